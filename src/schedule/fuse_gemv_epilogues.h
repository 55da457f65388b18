// Epilogues of coil's few-row product kernel (codegen/cuda/cuda_gemv.cc): a pointwise kernel that
// reads the results of one matrix product, or of two over the same A, element for element, runs
// inside the product's kernel, on its sums (ExternCall::gate, epilogue). At decoding's one row a
// token this is a Llama MLP's silu(x W1^T) * (x W3^T) as one kernel streaming both weights, where
// there were three: two products, then a kernel reading both results back.
//
// A pair or a single product joins a kernel P when:
// - the kernel takes each product (`takes`: static sizes, few rows, B's rows along K) and each is
//   an mm or addmm without an epilogue of its own (the second a plain mm of the same A, sizes and
//   dtypes as the first);
// - P is pointwise (no reductions, one store, not a scatter, static sizes), each result is a
//   contiguous [M, N] temporary read by P alone, and P loads it only at its own element (its
//   loop nest's row-major index over M * N points);
// - nothing between a product and P writes what the product reads.
// The call then runs where P ran, and writes P's output.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "loop/kernel.h"

namespace coil::schedule {

using GemvTakes = std::function<bool(const loop::ExternCall&, const loop::Program&)>;

// The operands of a product call: A and B (addmm: after the bias).
inline const loop::View& a_of(const loop::ExternCall& c) { return c.inputs[c.kind == loop::ExternKind::addmm ? 1 : 0]; }
inline const loop::View& b_of(const loop::ExternCall& c) { return c.inputs[c.kind == loop::ExternKind::addmm ? 2 : 1]; }

// What the few-row product passes ask of a program: each step's accesses, and per buffer the
// steps reading and writing it, in order.
struct StepAccess {
  std::vector<loop::Access> steps;
  std::map<int, std::vector<size_t>> readers, writers;
};
StepAccess step_access(const loop::Program& program);
// The program's buffers with the steps `kept` holds, in order (an empty one dropped).
loop::Program with_steps(const loop::Program& program, std::vector<std::optional<loop::Kernel>> kept);

loop::Program fuse_gemv_epilogues(const loop::Program& program, const GemvTakes& takes);

}  // namespace coil::schedule
