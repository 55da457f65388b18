// The geometry of 2-D pooling windows, as PyTorch computes it (pooling_output_shape and
// pool2d_shape_check): shape inference, the reference interpreter and the decomposition into
// windows (graph_passes/decompose_pooling.cc) share it.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coil/graph.h"

namespace coil {

struct Pool2d {
  std::array<int64_t, 2> kernel{}, stride{}, pad{}, dilation{};
  // Spatial sizes (H, W) of the input and the output: expressions of the graph's size symbols
  // where the input's are (the output's by PyTorch's formula, ceil_mode's last-window rule as a
  // min/max).
  std::array<SymInt, 2> in{SymInt(0), SymInt(0)}, out{SymInt(0), SymInt(0)};
  bool ceil_mode = false;  // (without it, no window reaches past the padding)
  bool symbolic() const { return !in[0].is_constant() || !in[1].is_constant(); }
  // Window i of dim d starts at i * stride - pad and takes `kernel` elements `dilation` apart.
  int64_t start(int d, int64_t i) const { return i * stride[static_cast<size_t>(d)] - pad[static_cast<size_t>(d)]; }
};

// kernel_size, stride (empty: the kernel), padding and dilation as the ops take them (one value
// stands for both dims); `max`: max pooling's padding rule (at most half the dilated kernel),
// else average pooling's (at most half the kernel). The input is [N, C, H, W] or [C, H, W]. Errors
// name `op` and say what PyTorch says (an output smaller than 1 where the sizes are static; Dynamo
// guards symbolic ones).
Pool2d pool2d_geometry(const std::string& op, const TensorMeta& input, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                       std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode, bool max);

// The geometry of a max_pool2d_with_indices or avg_pool2d node from its arguments, read through
// `args` (an ArgReader in graph passes, a NodeEval in the interpreter: both have ints and flag).
template <typename Args>
Pool2d pool2d_of(const Args& args, bool max, const std::string& op, const TensorMeta& input) {
  return pool2d_geometry(op, input, args.ints("kernel_size"), args.ints("stride"), args.ints("padding"),
                         max ? args.ints("dilation") : std::vector<int64_t>{1}, args.flag("ceil_mode"), max);
}

// Adaptive pooling's window i of `out` over `in` elements: [floor(i * in / out), ceil((i + 1) * in / out)).
inline int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
inline int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// The (H, W) of an adaptive pooling's input, checked: [N, C, H, W] or [C, H, W], non-empty
// non-batch dims; output_size of two positive values.
std::array<SymInt, 2> adaptive_input_size(const std::string& op, const TensorMeta& input, const std::vector<int64_t>& output_size);

}  // namespace coil
