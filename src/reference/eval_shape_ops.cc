// Reference evaluation of views (from the runtime tensor's own strides), shape ops and
// indexing. Views share storage with their input; everything else is a new tensor.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "graph/view_strides.h"
#include "reference/eval.h"
#include "support/check.h"

namespace coil::ref {

namespace {

int64_t clamp_bound(int64_t v, int64_t size) {
  if (v < 0) v += size;
  return std::clamp<int64_t>(v, 0, size);
}

Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  auto d = static_cast<size_t>(dim);
  int64_t n = t.sizes()[d];
  int64_t s = clamp_bound(start.value_or(0), n), e = clamp_bound(end.value_or(n), n);
  Shape sizes = t.sizes(), strides = t.strides();
  sizes[d] = std::max<int64_t>(e - s, 0) == 0 ? 0 : (e - s + step - 1) / step;
  strides[d] *= step;
  return t.view(sizes, strides, t.offset() + s * t.strides()[d]);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  auto d = static_cast<size_t>(dim);
  int64_t n = t.sizes()[d];
  if (index < -n || index >= n) fail("select(): index {} out of range for tensor of size {} at dimension {}", index, shape_to_string(t.sizes()), dim);
  if (index < 0) index += n;
  Shape sizes = t.sizes(), strides = t.strides();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return t.view(sizes, strides, t.offset() + index * t.strides()[d]);
}

std::vector<Tensor> views(const NodeEval& e) {
  const Tensor& t = e.tensor("self");
  int64_t rank = t.dim();
  switch (e.op()) {
    case OpKind::Alias: return {t};
    case OpKind::View:
    case OpKind::UnsafeView: {
      Shape sizes = e.out_sizes();
      auto strides = view_strides(t.sizes(), t.strides(), sizes);
      if (!strides) fail("view size {} is not compatible with the input's strides {}; use reshape", shape_to_string(sizes), shape_to_string(t.strides()));
      if (e.op() == OpKind::View) return {t.view(sizes, *strides, t.offset())};
      Tensor out = e.new_output();  // _unsafe_view makes a new (contiguous) tensor
      copy_into(out, t.view(sizes, *strides, t.offset()));
      return {out};
    }
    case OpKind::Permute: {
      Shape sizes, strides;
      for (int64_t d : e.ints("dims")) {
        sizes.push_back(t.sizes()[static_cast<size_t>(wrap(d, rank))]);
        strides.push_back(t.strides()[static_cast<size_t>(wrap(d, rank))]);
      }
      return {t.view(sizes, strides, t.offset())};
    }
    case OpKind::Expand: return {broadcast_to(t, e.out_sizes())};
    case OpKind::SliceTensor:
      return {slice(t, wrap(e.integer("dim"), rank), e.opt_integer("start"), e.opt_integer("end"), e.integer("step"))};
    case OpKind::SelectInt: return {select(t, wrap(e.integer("dim"), rank), e.integer("index"))};
    case OpKind::Squeeze:
    case OpKind::SqueezeDim:
    case OpKind::SqueezeDims: {
      std::vector<int64_t> dims;
      if (e.op() == OpKind::SqueezeDim) dims = {wrap(e.integer("dim"), rank)};
      if (e.op() == OpKind::SqueezeDims)
        for (int64_t d : e.ints("dim")) dims.push_back(wrap(d, rank));
      Shape sizes, strides;
      for (int64_t d = 0; d < rank; ++d) {
        bool listed = e.op() == OpKind::Squeeze || std::find(dims.begin(), dims.end(), d) != dims.end();
        if (listed && t.sizes()[static_cast<size_t>(d)] == 1) continue;
        sizes.push_back(t.sizes()[static_cast<size_t>(d)]);
        strides.push_back(t.strides()[static_cast<size_t>(d)]);
      }
      return {t.view(sizes, strides, t.offset())};
    }
    case OpKind::Unsqueeze: {
      int64_t d = wrap(e.integer("dim"), rank + 1);
      Shape sizes = t.sizes(), strides = t.strides();
      int64_t stride = d >= rank ? 1 : sizes[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
      sizes.insert(sizes.begin() + d, 1);
      strides.insert(strides.begin() + d, stride);
      return {t.view(sizes, strides, t.offset())};
    }
    case OpKind::Diagonal: {
      int64_t d1 = wrap(e.integer("dim1"), rank), d2 = wrap(e.integer("dim2"), rank), k = e.integer("offset");
      int64_t n1 = t.sizes()[static_cast<size_t>(d1)], n2 = t.sizes()[static_cast<size_t>(d2)];
      int64_t s1 = t.strides()[static_cast<size_t>(d1)], s2 = t.strides()[static_cast<size_t>(d2)];
      int64_t len = std::max<int64_t>(k >= 0 ? std::min(n1, n2 - k) : std::min(n1 + k, n2), 0);
      Shape sizes, strides;
      for (int64_t d = 0; d < rank; ++d)
        if (d != d1 && d != d2) sizes.push_back(t.sizes()[static_cast<size_t>(d)]), strides.push_back(t.strides()[static_cast<size_t>(d)]);
      sizes.push_back(len);
      strides.push_back(s1 + s2);
      return {t.view(sizes, strides, t.offset() + (len == 0 ? 0 : k >= 0 ? k * s2 : -k * s1))};
    }
    case OpKind::AsStrided:
      return {t.view(e.ints("size"), e.ints("stride"), e.opt_integer("storage_offset").value_or(t.offset()))};
    case OpKind::SplitWithSizes: {
      int64_t d = wrap(e.integer("dim"), rank), start = 0;
      std::vector<Tensor> parts;
      for (int64_t len : e.ints("split_sizes")) {
        parts.push_back(slice(t, d, start, start + len, 1));
        start += len;
      }
      return parts;
    }
    default: break;
  }
  COIL_CHECK(false) << "no view evaluator for " << e.op_name();
}

std::vector<Tensor> shape_ops(const NodeEval& e) {
  Tensor out = e.new_output();
  switch (e.op()) {
    case OpKind::Cat: {
      int64_t offset = 0;
      int64_t d = wrap(e.integer("dim"), out.dim());
      for (const auto& part : e.tensor_list("tensors")) {
        if (part->dim() == 1 && part->sizes()[0] == 0 && out.dim() != 1) continue;  // legacy empty tensors
        int64_t len = part->sizes()[static_cast<size_t>(d)];
        copy_into(slice(out, d, offset, offset + len, 1), *part);
        offset += len;
      }
      return {out};
    }
    case OpKind::ConstantPadNd: {
      const Tensor& self = e.tensor("self");
      auto pad = e.ints("pad");
      double value = e.real("value");
      Shape before(static_cast<size_t>(self.dim()), 0);
      for (size_t i = 0; i < pad.size() / 2; ++i) before[static_cast<size_t>(self.dim()) - 1 - i] = pad[2 * i];
      for_each_index(out.sizes(), [&](const Shape& idx) {
        Shape src(idx.size());
        bool inside = true;
        for (size_t d = 0; d < idx.size(); ++d) {
          src[d] = idx[d] - before[d];
          inside = inside && src[d] >= 0 && src[d] < self.sizes()[d];
        }
        set(out, idx, inside ? at(self, src) : value);
      });
      return {out};
    }
    case OpKind::Flip: {
      const Tensor& self = e.tensor("self");
      std::vector<int64_t> dims;
      if (self.dim() > 0)  // a 0-d tensor accepts dim 0 or -1, with nothing to flip
        for (int64_t d : e.ints("dims")) dims.push_back(wrap(d, self.dim()));
      for_each_index(out.sizes(), [&](const Shape& idx) {
        Shape src = idx;
        for (int64_t d : dims) src[static_cast<size_t>(d)] = self.sizes()[static_cast<size_t>(d)] - 1 - idx[static_cast<size_t>(d)];
        copy_element(out, idx, self, src);
      });
      return {out};
    }
    case OpKind::Repeat: {
      const Tensor& self = e.tensor("self");
      size_t lead = static_cast<size_t>(out.dim() - self.dim());
      for_each_index(out.sizes(), [&](const Shape& idx) {
        Shape src;
        for (size_t d = lead; d < idx.size(); ++d) src.push_back(idx[d] % self.sizes()[d - lead]);
        copy_element(out, idx, self, src);
      });
      return {out};
    }
    default: break;
  }
  COIL_CHECK(false) << "no shape evaluator for " << e.op_name();
}

int64_t checked_index(int64_t i, int64_t size, bool allow_negative, std::string_view op) {
  if (allow_negative && i < 0) i += size;
  if (i < 0 || i >= size) fail("{}: index {} is out of bounds for dimension with size {}", op, i, size);
  return i;
}

// self[indices] with integer index tensors (index.Tensor, index_put): calls fn(result
// position, self position) for each element of the result in row-major order; returns the
// result's shape. The indices broadcast together and sit where the indexed dims were when
// those are adjacent, else in front.
Shape advanced_walk(const Tensor& self, std::vector<std::optional<Tensor>> list, std::string_view op,
                    const std::function<void(const Shape&, const Shape&)>& fn) {
  list.resize(static_cast<size_t>(self.dim()));
  std::vector<size_t> indexed;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i]) indexed.push_back(i);
  bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  Shape bshape;
  for (size_t i : indexed) {
    Shape s = list[i]->sizes();
    if (s.size() > bshape.size()) bshape.insert(bshape.begin(), s.size() - bshape.size(), 1);
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& b = bshape[bshape.size() - s.size() + k];
      b = b == 1 ? s[k] : b;
    }
  }
  size_t b0 = adjacent ? indexed.front() : 0, bdims = bshape.size();
  Shape rshape;
  std::vector<size_t> pos(list.size());  // where each non-indexed dim of self sits in the result
  for (size_t d = 0, free = 0; d < list.size(); ++d) {
    if (list[d]) continue;
    if (!adjacent) pos[d] = bdims + free++;
    else pos[d] = d < b0 ? d : d - indexed.size() + bdims;
  }
  if (adjacent) {
    rshape.assign(self.sizes().begin(), self.sizes().begin() + static_cast<std::ptrdiff_t>(b0));
    rshape.insert(rshape.end(), bshape.begin(), bshape.end());
    rshape.insert(rshape.end(), self.sizes().begin() + static_cast<std::ptrdiff_t>(indexed.back() + 1), self.sizes().end());
  } else {
    rshape = bshape;
    for (size_t d = 0; d < list.size(); ++d)
      if (!list[d]) rshape.push_back(self.sizes()[d]);
  }
  std::vector<Tensor> idx_tensors;
  for (size_t i : indexed) idx_tensors.push_back(broadcast_to(*list[i], bshape));
  for_each_index(rshape, [&](const Shape& idx) {
    Shape bidx(idx.begin() + static_cast<std::ptrdiff_t>(b0), idx.begin() + static_cast<std::ptrdiff_t>(b0 + bdims));
    Shape src(list.size());
    for (size_t d = 0, k = 0; d < src.size(); ++d) {
      if (!list[d]) {
        src[d] = idx[pos[d]];
        continue;
      }
      const Tensor& it = idx_tensors[k++];
      src[d] = checked_index(it.load_int(it.element_index(bidx)), self.sizes()[d], true, op);
    }
    fn(idx, src);
  });
  return rshape;
}

