// Copies after fused attention and cuDNN's convolutions: the exported attention ops return
// [B, H, T, hd] over [B, T, H, hd] memory, so the graph follows the result with a copy into that
// layout (or into an output of its own layout); a convolution whose result the graph declares
// channels-last (PyTorch's for a channels-last input) is followed by a copy into that layout.
// When the only reader of such a call's temporary result is one kernel that copies it whole
// into another buffer, element for element through a permutation of its dims, the call writes
// that buffer itself through the matching strided view (ExternCall::output_view) and the copy
// is dropped. A copy loop that merged dims (the dense
// [B, T, H * hd] rows a projection reads: indices with x // hd and x % hd) is read by digits:
// each merged variable split at the divisors its indices use, which makes both indices affine.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program externs_write_copies(const loop::Program& program);

}  // namespace coil::schedule
