// Reference evaluation of reductions, scans and normalizations: plain loops in double.
#include <algorithm>
#include <cmath>
#include <optional>

#include "reference/eval.h"
#include "support/check.h"

namespace coil::ref {

namespace {

std::vector<int64_t> dims_or_all(const std::optional<std::vector<int64_t>>& dims, int64_t rank) {
  std::vector<int64_t> out;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) out.push_back(wrap(d, rank));
  return out;
}

// The running value of a scan (cumsum, cumprod, cummax/cummin with the index of the value,
// logcumsumexp) as ATen's CPU kernels compute it: integers exact (wrapping like int64), floats
// in double; cummax takes a later equal value and a NaN (which then stays), logcumsumexp adds
// in log space by max + log1p(exp(min - max)).
struct ScanState {
  ScanState(OpKind kind, DType dtype) : op(kind), exact(is_integral(dtype, true) && kind != OpKind::Logcumsumexp), acc(dtype) {
    if (op == OpKind::Cumprod) value = 1, exact_value = 1;
    if (op == OpKind::Logcumsumexp) value = -INFINITY;
  }
  void step(const Tensor& in, int64_t at, int64_t i) {
    if (exact) {
      int64_t x = wrap_int(in.load_int(at), acc);
      auto u = static_cast<uint64_t>(exact_value);
      switch (op) {
        case OpKind::Cumsum: exact_value = static_cast<int64_t>(u + static_cast<uint64_t>(x)); break;
        case OpKind::Cumprod: exact_value = static_cast<int64_t>(u * static_cast<uint64_t>(x)); break;
        default:
          if (i == 0 || (op == OpKind::Cummax ? x >= exact_value : x <= exact_value)) exact_value = x, index = i;
      }
      return;
    }
    double x = round_to_dtype(in.load(at), acc);
    switch (op) {
      case OpKind::Cumsum: value += x; break;
      case OpKind::Cumprod: value *= x; break;
      case OpKind::Logcumsumexp: {
        double lo = std::isnan(value) ? value : std::min(x, value), hi = std::isnan(value) ? value : std::max(x, value);
        value = lo != hi || std::isfinite(lo) ? hi + std::log1p(std::exp(lo - hi)) : x;
        break;
      }
      default:
        if (i == 0 || std::isnan(x) || (!std::isnan(value) && (op == OpKind::Cummax ? x >= value : x <= value))) value = x, index = i;
    }
  }
  void write(Tensor& out, int64_t at) const {
    if (exact) out.store_int(at, exact_value);
    else out.store(at, value);
  }
  OpKind op;
  bool exact;
  DType acc;
  double value = 0;
  int64_t exact_value = 0, index = 0;
};

// Groups the input's elements by output position: calls fn(out_index, values) once per
// output element with the reduced elements in row-major order, plus their flat positions
// within the reduced sub-space (for argmax).
// Groups the input's elements by output position: calls fn(out_index, elements) once per
// output element with the storage indices of the reduced elements in row-major order.
void reduce_elements(const Tensor& in, const std::vector<int64_t>& dims, bool keepdim,
                     const std::function<void(const Shape&, const std::vector<int64_t>&)>& fn) {
  Shape kept_sizes, red_sizes;
  for (int64_t d = 0; d < in.dim(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    (reduced ? red_sizes : kept_sizes).push_back(in.sizes()[static_cast<size_t>(d)]);
  }
  for_each_index(kept_sizes, [&](const Shape& kept) {
    std::vector<int64_t> elements;
    for_each_index(red_sizes, [&](const Shape& red) {
      Shape idx;
      size_t k = 0, r = 0;
      for (int64_t d = 0; d < in.dim(); ++d) {
        bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
        idx.push_back(reduced ? red[r++] : kept[k++]);
      }
      elements.push_back(in.element_index(idx));
    });
    Shape out_idx;
    size_t k = 0;
    for (int64_t d = 0; d < in.dim(); ++d) {
      bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!reduced) out_idx.push_back(kept[k++]);
      else if (keepdim) out_idx.push_back(0);
    }
    fn(out_idx, elements);
  });
}

// The same, with the reduced values as doubles.
void reduce(const Tensor& in, const std::vector<int64_t>& dims, bool keepdim,
            const std::function<void(const Shape&, const std::vector<double>&)>& fn) {
  reduce_elements(in, dims, keepdim, [&](const Shape& idx, const std::vector<int64_t>& elements) {
    std::vector<double> values;
    for (int64_t e : elements) values.push_back(in.load(e));
    fn(idx, values);
  });
}

// Index of the max (or min); NaN counts as the extreme, and the first occurrence wins.
size_t arg_extreme(const std::vector<double>& v, bool want_max) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[best])) break;
    if (std::isnan(v[i]) || (want_max ? v[i] > v[best] : v[i] < v[best])) best = i;
  }
  return best;
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