// Values scattered into `out` (a copy of self) by a scatter or index_put: assigned (a later
// value wins) or reduced per target element, in double for floats and exactly (wrapping) for
// integers, logically for bools, then written once. A mean divides by the count of values
// (plus one for self), rounding down for integers; without include_self a target starts from
// its first value.
class Reduction {
 public:
  Reduction(const NodeEval& e, const Tensor& out) : out_(out), integral_(is_integral(out.dtype(), true)) {
    switch (e.op()) {
      case OpKind::ScatterSrc: case OpKind::ScatterValue: how_ = How::assign; break;
      case OpKind::ScatterAdd: how_ = How::sum; break;
      case OpKind::ScatterReduce: case OpKind::ScatterValueReduce: how_ = *e.opt_str("reduce") == "add" ? How::sum : How::prod; break;
      case OpKind::IndexPut: how_ = e.flag("accumulate") ? How::sum : How::assign; break;
      default: {
        std::string r = *e.opt_str("reduce");
        how_ = r == "sum" ? How::sum : r == "prod" ? How::prod : r == "amax" || r == "max" ? How::max
             : r == "amin" || r == "min" ? How::min : How::mean;
        include_self_ = e.flag("include_self");
      }
    }
  }
  void add(int64_t k, const Tensor& src, int64_t at) {
    if (integral_ && is_integral(src.dtype(), true)) add_int(k, src.load_int(at));
    else add_real(k, src.load(at));
  }
  void add_value(int64_t k, double v) {
    if (integral_) add_int(k, static_cast<int64_t>(v));
    else add_real(k, v);
  }
  void finish() {
    for (auto& [k, en] : entries_) {
      int64_t n = std::max<int64_t>(en.count, 1);
      if (integral_) {
        int64_t v = en.i;
        if (how_ == How::mean) v = v / n - ((v % n != 0) && (v < 0));
        out_.store_int(k, wrap_int(v, out_.dtype()));
      } else {
        out_.store(k, how_ == How::mean ? en.v / static_cast<double>(n) : en.v);
      }
    }
  }

