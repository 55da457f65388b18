// A convolution extern call's parameters, as lowering writes them into `ExternCall::params`:
// k (the spatial dims), then k values each of stride, padding, dilation and output_padding, then
// groups and transposed (0 or 1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace coil::loop {

struct ConvParams {
  size_t k = 0;
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};

inline ConvParams conv_params(const std::vector<double>& params) {
  ConvParams c;
  c.k = static_cast<size_t>(params.at(0));
  auto array = [&](size_t which) {
    std::vector<int64_t> v;
    for (size_t d = 0; d < c.k; ++d) v.push_back(static_cast<int64_t>(params.at(1 + which * c.k + d)));
    return v;
  };
  c.stride = array(0);
  c.padding = array(1);
  c.dilation = array(2);
  c.output_padding = array(3);
  c.groups = static_cast<int64_t>(params.at(1 + 4 * c.k));
  c.transposed = params.at(2 + 4 * c.k) != 0;
  return c;
}

}  // namespace coil::loop
