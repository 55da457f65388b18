#include "graph_passes/decompose_pooling.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>

#include "graph/infer_util.h"
#include "graph/pooling.h"
#include "support/check.h"

namespace coil {

namespace {

using Fresh = std::function<std::string(const std::string&)>;

// Builds the pieces of one pooling node; every new value is named after the node.
struct Builder {
  Graph& g;
  const Node& n;
  const Fresh& fresh;

  ValueRef call(OpKind op, std::vector<Arg> args, std::vector<std::pair<std::string, Arg>> kw = {}) {
    return g.call1(op, std::move(args), std::move(kw), fresh(n.name() + "_pool"));
  }
  ValueRef named(OpKind op, std::vector<Arg> args, const std::string& name, std::vector<std::pair<std::string, Arg>> kw = {}) {
    return g.call1(op, std::move(args), std::move(kw), name);
  }
  int64_t rank(ValueRef v) { return g.meta(v).dim(); }
  // The window positions of one output dim: x[.., start + i * step for each output i] along dim d.
  ValueRef strided(ValueRef x, int64_t dim, int64_t start, const SymInt& count, int64_t step) {
    return call(OpKind::SliceTensor, {x, dim, start, (count - 1) * step + (start + 1), step});
  }
  // Pads the last two dims: (before, after) for H, then W.
  ValueRef pad(ValueRef x, const Pool2d& p, const std::array<SymInt, 2>& after, Arg value) {
    if (p.pad[0] == 0 && p.pad[1] == 0 && after[0] == SymInt(0) && after[1] == SymInt(0)) return x;
    return call(OpKind::ConstantPadNd, {x, IntList{p.pad[1], after[1] + p.pad[1], p.pad[0], after[0] + p.pad[0]}, std::move(value)});
  }
  // The slice of padded `xp` that window offset (i, j) of every output reads. Symbolic sizes:
  // a strided view of [.., OH, OW] (slices would clamp their ends to sizes that bounds cannot
  // compare, leaving each window's shape an expression of its own).
  ValueRef window(ValueRef xp, const Pool2d& p, int64_t i, int64_t j) {
    int64_t r = rank(xp);
    if (p.symbolic()) {
      const TensorMeta& m = g.meta(xp);
      IntList sizes(m.sizes.begin(), m.sizes.end() - 2), strides(m.strides.begin(), m.strides.end() - 2);
      const SymInt& sh = m.strides[static_cast<size_t>(r - 2)];
      const SymInt& sw = m.strides[static_cast<size_t>(r - 1)];
      sizes.push_back(p.out[0]), sizes.push_back(p.out[1]);
      strides.push_back(sh * p.stride[0]), strides.push_back(sw * p.stride[1]);
      const SymInt offset = m.offset + sh * (i * p.dilation[0]) + sw * (j * p.dilation[1]);
      return call(OpKind::AsStrided, {xp, sizes, strides, offset});
    }
    ValueRef rows = strided(xp, r - 2, i * p.dilation[0], p.out[0], p.stride[0]);
    return strided(rows, r - 1, j * p.dilation[1], p.out[1], p.stride[1]);
  }
  // Window offset k's input coordinate per output position along dim d, as an i64 [out] tensor
  // (symbolic sizes: arange(out) * stride + first, whose length is `out` itself).
  ValueRef coordinate(const Pool2d& p, int d, int64_t k) {
    auto du = static_cast<size_t>(d);
    int64_t first = k * p.dilation[du] - p.pad[du];
    const Device device = n.outputs[0].meta.device;
    if (p.symbolic()) {
      ValueRef i = call(OpKind::ArangeStartStep, {int64_t{0}, p.out[du], int64_t{1}}, {{"device", device}});
      return call(OpKind::AddScalar, {call(OpKind::MulScalar, {i, p.stride[du]}), first});
    }
    return call(OpKind::ArangeStartStep, {first, p.out[du] * p.stride[du] + first, p.stride[du]}, {{"device", device}});
  }
  ValueRef in_range(ValueRef c, const SymInt& size) {
    ValueRef ge = call(OpKind::GeScalar, {c, int64_t{0}});
    return call(OpKind::LogicalAnd, {ge, call(OpKind::LtScalar, {c, size})});
  }
  ValueRef column(ValueRef v) { return call(OpKind::Unsqueeze, {v, int64_t{1}}); }  // [n] -> [n, 1]
  ValueRef widen(ValueRef x) {
    DType t = g.meta(x).dtype;
    return t == DType::f16 || t == DType::bf16 ? call(OpKind::ToCopy, {x}, {{"dtype", DType::f32}}) : x;
  }
  // The node's output `name`: x as a new contiguous tensor of dtype t.
  ValueRef output(ValueRef x, DType t, const std::string& name) {
    if (g.meta(x).dtype == t) return named(OpKind::Clone, {x}, name, {{"memory_format", "contiguous_format"}});
    return named(OpKind::ToCopy, {x}, name, {{"dtype", t}});
  }
};

// The padding value no element beats: -inf, or the integer type's lowest value.
Arg lowest(DType t) {
  if (is_float(t)) return -std::numeric_limits<double>::infinity();
  switch (t) {
    case DType::u8: return int64_t{0};
    case DType::i8: return int64_t{std::numeric_limits<int8_t>::min()};
    case DType::i16: return int64_t{std::numeric_limits<int16_t>::min()};
    case DType::i32: return int64_t{std::numeric_limits<int32_t>::min()};
    default: return std::numeric_limits<int64_t>::min();
  }
}

// Rows or columns past the padding that the last window reaches (ceil_mode): padded too.
std::array<SymInt, 2> overhang(const Pool2d& p, bool dilated) {
  std::array<SymInt, 2> after{SymInt(0), SymInt(0)};
  if (!p.ceil_mode) return after;  // the last window ends inside the padding
  for (size_t d = 0; d < 2; ++d) {
    const SymInt reach = (p.out[d] - 1) * p.stride[d] + ((p.kernel[d] - 1) * (dilated ? p.dilation[d] : 1) + 1);
    after[d] = max(SymInt(0), reach - p.in[d] - 2 * p.pad[d]);
  }
  return after;
}

// Values: the maximum over the window offsets (NaN wins). Indices: the flat input position
// h * W + w of the first largest valid element, the last NaN, or the window's first valid
// position when nothing beats the padding, as ATen's CPU kernel keeps them.
std::vector<ValueRef> max_pool(Builder& b, ValueRef x) {
  const Node& n = b.n;
  Pool2d p = pool2d_of(ArgReader(b.g, n), true, n.schema().name, b.g.meta(x));
  DType t = b.g.meta(x).dtype;
  ValueRef xp = b.pad(x, p, overhang(p, true), lowest(t));
  std::optional<ValueRef> best, index, found;
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    ValueRef rows = b.coordinate(p, 0, i);
    ValueRef row_ok = b.column(b.in_range(rows, p.in[0]));
    ValueRef row_at = b.column(b.call(OpKind::MulScalar, {rows, p.in[1]}));
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      ValueRef v = b.window(xp, p, i, j);
      ValueRef cols = b.coordinate(p, 1, j);
      ValueRef ok = b.call(OpKind::LogicalAnd, {row_ok, b.in_range(cols, p.in[1])});  // [OH, OW]
      ValueRef at = b.call(OpKind::AddTensor, {row_at, cols});
      if (!best) {
        best = v, index = at, found = ok;
        continue;
      }
      // Taken: valid, and the first valid one, larger, or NaN.
      ValueRef better = b.call(OpKind::GtTensor, {v, *best});
      if (is_float(t)) better = b.call(OpKind::LogicalOr, {better, b.call(OpKind::Isnan, {v})});
      ValueRef take = b.call(OpKind::LogicalAnd, {ok, b.call(OpKind::LogicalOr, {better, b.call(OpKind::LogicalNot, {*found})})});
      index = b.call(OpKind::WhereSelf, {take, at, *index});
      best = b.call(OpKind::Maximum, {*best, v});
      found = b.call(OpKind::LogicalOr, {*found, ok});
    }
  }
  ValueRef values = b.output(*best, t, n.outputs[0].name);
  SymShape sizes = n.outputs[1].meta.sizes;
  ValueRef indices = b.named(OpKind::Clone, {b.call(OpKind::Expand, {*index, IntList(sizes)})}, n.outputs[1].name,
                             {{"memory_format", "contiguous_format"}});
  return {values, indices};
}