 private:
  enum class How { assign, sum, prod, max, min, mean };
  struct Entry {
    double v = 0;
    int64_t i = 0, count = 0;
    bool started = false;
  };
  Entry& entry(int64_t k) {
    auto [it, fresh] = entries_.try_emplace(k);
    if (fresh && include_self_) {
      it->second.started = true;
      it->second.count = 1;
      if (integral_) it->second.i = out_.load_int(k);
      else it->second.v = out_.load(k);
    }
    return it->second;
  }
  void add_real(int64_t k, double x) {
    if (how_ == How::assign) return out_.store(k, x);
    Entry& en = entry(k);
    ++en.count;
    if (!en.started) {
      en.v = x, en.started = true;
      return;
    }
    bool nan = std::isnan(en.v) || std::isnan(x);
    switch (how_) {
      case How::prod: en.v *= x; break;
      case How::max: en.v = nan ? NAN : std::max(en.v, x); break;
      case How::min: en.v = nan ? NAN : std::min(en.v, x); break;
      default: en.v += x;
    }
  }
  void add_int(int64_t k, int64_t x) {
    if (how_ == How::assign) return out_.store_int(k, x);
    Entry& en = entry(k);
    ++en.count;
    if (!en.started) {
      en.i = x, en.started = true;
      return;
    }
    bool logical = out_.dtype() == DType::b8;
    auto u = static_cast<uint64_t>(en.i), ux = static_cast<uint64_t>(x);
    switch (how_) {
      case How::prod: en.i = logical ? (en.i & x) : static_cast<int64_t>(u * ux); break;
      case How::max: en.i = std::max(en.i, x); break;
      case How::min: en.i = std::min(en.i, x); break;
      default: en.i = logical ? (en.i | x) : static_cast<int64_t>(u + ux);
    }
  }
  const Tensor& out_;
  bool integral_;
  How how_ = How::assign;
  bool include_self_ = true;
  std::map<int64_t, Entry> entries_;
};

