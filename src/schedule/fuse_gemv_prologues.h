// Prologues of coil's few-row product kernel (codegen/cuda/cuda_gemv.cc): the row kernel that
// wrote the product's A runs inside the product's kernel, each block computing A's rows into
// shared memory. At decoding's one row a token this is a Llama layer's RMSNorm inside the
// products that read its result (the attention's q/k/v, the MLP's gate and up): their weights'
// stream no longer waits for a kernel of its own between the residual's producer and them.
// Each block reads the rows again (M x K elements, the block's sums over them), so the kernel
// takes a prologue only over few bytes of A (cuda_gemv.cc's kPrologueBytes, `takes`: one row of a
// decoding step, not eight). On the H200 this gained less than the norm kernels' time: the
// products' own early weight loads had already streamed during the norms (B=1: 1134 -> 1164
// tok/s, bench/results/decode-2026-11-30-s20.md).
//
// A row kernel P joins the products that read its result when:
// - P is a reduction (sums, products, maxima or minima; no scans, no Welford pairs) over one
//   inner dim of static extent K, with static outer dims of M points in all, and one store:
//   inner, at the row-major index of its point (outer index * K + r0), into a temporary that
//   only product calls read and no other kernel writes;
// - every reader is an mm or addmm the kernel takes with P as its prologue, and reads the
//   temporary as its A only, viewed as the whole [M, K] matrix in P's layout;
// - nothing between P and a reader writes what P reads, and P neither fails nor reads what
//   it writes.
// P is then dropped: each reader computes A itself.
#pragma once
#include "schedule/fuse_gemv_epilogues.h"

namespace coil::schedule {

loop::Program fuse_gemv_prologues(const loop::Program& program, const GemvTakes& takes);

}  // namespace coil::schedule
