// Reference evaluation of views (from the runtime tensor's own strides), shape ops and
// indexing. Views share storage with their input; everything else is a new tensor.
#include <algorithm>
#include <map>

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
      auto list = e.tensor_list("indices");
      list.resize(static_cast<size_t>(self.dim()));
      std::vector<size_t> indexed;
      for (size_t i = 0; i < list.size(); ++i)
        if (list[i]) indexed.push_back(i);
      bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
      size_t bdims = 0;
      for (size_t i : indexed) bdims = std::max(bdims, static_cast<size_t>(list[i]->dim()));
      Shape bshape(out.sizes().begin() + static_cast<std::ptrdiff_t>(adjacent ? indexed.front() : 0),
                   out.sizes().begin() + static_cast<std::ptrdiff_t>((adjacent ? indexed.front() : 0) + bdims));
      std::vector<Tensor> idx_tensors;
      for (size_t i : indexed) idx_tensors.push_back(broadcast_to(*list[i], bshape));
      // Where each non-indexed dim of self sits in the output.
      size_t b0 = adjacent ? indexed.front() : 0;
      std::vector<size_t> pos(list.size());
      for (size_t d = 0, free = 0; d < list.size(); ++d) {
        if (list[d]) continue;
        if (!adjacent) pos[d] = bdims + free++;
        else pos[d] = d < b0 ? d : d - indexed.size() + bdims;
      }
      for_each_index(out.sizes(), [&](const Shape& idx) {
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
        copy_element(out, idx, self, src);
      });
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
    case OpKind::ScatterSrc:
    case OpKind::ScatterAdd: {
      const Tensor& self = e.tensor("self");
      const Tensor& index = e.tensor("index");
      const Tensor& src = e.tensor("src");
      copy_into(out, self);
      int64_t d = wrap(e.integer("dim"), self.dim());
      bool add = e.op() == OpKind::ScatterAdd;
      // Floating sums accumulate in double and round once at the end, as ATen's CPU kernel
      // (which accumulates f16 and bf16 in float) comes closest to.
      std::map<int64_t, double> sums;
      for_each_index(index.sizes(), [&](const Shape& idx) {
        // 0-d and 1-d tensors mix: a 0-d tensor has one position, a 0-d index names one.
        int64_t n = self.dim() == 0 ? 1 : self.sizes()[static_cast<size_t>(d)];
        int64_t which = checked_index(index.load_int(index.element_index(idx)), n, false, op);
        Shape at_index = idx.empty() ? Shape{0} : idx;
        Shape dst, si = src.dim() == 0 ? Shape{} : at_index;
        if (self.dim() > 0) {
          dst = at_index;
          dst[static_cast<size_t>(d)] = which;
        }
        if (!add) {
          copy_element(out, dst, src, si);
        } else if (is_integral(out.dtype(), true)) {
          int64_t sum = static_cast<int64_t>(static_cast<uint64_t>(out.load_int(out.element_index(dst))) +
                                             static_cast<uint64_t>(src.load_int(src.element_index(si))));
          out.store_int(out.element_index(dst), sum);
        } else {
          int64_t k = out.element_index(dst);
          auto it = sums.try_emplace(k, out.load(k)).first;
          it->second += at(src, si);
        }
      });
      for (const auto& [k, v] : sums) out.store(k, v);
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
