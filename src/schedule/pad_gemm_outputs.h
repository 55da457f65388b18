// Row padding of matrix-product results on the GPU: cuBLASLt picks its fast kernels (16-byte
// vectors, TMA) only when every row of D starts 16-byte aligned, and a [8192, 768] x [768, 50257]
// bf16 product (GPT-2's vocabulary head) ran 7x slower with 50257-element rows than with 50264.
// A product's temporary result whose rows are not a multiple of 16 bytes gets rows padded to
// the next multiple (the padding is never written or read), and every loop kernel reading it
// indexes the padded layout: offset o of the dense layout becomes (o // n) * n_padded + o % n,
// simplified with the kernel's loop bounds (to row * n_padded + column where the index is a
// plain row and column). Results read by another extern call, through a data-dependent index,
// written by a loop kernel, or with fewer than `min_elements` elements keep their layout.
// A product whose result is a graph output writes a temporary first, copied into the output
// (the temporary is then padded; outputs keep their dense layout). A graph input of unaligned
// rows that products read is copied into padded rows (zeros past the end) when the products'
// work pays for the copy; a product reducing over such rows runs over the padded length, and a
// product reading them transposed (M along the rows) runs over the padded M into a temporary of
// that many rows (the first M are its result).
#pragma once
#include <cstdint>

#include "loop/kernel.h"

namespace coil::schedule {

inline constexpr int64_t kPadGemmMinElements = int64_t{1} << 20;

loop::Program pad_gemm_outputs(const loop::Program& program, int64_t min_elements = kPadGemmMinElements);

}  // namespace coil::schedule