double variance(const std::vector<double>& v, double correction) {
  double n = static_cast<double>(v.size());
  double mean = sum(v) / n;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return ss / std::max(0.0, n - correction);
}

std::vector<Tensor> reductions(const NodeEval& e) {
  const Tensor& self = e.tensor("self");
  Tensor out = e.new_output();
  int64_t rank = self.dim();
  DType acc = e.out_dtype();
  // Values are converted to the output (accumulation) dtype first, as PyTorch does.
  auto cast_all = [&](std::vector<double> v, DType dt) {
    for (double& x : v) x = opmath_round(x, dt);
    return v;
  };
  auto write = [&](const Tensor& t, const Shape& idx, double v) { set(t, idx, v); };
  switch (e.op()) {
    case OpKind::Sum: case OpKind::SumDimIntList: case OpKind::Mean: case OpKind::MeanDim:
    case OpKind::Prod: case OpKind::ProdDimInt: {
      std::optional<std::vector<int64_t>> dims;
      if (e.op() == OpKind::SumDimIntList || e.op() == OpKind::MeanDim) dims = e.opt_ints("dim");
      if (e.op() == OpKind::ProdDimInt) dims = std::vector<int64_t>{e.integer("dim")};
      bool keep = e.node().schema().arg_index("keepdim") >= 0 && e.flag("keepdim");
      bool is_prod = e.op() == OpKind::Prod || e.op() == OpKind::ProdDimInt;
      bool is_mean = e.op() == OpKind::Mean || e.op() == OpKind::MeanDim;
      if (is_integral(acc, true)) {  // exact, wrapping int64 accumulation
        reduce_elements(self, dims_or_all(dims, rank), keep, [&](const Shape& idx, const std::vector<int64_t>& elements) {
          uint64_t r = is_prod ? 1 : 0;
          for (int64_t el : elements) {
            auto x = static_cast<uint64_t>(wrap_int(self.load_int(el), acc));
            r = is_prod ? r * x : r + x;
          }
          out.store_int(out.element_index(idx), static_cast<int64_t>(r));
        });
        return {out};
      }
      reduce(self, dims_or_all(dims, rank), keep, [&](const Shape& idx, const std::vector<double>& raw) {
        // sum/prod with dtype= convert the input to that dtype first; mean averages as is.
        auto v = is_mean ? cast_all(raw, acc) : raw;
        if (!is_mean)
          for (double& x : v) x = round_to_dtype(x, acc);
        double r = is_prod ? 1.0 : sum(v);
        if (is_prod)
          for (double x : v) r *= x;
        if (is_mean) r /= static_cast<double>(v.size());
        write(out, idx, r);
      });
      return {out};
    }
    case OpKind::Max: case OpKind::Min:
    case OpKind::Amax: case OpKind::Amin: {
      bool want_max = e.op() == OpKind::Amax || e.op() == OpKind::Max;
      bool all = e.op() == OpKind::Max || e.op() == OpKind::Min;
      reduce(self, dims_or_all(all ? std::nullopt : std::optional(e.ints("dim")), rank), !all && e.flag("keepdim"), [&](const Shape& idx, const std::vector<double>& v) {
        write(out, idx, v[arg_extreme(v, want_max)]);
      });
      return {out};
    }
    case OpKind::Argmax: case OpKind::Argmin: {
      bool want_max = e.op() == OpKind::Argmax;
      auto dim = e.opt_integer("dim");
      if (!dim) {
        // Over the flattened tensor; keepdim gives all-ones dims.
        std::vector<double> v;
        for_each_index(self.sizes(), [&](const Shape& i) { v.push_back(at(self, i)); });
        out.store(out.offset(), static_cast<double>(arg_extreme(v, want_max)));
        return {out};
      }
      reduce(self, {wrap(*dim, rank)}, e.flag("keepdim"), [&](const Shape& idx, const std::vector<double>& v) {
        write(out, idx, static_cast<double>(arg_extreme(v, want_max)));
      });
      return {out};
    }
    case OpKind::VarCorrection: {
      double correction = e.opt_real("correction").value_or(1.0);
      reduce(self, dims_or_all(e.opt_ints("dim"), rank), e.flag("keepdim"), [&](const Shape& idx, const std::vector<double>& v) {
        write(out, idx, variance(v, correction));
      });
      return {out};
    }
    case OpKind::Any: case OpKind::AnyDim: case OpKind::AnyDims: {
      std::optional<std::vector<int64_t>> dims;
      if (e.op() == OpKind::AnyDim) dims = std::vector<int64_t>{e.integer("dim")};
      if (e.op() == OpKind::AnyDims) dims = e.opt_ints("dim");
      bool keep = e.op() != OpKind::Any && e.flag("keepdim");
      // An empty dim list of any.dims reduces nothing.
      auto reduced = dims && dims->empty() ? std::vector<int64_t>{} : dims_or_all(dims, rank);
      reduce(self, reduced, keep, [&](const Shape& idx, const std::vector<double>& v) {
        write(out, idx, std::any_of(v.begin(), v.end(), [](double x) { return x != 0; }));
      });
      return {out};
    }
    case OpKind::MaxDim: case OpKind::MinDim: {
      Tensor indices = e.new_output(1);
      bool want_max = e.op() == OpKind::MaxDim;
      reduce(self, {wrap(e.integer("dim"), rank)}, e.flag("keepdim"), [&](const Shape& idx, const std::vector<double>& v) {
        size_t i = arg_extreme(v, want_max);
        write(out, idx, v[i]);
        write(indices, idx, static_cast<double>(i));
      });
      return {out, indices};
    }
    case OpKind::Cumsum: case OpKind::Cumprod: case OpKind::Cummax: case OpKind::Cummin: case OpKind::Logcumsumexp: {
      // One pass along `dim` per row (a 0-d input is a one-element row).
      bool with_index = e.op() == OpKind::Cummax || e.op() == OpKind::Cummin;
      std::optional<Tensor> indices;
      if (with_index) indices = e.new_output(1);
      int64_t d = rank == 0 ? 0 : wrap(e.integer("dim"), rank);
      Shape outer = self.sizes();
      if (rank > 0) outer[static_cast<size_t>(d)] = 1;
      int64_t n = rank == 0 ? 1 : self.sizes()[static_cast<size_t>(d)];
      for_each_index(outer, [&](const Shape& base) {
        ScanState state(e.op(), acc);
        Shape idx = base;
        for (int64_t i = 0; i < n; ++i) {
          if (rank > 0) idx[static_cast<size_t>(d)] = i;
          state.step(self, self.element_index(idx), i);
          state.write(out, out.element_index(idx));
          if (indices) indices->store_int(indices->element_index(idx), state.index);
        }
      });
      if (indices) return {out, *indices};
      return {out};
    }
    default: break;
  }
  COIL_CHECK(false) << "no reduction evaluator for " << e.op_name();
}