// The sum over the window offsets of the zero-padded input, divided by the window's size; an
// int64 input sums in int64 (wrapping) and divides rounding toward zero, as ATen's CPU kernel.
ValueRef avg_pool(Builder& b, ValueRef x, const Pool2d& p, bool include_pad, std::optional<int64_t> divisor, const std::string& name) {
  DType t = b.g.meta(x).dtype;
  const bool integral = !is_float(t);
  ValueRef xf = b.widen(x);
  ValueRef xp = b.pad(xf, p, overhang(p, false), integral ? Arg(int64_t{0}) : Arg(0.0));
  std::optional<ValueRef> sum;
  for (int64_t i = 0; i < p.kernel[0]; ++i)
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      ValueRef v = b.window(xp, p, i, j);
      sum = sum ? b.call(OpKind::AddTensor, {*sum, v}) : v;
    }
  ValueRef mean;
  if (divisor) {
    mean = integral ? b.call(OpKind::DivScalarMode, {*sum, *divisor}, {{"rounding_mode", "trunc"}})
                    : b.call(OpKind::DivScalar, {*sum, static_cast<double>(*divisor)});
  } else {
    // Per output dim: the window's extent, [start, min(start + k, in + pad)) with the padding, or
    // clipped to [0, in) without it; their product divides.
    std::array<ValueRef, 2> extent;
    for (int d = 0; d < 2; ++d) {
      auto du = static_cast<size_t>(d);
      ValueRef start = b.coordinate(p, d, 0);
      ValueRef end = b.call(OpKind::Clamp, {b.call(OpKind::AddScalar, {start, p.kernel[du]}), std::nullopt, p.in[du] + p.pad[du]});
      if (!include_pad) {
        end = b.call(OpKind::Clamp, {end, std::nullopt, p.in[du]});
        start = b.call(OpKind::Clamp, {start, int64_t{0}, std::nullopt});
      }
      extent[du] = b.call(OpKind::SubTensor, {end, start});
    }
    ValueRef size = b.call(OpKind::MulTensor, {b.column(extent[0]), extent[1]});
    mean = integral ? b.call(OpKind::DivTensorMode, {*sum, size}, {{"rounding_mode", "trunc"}}) : b.call(OpKind::DivTensor, {*sum, size});
  }
  return b.output(mean, t, name);
}

