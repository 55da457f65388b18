// GEMM epilogue fusion: an activation (relu, gelu with the tanh approximation) applied to a
// matrix product's result moves into the product's call, which cuBLASLt (or the CPU runtime)
// applies before storing. It fires when every read of the product goes through the same
// activation; those reads then load the product itself. A kernel left copying the product
// into a buffer of the same layout disappears, the product writing that buffer directly.
// With addmm's bias this gives cuBLASLt's bias, relu, gelu, bias+relu and bias+gelu epilogues.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program fuse_gemm_epilogues(const loop::Program& program);

}  // namespace coil::schedule
