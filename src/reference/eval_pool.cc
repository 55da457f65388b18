// Reference evaluation of 2-D pooling, window by window in double, as ATen's CPU kernels
// define it: max pooling keeps the first largest value (a NaN wins, the last one seen) and its
// flat index h * W + w, average pooling divides by the window's size (padding counted or not, or
// an override), adaptive average pooling averages [floor(i * in / out), ceil((i + 1) * in / out)).
#include <array>
#include <cmath>
#include <limits>

#include "graph/pooling.h"
#include "reference/eval.h"
#include "support/check.h"

namespace coil::ref {

namespace {

// Calls fn(plane prefix, oh, ow) for every output element of a [.., OH, OW] output.
template <typename F> void each_output(const Tensor& out, F fn) {
  Shape lead(out.sizes().begin(), out.sizes().end() - 2);
  int64_t oh_n = out.sizes()[out.dim() - 2], ow_n = out.sizes()[out.dim() - 1];
  for_each_index(lead, [&](const Shape& plane) {
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) fn(plane, oh, ow);
  });
}

Shape at2(const Shape& plane, int64_t h, int64_t w) {
  Shape i = plane;
  i.push_back(h);
  i.push_back(w);
  return i;
}

// The input's (H, W): the interpreter's sizes are numbers.
std::array<int64_t, 2> sizes_in(const Pool2d& p) { return {*p.in[0].constant(), *p.in[1].constant()}; }

std::vector<Tensor> max_pool(const NodeEval& e, const Pool2d& p) {
  const Tensor& x = e.tensor("self");
  const std::array<int64_t, 2> in = sizes_in(p);
  Tensor values = e.new_output(0), indices = e.new_output(1);
  const bool integral = is_integral(x.dtype(), true);
  each_output(values, [&](const Shape& plane, int64_t oh, int64_t ow) {
    int64_t h0 = p.start(0, oh), w0 = p.start(1, ow);
    int64_t h1 = std::min(h0 + (p.kernel[0] - 1) * p.dilation[0] + 1, in[0]);
    int64_t w1 = std::min(w0 + (p.kernel[1] - 1) * p.dilation[1] + 1, in[1]);
    while (h0 < 0) h0 += p.dilation[0];
    while (w0 < 0) w0 += p.dilation[1];
    Shape best_at = at2(plane, h0, w0);
    int64_t best_index = h0 * in[1] + w0;
    double best = -std::numeric_limits<double>::infinity();
    int64_t best_int = std::numeric_limits<int64_t>::min();
    for (int64_t h = h0; h < h1; h += p.dilation[0]) {
      for (int64_t w = w0; w < w1; w += p.dilation[1]) {
        Shape i = at2(plane, h, w);
        bool take;
        if (integral) {
          int64_t v = x.load_int(x.element_index(i));
          take = v > best_int;
          if (take) best_int = v;
        } else {
          double v = at(x, i);
          take = v > best || std::isnan(v);
          if (take) best = v;
        }
        if (take) best_at = i, best_index = h * in[1] + w;
      }
    }
    copy_element(values, at2(plane, oh, ow), x, best_at);
    indices.store_int(indices.element_index(at2(plane, oh, ow)), best_index);
  });
  return {values, indices};
}

Tensor avg_pool(const NodeEval& e, const Pool2d& p) {
  const Tensor& x = e.tensor("self");
  const std::array<int64_t, 2> in = sizes_in(p);
  Tensor out = e.new_output();
  std::optional<int64_t> divisor = e.opt_integer("divisor_override");
  bool include_pad = e.flag("count_include_pad");
  each_output(out, [&](const Shape& plane, int64_t oh, int64_t ow) {
    int64_t h0 = p.start(0, oh), w0 = p.start(1, ow);
    int64_t h1 = std::min(h0 + p.kernel[0], in[0] + p.pad[0]), w1 = std::min(w0 + p.kernel[1], in[1] + p.pad[1]);
    int64_t padded_size = (h1 - h0) * (w1 - w0);
    h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
    h1 = std::min(h1, in[0]), w1 = std::min(w1, in[1]);
    if (h0 >= h1 || w0 >= w1) return;  // a window wholly in the padding: 0
    int64_t d = divisor ? *divisor : include_pad ? padded_size : (h1 - h0) * (w1 - w0);
    if (x.dtype() == DType::i64) {  // an int64 sum (wrapping), divided rounding toward zero
      uint64_t sum = 0;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) sum += static_cast<uint64_t>(x.load_int(x.element_index(at2(plane, h, w))));
      int64_t mean = d == -1 ? static_cast<int64_t>(0 - sum) : static_cast<int64_t>(sum) / d;  // INT64_MIN / -1 wraps
      out.store_int(out.element_index(at2(plane, oh, ow)), mean);
      return;
    }
    double sum = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += at(x, at2(plane, h, w));
    set(out, at2(plane, oh, ow), sum / static_cast<double>(d));
  });
  return out;
}

Tensor adaptive_avg_pool(const NodeEval& e) {
  const Tensor& x = e.tensor("self");
  Tensor out = e.new_output();
  int64_t ih = x.sizes()[x.dim() - 2], iw = x.sizes()[x.dim() - 1];
  int64_t oh_n = out.sizes()[out.dim() - 2], ow_n = out.sizes()[out.dim() - 1];
  each_output(out, [&](const Shape& plane, int64_t oh, int64_t ow) {
    int64_t h0 = adaptive_start(oh, ih, oh_n), h1 = adaptive_end(oh, ih, oh_n);
    int64_t w0 = adaptive_start(ow, iw, ow_n), w1 = adaptive_end(ow, iw, ow_n);
    double sum = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += at(x, at2(plane, h, w));
    set(out, at2(plane, oh, ow), sum / static_cast<double>((h1 - h0) * (w1 - w0)));
  });
  return out;
}

TensorMeta meta_of(const Tensor& t) {
  SymShape sizes;
  for (int64_t s : t.sizes()) sizes.push_back(s);
  return TensorMeta::contiguous(t.dtype(), sizes, {});
}

}  // namespace

std::vector<Tensor> eval_pooling(const NodeEval& e) {
  const Tensor& x = e.tensor("self");
  switch (e.op()) {
    case OpKind::MaxPool2dWithIndices:
      return max_pool(e, pool2d_of(e, true, e.op_name(), meta_of(x)));
    case OpKind::AvgPool2d:
      return {avg_pool(e, pool2d_of(e, false, e.op_name(), meta_of(x)))};
    case OpKind::AdaptiveAvgPool2d: return {adaptive_avg_pool(e)};
    default: COIL_CHECK(false) << "no pooling evaluator for " << e.op_name();
  }
  return {};
}

}  // namespace coil::ref
