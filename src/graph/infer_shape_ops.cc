// Inference for views (strides and offsets as PyTorch computes them) and shape ops.
#include <algorithm>
#include <numeric>

#include "arith/simplify.h"
#include "graph/infer_ops.h"
#include "graph/view_strides.h"
#include "coil/tensor.h"
#include "support/check.h"

namespace coil {

std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_sizes,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& new_sizes) {
  // Splits the old shape into chunks of dims that are contiguous with each other; each chunk
  // must map onto a run of new dims with the same element count.
  std::vector<int64_t> out(new_sizes.size());
  int64_t numel = std::accumulate(old_sizes.begin(), old_sizes.end(), int64_t{1}, std::multiplies<>());
  if (numel == 0 || old_sizes.empty()) return contiguous_strides(new_sizes);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[static_cast<size_t>(d)];
    bool chunk_ends = d == 0 || (old_sizes[static_cast<size_t>(d - 1)] != 1 &&
                                 old_strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[static_cast<size_t>(view_d)] == 1)) {
      out[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
      view_numel *= new_sizes[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[static_cast<size_t>(d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

namespace {

// Slice bounds the way PyTorch clamps them: negative values count from the end, and
// out-of-range values clamp to [0, size].
}  // namespace

SymInt clamp_slice_bound(const SymInt& v, const SymInt& size) {
  if (auto c = v.constant()) {
    if (auto n = size.constant()) {
      int64_t x = *c < 0 ? *c + *n : *c;
      return std::clamp<int64_t>(x, 0, *n);
    }
    if (*c >= (int64_t{1} << 40)) return size;  // "to the end" sentinels such as INT64_MAX
    if (*c < 0) return simplify(max(size + v, 0), {});
  }
  // Sizes are non-negative, which decides min(0, size) and the like.
  return simplify(min(v, size), {});
}

namespace {

// view_strides for symbolic shapes: each contiguous chunk of the old dims must be matched by a
// run of new dims whose product equals the chunk's element count as an expression.
std::optional<SymShape> symbolic_view_strides(const SymShape& old_sizes, const SymShape& old_strides, const SymShape& new_sizes) {
  SymShape out(new_sizes.size());
  size_t view_d = new_sizes.size();
  size_t d = old_sizes.size();
  while (d > 0) {
    // The chunk [start, d): dims contiguous with each other. A dim joins it when its stride steps
    // over the whole chunk (a size-1 dim inside it says nothing: its stride is any value).
    size_t start = d - 1;
    SymInt chunk = old_sizes[start];
    while (start > 0 && (old_sizes[start - 1] == SymInt(1) || old_strides[start - 1] == old_strides[d - 1] * chunk)) {
      --start;
      chunk = chunk * old_sizes[start];
    }
    SymInt base = old_strides[d - 1], have = 1;
    while (view_d > 0 && (have != chunk || new_sizes[view_d - 1] == SymInt(1))) {
      --view_d;
      out[view_d] = have * base;
      have = have * new_sizes[view_d];
    }
    if (have != chunk) return std::nullopt;
    d = start;
  }
  while (view_d > 0) {  // leading size-1 dims
    if (new_sizes[view_d - 1] != SymInt(1)) return std::nullopt;
    --view_d;
    out[view_d] = 1;
  }
  return out;
}

SymShape infer_view_size(const ArgReader& a, const TensorMeta& self) {
  IntList size = a.syms("size");
  SymInt numel = product(self.sizes);
  int infer_at = -1;
  SymInt known = 1;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == SymInt(-1)) {
      if (infer_at >= 0) fail("{}: only one dimension can be inferred", a.op_name());
      infer_at = static_cast<int>(i);
    } else if (size[i].is_constant() && *size[i].constant() < 0) {
      fail("{}: invalid shape dimension {}", a.op_name(), *size[i].constant());
    } else {
      known = known * size[i];
    }
  }
  if (infer_at >= 0) {
    if (known == SymInt(0)) fail("{}: cannot reshape tensor of {} elements into shape {} because the unspecified dimension size -1 can be any value", a.op_name(), numel.str(), shape_str(size));
    size[static_cast<size_t>(infer_at)] = floordiv(numel, known);
    known = known * size[static_cast<size_t>(infer_at)];
  }
  if (known != numel)
    fail("{}: shape {} is invalid for input of size {}", a.op_name(), shape_str(size), numel.str());
  return size;
}

TensorMeta view_like(const TensorMeta& self, SymShape sizes, SymShape strides, SymInt offset) {
  TensorMeta m = self;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.offset = std::move(offset);
  return m;
}

// The element count of the storage a view reads: the first non-view value up its chain of
// view operands (computed values and inputs own dense storage).
SymInt storage_numel(const Graph& g, ValueRef v) {
  for (;;) {
    const Node& n = g.node(v);
    if (!n.schema().is_view) return product(g.meta(v).sizes);
    const ValueRef* base = nullptr;
    for (const auto& arg : n.args)
      if ((base = std::get_if<ValueRef>(&arg.value))) break;
    if (!base) return product(g.meta(v).sizes);
    v = *base;
  }
}

// as_strided may address any element of its operand's storage, and no other.
void check_storage_bounds(const ArgReader& a, const IntList& size, const IntList& stride, const SymInt& offset) {
  const std::string& op = a.op_name();
  if (offset.is_constant() && *offset.constant() < 0) fail("{}: negative storage offset {}", op, *offset.constant());
  SymInt last = offset;
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == SymInt(0)) return;  // no elements, nothing read
    last = last + (size[i] - 1) * stride[i];
  }
  SymInt storage = storage_numel(a.graph(), std::get<ValueRef>(a.raw("self").value));
  if (last.is_constant() && storage.is_constant() && *last.constant() >= *storage.constant())
    fail("{}: sizes {}, strides {} and storage offset {} need {} elements, out of bounds for a storage of {}", op,
         shape_str(size), shape_str(stride), offset.str(), *last.constant() + 1, *storage.constant());
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank, const std::string& op) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank, op);
    if (std::find(out.begin(), out.end(), w) != out.end()) fail("{}: dim {} appears multiple times in the list of dims", op, w);
    out.push_back(w);
  }
  return out;
}

