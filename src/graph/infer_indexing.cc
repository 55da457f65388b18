// Inference for indexing: gathers (index_select, gather, embedding, index.Tensor), the scatters
// and index_put, with ATen's checks of index dtypes, ranks and sizes.
#include <algorithm>

#include <fmt/ranges.h>

#include "graph/infer_ops.h"
#include "support/check.h"

namespace coil {

namespace {

void require_index_dtype(const TensorMeta& index, const std::string& op, std::string_view what, bool allow_i32) {
  if (index.dtype == DType::i64 || (allow_i32 && index.dtype == DType::i32)) return;
  fail("{}: {} must be {}, got {}", op, what, allow_i32 ? "i64 or i32" : "i64", dtype_name(index.dtype));
}

bool is_empty(const SymShape& sizes) {
  return std::any_of(sizes.begin(), sizes.end(), [](const SymInt& s) { return s == SymInt(0); });
}

// gather/scatter: index.size(d) <= other.size(d) for every d but `skip` (sizes of a 0-d tensor
// count as [1]); symbolic sizes are left to the runtime.
void require_index_fits(const TensorMeta& index, const TensorMeta& other, int64_t skip, const std::string& op,
                        std::string_view what) {
  auto size = [](const TensorMeta& m, size_t d) { return m.dim() == 0 ? SymInt(1) : m.sizes[d]; };
  for (size_t d = 0; d < static_cast<size_t>(std::max<int64_t>(index.dim(), 1)); ++d) {
    if (static_cast<int64_t>(d) == skip) continue;
    SymInt i = size(index, d), o = size(other, d);
    if (i.is_constant() && o.is_constant() && *i.constant() > *o.constant())
      fail("{}: index of shape {} is larger than {} of shape {} at dimension {}", op, shape_str(index.sizes), what,
           shape_str(other.sizes), d);
  }
}

// The shape of self[indices] (advanced indexing with integer tensors): the indices broadcast
// together, placed where the indexed dims were when they are adjacent, else in front.
SymShape indexed_shape(const TensorMeta& self, const std::vector<std::optional<TensorMeta>>& indices, const std::string& op) {
  if (static_cast<int64_t>(indices.size()) > self.dim())
    fail("{}: too many indices for tensor of dimension {} (got {})", op, self.dim(), indices.size());
  SymShape bshape;
  bool first = true;
  int first_pos = -1, last_pos = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    if (indices[i]->dtype == DType::b8 || indices[i]->dtype == DType::u8)
      fail("{}: boolean mask indices give a data-dependent shape and are not supported; use where() or masked ops", op);
    require_index_dtype(*indices[i], op, "indices", true);
    bshape = first ? indices[i]->sizes : broadcast_shapes(bshape, indices[i]->sizes, op);
    first = false;
    if (first_pos < 0) first_pos = static_cast<int>(i);
    last_pos = static_cast<int>(i);
  }
  if (first) fail("{}: at least one index must be a tensor", op);
  bool adjacent = true;
  for (int i = first_pos; i <= last_pos; ++i)
    if (!indices[static_cast<size_t>(i)]) adjacent = false;
  SymShape sizes;
  auto kept = [&](int64_t d) { return d >= static_cast<int64_t>(indices.size()) || !indices[static_cast<size_t>(d)]; };
  if (adjacent) {
    for (int64_t d = 0; d < first_pos; ++d) sizes.push_back(self.sizes[static_cast<size_t>(d)]);
    sizes.insert(sizes.end(), bshape.begin(), bshape.end());
    for (int64_t d = last_pos + 1; d < self.dim(); ++d) sizes.push_back(self.sizes[static_cast<size_t>(d)]);
  } else {
    sizes = bshape;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (kept(d)) sizes.push_back(self.sizes[static_cast<size_t>(d)]);
  }
  return sizes;
}

// index_put with one boolean mask as its only index: the shape values broadcast to, with the
// selected count as 1 (self's sizes before the mask, 1, self's sizes after it); nullopt when
// the indices are not one mask. The mask's sizes must be self's at its dims.
std::optional<SymShape> mask_put_shape(const TensorMeta& self, const std::vector<std::optional<TensorMeta>>& indices,
                                       const std::string& op) {
  int pos = -1, count = 0;
  bool any_mask = false;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    ++count;
    if (indices[i]->dtype == DType::b8 || indices[i]->dtype == DType::u8) any_mask = true, pos = static_cast<int>(i);
  }
  if (!any_mask) return std::nullopt;
  if (count != 1) fail("{}: a boolean mask index mixed with other indices is not supported", op);
  const TensorMeta& mask = *indices[static_cast<size_t>(pos)];
  auto p = static_cast<size_t>(pos);
  if (static_cast<int64_t>(p) + mask.dim() > self.dim())
    fail("{}: too many indices for tensor of dimension {}", op, self.dim());
  for (size_t d = 0; d < static_cast<size_t>(mask.dim()); ++d)
    if (mask.sizes[d] != self.sizes[p + d])
      fail("{}: The shape of the mask {} at index {} does not match the shape of the indexed tensor {} at index {}", op,
           shape_str(mask.sizes), d, shape_str(self.sizes), p + d);
  SymShape shape(self.sizes.begin(), self.sizes.begin() + static_cast<std::ptrdiff_t>(p));
  shape.push_back(1);
  shape.insert(shape.end(), self.sizes.begin() + static_cast<std::ptrdiff_t>(p + static_cast<size_t>(mask.dim())), self.sizes.end());
  return shape;
}

