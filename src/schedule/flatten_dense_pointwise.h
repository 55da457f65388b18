// Pointwise kernels that fill their outputs densely in the order of their loop nest, but whose
// last dim is too odd for vector stores (GPT-2's logits copied out of padded rows into the
// [8192, 50257] bf16 output: 2-byte stores at 2.0 TB/s on an H200), run over one flat dim
// instead: the stores become vectors along it, and each load keeps its element's offset, the
// old loop variables recovered from the flat index (x_i = flat // S_i % n_i, S_i the dense
// stride of dim i). Kernels of fewer than `min_elements` points keep their nest (the divisions
// cost more than the vectors gain).
#pragma once
#include <cstdint>

#include "loop/kernel.h"

namespace coil::schedule {

inline constexpr int64_t kFlattenMinElements = int64_t{1} << 20;

loop::Program flatten_dense_pointwise(const loop::Program& program, int64_t min_elements = kFlattenMinElements);

}  // namespace coil::schedule