std::vector<TensorMeta> views(const ArgReader& a) {
  const std::string& op = a.op_name();
  const TensorMeta& self = a.tensor("self");
  int64_t rank = self.dim();
  switch (a.node().op) {
    case OpKind::Alias: return {self};
    case OpKind::View:
    case OpKind::UnsafeView: {
      TensorMeta meta = [&]() -> TensorMeta {
        SymShape size = infer_view_size(a, self);
        if (self.is_contiguous() || self.strides == contiguous_strides(self.sizes))
          return {view_like(self, size, contiguous_strides(size), self.offset)};
        auto os = constant_shape(self.sizes), ost = constant_shape(self.strides), ns = constant_shape(size);
        if (!os || !ost || !ns) {
          auto symbolic = symbolic_view_strides(self.sizes, self.strides, size);
          if (!symbolic) fail("{}: view of a non-contiguous tensor: the new shape {} does not split its contiguous chunks (sizes {}, strides {}); use clone first", op, shape_str(size), shape_str(self.sizes), shape_str(self.strides));
          return {view_like(self, size, *symbolic, self.offset)};
        }
        auto strides = view_strides(*os, *ost, *ns);
        if (!strides)
          fail("{}: view size is not compatible with input tensor's size and stride (at least one dimension spans "
               "across two contiguous subspaces); use reshape or clone first",
               op);
        SymShape st(strides->begin(), strides->end());
        return {view_like(self, size, st, self.offset)};
      }();
      // _unsafe_view's schema returns a new tensor, not an alias: it has a contiguous layout.
      if (a.node().op == OpKind::UnsafeView) return {TensorMeta::contiguous(meta.dtype, meta.sizes, meta.device)};
      return {meta};
    }
    case OpKind::Permute: {
      auto dims = a.ints("dims");
      if (static_cast<int64_t>(dims.size()) != rank)
        fail("{}: number of dims don't match in permute (tensor has {}, dims has {})", op, rank, dims.size());
      dims = wrap_dims(dims, rank, op);
      SymShape sizes, strides;
      for (int64_t d : dims) {
        sizes.push_back(self.sizes[static_cast<size_t>(d)]);
        strides.push_back(self.strides[static_cast<size_t>(d)]);
      }
      return {view_like(self, sizes, strides, self.offset)};
    }
    case OpKind::Expand: {
      IntList size = a.syms("size");
      if (static_cast<int64_t>(size.size()) < rank)
        fail("{}: the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})", op, size.size(), rank);
      size_t lead = size.size() - static_cast<size_t>(rank);
      SymShape sizes(size.size()), strides(size.size());
      for (size_t i = 0; i < size.size(); ++i) {
        if (i < lead) {
          if (size[i] == SymInt(-1)) fail("{}: -1 is not allowed in a leading, non-existing dimension {}", op, i);
          sizes[i] = size[i];
          strides[i] = 0;
          continue;
        }
        const SymInt& have = self.sizes[i - lead];
        if (size[i] == SymInt(-1) || size[i] == have) {
          sizes[i] = have;
          strides[i] = self.strides[i - lead];
        } else if (have == SymInt(1)) {
          sizes[i] = size[i];
          strides[i] = 0;
        } else {
          fail("{}: the expanded size of the tensor ({}) must match the existing size ({}) at non-singleton dimension {}; target sizes {}, tensor sizes {}", op, size[i].str(), have.str(), i, shape_str(size), shape_str(self.sizes));
        }
      }
      return {view_like(self, sizes, strides, self.offset)};
    }
    case OpKind::SliceTensor: {
      if (rank == 0) fail("{}: slice() cannot be applied to a 0-dim tensor", op);
      auto d = static_cast<size_t>(wrap_dim(a.integer("dim"), rank, op));
      SymInt step = a.sym("step");
      if (!step.is_constant() || *step.constant() <= 0) fail("{}: slice step must be a positive constant", op);
      const SymInt& n = self.sizes[d];
      SymInt start = clamp_slice_bound(a.opt_sym("start").value_or(0), n);
      SymInt end = clamp_slice_bound(a.opt_sym("end").value_or(n), n);
      SymInt len = max(end - start, 0);
      len = floordiv(len + step - 1, step);
      SymShape sizes = self.sizes, strides = self.strides;
      sizes[d] = len;
      strides[d] = self.strides[d] * step;
      return {view_like(self, sizes, strides, self.offset + start * self.strides[d])};
    }
    case OpKind::SelectInt: {
      if (rank == 0) fail("{}: select() cannot be applied to a 0-dim tensor", op);
      auto d = static_cast<size_t>(wrap_dim(a.integer("dim"), rank, op));
      SymInt index = a.sym("index");
      const SymInt& n = self.sizes[d];
      if (index.is_constant() && n.is_constant()) {
        int64_t i = *index.constant(), size = *n.constant();
        if (i < -size || i >= size)
          fail("{}: index {} out of range for tensor of size {} at dimension {}", op, i, shape_str(self.sizes), d);
        index = i < 0 ? i + size : i;
      } else if (index.is_constant() && *index.constant() < 0) {
        index = n + index;
      }
      SymShape sizes = self.sizes, strides = self.strides;
      sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(d));
      strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
      return {view_like(self, sizes, strides, self.offset + index * self.strides[d])};
    }
    case OpKind::Squeeze:
    case OpKind::SqueezeDim:
    case OpKind::SqueezeDims: {
      std::vector<int64_t> dims;
      if (a.node().op == OpKind::SqueezeDim) dims = {wrap_dim(a.integer("dim"), rank, op)};
      else if (a.node().op == OpKind::SqueezeDims) dims = wrap_dims(a.ints("dim"), rank, op);
      SymShape sizes, strides;
      for (int64_t i = 0; i < rank; ++i) {
        bool listed = a.node().op == OpKind::Squeeze || std::find(dims.begin(), dims.end(), i) != dims.end();
        if (listed && self.sizes[static_cast<size_t>(i)] == SymInt(1)) continue;
        sizes.push_back(self.sizes[static_cast<size_t>(i)]);
        strides.push_back(self.strides[static_cast<size_t>(i)]);
      }
      return {view_like(self, sizes, strides, self.offset)};
    }
    case OpKind::Unsqueeze: {
      auto d = static_cast<size_t>(wrap_dim(a.integer("dim"), rank + 1, op));
      SymShape sizes = self.sizes, strides = self.strides;
      SymInt stride = d >= static_cast<size_t>(rank) ? SymInt(1) : self.sizes[d] * self.strides[d];
      sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(d), 1);
      strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
      return {view_like(self, sizes, strides, self.offset)};
    }
    case OpKind::Diagonal: {
      int64_t d1 = wrap_dim(a.integer("dim1"), rank, op), d2 = wrap_dim(a.integer("dim2"), rank, op), k = a.integer("offset");
      if (d1 == d2) fail("{}: diagonal dimensions cannot be identical {}, {}", op, a.integer("dim1"), a.integer("dim2"));
      const SymInt &n1 = self.sizes[static_cast<size_t>(d1)], &n2 = self.sizes[static_cast<size_t>(d2)];
      const SymInt &s1 = self.strides[static_cast<size_t>(d1)], &s2 = self.strides[static_cast<size_t>(d2)];
      SymInt len = max(k >= 0 ? min(n1, n2 - k) : min(n1 + k, n2), 0);
      // An empty diagonal keeps the storage offset (as PyTorch's does).
      SymInt offset = self.offset;
      if (!(len == SymInt(0))) offset = offset + (k >= 0 ? s2 * k : s1 * -k);
      SymShape sizes, strides;
      for (int64_t d = 0; d < rank; ++d)
        if (d != d1 && d != d2) sizes.push_back(self.sizes[static_cast<size_t>(d)]), strides.push_back(self.strides[static_cast<size_t>(d)]);
      sizes.push_back(len);
      strides.push_back(s1 + s2);
      return {view_like(self, sizes, strides, offset)};
    }
    case OpKind::AsStrided: {
      IntList size = a.syms("size"), stride = a.syms("stride");
      if (size.size() != stride.size())
        fail("{}: mismatch in length of strides ({}) and shape ({})", op, stride.size(), size.size());
      for (const auto& s : stride)
        if (s.is_constant() && *s.constant() < 0) fail("{}: negative strides are not supported, got {}", op, *s.constant());
      for (const auto& s : size)
        if (s.is_constant() && *s.constant() < 0) fail("{}: negative dimension {}", op, *s.constant());
      SymInt offset = a.opt_sym("storage_offset").value_or(self.offset);
      check_storage_bounds(a, size, stride, offset);
      return {view_like(self, size, stride, offset)};
    }
    case OpKind::SplitWithSizes: {
      if (rank == 0) fail("{}: split expects at least a 1-dimensional tensor", op);
      auto d = static_cast<size_t>(wrap_dim(a.integer("dim"), rank, op));
      IntList parts = a.syms("split_sizes");
      SymInt total = 0;
      for (const auto& p : parts) {
        if (p.is_constant() && *p.constant() < 0) fail("{}: split_sizes must be non-negative, got {}", op, *p.constant());
        total = total + p;
      }
      if (total != self.sizes[d])
        fail("{}: split_sizes {} must sum to the size of dimension {} ({}), but got sum {}", op, shape_str(parts), d,
             self.sizes[d].str(), total.str());
      std::vector<TensorMeta> out;
      SymInt start = 0;
      for (const auto& p : parts) {
        SymShape sizes = self.sizes;
        sizes[d] = p;
        out.push_back(view_like(self, sizes, self.strides, self.offset + start * self.strides[d]));
        start = start + p;
      }
      return out;
    }
    default: break;
  }
  COIL_CHECK(false) << "no view rule for " << op;
}

