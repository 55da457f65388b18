// A matrix product extern call (mm, bmm, addmm) in cuBLASLt's terms: its operands' roles and
// its problem (sizes, strides, epilogue) for given symbol values. The GPU plan's library step
// and coil's own small-row product kernel (codegen/cuda/cuda_gemv.cc) read a call the same way.
#pragma once
#include <map>
#include <string>

#include "loop/kernel.h"
#include "runtime/cuda/cublaslt.h"

namespace coil {

// The views matrix product `call` reads, in cuBLASLt's roles: A and B, addmm's bias, and the
// residual the scheduler joined to it as C (null where there is none).
struct GemmViews {
  const loop::View* a = nullptr;
  const loop::View* b = nullptr;
  const loop::View* bias = nullptr;
  const loop::View* c = nullptr;
};
GemmViews gemm_views(const loop::ExternCall& call);

// Matrix product `call` as cuBLASLt's problem, with the graph's symbol values: strides of the
// views (the last two dims are the matrix, a leading one the batch), C for a residual,
// the epilogue for its activation and bias.
cuda::GemmProblem gemm_problem(const loop::ExternCall& call, const loop::Program& p, const std::map<std::string, int64_t>& symbols,
                               bool tf32);

// Where a product's operands lie: a buffer and a byte offset into it each (buffer -1: absent); D
// where the GPU plan writes it (the call's result view). A symbolic view's offset is taken at
// `sizes` (a value for each of its symbols).
struct GemmPlace {
  int buffer = -1;
  int64_t byte_offset = 0;
};
struct GemmPlaces {
  GemmPlace a, b, c, d, bias;
};
GemmPlaces gemm_places(const loop::ExternCall& call, const loop::Program& p, const std::map<std::string, int64_t>& sizes = {});

}  // namespace coil
