// f16/bf16 <-> f32 conversion of whole tensors on the CPU, for the libraries that compute 16-bit
// products in f32 (OpenBLAS always; oneDNN where the machine has no 16-bit kernels, whose own
// reorders then fall back to a slow reference loop). A tensor laid out densely in any order of
// its dims (contiguous, channels-last, a transposed weight) converts as one flat, vectorized
// (F16C for f16), parallel pass, and keeps its layout; anything else goes element by element.
// f32 -> 16 bits rounds to nearest even, NaN stays NaN.
#pragma once
#include "coil/tensor.h"

namespace coil {

// An f32 copy of a f16, bf16 or f32 tensor in the same layout (dims it broadcasts over, with
// stride 0, stay broadcast over one element).
Tensor widen_to_f32(const Tensor& t);

// dst = src (f32), rounded to dst's dtype (f16, bf16 or f32) and written in dst's layout.
void narrow_into(const Tensor& src, const Tensor& dst);

// A new f32 tensor of `like`'s sizes, laid out as `like` is when that layout is dense (so that
// narrow_into(result, like) is one flat pass), else contiguous.
Tensor f32_like(const Tensor& like);

}  // namespace coil