std::vector<Tensor> indexing(const NodeEval& e) {
  Tensor out = e.new_output();
  const std::string& op = e.op_name();
  switch (e.op()) {
    case OpKind::IndexSelect: {
      const Tensor& self = e.tensor("self");
      const Tensor& index = e.tensor("index");
      int64_t d = wrap(e.integer("dim"), self.dim());
      for_each_index(out.sizes(), [&](const Shape& idx) {
        Shape src = idx;
        if (!src.empty()) {
          int64_t which = index.load_int(index.dim() == 0 ? index.offset() : index.element_index(Shape{idx[static_cast<size_t>(d)]}));
          src[static_cast<size_t>(d)] = checked_index(which, self.sizes()[static_cast<size_t>(d)], false, op);
        }
        copy_element(out, idx, self, src);
      });
      return {out};
    }
    case OpKind::Gather: {
      const Tensor& self = e.tensor("self");
      const Tensor& index = e.tensor("index");
      int64_t d = wrap(e.integer("dim"), self.dim());
      for_each_index(out.sizes(), [&](const Shape& idx) {
        // 0-d and 1-d tensors mix: a 0-d self has one position, a 0-d index names one.
        int64_t n = self.dim() == 0 ? 1 : self.sizes()[static_cast<size_t>(d)];
        int64_t which = checked_index(index.load_int(index.element_index(idx)), n, false, op);
        Shape src;
        if (self.dim() > 0) {
          src = idx.empty() ? Shape{0} : idx;
          src[static_cast<size_t>(d)] = which;
        }
        copy_element(out, idx, self, src);
      });
      return {out};
    }
    case OpKind::Embedding: {
      const Tensor& weight = e.tensor("weight");
      const Tensor& indices = e.tensor("indices");
      for_each_index(out.sizes(), [&](const Shape& idx) {
        Shape prefix(idx.begin(), idx.end() - 1);
        int64_t row = checked_index(indices.load_int(indices.element_index(prefix)), weight.sizes()[0], false, op);
        copy_element(out, idx, weight, {row, idx.back()});
      });
      return {out};
    }
    case OpKind::IndexTensor: {
      const Tensor& self = e.tensor("self");
      advanced_walk(self, e.tensor_list("indices"), op, [&](const Shape& r, const Shape& si) { copy_element(out, r, self, si); });
      return {out};
    }
    case OpKind::SliceScatter:
    case OpKind::SelectScatter: {
      const Tensor& self = e.tensor("self");
      copy_into(out, self);
      int64_t d = wrap(e.integer("dim"), self.dim());
      Tensor region = e.op() == OpKind::SliceScatter
                          ? slice(out, d, e.opt_integer("start"), e.opt_integer("end"), e.integer("step"))
                          : select(out, d, e.integer("index"));
      copy_into(region, e.tensor("src"));
      return {out};
    }
    case OpKind::ScatterSrc: case OpKind::ScatterAdd: case OpKind::ScatterValue: case OpKind::ScatterReduce:
    case OpKind::ScatterValueReduce: case OpKind::ScatterReduceTwo: {
      const Tensor& self = e.tensor("self");
      const Tensor& index = e.tensor("index");
      bool has_src = e.op() != OpKind::ScatterValue && e.op() != OpKind::ScatterValueReduce;
      std::optional<Tensor> src;
      if (has_src) src = e.tensor("src");
      copy_into(out, self);
      int64_t d = wrap(e.integer("dim"), self.dim());
      Reduction reduction(e, out);
      for_each_index(index.sizes(), [&](const Shape& idx) {
        // 0-d and 1-d tensors mix: a 0-d tensor has one position, a 0-d index names one.
        int64_t n = self.dim() == 0 ? 1 : self.sizes()[static_cast<size_t>(d)];
        int64_t which = checked_index(index.load_int(index.element_index(idx)), n, false, op);
        Shape at_index = idx.empty() ? Shape{0} : idx;
        Shape dst, si = !src || src->dim() == 0 ? Shape{} : at_index;
        if (self.dim() > 0) {
          dst = at_index;
          dst[static_cast<size_t>(d)] = which;
        }
        if (src) reduction.add(out.element_index(dst), *src, src->element_index(si));
        else reduction.add_value(out.element_index(dst), e.real("value"));
      });
      reduction.finish();
      return {out};
    }
    case OpKind::IndexPut: {
      const Tensor& self = e.tensor("self");
      const Tensor& values = e.tensor("values");
      auto list = e.tensor_list("indices");
      copy_into(out, self);
      Reduction reduction(e, out);
      list.resize(static_cast<size_t>(self.dim()));
      std::vector<size_t> indexed;
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i]) indexed.push_back(i);
      if (list[indexed.front()]->dtype() == DType::b8 || list[indexed.front()]->dtype() == DType::u8) {
        // One boolean mask: values broadcast over the selected count (a dim of 1 in their shape).
        const Tensor& mask = *list[indexed.front()];
        size_t p = indexed.front(), m = static_cast<size_t>(mask.dim());
        Shape vshape(self.sizes().begin(), self.sizes().begin() + static_cast<std::ptrdiff_t>(p));
        vshape.push_back(1);
        vshape.insert(vshape.end(), self.sizes().begin() + static_cast<std::ptrdiff_t>(p + m), self.sizes().end());
        Tensor v = broadcast_to(values, vshape);
        for_each_index(self.sizes(), [&](const Shape& idx) {
          Shape at(idx.begin() + static_cast<std::ptrdiff_t>(p), idx.begin() + static_cast<std::ptrdiff_t>(p + m));
          if (mask.load(mask.element_index(at)) == 0) return;
          Shape vi(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(p));
          vi.push_back(0);
          vi.insert(vi.end(), idx.begin() + static_cast<std::ptrdiff_t>(p + m), idx.end());
          reduction.add(out.element_index(idx), v, v.element_index(vi));
        });
        reduction.finish();
        return {out};
      }
      std::vector<std::pair<Shape, Shape>> pairs;  // (result position, self position) of self[indices]
      Shape rshape = advanced_walk(self, list, op, [&](const Shape& r, const Shape& si) { pairs.emplace_back(r, si); });
      Tensor v = broadcast_to(values, rshape);
      for (const auto& [r, si] : pairs) reduction.add(out.element_index(si), v, v.element_index(r));
      reduction.finish();
      return {out};
    }
    default: break;
  }
  COIL_CHECK(false) << "no indexing evaluator for " << op;
}

}  // namespace

std::vector<Tensor> eval_view(const NodeEval& e) { return views(e); }
std::vector<Tensor> eval_shape(const NodeEval& e) { return shape_ops(e); }
std::vector<Tensor> eval_indexing(const NodeEval& e) { return indexing(e); }

}  // namespace coil::ref