// Adaptive average pooling along one dim: output i averages [floor(i * in / out),
// ceil((i + 1) * in / out)). Few outputs: a mean per window (a slice each), concatenated. Many
// outputs (4x4 -> [1, 100000] made 100,000 slices and megabytes of source): the nodes follow
// the widest window instead, a gather per window offset, masked past each window's end.
ValueRef adaptive_mean(Builder& b, ValueRef v, int64_t dim, int64_t in, int64_t out) {
  int64_t widest = 0;
  for (int64_t i = 0; i < out; ++i) widest = std::max(widest, adaptive_end(i, in, out) - adaptive_start(i, in, out));
  if (out <= 64 || out <= 4 * widest) {
    std::vector<ValueRef> parts;
    for (int64_t i = 0; i < out; ++i) {
      ValueRef slice = b.call(OpKind::SliceTensor, {v, dim, adaptive_start(i, in, out), adaptive_end(i, in, out), int64_t{1}});
      parts.push_back(b.call(OpKind::MeanDim, {slice, IntList{dim}, true}));
    }
    return b.call(OpKind::Cat, {Arg(parts), dim});
  }
  const Device device = b.n.outputs[0].meta.device;
  auto floor_div = [&](ValueRef x, int64_t by) { return b.call(OpKind::DivScalarMode, {x, by}, {{"rounding_mode", "floor"}}); };
  auto scaled = [&](int64_t first, int64_t add) {  // floor(((i + first) * in + add) / out) for every output i
    ValueRef i = b.call(OpKind::ArangeStartStep, {first, first + out, int64_t{1}}, {{"device", device}});
    return floor_div(b.call(OpKind::AddScalar, {b.call(OpKind::MulScalar, {i, in}), add}), out);
  };
  ValueRef start = scaled(0, 0), end = scaled(1, out - 1);
  const bool rows = dim == b.rank(v) - 2;  // H: per-output values broadcast as a column
  auto shaped = [&](ValueRef per_output) { return rows ? b.column(per_output) : per_output; };
  ValueRef zero = b.call(OpKind::ScalarTensor, {0.0}, {{"dtype", b.g.meta(v).dtype}, {"device", device}});
  std::optional<ValueRef> sum;
  for (int64_t k = 0; k < widest; ++k) {
    ValueRef at = b.call(OpKind::AddScalar, {start, k});
    ValueRef taken = b.call(OpKind::IndexSelect, {v, dim, b.call(OpKind::Clamp, {at, std::nullopt, in - 1})});
    ValueRef term = b.call(OpKind::WhereSelf, {shaped(b.call(OpKind::LtTensor, {at, end})), taken, zero});
    sum = sum ? b.call(OpKind::AddTensor, {*sum, term}) : term;
  }
  return b.call(OpKind::DivTensor, {*sum, shaped(b.call(OpKind::SubTensor, {end, start}))});
}

