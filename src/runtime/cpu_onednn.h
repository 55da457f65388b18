// oneDNN on the CPU: convolutions (forward and transposed, 1-3 spatial dims, groups up to
// depthwise, any strides of input, weight and output) in f32, f16 and bf16.
//
// A convolution asks oneDNN for its best kernel with every layout left to it (blocked layouts
// such as nChw8c on AVX2), then reorders the operands into those layouts and the result back
// into the output's strides; where oneDNN's kernel already takes a tensor's own layout nothing is
// copied. f16 and bf16 run natively where the machine has a 16-bit kernel (AVX-512 BF16, AMX);
// elsewhere (oneDNN's 16-bit reorders are then slow reference loops too) they are widened to
// f32 by coil's own conversion (cpu_convert.h) and the result narrowed back. Either way products
// accumulate in f32 and the result rounds once, after the bias, as PyTorch's CPU kernels round.
#pragma once
#include <string>

#include "coil/tensor.h"
#include "loop/conv_params.h"

namespace coil::onednn {

// Whether oneDNN computes convolutions of this dtype (operands and result all of it).
bool takes_convolution(DType dtype);

// out = conv(input, weight) + bias, as aten.convolution with `params`. `name` names the call in errors.
void convolution(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                 const loop::ConvParams& params, const std::string& name);

}  // namespace coil::onednn
