// What the epilogue passes (fuse_gemm_epilogues, fuse_conv_epilogues) share: once a library
// call applies the work of the kernels reading its result, those kernels may be left copying the
// result into another buffer, which the call then writes directly.
#pragma once
#include <vector>

#include "loop/kernel.h"

namespace coil::schedule {

bool reads(const loop::Kernel& k, int buffer);

// The same elements at the same offsets: equal layouts, or both row-major with as many elements
// and the second with at least the first's dims (its leading ones then merge into the rows).
bool same_elements(const loop::Buffer& result, const loop::Buffer& other);

// A pointwise kernel among `later` (the kernels after `call`) that only copies the call's result
// into a buffer of the same elements, which nothing between them touches: the call writes that
// buffer instead and the copy goes (its kernel too when that was its only store).
void elide_copy(loop::Program& p, loop::ExternCall& call, std::vector<loop::Kernel>& later);

// The program's kernels from `at` on become `call` and the kernels `later` after it.
void replace_from(loop::Program& p, size_t at, loop::ExternCall call, std::vector<loop::Kernel> later);

}  // namespace coil::schedule
