// Lowering of the indexing ops. Reads through an index tensor (index_select, gather,
// embedding, index.Tensor) are loads with a data-dependent offset: the operand is realized and
// each index value goes through check_index (a runtime error out of range; index.Tensor first
// counts negative indices from the end, as PyTorch does). slice_scatter and select_scatter are `where` over positions;
// scatter and scatter_add copy `self` into a new buffer, then store through the index in one
// ordered loop, so later writes win and additions accumulate as in PyTorch's CPU kernels.
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
      auto indices = std::get<TensorList>(n.arg("indices").value);
      int first = -1, last = -1;
      for (size_t i = 0; i < indices.size(); ++i)
        if (indices[i]) {
          if (first < 0) first = static_cast<int>(i);
          last = static_cast<int>(i);
        }
      bool adjacent = true;
      for (int i = first; i <= last; ++i) adjacent = adjacent && indices[static_cast<size_t>(i)].has_value();
      // The broadcast index dims sit where the indexed dims were (adjacent) or in front.
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
      for (int64_t d = 0; d < self.meta.dim(); ++d) {
        bool indexed = static_cast<size_t>(d) < indices.size() && indices[static_cast<size_t>(d)];
        if (indexed) {
          const Value& iv = c.value(*indices[static_cast<size_t>(d)]);
          idx.push_back(index_value(c, iv, broadcast_index(b_index, bshape, iv.meta.sizes), self.meta.sizes[static_cast<size_t>(d)], true));
          continue;
        }
        if (adjacent && d == last + 1) next_kept = static_cast<size_t>(first) + bshape.size();
        idx.push_back(Expr::index(o[next_kept++]));
      }
      return Value{meta, -1, c.at_dynamic(self, idx, n.outputs[0].name + "_src")};
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

// scatter_add of f16/bf16 accumulates in f32 (a scratch copy of self) and rounds once, as
// PyTorch's CPU kernel does; other dtypes scatter straight into the result.
Value scatter(Context& c, const Node& n, const ArgReader& args) {
  const TensorMeta& result = n.outputs[0].meta;
  const std::string& name = n.outputs[0].name;
  bool widen = n.op == OpKind::ScatterAdd && opmath(result.dtype) != result.dtype;
  TensorMeta meta = widen ? TensorMeta::contiguous(opmath(result.dtype), result.sizes, result.device) : result;
  Value out{meta, -1, cast(c.at(operand(c, n, "self"), index_vars(meta.sizes.size())), meta.dtype)};
  c.realize(out, widen ? name + "_acc" : name);
  const Value& index = operand(c, n, "index");
  const Value& src = operand(c, n, "src");
  loop::LoopKernel k;
  k.name = c.kernel_name(name + "_scatter");
  k.origins = {name};
  k.outer = index.meta.sizes;
  SymShape x;
  for (size_t i = 0; i < k.outer.size(); ++i) x.push_back(SymInt::symbol(loop::loop_var(static_cast<int>(i))));
  // A 0-d self is a one-element row: the index must be 0 or -1.
  size_t d = meta.dim() == 0 ? 0 : static_cast<size_t>(wrap_dim(args.integer("dim"), meta.dim(), ""));
  ExprRef target = index_value(c, index, x, meta.dim() == 0 ? SymInt(1) : meta.sizes[d]);
  SymShape at = meta.dim() == 0 ? SymShape{} : with_dim(to_rank(x, meta.dim()), d, 0);
  SymInt offset = element_offset(meta, at);
  ExprRef dynamic = meta.dim() == 0 ? op(LoopOp::Mul, {target, Expr::index(0)})
                                    : op(LoopOp::Mul, {target, Expr::index(meta.strides[d])});
  // src rounds to the result dtype first, as PyTorch casts it to self's dtype.
  ExprRef value = cast(cast(c.at(src, to_rank(x, src.meta.dim())), result.dtype), meta.dtype);
  if (n.op == OpKind::ScatterAdd) {
    DType acc = opmath(meta.dtype);
    ExprRef old = Expr::load(out.buffer, offset, meta.dtype, dynamic);
    value = cast(op(LoopOp::Add, {cast(old, acc), cast(value, acc)}), meta.dtype);
  }
  k.stores.push_back({out.buffer, offset, value, false, dynamic});
  c.program.kernels.push_back(std::move(k));
  if (!widen) return out;
  return Value{result, -1, cast(c.at(out, index_vars(result.sizes.size())), result.dtype)};
}

}  // namespace

std::vector<Value> lower_indexing(Context& c, const Node& n) {
  ArgReader args(c.graph, n);
  switch (n.op) {
    case OpKind::SliceScatter: case OpKind::SelectScatter: return {scatter_positions(c, n, args)};
    case OpKind::ScatterSrc: case OpKind::ScatterAdd: return {scatter(c, n, args)};
    default: return {gather_like(c, n, args)};
  }
}

}  // namespace coil::lowering
