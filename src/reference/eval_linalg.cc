// Reference evaluation of matrix products, convolution and attention: direct loops in double.
#include <cmath>

#include "reference/eval.h"
#include "support/check.h"

namespace coil::ref {

namespace {

// out[b] = alpha * x[b] @ y[b] (+ beta * bias broadcast), for 2-D or batched 3-D operands.
void matmul(const Tensor& out, const Tensor& x, const Tensor& y, double alpha, const Tensor* bias, double beta) {
  bool batched = x.dim() == 3;
  int64_t batches = batched ? x.sizes()[0] : 1;
  int64_t n = x.sizes()[x.dim() - 2], k = x.sizes()[x.dim() - 1], m = y.sizes()[y.dim() - 1];
  std::optional<Tensor> b;
  if (bias) b = broadcast_to(*bias, out.sizes());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          Shape xi = batched ? Shape{bi, i, p} : Shape{i, p};
          Shape yi = batched ? Shape{bi, p, j} : Shape{p, j};
          acc += at(x, xi) * at(y, yi);
        }
        Shape oi = batched ? Shape{bi, i, j} : Shape{i, j};
        double r = alpha * acc;
        if (b && beta != 0) r += beta * at(*b, oi);  // beta == 0 ignores the bias, NaN included
        set(out, oi, r);
      }
    }
  }
}

// Each output element gathers input * weight over the kernel window. A transposed convolution
// is the same gather read backwards: output position o takes input i where
// i * stride - padding + kk * dilation == o.
void convolution(const NodeEval& e, const Tensor& out) {
  const Tensor& input = e.tensor("input");
  const Tensor& weight = e.tensor("weight");
  auto bias = e.opt_tensor("bias");
  bool transposed = e.flag("transposed");
  size_t k = static_cast<size_t>(weight.dim() - 2);
  auto expand = [&](std::string_view name) {
    auto v = e.ints(name);
    if (v.size() == 1) v.resize(k, v[0]);
    return v;
  };
  auto stride = expand("stride"), padding = expand("padding"), dilation = expand("dilation");
  int64_t groups = e.integer("groups");
  int64_t cin_per_group = transposed ? weight.sizes()[0] / groups : weight.sizes()[1];
  int64_t cout_per_group = transposed ? weight.sizes()[1] : weight.sizes()[0] / groups;
  Shape kernel(weight.sizes().begin() + 2, weight.sizes().end());
  for_each_index(out.sizes(), [&](const Shape& oi) {
    int64_t n = oi[0], o = oi[1], g = o / cout_per_group;
    double acc = bias ? at(*bias, {o}) : 0.0;
    for (int64_t c = 0; c < cin_per_group; ++c) {
      int64_t ci = g * cin_per_group + c;
      for_each_index(kernel, [&](const Shape& kk) {
        Shape ii = {n, ci};
        for (size_t d = 0; d < k; ++d) {
          int64_t pos;
          if (transposed) {
            int64_t t = oi[d + 2] + padding[d] - kk[d] * dilation[d];
            if (t < 0 || t % stride[d] != 0) return;
            pos = t / stride[d];
          } else {
            pos = oi[d + 2] * stride[d] - padding[d] + kk[d] * dilation[d];
          }
          if (pos < 0 || pos >= input.sizes()[d + 2]) return;
          ii.push_back(pos);
        }
        Shape wi(k + 2);
        wi[0] = transposed ? ci : o;
        wi[1] = transposed ? o % cout_per_group : c;
        std::copy(kk.begin(), kk.end(), wi.begin() + 2);
        acc += at(input, ii) * at(weight, wi);
      });
    }
    set(out, oi, acc);
  });
}

void attention(const NodeEval& e, const Tensor& out) {
  const Tensor& q = e.tensor("query");
  const Tensor& key = e.tensor("key");
  const Tensor& v = e.tensor("value");
  auto mask = e.opt_tensor("attn_mask");
  bool causal = e.flag("is_causal");
  size_t r = static_cast<size_t>(q.dim());
  int64_t L = q.sizes()[r - 2], E = q.sizes()[r - 1], S = key.sizes()[r - 2], Ev = v.sizes()[r - 1];
  double scale = e.opt_real("scale").value_or(1.0 / std::sqrt(static_cast<double>(E)));
  Shape scores_shape(q.sizes().begin(), q.sizes().end() - 2);
  scores_shape.push_back(L);
  scores_shape.push_back(S);
  std::optional<Tensor> m;
  if (mask) m = broadcast_to(*mask, scores_shape);
  // Grouped-query attention: query head h reads key/value head h / (Hq / Hkv).
  int64_t group = r >= 3 && key.sizes()[r - 3] > 0 ? q.sizes()[r - 3] / key.sizes()[r - 3] : 1;
  Shape batch(q.sizes().begin(), q.sizes().end() - 2);
  for_each_index(batch, [&](const Shape& b) {
    Shape kb = b;
    if (r >= 3) kb[r - 3] = b[r - 3] / group;
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(static_cast<size_t>(S));
      double best = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < E; ++p) {
          Shape qi = b, ki = kb;
          qi.insert(qi.end(), {i, p});
          ki.insert(ki.end(), {j, p});
          acc += at(q, qi) * at(key, ki);
        }
        acc *= scale;
        if (causal && j > i) acc = -INFINITY;
        if (m) {
          Shape mi = b;
          mi.insert(mi.end(), {i, j});
          double mv = at(*m, mi);
          acc = m->dtype() == DType::b8 ? (mv != 0 ? acc : -INFINITY) : acc + mv;
        }
        s[static_cast<size_t>(j)] = acc;
        best = std::max(best, acc);
      }
      // A row with every position masked attends to nothing: its output is zero.
      double total = 0;
      for (double& x : s) {
        x = best == -INFINITY ? 0.0 : std::exp(x - best);
        total += x;
      }
      for (int64_t c = 0; c < Ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) {
          Shape vi = kb;
          vi.insert(vi.end(), {j, c});
          acc += s[static_cast<size_t>(j)] * at(v, vi);
        }
        Shape oi = b;
        oi.insert(oi.end(), {i, c});
        set(out, oi, total == 0 ? 0.0 : acc / total);
      }
    }
  });
}

}  // namespace

std::vector<Tensor> eval_linalg(const NodeEval& e) {
  if (e.op() == OpKind::MaxPool2dWithIndices || e.op() == OpKind::AvgPool2d || e.op() == OpKind::AdaptiveAvgPool2d) return eval_pooling(e);
  if (e.op() == OpKind::TorchCall) fail("{}: the call is its embedder's (the torch.compile adapter), which the reference has not", e.op_name());
  Tensor out = e.new_output();
  switch (e.op()) {
    case OpKind::Mm:
    case OpKind::Bmm: matmul(out, e.tensor("self"), e.tensor("mat2"), 1.0, nullptr, 0.0); break;
    case OpKind::Addmm: {
      const Tensor& bias = e.tensor("self");
      double alpha = e.real("alpha"), beta = e.real("beta");
      if (is_integral(out.dtype(), true)) {  // ATen converts the scalars to the integer type
        alpha = std::trunc(alpha);
        beta = std::trunc(beta);
      }
      matmul(out, e.tensor("mat1"), e.tensor("mat2"), alpha, &bias, beta);
      break;
    }
    case OpKind::Convolution: convolution(e, out); break;
    case OpKind::ScaledDotProductAttention: attention(e, out); break;
    default: COIL_CHECK(false) << "no linalg evaluator for " << e.op_name();
  }
  return {out};
}

}  // namespace coil::ref