std::vector<TensorMeta> indexing(const ArgReader& a) {
  const std::string& op = a.op_name();
  switch (a.node().op) {
    case OpKind::IndexSelect: {
      const TensorMeta& self = a.tensor("self");
      const TensorMeta& index = a.tensor("index");
      require_index_dtype(index, op, "index", true);
      if (index.dim() > 1) fail("{}: index must be 0-d or 1-d, got {} dims", op, index.dim());
      if (self.dim() == 0 && index.dim() == 1 && index.sizes[0].is_constant() && *index.sizes[0].constant() != 1)
        fail("{}: index to a 0-d tensor can have only 1 value, got {}", op, index.sizes[0].str());
      auto d = static_cast<size_t>(wrap_dim(a.integer("dim"), self.dim(), op));
      SymShape sizes = self.sizes;
      if (!sizes.empty()) sizes[d] = index.dim() == 0 ? SymInt(1) : index.sizes[0];
      return {TensorMeta::contiguous(self.dtype, sizes, self.device)};
    }
    case OpKind::Gather: {
      const TensorMeta& self = a.tensor("self");
      const TensorMeta& index = a.tensor("index");
      int64_t d = wrap_dim(a.integer("dim"), self.dim(), op);
      // ATen checks nothing more for an empty index.
      if (!is_empty(index.sizes)) {
        require_index_dtype(index, op, "index", true);
        if (index.dim() != self.dim() && !(index.dim() <= 1 && self.dim() <= 1))
          fail("{}: index tensor must have the same number of dimensions as input tensor ({} vs {})", op, index.dim(), self.dim());
        require_index_fits(index, self, d, op, "input");
      }
      return {TensorMeta::contiguous(self.dtype, index.sizes, self.device)};
    }
    case OpKind::Embedding: {
      const TensorMeta& weight = a.tensor("weight");
      const TensorMeta& indices = a.tensor("indices");
      if (weight.dim() != 2) fail("{}: weight must be 2-D, got {} dims", op, weight.dim());
      require_index_dtype(indices, op, "indices", true);
      SymShape sizes = indices.sizes;
      sizes.push_back(weight.sizes[1]);
      return {TensorMeta::contiguous(weight.dtype, sizes, weight.device)};
    }
    case OpKind::IndexTensor: {
      const TensorMeta& self = a.tensor("self");
      return {TensorMeta::contiguous(self.dtype, indexed_shape(self, a.tensor_list("indices"), op), self.device)};
    }
    case OpKind::IndexPut: {
      const TensorMeta& self = a.tensor("self");
      const TensorMeta& values = a.tensor("values");
      auto indices = a.tensor_list("indices");
      if (values.dtype != self.dtype)
        fail("{}: Index put requires the source and destination dtypes match, got {} for the destination and {} for the "
             "source", op, dtype_name(self.dtype), dtype_name(values.dtype));
      // A boolean mask (the only index) selects a data-dependent count of elements: values must
      // broadcast over that count, as x[mask] = v with one v per selected row.
      auto mask = mask_put_shape(self, indices, op);
      SymShape target = mask ? *mask : indexed_shape(self, indices, op);
      if (broadcast_shapes(target, values.sizes, op) != target)
        fail("{}: shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}", op,
             shape_str(values.sizes), shape_str(target));
      return {TensorMeta::contiguous(self.dtype, self.sizes, self.device)};
    }
    case OpKind::SliceScatter:
    case OpKind::SelectScatter: {
      const TensorMeta& self = a.tensor("self");
      const TensorMeta& src = a.tensor("src");
      // The expected src shape is that of the matching view of self.
      Graph probe;
      ValueRef base = probe.add_input("self", self.dtype, self.sizes, self.device);
      bool is_slice = a.node().op == OpKind::SliceScatter;
      std::vector<std::pair<std::string, Arg>> kw = {{"dim", a.raw("dim")}};
      if (is_slice) {
        kw.push_back({"start", a.raw("start")});
        kw.push_back({"end", a.raw("end")});
        kw.push_back({"step", a.raw("step")});
      } else {
        kw.push_back({"index", a.raw("index")});
      }
      ValueRef view = probe.call1(is_slice ? OpKind::SliceTensor : OpKind::SelectInt, {base}, kw);
      if (probe.meta(view).sizes != src.sizes)
        fail("{}: expected src to have a size equal to the slice of self; src size {}, slice size {}", op,
             shape_str(src.sizes), shape_str(probe.meta(view).sizes));
      return {TensorMeta::contiguous(self.dtype, self.sizes, self.device)};
    }
    case OpKind::ScatterSrc:
    case OpKind::ScatterAdd:
    case OpKind::ScatterReduce:
    case OpKind::ScatterReduceTwo:
    case OpKind::ScatterValue:
    case OpKind::ScatterValueReduce: {
      const TensorMeta& self = a.tensor("self");
      const TensorMeta& index = a.tensor("index");
      bool has_src = a.node().op != OpKind::ScatterValue && a.node().op != OpKind::ScatterValueReduce;
      int64_t d = wrap_dim(a.integer("dim"), self.dim(), op);
      if (has_src && a.tensor("src").dtype != self.dtype)
        fail("{}: expected self.dtype to be equal to src.dtype ({} vs {})", op, dtype_name(self.dtype), dtype_name(a.tensor("src").dtype));
      if (!has_src) check_scalar_fits(a.raw("value"), self.dtype, op);
      bool two = a.node().op == OpKind::ScatterReduceTwo;
      if (two || a.node().op == OpKind::ScatterReduce || a.node().op == OpKind::ScatterValueReduce) {
        std::string reduce = *a.opt_str("reduce");
        static const std::vector<std::string> kTwo = {"sum", "prod", "mean", "amax", "amin", "max", "min"}, kOld = {"add", "multiply"};
        const auto& allowed = two ? kTwo : kOld;
        if (std::find(allowed.begin(), allowed.end(), reduce) == allowed.end())
          fail("{}: reduce argument must be one of {}, got '{}'", op, fmt::join(allowed, ", "), reduce);
        if (self.dtype == DType::b8 && reduce == "mean") fail("{}: reduce 'mean' is not implemented for bool tensors", op);
      }
      // ATen checks nothing more for an empty index (0-d and 1-d count as the same rank).
      if (!is_empty(index.sizes)) {
        require_index_dtype(index, op, "index", true);
        int64_t src_rank = has_src ? a.tensor("src").dim() : self.dim();
        if (std::max<int64_t>(index.dim(), 1) != std::max<int64_t>(self.dim(), 1) ||
            std::max<int64_t>(src_rank, 1) != std::max<int64_t>(self.dim(), 1))
          fail("{}: index, src and self must have the same number of dimensions ({}, {}, {})", op, index.dim(), src_rank, self.dim());
        require_index_fits(index, self, d, op, "self");
        if (has_src) require_index_fits(index, a.tensor("src"), -1, op, "src");
      }
      return {TensorMeta::contiguous(self.dtype, self.sizes, self.device)};
    }
    default: break;
  }
  COIL_CHECK(false) << "no indexing rule for " << op;
}

}  // namespace

std::vector<TensorMeta> infer_indexing(const ArgReader& args) { return indexing(args); }

}  // namespace coil
