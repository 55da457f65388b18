#include "graph/pooling.h"

#include <fmt/format.h>

#include "support/check.h"

namespace coil {

namespace {

std::array<int64_t, 2> pair(const std::string& op, const char* name, const std::vector<int64_t>& v) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  fail("{}: {} must either be a single int, or a tuple of two ints", op, name);
}

// `first_checked`: the first dim that must not be empty (adaptive pooling checks only H and W).
std::array<SymInt, 2> spatial(const std::string& op, const TensorMeta& input, int64_t first_checked) {
  if (input.dim() != 3 && input.dim() != 4) fail("{}: expected 3D or 4D (batch mode) tensor for input, got {} dims", op, input.dim());
  std::array<SymInt, 2> in{input.sizes[static_cast<size_t>(input.dim() - 2)], input.sizes[static_cast<size_t>(input.dim() - 1)]};
  for (int64_t d = first_checked; d < input.dim(); ++d)
    if (input.sizes[static_cast<size_t>(d)].is_constant() && *input.sizes[static_cast<size_t>(d)].constant() == 0)
      fail("{}: expected input to have non-zero size for non-batch dimensions, but got {}", op, shape_str(input.sizes));
  return in;
}

// v clamped to [0, 1]: 1 where v >= 1, 0 where v <= 0.
SymInt clamp01(const SymInt& v) { return min(SymInt(1), max(SymInt(0), v)); }

}  // namespace

Pool2d pool2d_geometry(const std::string& op, const TensorMeta& input, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                       std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode, bool max) {
  Pool2d p;
  p.kernel = pair(op, "kernel_size", kernel);
  p.stride = stride.empty() ? p.kernel : pair(op, "stride", stride);
  p.pad = pair(op, "padding", padding);
  p.dilation = pair(op, "dilation", dilation);
  for (size_t d = 0; d < 2; ++d) {
    if (p.kernel[d] <= 0) fail("{}: kernel size should be greater than zero, but got kH: {} kW: {}", op, p.kernel[0], p.kernel[1]);
    if (p.stride[d] <= 0) fail("{}: stride should be greater than zero, but got dH: {} dW: {}", op, p.stride[0], p.stride[1]);
    if (p.dilation[d] <= 0) fail("{}: dilation should be greater than zero, but got dilationH: {} dilationW: {}", op, p.dilation[0], p.dilation[1]);
    int64_t limit = max ? ((p.kernel[d] - 1) * p.dilation[d] + 1) / 2 : p.kernel[d] / 2;
    if (p.pad[d] < 0 || p.pad[d] > limit)
      fail("{}: pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}", op, p.pad[d],
           p.kernel[d], p.dilation[d]);
  }
  p.in = spatial(op, input, input.dim() == 4 ? 1 : 0);
  p.ceil_mode = ceil_mode;
  for (size_t d = 0; d < 2; ++d) {
    const SymInt span = p.in[d] + (2 * p.pad[d] - p.dilation[d] * (p.kernel[d] - 1) - 1 + (ceil_mode ? p.stride[d] - 1 : 0));
    SymInt o = floordiv(span, p.stride[d]) + 1;  // rounds down
    // ceil_mode: the last window must start inside the input or its left padding, else one less:
    // (o - 1) * stride >= in + pad takes 1 off, as min(1, max(0, ...)) over symbols.
    if (ceil_mode) o = o - clamp01((o - 1) * p.stride[d] - p.in[d] + (1 - p.pad[d]));
    p.out[d] = o;
  }
  for (const SymInt& o : p.out)
    if (o.is_constant() && *o.constant() < 1)
      fail("{}: given input size {}, calculated output size ({}x{}) is too small", op, shape_str(input.sizes), p.out[0].str(), p.out[1].str());
  return p;
}

std::array<SymInt, 2> adaptive_input_size(const std::string& op, const TensorMeta& input, const std::vector<int64_t>& output_size) {
  if (output_size.size() != 2) fail("{}: output_size must be 2", op);
  if (output_size[0] < 1 || output_size[1] < 1) fail("{}: coil takes output sizes of at least 1, got {{{}, {}}}", op, output_size[0], output_size[1]);
  return spatial(op, input, input.dim() - 2);
}

}  // namespace coil
