// Prologues of coil's few-row product kernel (codegen/cuda/cuda_gemv.cc): the row kernel that
// computes the product's A — an RMSNorm: x * rsqrt(mean(x^2) + eps) * g, however the model spells
// it — runs inside the product's kernel, which takes the norm's sum over the row in its own pass
// over K and scales its sums by the row's factor at the end. At decoding's one row a token this
// removes a kernel of its own before the q/k/v projection and before the MLP (a layer's two
// norms cost 3.4 µs each in TinyLlama's overlapped decode step, more than alone: the product's
// early weight loads crowd their round trips; bench/results/decode-2026-11-29-s18.md).
//
// A row kernel N joins a product call C (ExternCall::prologue) when:
// - C is an mm or addmm the kernel takes (`takes`, with the prologue), whose A is a contiguous
//   [M, K] temporary that N alone writes and C alone reads, N before C, and nothing between them
//   writes what N reads;
// - N runs M rows (its outer points) of K (its inner extent), with one reduction (a sum), one
//   store (A at r0 + K * row, of A's dtype), and never fails;
// - N's stored value, through float casts, is a product of factors where those using the
//   reduction read nothing along the row (no loads, no r0): the row's scale s, applied to the
//   product's sums; the others, per element, multiply A's elements in the product's pass.
// Roundings of the factors' partial products to A's dtype (bf16 at decoding) are dropped: the
// result keeps f32 where eager rounds, as a fused Inductor kernel does.
#pragma once
#include "schedule/fuse_gemv_epilogues.h"

namespace coil::schedule {

loop::Program fuse_gemv_prologues(const loop::Program& program, const GemvTakes& takes);

// A row kernel's stored value split as the pass needs it (nothing where it does not factor so):
// the factors that use the reduction (the row's scale) and the others (per element).
struct RowFactors {
  std::vector<loop::ExprRef> scale, element;
};
std::optional<RowFactors> row_factors(const loop::LoopKernel& k);

}  // namespace coil::schedule
