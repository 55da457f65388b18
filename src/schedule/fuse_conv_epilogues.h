// Convolution epilogue fusion (CUDA: cuDNN's runtime-fused engines). The per-channel affine map,
// residual add and ReLU that follow a convolution (an inference batch norm, a bias, ResNet's
// shortcut) move into the convolution's call, which applies them to its f32 result before its
// one store, instead of a kernel reading the result back and writing it again. It fires when
// every read of the convolution's result, all in one loop kernel at one element offset, is
//     round(relu?(a[c] * v + s[c] * r + b[c]))
// with v the result's value, c its channel (a loop variable spanning the channels), a, s and b
// expressions of the channel alone (weights, running statistics; absent: 1, 1, 0) and r another
// tensor of the result's layout and dtype, read at the same element and complete before the call
// (or no r), round the cast to the result's 16-bit dtype (f32 results stay unfused: a device
// run crashed with fused f32 problems, cause not yet found). Roundings to that dtype inside
// (each op of a bf16 graph rounds) are dropped: the sum is computed in f32 once, as in
// Inductor's fused kernels. A kernel over the channels computes a, s and b into f32 vectors
// before the call; the reads become loads of the call's result, and a kernel left copying it
// goes (the call writes its target). `library_takes` says whether the library runs the fused
// call (cuDNN offers plans for it); where not, the program stays as it was. `prefetch`, when
// given, first gets every fusion the unfused program offers, all at once, so that the library
// can prepare them in parallel (cuDNN's heuristics and plan builds, the kernels of which it
// compiles one at a time) rather than as `library_takes` is asked, one after another; it
// decides nothing.
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "loop/kernel.h"

namespace coil::schedule {

using LibraryTakes = std::function<bool(const loop::ExternCall&, const loop::Program&)>;
using Prefetch = std::function<void(const std::vector<std::pair<loop::ExternCall, loop::Program>>&)>;

loop::Program fuse_conv_epilogues(const loop::Program& program, const LibraryTakes& library_takes, const Prefetch& prefetch = {});

}  // namespace coil::schedule
