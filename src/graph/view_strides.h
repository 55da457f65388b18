// The strides of `view(new_sizes)` over a tensor with the given sizes and strides, or nullopt
// when the view would have to span non-contiguous chunks (PyTorch then asks for reshape).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace coil {

std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_sizes,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& new_sizes);

}  // namespace coil
