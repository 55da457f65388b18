// Layout planning for convolution chains (CUDA target): cuDNN's fast 16-bit kernels are
// implicit GEMMs over channels-last (NHWC) tensors, and given NCHW they transpose the input and
// output around every call (on the H100, ConvNeXt-T's depthwise convolutions ran 8x slower
// in NCHW). So the temporaries a library convolution reads or writes, and every 4-/5-d
// temporary of the same sizes that a loop kernel touching one of them reads or writes (the batch
// norm, activation and residual kernels between convolutions), take channels-last strides
// [N, C, spatial...] -> strides with C innermost. Each load and store of those buffers is
// re-indexed (offset o in the old row-major layout becomes sum_d ((o // old_d) % size_d) * new_d,
// simplified with the kernel's loop bounds back to affine indices), so the kernels keep their
// logical shapes and only their memory order changes; a pointwise kernel over such a buffer's
// sizes then iterates with the channels innermost ([N, spatial..., C]), so that its threads
// take neighbouring addresses. Operands that are no such temporary (the
// graph's input image, the weights) are copied into a channels-last temporary once per run by
// a pointwise kernel, and a convolution writing a graph output writes a temporary copied into
// it (an input over too few channels padded: aligned_channels). Graph outputs and inputs keep their layouts: the conversion happens at the boundary,
// except for outputs whose layout is the compiler's (Buffer::any_layout: a training forward's
// saved activations), which move like temporaries, and inputs already channels-last (those
// activations in the backward graph), which convolutions read in place.
// Buffers with data-dependent accesses or read by other library calls stay as they are. When a
// convolution in the new layouts is one the library does not take, the program stays as it was.
#pragma once
#include <functional>

#include "loop/kernel.h"

namespace coil::schedule {

loop::Program convolutions_channels_last(
    const loop::Program& program, const std::function<bool(const loop::ExternCall&, const loop::Program&)>& library_takes);

// cuDNN's fast engines read each pixel's channels in whole 16-byte vectors: a convolution over
// channels that fill none (a network's first layer over RGB) ran a generic kernel (on the H100
// the yardstick CNN's 3 -> 32 channel 3x3 layer in bf16: 0.156 ms, of a 0.37 ms model). Its
// copied input and its weight are padded with zero channels up to this count.
int64_t aligned_channels(int64_t channels, DType dtype);

// The channels-last strides of [N, C, spatial...] sizes: C innermost, then the spatial dims from
// the last, then N.
SymShape channels_last_strides(const SymShape& sizes);

}  // namespace coil::schedule
