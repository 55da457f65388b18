// Unroll-and-jam of a reduction over an outer dim whose loads slide with the reduction (a
// stride-1 convolution window: the load at output w and tap t reads input w + t): a thread takes
// `factor` adjacent outputs along that dim, their reductions in one loop, so that with the
// window's taps unrolled the loads two outputs share (w + t == (w + 1) + (t - 1)) are the same
// expression and read once. A flat column's candidates (launch.cc) offer it; emit_cuda_kernel
// applies it before emitting.
#pragma once
#include "loop/kernel.h"

namespace coil::codegen {

// The outer dim a kernel's loads slide along with its last reduction dim (second-to-last outer,
// unit step), or -1: every load reading both reads them through their sum, and one does; the
// reductions are one pass.
int window_dim(const loop::LoopKernel& kernel);

// Kernel `k` with outer dim `dim` divided by `factor` (which divides it): each point computes the
// reductions and stores of `factor` adjacent points of the original, the reductions one pass.
loop::LoopKernel jammed(const loop::LoopKernel& k, int dim, int factor);

}  // namespace coil::codegen