ValueRef adaptive_avg_pool(Builder& b, ValueRef x) {
  const Node& n = b.n;
  ArgReader args(b.g, n);
  auto out = args.ints("output_size");
  const auto in = adaptive_input_size(n.schema().name, b.g.meta(x), out);
  DType t = b.g.meta(x).dtype;
  if (!in[0].is_constant() || !in[1].is_constant()) {
    // Symbolic sizes: an output of 1 along a dim is the mean over it (a CNN's global pooling);
    // other window layouts follow the size and are compiled per size.
    if (out[0] != 1 || out[1] != 1)
      fail("{}: coil pools adaptively over symbolic spatial sizes ({}x{}) only to 1x1, not {}x{}", n.schema().name, in[0].str(), in[1].str(),
           out[0], out[1]);
    const int64_t r = b.rank(x);
    return b.output(b.call(OpKind::MeanDim, {b.widen(x), IntList{r - 2, r - 1}, true}), t, n.outputs[0].name);
  }
  const std::array<int64_t, 2> sizes{*in[0].constant(), *in[1].constant()};
  if (sizes[0] % out[0] == 0 && sizes[1] % out[1] == 0) {  // windows of one size: average pooling
    Pool2d p;
    p.kernel = p.stride = {sizes[0] / out[0], sizes[1] / out[1]};
    p.dilation = {1, 1};
    p.in = in;
    p.out = {SymInt(out[0]), SymInt(out[1])};
    return avg_pool(b, x, p, true, std::nullopt, n.outputs[0].name);
  }
  // Windows of two sizes, one output dim at a time (W, then H).
  ValueRef v = b.widen(x);
  for (int d = 1; d >= 0; --d) {
    auto du = static_cast<size_t>(d);
    v = adaptive_mean(b, v, b.rank(v) - 2 + d, sizes[du], out[du]);
  }
  return b.output(v, t, n.outputs[0].name);
}

}  // namespace

bool is_pooling(OpKind op) {
  return op == OpKind::MaxPool2dWithIndices || op == OpKind::AvgPool2d || op == OpKind::AdaptiveAvgPool2d;
}

std::vector<ValueRef> decompose_pooling(Graph& g, const Node& node, ValueRef self, const Fresh& fresh) {
  Builder b{g, node, fresh};
  switch (node.op) {
    case OpKind::MaxPool2dWithIndices: return max_pool(b, self);
    case OpKind::AvgPool2d: {
      ArgReader args(g, node);
      Pool2d p = pool2d_of(args, false, node.schema().name, g.meta(self));
      std::optional<int64_t> divisor;
      if (!args.is_none("divisor_override")) divisor = args.integer("divisor_override");
      return {avg_pool(b, self, p, args.flag("count_include_pad"), divisor, node.outputs[0].name)};
    }
    case OpKind::AdaptiveAvgPool2d: return {adaptive_avg_pool(b, self)};
    default: COIL_CHECK(false) << "not a pooling op: " << node.schema().name;
  }
  return {};
}

}  // namespace coil