std::vector<TensorMeta> shape_ops(const ArgReader& a) {
  const std::string& op = a.op_name();
  switch (a.node().op) {
    case OpKind::Cat: {
      auto list = a.tensor_list("tensors");
      if (list.empty()) fail("{}: expected a non-empty list of tensors", op);
      // Legacy rule: 1-d empty tensors are skipped when the others have a different shape.
      std::vector<TensorMeta> parts;
      std::vector<PromoteOperand> operands;
      for (const auto& m : list) {
        operands.push_back({m->dtype, PromoteOperand::Category::dimensioned});
        if (!(m->dim() == 1 && m->sizes[0] == SymInt(0))) parts.push_back(*m);
      }
      DType dt = result_type(operands);
      if (parts.empty()) return {TensorMeta::contiguous(dt, list[0]->sizes, list[0]->device)};
      int64_t rank = parts[0].dim();
      if (rank == 0) fail("{}: zero-dimensional tensor cannot be concatenated", op);
      auto d = static_cast<size_t>(wrap_dim(a.integer("dim"), rank, op));
      SymShape sizes = parts[0].sizes;
      sizes[d] = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].dim() != rank)
          fail("{}: tensors must have the same number of dimensions: got {} and {}", op, rank, parts[i].dim());
        for (size_t k = 0; k < static_cast<size_t>(rank); ++k)
          if (k != d && parts[i].sizes[k] != parts[0].sizes[k])
            fail("{}: sizes of tensors must match except in dimension {}; expected size {} but got size {} for tensor number {} in the list", op, d, parts[0].sizes[k].str(), parts[i].sizes[k].str(), i);
        sizes[d] = sizes[d] + parts[i].sizes[d];
      }
      return {TensorMeta::contiguous(dt, sizes, parts[0].device)};
    }
    case OpKind::ConstantPadNd: {
      const TensorMeta& self = a.tensor("self");
      IntList pad = a.syms("pad");
      if (pad.size() % 2 != 0) fail("{}: length of pad must be even but instead it equals {}", op, pad.size());
      if (static_cast<int64_t>(pad.size() / 2) > self.dim())
        fail("{}: length of pad should be no more than twice the number of dimensions of the input ({} > 2*{})", op, pad.size(), self.dim());
      SymShape sizes = self.sizes;
      for (size_t i = 0; i < pad.size() / 2; ++i) {
        size_t d = sizes.size() - 1 - i;
        // ATen first narrows by the negative pads, which must leave a size >= 0 by themselves.
        auto neg = [](const SymInt& p) { return p.is_constant() && *p.constant() < 0 ? p : SymInt(0); };
        SymInt narrowed = sizes[d] + neg(pad[2 * i]) + neg(pad[2 * i + 1]);
        if (narrowed.is_constant() && *narrowed.constant() < 0)
          fail("{}: negative padding {} and {} narrow dimension {} of size {} below zero", op, pad[2 * i].str(), pad[2 * i + 1].str(), d, self.sizes[d].str());
        sizes[d] = sizes[d] + pad[2 * i] + pad[2 * i + 1];
        if (sizes[d].is_constant() && *sizes[d].constant() < 0)
          fail("{}: the input size {} plus negative padding {} and {} resulted in a negative output size", op, self.sizes[d].str(), pad[2 * i].str(), pad[2 * i + 1].str());
      }
      TensorMeta out = TensorMeta::contiguous(self.dtype, sizes, self.device);
      // The value fills the output only when some pad is positive (otherwise ATen narrows a copy).
      if (std::any_of(pad.begin(), pad.end(), [](const SymInt& p) { return !p.is_constant() || *p.constant() > 0; }))
        check_fill_value(a.raw("value"), out, op);
      return {out};
    }
    case OpKind::Flip: {
      const TensorMeta& self = a.tensor("self");
      wrap_dims(a.ints("dims"), self.dim(), op);
      return {TensorMeta::contiguous(self.dtype, self.sizes, self.device)};
    }
    case OpKind::Repeat: {
      const TensorMeta& self = a.tensor("self");
      IntList reps = a.syms("repeats");
      if (static_cast<int64_t>(reps.size()) < self.dim())
        fail("{}: number of dimensions of repeat dims ({}) can not be smaller than number of dimensions of tensor ({})", op, reps.size(), self.dim());
      SymShape sizes(reps.size());
      size_t lead = reps.size() - static_cast<size_t>(self.dim());
      for (size_t i = 0; i < reps.size(); ++i) {
        if (reps[i].is_constant() && *reps[i].constant() < 0) fail("{}: repeats can not be negative, got {}", op, *reps[i].constant());
        sizes[i] = i < lead ? reps[i] : self.sizes[i - lead] * reps[i];
      }
      return {TensorMeta::contiguous(self.dtype, sizes, self.device)};
    }
    default: break;
  }
  COIL_CHECK(false) << "no shape rule for " << op;
}

}  // namespace

std::vector<TensorMeta> infer_view(const ArgReader& args) { return views(args); }
std::vector<TensorMeta> infer_shape(const ArgReader& args) { return shape_ops(args); }

}  // namespace coil
