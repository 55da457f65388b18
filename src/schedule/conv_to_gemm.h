// Convolution as im2col + GEMM, for the CUDA target (cuBLASLt does the product on tensor
// cores): a loop kernel gathers the input patches into col[n, (c, taps), (out positions)]
// (zero where the padding is), a batched product multiplies the weight, viewed as
// [c_out, c_in * taps] and shared by every image, with each image's col, and a pointwise kernel
// writes the result in the output's layout with the bias added. A 1x1 convolution with unit
// stride and no padding over dense spatial dims multiplies the input itself: no col.
// Taken for forward convolutions with one group, float dtypes, a weight dense over
// (c_in, taps) and one image's col of static size up to 256 MiB; the rest stays a direct loop.
// A convolution a library takes (`library_takes`: cuDNN) stays a call instead; its bias, which
// the library's plain convolution does not add, moves into a pointwise kernel after it (the
// call writing a temporary), which the scheduler then fuses into what reads the result.
#pragma once
#include <functional>

#include "loop/kernel.h"

namespace coil::schedule {

loop::Program convolutions_to_gemm(const loop::Program& program,
                                   const std::function<bool(const loop::ExternCall&)>& library_takes = {});

}  // namespace coil::schedule
