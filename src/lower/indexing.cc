// Lowering of the indexing ops. Reads through an index tensor (index_select, gather,
// embedding, index.Tensor) are loads with a data-dependent offset: the operand is realized and
// each index value goes through check_index (a runtime error out of range; index.Tensor first
// counts negative indices from the end, as PyTorch does). slice_scatter and select_scatter are `where` over positions;
// The scatters (scatter, scatter_add, scatter.reduce, scatter_reduce.two) and index_put with
// integer indices copy `self` into a new buffer, then store through the index in one ordered
// loop, so later writes win and reductions accumulate as in PyTorch's CPU kernels; index_put
// with a boolean mask is a pointwise select.
#include <algorithm>
#include <cmath>
#include <functional>

#include "graph/infer_util.h"
#include "lower/context.h"
#include "support/check.h"

namespace coil::lowering {

namespace {

ExprRef op(LoopOp o, std::vector<ExprRef> a) { return Expr::apply(o, std::move(a)); }

// An index read from `index` at `at`, checked against a dim of `size`. Only index.Tensor
// counts negative indices from the end.
ExprRef index_value(Context& c, const Value& index, const SymShape& at, const SymInt& size, bool wrap_negative = false) {
  ExprRef i = cast(c.at(index, at), DType::i64);
  if (wrap_negative)
    i = op(LoopOp::Where, {op(LoopOp::Lt, {i, Expr::index(0)}), op(LoopOp::Add, {i, Expr::index(size)}), i});
  return op(LoopOp::CheckIndex, {i, Expr::index(size)});
}

Value& operand(Context& c, const Node& n, std::string_view name) { return c.value(std::get<ValueRef>(n.arg(name).value)); }

SymShape with_dim(SymShape idx, size_t d, const SymInt& v) {
  if (d < idx.size()) idx[d] = v;
  return idx;
}

// gather and scatter treat a 0-d tensor as one of shape [1]: an index of rank 0 addresses a
// rank-1 operand at position 0.
SymShape to_rank(SymShape idx, int64_t rank) {
  if (static_cast<int64_t>(idx.size()) < rank) idx.resize(static_cast<size_t>(rank), 0);
  return idx;
}

// self[indices] at a position `o` of the indexing result (integer index tensors, broadcast
// together, placed where the indexed dims were when adjacent, else in front): for each dim of
// self, the position read, a data-dependent (checked, negative counted from the end) entry
// for an indexed dim.
// `kept`, when given, receives the dims of `o` that index the dims no index tensor indexes (one
// each, in self's order).
std::vector<ExprRef> advanced_positions(Context& c, const Node& n, const TensorMeta& self, const SymShape& o,
                                        std::vector<size_t>* kept = nullptr) {
  auto indices = std::get<TensorList>(n.arg("indices").value);
  int first = -1, last = -1;
  for (size_t i = 0; i < indices.size(); ++i)
    if (indices[i]) {
      if (first < 0) first = static_cast<int>(i);
      last = static_cast<int>(i);
    }
  bool adjacent = true;
  for (int i = first; i <= last; ++i) adjacent = adjacent && indices[static_cast<size_t>(i)].has_value();
  SymShape bshape;
  bool any = false;
  for (const auto& r : indices) {
    if (!r) continue;
    bshape = any ? broadcast_shapes(bshape, c.value(*r).meta.sizes, "") : c.value(*r).meta.sizes;
    any = true;
  }
  size_t b_at = adjacent ? static_cast<size_t>(first) : 0;
  SymShape b_index(o.begin() + static_cast<std::ptrdiff_t>(b_at), o.begin() + static_cast<std::ptrdiff_t>(b_at + bshape.size()));
  std::vector<ExprRef> idx;
  size_t next_kept = adjacent ? 0 : bshape.size();
  for (int64_t d = 0; d < self.dim(); ++d) {
    bool indexed = static_cast<size_t>(d) < indices.size() && indices[static_cast<size_t>(d)];
    if (indexed) {
      const Value& iv = c.value(*indices[static_cast<size_t>(d)]);
      idx.push_back(index_value(c, iv, broadcast_index(b_index, bshape, iv.meta.sizes), self.sizes[static_cast<size_t>(d)], true));
      continue;
    }
    if (adjacent && d == last + 1) next_kept = static_cast<size_t>(first) + bshape.size();
    if (kept) kept->push_back(next_kept);
    idx.push_back(Expr::index(o[next_kept++]));
  }
  return idx;
}

Value gather_like(Context& c, const Node& n, const ArgReader& args) {
  const TensorMeta& meta = n.outputs[0].meta;
  SymShape o = index_vars(meta.sizes.size());
  switch (n.op) {
    case OpKind::IndexSelect: {
      Value& self = operand(c, n, "self");
      const Value& index = operand(c, n, "index");
      if (self.meta.dim() == 0) return Value{meta, -1, c.at(self, {})};
      auto d = static_cast<size_t>(wrap_dim(args.integer("dim"), self.meta.dim(), ""));
      SymShape at = index.meta.dim() == 0 ? SymShape{} : SymShape{o[d]};
      std::vector<ExprRef> idx;
      for (size_t k = 0; k < o.size(); ++k) idx.push_back(k == d ? index_value(c, index, at, self.meta.sizes[d]) : Expr::index(o[k]));
      return Value{meta, -1, c.at_dynamic(self, idx, n.outputs[0].name + "_src")};
    }
    case OpKind::Gather: {
      Value& self = operand(c, n, "self");
      const Value& index = operand(c, n, "index");
      // ATen checks nothing of an empty index, whose rank may differ from self's: nothing to read.
      for (const auto& s : index.meta.sizes)
        if (s == SymInt(0)) return Value{meta, -1, Expr::constant(0, meta.dtype)};
      if (self.meta.dim() == 0) {
        ExprRef check = index_value(c, index, o, 1);  // only 0 and -1 are valid
        return Value{meta, -1, c.at_dynamic(self, {}, n.outputs[0].name + "_src", op(LoopOp::Mul, {check, Expr::index(0)}))};
      }
      auto d = static_cast<size_t>(wrap_dim(args.integer("dim"), self.meta.dim(), ""));
      SymShape os = to_rank(o, self.meta.dim());
      std::vector<ExprRef> idx;
      for (size_t k = 0; k < os.size(); ++k)
        idx.push_back(k == d ? index_value(c, index, o, self.meta.sizes[d]) : Expr::index(os[k]));
      return Value{meta, -1, c.at_dynamic(self, idx, n.outputs[0].name + "_src")};
    }
    case OpKind::Embedding: {
      Value& weight = operand(c, n, "weight");
      const Value& indices = operand(c, n, "indices");
      SymShape lead(o.begin(), o.end() - 1);
      return Value{meta, -1,
                   c.at_dynamic(weight, {index_value(c, indices, lead, weight.meta.sizes[0]), Expr::index(o.back())},
                                n.outputs[0].name + "_src")};
    }
    case OpKind::IndexTensor: {
      Value& self = operand(c, n, "self");
      return Value{meta, -1, c.at_dynamic(self, advanced_positions(c, n, self.meta, o), n.outputs[0].name + "_src")};
    }
    default: fail("{} is not supported by the compiler yet", n.schema().name);
  }
}

ExprRef in_range(const SymInt& v, const SymInt& lo, const SymInt& hi) {
  return op(LoopOp::LogicalAnd, {op(LoopOp::Ge, {Expr::index(v), Expr::index(lo)}), op(LoopOp::Lt, {Expr::index(v), Expr::index(hi)})});
}

Value scatter_positions(Context& c, const Node& n, const ArgReader& args) {
  const TensorMeta& meta = n.outputs[0].meta;
  SymShape o = index_vars(meta.sizes.size());
  const Value& self = operand(c, n, "self");
  const Value& src = operand(c, n, "src");
  auto d = static_cast<size_t>(wrap_dim(args.integer("dim"), meta.dim(), ""));
  SymInt size = meta.sizes[d];
  ExprRef inside;
  SymShape src_index = o;
  if (n.op == OpKind::SliceScatter) {
    SymInt start = clamp_slice_bound(args.opt_sym("start").value_or(0), size);
    SymInt step = args.sym("step");
    SymInt count = src.meta.sizes[d];
    inside = op(LoopOp::LogicalAnd, {in_range(o[d], start, start + count * step),
                                     op(LoopOp::Eq, {Expr::index(mod(o[d] - start, step)), Expr::index(0)})});
    // Clamped, so that the load stays inside `src` where the position is not selected.
    src_index[d] = max(min(floordiv(o[d] - start, step), count - 1), 0);
  } else {
    SymInt index = args.sym("index");
    if (index.is_constant() && *index.constant() < 0) index = index + size;
    inside = op(LoopOp::Eq, {Expr::index(o[d]), Expr::index(index)});
    src_index.erase(src_index.begin() + static_cast<std::ptrdiff_t>(d));
  }
  return Value{meta, -1, op(LoopOp::Where, {inside, cast(c.at(src, src_index), meta.dtype), c.at(self, o)})};
}

// How a scatter combines a value with the element it lands on.
enum class Combine { assign, sum, prod, max, min, mean };

Combine scatter_combine(const Node& n, const ArgReader& args) {
  switch (n.op) {
    case OpKind::ScatterSrc: case OpKind::ScatterValue: return Combine::assign;
    case OpKind::ScatterAdd: return Combine::sum;
    case OpKind::ScatterReduce: case OpKind::ScatterValueReduce:
      return *args.opt_str("reduce") == "add" ? Combine::sum : Combine::prod;
    default: {
      std::string r = *args.opt_str("reduce");
      // "max" and "min" are ATen's other names of amax and amin.
      if (r == "amax" || r == "max") return Combine::max;
      if (r == "amin" || r == "min") return Combine::min;
      return r == "sum" ? Combine::sum : r == "prod" ? Combine::prod : Combine::mean;
    }
  }
}

ExprRef combine(Combine how, const ExprRef& old, const ExprRef& v, DType t) {
  bool logical = t == DType::b8;
  switch (how) {
    case Combine::assign: return v;
    case Combine::sum: case Combine::mean: return op(logical ? LoopOp::LogicalOr : LoopOp::Add, {old, v});
    case Combine::prod: return op(logical ? LoopOp::LogicalAnd : LoopOp::Mul, {old, v});
    case Combine::max: return op(logical ? LoopOp::LogicalOr : LoopOp::Maximum, {old, v});
    default: return op(logical ? LoopOp::LogicalAnd : LoopOp::Minimum, {old, v});
  }
}

// The element a reduction starts a target from when include_self=False: its identity (the
// dtype's lowest or highest value for amax / amin).
ExprRef identity(Combine how, DType t) {
  if (how == Combine::prod) return Expr::constant(1, t);
  if (how != Combine::max && how != Combine::min) return Expr::constant(0, t);
  bool lowest = how == Combine::max;
  if (t == DType::b8) return Expr::constant(lowest ? 0 : 1, t);
  if (is_float(t)) return Expr::constant(lowest ? -INFINITY : INFINITY, t);
  if (t == DType::u8) return Expr::constant(lowest ? 0 : 255, t);
  ExprRef min = Expr::constant(-std::ldexp(1.0, static_cast<int>(dtype_size(t)) * 8 - 1), t);  // exact in a double
  return lowest ? min : op(LoopOp::BitwiseNot, {min});
}

// A kernel over `shape` (x*) storing `value(x, old)` at the data-dependent `target(x)` of
// `out` (offset 0, contiguous): one ordered pass, so later writes win and repeats accumulate.
// `free`: the dims of `shape` that are themselves coordinates of the target (a scatter's dims
// but `dim`, index_put's sliced dims), so that two points differing in one store to different
// elements (LoopKernel::free_dims: run in parallel, the rest in order).
void emit_scatter(Context& c, const std::string& name, const std::string& origin, const Value& out, const SymShape& shape,
                  const std::vector<size_t>& free, const std::function<ExprRef(const SymShape&)>& target,
                  const std::function<ExprRef(const SymShape&, const ExprRef&)>& value) {
  loop::LoopKernel k;
  k.name = c.kernel_name(name);
  k.origins = {origin};
  k.outer = shape;
  k.free_dims = free;
  std::sort(k.free_dims.begin(), k.free_dims.end());
  SymShape x;
  for (size_t i = 0; i < k.outer.size(); ++i) x.push_back(SymInt::symbol(loop::loop_var(static_cast<int>(i))));
  ExprRef dynamic = target(x);
  ExprRef old = Expr::load(out.buffer, 0, out.meta.dtype, dynamic);
  k.stores.push_back({out.buffer, 0, value(x, old), false, dynamic});
  c.program.kernels.push_back(std::move(k));
}

// A copy of `self` to scatter into, in f32 for 16-bit sums, products and means (rounded once
// at the end, as ATen's CPU kernels accumulate them in float).
Value scatter_target(Context& c, const Node& n, Combine how, const Value& self) {
  const TensorMeta& result = n.outputs[0].meta;
  bool widen = (how == Combine::sum || how == Combine::prod || how == Combine::mean) && opmath(result.dtype) != result.dtype;
  TensorMeta meta = TensorMeta::contiguous(widen ? opmath(result.dtype) : result.dtype, result.sizes, result.device);
  Value out{meta, -1, cast(c.at(self, index_vars(meta.sizes.size())), meta.dtype)};
  c.realize(out, widen ? n.outputs[0].name + "_acc" : n.outputs[0].name);
  return out;
}

// `out` (a mean's sum) divided by how many values reached each element: 1 for self where
// include_self, one per scattered value; an element nothing reached keeps self. Integers divide
// rounding down, as ATen does.
Value finish(Context& c, const Node& n, Combine how, const Value& out, const std::optional<Value>& count) {
  const TensorMeta& result = n.outputs[0].meta;
  SymShape i = index_vars(result.sizes.size());
  ExprRef v = c.at(out, i);
  if (how == Combine::mean) {
    ExprRef k = c.at(*count, i);
    k = op(LoopOp::Where, {op(LoopOp::Eq, {k, Expr::constant(0, k->dtype())}), Expr::constant(1, k->dtype()), k});
    v = op(is_float(out.meta.dtype) ? LoopOp::Div : LoopOp::FloorDiv, {v, cast(k, out.meta.dtype)});
  }
  if (out.meta.dtype == result.dtype && how != Combine::mean) return out;
  return Value{result, -1, cast(v, result.dtype)};
}

// A scatter or scatter_add of one element a row (the index one long along `dim` and as long as
// the result in every other dim: a loss's one-hot gradient, [8192, 50257] for GPT-2) is a select
// that fuses with its readers instead of a filled buffer and a pass over the index:
// where(x[dim] == index[x with x[dim] = 0], value (added to self for a sum), self).
std::optional<Value> scatter_as_select(Context& c, const Node& n, const ArgReader& args, Combine how) {
  const TensorMeta& result = n.outputs[0].meta;
  if ((n.op != OpKind::ScatterSrc && n.op != OpKind::ScatterValue && n.op != OpKind::ScatterAdd) || result.dim() == 0)
    return std::nullopt;
  const Value& index = operand(c, n, "index");
  const size_t d = static_cast<size_t>(wrap_dim(args.integer("dim"), result.dim(), ""));
  if (index.meta.sizes.size() != result.sizes.size()) return std::nullopt;
  for (size_t i = 0; i < result.sizes.size(); ++i)
    if (!(index.meta.sizes[i] == (i == d ? SymInt(1) : result.sizes[i]))) return std::nullopt;
  SymShape o = index_vars(result.sizes.size());
  SymShape row = with_dim(o, d, 0);
  ExprRef hit = op(LoopOp::Eq, {Expr::index(o[d]), index_value(c, index, row, result.sizes[d])});
  ExprRef v = n.op == OpKind::ScatterValue ? scalar(args.raw("value"), result.dtype)
                                           : cast(c.at(operand(c, n, "src"), row), result.dtype);
  ExprRef old = c.at(operand(c, n, "self"), o);
  if (how == Combine::sum) {
    DType acc = opmath(result.dtype);
    v = cast(combine(Combine::sum, cast(old, acc), cast(v, acc), acc), result.dtype);
  }
  return Value{result, -1, op(LoopOp::Where, {hit, v, old})};
}

// scatter / scatter_add / scatter.reduce / scatter_reduce.two: self copied into a new buffer,
// then one ordered pass over the index storing (or combining) each value at its target.
Value scatter(Context& c, const Node& n, const ArgReader& args) {
  const TensorMeta& result = n.outputs[0].meta;
  const std::string& name = n.outputs[0].name;
  Combine how = scatter_combine(n, args);
  if (auto select = scatter_as_select(c, n, args, how)) return *select;
  bool include_self = n.op != OpKind::ScatterReduceTwo || args.flag("include_self");
  Value out = scatter_target(c, n, how, operand(c, n, "self"));
  const TensorMeta& meta = out.meta;
  const Value& index = operand(c, n, "index");
  // A 0-d self is a one-element row: the index must be 0 or -1.
  size_t d = meta.dim() == 0 ? 0 : static_cast<size_t>(wrap_dim(args.integer("dim"), meta.dim(), ""));
  auto target = [&](const SymShape& x) {
    ExprRef t = index_value(c, index, x, meta.dim() == 0 ? SymInt(1) : meta.sizes[d]);
    if (meta.dim() == 0) return op(LoopOp::Mul, {t, Expr::index(0)});
    SymShape at = with_dim(to_rank(x, meta.dim()), d, 0);
    return op(LoopOp::Add, {op(LoopOp::Mul, {t, Expr::index(meta.strides[d])}), Expr::index(element_offset(meta, at))});
  };
  bool has_src = n.op != OpKind::ScatterValue && n.op != OpKind::ScatterValueReduce;
  auto source = [&](const SymShape& x) {
    // src rounds to the result dtype first, as PyTorch casts it to self's dtype.
    ExprRef v = has_src ? cast(c.at(operand(c, n, "src"), to_rank(x, operand(c, n, "src").meta.dim())), result.dtype)
                        : scalar(args.raw("value"), result.dtype);
    return cast(v, meta.dtype);
  };
  std::vector<size_t> free;  // every dim but `dim` is a coordinate of the target
  for (size_t i = 0; meta.dim() > 0 && i < index.meta.sizes.size(); ++i)
    if (i != d) free.push_back(i);
  if (!include_self) {
    ExprRef start = identity(how, meta.dtype);
    emit_scatter(c, name + "_start", name, out, index.meta.sizes, free, target, [&](const SymShape&, const ExprRef&) { return start; });
  }
  emit_scatter(c, name + "_scatter", name, out, index.meta.sizes, free, target,
               [&](const SymShape& x, const ExprRef& old) { return combine(how, old, source(x), meta.dtype); });
  std::optional<Value> count;
  if (how == Combine::mean) {
    DType ct = is_float(meta.dtype) ? meta.dtype : DType::i64;
    count = Value{TensorMeta::contiguous(ct, meta.sizes, meta.device), -1, Expr::constant(include_self ? 1 : 0, ct)};
    c.realize(*count, name + "_count");
    emit_scatter(c, name + "_counts", name, *count, index.meta.sizes, free, target,
                 [&](const SymShape&, const ExprRef& old) { return op(LoopOp::Add, {old, Expr::constant(1, ct)}); });
  }
  return finish(c, n, how, out, count);
}

// index_put: with integer indices, self copied into a new buffer, then one ordered pass over
// the indexing result's positions storing (accumulate: adding) values broadcast to them; with
// one boolean mask, a pointwise select of values (broadcast over the selected count) or self.
Value index_put(Context& c, const Node& n, const ArgReader& args) {
  const TensorMeta& result = n.outputs[0].meta;
  Value& self = operand(c, n, "self");
  const Value& values = operand(c, n, "values");
  bool accumulate = args.flag("accumulate");
  auto indices = std::get<TensorList>(n.arg("indices").value);
  for (size_t p = 0; p < indices.size(); ++p) {
    if (!indices[p]) continue;
    const Value& mask = c.value(*indices[p]);
    if (mask.meta.dtype != DType::b8 && mask.meta.dtype != DType::u8) break;
    SymShape o = index_vars(result.sizes.size());
    size_t m = mask.meta.sizes.size();
    SymShape at(o.begin() + static_cast<std::ptrdiff_t>(p), o.begin() + static_cast<std::ptrdiff_t>(p + m));
    ExprRef selected = cast(c.at(mask, at), DType::b8);
    SymShape vshape(result.sizes.begin(), result.sizes.begin() + static_cast<std::ptrdiff_t>(p)), vo(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(p));
    vshape.push_back(1), vo.push_back(0);
    vshape.insert(vshape.end(), result.sizes.begin() + static_cast<std::ptrdiff_t>(p + m), result.sizes.end());
    vo.insert(vo.end(), o.begin() + static_cast<std::ptrdiff_t>(p + m), o.end());
    ExprRef v = c.at(values, broadcast_index(vo, vshape, values.meta.sizes));
    ExprRef old = c.at(self, o);
    if (accumulate) {
      DType acc = opmath(result.dtype);
      v = cast(combine(Combine::sum, cast(old, acc), cast(v, acc), acc), result.dtype);
    }
    return Value{result, -1, op(LoopOp::Where, {selected, v, old})};
  }
  Value out = scatter_target(c, n, accumulate ? Combine::sum : Combine::assign, self);
  const TensorMeta& meta = out.meta;
  SymShape shape = n.outputs[0].meta.sizes;
  {  // the indexing result's shape, which values broadcast to
    Graph probe;
    ValueRef base = probe.add_input("self", self.meta.dtype, self.meta.sizes, self.meta.device);
    TensorList probe_indices;
    for (const auto& r : indices) {
      if (!r) probe_indices.push_back(std::nullopt);
      else probe_indices.push_back(probe.add_input("i" + std::to_string(probe_indices.size()), c.value(*r).meta.dtype,
                                                   c.value(*r).meta.sizes, c.value(*r).meta.device));
    }
    shape = probe.meta(probe.call1(OpKind::IndexTensor, {base}, {{"indices", Arg{probe_indices}}})).sizes;
  }
  auto target = [&](const SymShape& x) {
    std::vector<ExprRef> pos = advanced_positions(c, n, meta, x);
    ExprRef off = Expr::index(0);
    for (size_t d = 0; d < pos.size(); ++d) off = op(LoopOp::Add, {off, op(LoopOp::Mul, {pos[d], Expr::index(meta.strides[d])})});
    return off;
  };
  std::vector<size_t> free;  // the sliced dims: coordinates of the target
  advanced_positions(c, n, meta, index_vars(shape.size()), &free);
  emit_scatter(c, n.outputs[0].name + "_put", n.outputs[0].name, out, shape, free, target, [&](const SymShape& x, const ExprRef& old) {
    ExprRef v = cast(c.at(values, broadcast_index(x, shape, values.meta.sizes)), meta.dtype);
    return accumulate ? combine(Combine::sum, old, v, meta.dtype) : v;
  });
  return finish(c, n, accumulate ? Combine::sum : Combine::assign, out, std::nullopt);
}

}  // namespace

std::vector<Value> lower_indexing(Context& c, const Node& n) {
  ArgReader args(c.graph, n);
  switch (n.op) {
    case OpKind::SliceScatter: case OpKind::SelectScatter: return {scatter_positions(c, n, args)};
    case OpKind::ScatterSrc: case OpKind::ScatterAdd: case OpKind::ScatterValue: case OpKind::ScatterReduce:
    case OpKind::ScatterValueReduce: case OpKind::ScatterReduceTwo: return {scatter(c, n, args)};
    case OpKind::IndexPut: return {index_put(c, n, args)};
    default: return {gather_like(c, n, args)};
  }
}

}  // namespace coil::lowering
