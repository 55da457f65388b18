// Prologues of coil's few-row product kernel (codegen/cuda/cuda_gemv.cc): the row kernel that
// computes a product's A (an RMSNorm or LayerNorm of the rows: reductions over K, then the row)
// runs inside the product's kernel, every block computing A's few rows into shared memory
// (ExternCall::prologue). At decoding's one row a token, a Llama layer's two norms stop being
// kernels of their own: the row is 4 KiB, read from L2 by each block.
//
// A row kernel R joins the product call C (already with its epilogue and gate, where
// fuse_gemv_epilogues gave it them) when:
// - R has static sizes, one inner dim of C's K, reductions of sum, prod, max, min or Welford's
//   mean and M2 of one value (computed in two passes, the mean's then the squared deviations'; no scan),
//   one store (inner, not a scatter) of A's row-major element, never fails, and is indexed by
//   its loop variables alone;
// - A is a contiguous [M, K] temporary that C alone reads, as its A and nowhere else, and its
//   M rows with the block's sums (at most 1 KiB a row) fit kPrologueBytes of shared memory (the
//   kernel's static shared memory stays under 48 KiB);
// - nothing between R and C writes what R reads.
// C then runs without R, where it ran.
#pragma once
#include "loop/kernel.h"
#include "schedule/fuse_gemv_epilogues.h"

namespace coil::schedule {

inline constexpr int64_t kPrologueBytes = 44 * 1024;

loop::Program fuse_gemv_prologues(const loop::Program& program, const GemvTakes& takes);

}  // namespace coil::schedule