// Visits the rows along `dim`: fn(indices of the row's elements).
void for_each_row(const Shape& sizes, int64_t dim, const std::function<void(const std::vector<Shape>&)>& fn) {
  if (sizes.empty()) {
    fn({Shape{}});
    return;
  }
  Shape outer = sizes;
  outer[static_cast<size_t>(dim)] = 1;
  for_each_index(outer, [&](const Shape& base) {
    std::vector<Shape> row;
    for (int64_t i = 0; i < sizes[static_cast<size_t>(dim)]; ++i) {
      row.push_back(base);
      row.back()[static_cast<size_t>(dim)] = i;
    }
    fn(row);
  });
}

std::vector<Tensor> normalizations(const NodeEval& e) {
  switch (e.op()) {
    case OpKind::Softmax: case OpKind::LogSoftmax: {
      const Tensor& self = e.tensor("self");
      Tensor out = e.new_output();
      bool log = e.op() == OpKind::LogSoftmax;
      for_each_row(self.sizes(), wrap(e.integer("dim"), self.dim()), [&](const std::vector<Shape>& row) {
        double m = -INFINITY;
        for (const auto& i : row) m = std::max(m, at(self, i));
        double s = 0;
        for (const auto& i : row) s += std::exp(at(self, i) - m);
        for (const auto& i : row) {
          double x = at(self, i) - m;
          set(out, i, log ? x - std::log(s) : std::exp(x) / s);
        }
      });
      return {out};
    }
    case OpKind::NativeLayerNorm: {
      const Tensor& input = e.tensor("input");
      auto weight = e.opt_tensor("weight"), bias = e.opt_tensor("bias");
      Tensor out = e.new_output(0), mean = e.new_output(1), rstd = e.new_output(2);
      double eps = e.real("eps");
      size_t k = e.ints("normalized_shape").size();
      std::vector<int64_t> dims;
      for (int64_t d = input.dim() - static_cast<int64_t>(k); d < input.dim(); ++d) dims.push_back(d);
      Shape inner(input.sizes().end() - static_cast<std::ptrdiff_t>(k), input.sizes().end());
      reduce(input, dims, true, [&](const Shape& idx, const std::vector<double>& v) {
        double mu = sum(v) / static_cast<double>(v.size());
        double r = 1.0 / std::sqrt(variance(v, 0) + eps);
        set(mean, idx, mu);
        set(rstd, idx, r);
        size_t n = 0;
        for_each_index(inner, [&](const Shape& j) {
          Shape full(idx.begin(), idx.end() - static_cast<std::ptrdiff_t>(k));
          full.insert(full.end(), j.begin(), j.end());
          double y = (v[n++] - mu) * r;
          if (weight) y *= at(*weight, j);
          if (bias) y += at(*bias, j);
          set(out, full, y);
        });
      });
      return {out, mean, rstd};
    }
    case OpKind::NativeGroupNorm: {
      const Tensor& input = e.tensor("input");
      auto weight = e.opt_tensor("weight"), bias = e.opt_tensor("bias");
      Tensor out = e.new_output(0), mean = e.new_output(1), rstd = e.new_output(2);
      int64_t n = input.sizes()[0], c = input.sizes()[1], groups = e.integer("group");
      int64_t per = c / groups;
      double eps = e.real("eps");
      Shape spatial(input.sizes().begin() + 2, input.sizes().end());
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t g = 0; g < groups; ++g) {
          std::vector<Shape> members;
          for (int64_t ch = g * per; ch < (g + 1) * per; ++ch)
            for_each_index(spatial, [&](const Shape& s) {
              Shape idx = {b, ch};
              idx.insert(idx.end(), s.begin(), s.end());
              members.push_back(idx);
            });
          std::vector<double> v;
          for (const auto& i : members) v.push_back(at(input, i));
          double mu = v.empty() ? NAN : sum(v) / static_cast<double>(v.size());
          double r = 1.0 / std::sqrt(variance(v, 0) + eps);
          set(mean, {b, g}, mu);
          set(rstd, {b, g}, r);
          for (size_t i = 0; i < members.size(); ++i) {
            int64_t ch = members[i][1];
            double y = (v[i] - mu) * r;
            if (weight) y *= at(*weight, {ch});
            if (bias) y += at(*bias, {ch});
            set(out, members[i], y);
          }
        }
      }
      return {out, mean, rstd};
    }
    case OpKind::BatchNormNoTraining: {
      const Tensor& input = e.tensor("input");
      auto weight = e.opt_tensor("weight"), bias = e.opt_tensor("bias");
      const Tensor& rm = e.tensor("running_mean");
      const Tensor& rv = e.tensor("running_var");
      double eps = e.real("eps");
      Tensor out = e.new_output(0);
      for_each_index(input.sizes(), [&](const Shape& idx) {
        Shape ch = {idx[1]};
        double y = (at(input, idx) - at(rm, ch)) / std::sqrt(at(rv, ch) + eps);
        if (weight) y *= at(*weight, ch);
        if (bias) y += at(*bias, ch);
        set(out, idx, y);
      });
      Tensor saved_mean = e.new_output(1), saved_invstd = e.new_output(2);
      for (int64_t ch = 0; ch < saved_mean.numel(); ++ch) {  // CUDA's: saved per channel
        set(saved_mean, {ch}, at(rm, {ch}));
        set(saved_invstd, {ch}, 1.0 / std::sqrt(at(rv, {ch}) + eps));
      }
      return {out, saved_mean, saved_invstd};
    }
    case OpKind::BatchNormFunctional:
    case OpKind::BatchNormNoStats: {
      // Training: per channel statistics over the batch and spatial dims (the biased variance
      // normalizes; the running variance is updated with the unbiased one); eval (functional
      // only): the running statistics normalize and pass through.
      bool functional = e.op() == OpKind::BatchNormFunctional;
      const Tensor& input = e.tensor("input");
      auto weight = e.opt_tensor("weight"), bias = e.opt_tensor("bias");
      bool training = e.flag("training");
      double momentum = e.real("momentum"), eps = e.real("eps");
      std::vector<Tensor> out;
      for (size_t i = 0; i < e.num_outputs(); ++i) out.push_back(e.new_output(i));
      std::vector<int64_t> dims = {0};
      for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
      int64_t channels = input.sizes()[1];
      std::vector<double> mean(static_cast<size_t>(channels)), var(static_cast<size_t>(channels)), unbiased(mean.size());
      if (training) {
        reduce(input, dims, false, [&](const Shape& idx, const std::vector<double>& v) {
          auto ch = static_cast<size_t>(idx[0]);
          double n = static_cast<double>(v.size());
          mean[ch] = sum(v) / n;
          var[ch] = variance(v, 0);
          unbiased[ch] = var[ch] * (n / (n - 1));
        });
      } else {
        for (int64_t ch = 0; ch < channels; ++ch) {
          mean[static_cast<size_t>(ch)] = at(e.tensor("running_mean"), {ch});
          var[static_cast<size_t>(ch)] = at(e.tensor("running_var"), {ch});
        }
      }
      for_each_index(input.sizes(), [&](const Shape& idx) {
        Shape ch = {idx[1]};
        auto c = static_cast<size_t>(idx[1]);
        double y = (at(input, idx) - mean[c]) / std::sqrt(var[c] + eps);
        if (weight) y *= at(*weight, ch);
        if (bias) y += at(*bias, ch);
        set(out[0], idx, y);
      });
      for (int64_t ch = 0; ch < channels; ++ch) {
        auto c = static_cast<size_t>(ch);
        if (out[1].numel() > 0) {  // empty on the CPU in eval mode
          set(out[1], {ch}, mean[c]);
          set(out[2], {ch}, 1.0 / std::sqrt(var[c] + eps));
        }
        if (!functional) continue;
        double rm = at(e.tensor("running_mean"), {ch}), rv = at(e.tensor("running_var"), {ch});
        set(out[3], {ch}, training ? momentum * mean[c] + (1 - momentum) * rm : rm);
        set(out[4], {ch}, training ? momentum * unbiased[c] + (1 - momentum) * rv : rv);
      }
      return out;
    }
    default: break;
  }
  COIL_CHECK(false) << "no normalization evaluator for " << e.op_name();
}

}  // namespace

std::vector<Tensor> eval_reduction(const NodeEval& e) { return reductions(e); }
std::vector<Tensor> eval_normalization(const NodeEval& e) { return normalizations(e); }

}  // namespace coil::ref
