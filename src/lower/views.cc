// Lowering of views and shape ops into index maps. A view of a realized value is a load
// through the view's own strides and offset (which describe the same storage); a view of an
// inline value substitutes the map into its body. cat and constant_pad_nd select between
// sources with `where`, clamping every index so that no load leaves its buffer.
#include "graph/infer_util.h"
#include "lower/context.h"
#include "support/check.h"

namespace coil::lowering {

namespace {

constexpr int kMaxSymbolicCat = 128;

ExprRef op(LoopOp o, std::vector<ExprRef> a) { return Expr::apply(o, std::move(a)); }

// Row-major linear position of `index` in `sizes`, and its inverse.
SymInt linearize(const SymShape& index, const SymShape& sizes) {
  SymInt lin = 0;
  for (size_t k = 0; k < index.size(); ++k) lin = lin * sizes[k] + index[k];
  return lin;
}
SymShape delinearize(const SymInt& lin, const SymShape& sizes) {
  // An empty tensor has no elements to address (and its strides would divide by zero).
  for (const auto& d : sizes)
    if (d == SymInt(0)) return SymShape(sizes.size(), 0);
  SymShape out(sizes.size());
  SymInt stride = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    out[k] = sizes[k] == SymInt(1) ? SymInt(0) : mod(floordiv(lin, stride), sizes[k]);
    stride = stride * sizes[k];
  }
  return out;
}

SymInt clamp_index(const SymInt& i, const SymInt& size) { return max(min(i, size - 1), 0); }

// The input index that output index `o` of view node `n` reads.
SymShape view_source_index(const Node& n, const ArgReader& args, const TensorMeta& in, const TensorMeta& out, const SymShape& o) {
  int64_t rank = in.dim();
  switch (n.op) {
    case OpKind::Alias: return o;
    case OpKind::View: case OpKind::UnsafeView: return delinearize(linearize(o, out.sizes), in.sizes);
    case OpKind::Permute: {
      SymShape idx(static_cast<size_t>(rank));
      auto dims = args.ints("dims");
      for (size_t k = 0; k < dims.size(); ++k) idx[static_cast<size_t>(wrap_dim(dims[k], rank, ""))] = o[k];
      return idx;
    }
    case OpKind::Expand: return broadcast_index(o, out.sizes, in.sizes);
    case OpKind::SliceTensor: {
      auto d = static_cast<size_t>(wrap_dim(args.integer("dim"), rank, ""));
      SymShape idx = o;
      idx[d] = clamp_slice_bound(args.opt_sym("start").value_or(0), in.sizes[d]) + o[d] * args.sym("step");
      return idx;
    }
    case OpKind::SelectInt: {
      auto d = static_cast<size_t>(wrap_dim(args.integer("dim"), rank, ""));
      SymShape idx = o;
      SymInt index = args.sym("index");
      if (index.is_constant() && *index.constant() < 0) index = index + in.sizes[d];
      idx.insert(idx.begin() + static_cast<std::ptrdiff_t>(d), index);
      return idx;
    }
    case OpKind::Diagonal: {
      // o is the other dims in order, then the position along the diagonal.
      auto d1 = static_cast<size_t>(wrap_dim(args.integer("dim1"), rank, "")), d2 = static_cast<size_t>(wrap_dim(args.integer("dim2"), rank, ""));
      int64_t k = args.integer("offset");
      SymShape idx;
      size_t next = 0;
      for (size_t d = 0; d < static_cast<size_t>(rank); ++d)
        idx.push_back(d == d1 ? o.back() + std::max<int64_t>(-k, 0) : d == d2 ? o.back() + std::max<int64_t>(k, 0) : o[next++]);
      return idx;
    }
    case OpKind::Squeeze: case OpKind::SqueezeDim: case OpKind::SqueezeDims:
    case OpKind::Unsqueeze:
      return delinearize(linearize(o, out.sizes), in.sizes);  // only size-1 dims change
    default: break;
  }
  fail("{} of a fused value is not supported yet", n.schema().name);
}

// The value that owns the storage `v` views: as_strided's sizes, strides and offset address that
// storage, not `v`'s elements (a strict subset of it, or a view laid out otherwise).
ValueRef storage_base(const Graph& g, ValueRef v) {
  for (;;) {
    const Node& n = g.node(v);
    if (!n.schema().is_view) return v;
    v = std::get<ValueRef>(n.arg("self").value);
  }
}

}  // namespace

std::vector<Value> lower_view(Context& c, const Node& n) {
  ArgReader args(c.graph, n);
  if (n.op == OpKind::AsStrided) {
    ValueRef base = storage_base(c.graph, std::get<ValueRef>(n.arg("self").value));
    Value& storage = c.value(base);
    c.realize(storage, c.graph.value_name(base));
    return {Value{n.outputs[0].meta, storage.buffer, nullptr}};
  }
  if (n.schema().family == OpFamily::view) {
    Value& in = c.value(std::get<ValueRef>(n.arg("self").value));
    std::vector<Value> out;
    for (const auto& o : n.outputs) {
      // A true view of a realized value loads through its own strides into the same storage;
      // _unsafe_view's result is a new (contiguous) tensor, so it maps indices like view.
      if ((in.realized() && n.schema().is_view) || n.op == OpKind::SplitWithSizes) {
        c.realize(in, c.graph.value_name(std::get<ValueRef>(n.arg("self").value)));
        out.push_back(Value{o.meta, in.buffer, nullptr});
        continue;
      }
      SymShape idx = index_vars(o.meta.sizes.size());
      out.push_back(Value{o.meta, -1, c.at(in, view_source_index(n, args, in.meta, o.meta, idx))});
    }
    return out;
  }
  const TensorMeta& meta = n.outputs[0].meta;
  SymShape idx = index_vars(meta.sizes.size());
  auto result = [&](ExprRef body) { return std::vector<Value>{Value{meta, -1, cast(body, meta.dtype)}}; };
  switch (n.op) {
    case OpKind::Cat: {
      auto list = std::get<TensorList>(n.arg("tensors").value);
      auto d = static_cast<size_t>(wrap_dim(args.integer("dim"), meta.dim(), ""));
      // Each input's position is the sum of the sizes before it, so inputs of symbolic sizes
      // make index expressions that grow with the count (2,000 took hours to simplify).
      int symbolic = 0;
      for (const auto& r : list) symbolic += c.value(*r).meta.sizes.size() > d && !c.value(*r).meta.sizes[d].constant();
      if (symbolic > kMaxSymbolicCat)
        fail("cat of {} tensors whose sizes along dim {} are symbolic: more than the {} coil compiles in one step", symbolic, d, kMaxSymbolicCat);
      std::vector<std::pair<SymInt, ExprRef>> parts;  // (end position, value)
      SymInt start = 0;
      for (const auto& r : list) {
        const Value& v = c.value(*r);
        if (v.meta.dim() == 1 && v.meta.sizes[0] == SymInt(0) && meta.dim() != 1) continue;
        SymShape at = idx;
        at[d] = clamp_index(idx[d] - start, v.meta.sizes[d]);
        start = start + v.meta.sizes[d];
        parts.emplace_back(start, cast(c.at(v, at), meta.dtype));
      }
      ExprRef body = parts.back().second;
      for (size_t k = parts.size() - 1; k-- > 0;)
        body = op(LoopOp::Where, {op(LoopOp::Lt, {Expr::index(idx[d]), Expr::index(parts[k].first)}), parts[k].second, body});
      return result(body);
    }
    case OpKind::ConstantPadNd: {
      const Value& in = c.value(std::get<ValueRef>(n.arg("self").value));
      auto pad = args.syms("pad");
      SymShape at = idx;
      std::optional<ExprRef> inside;
      for (size_t i = 0; i < pad.size() / 2; ++i) {
        size_t d = idx.size() - 1 - i;
        SymInt src = idx[d] - pad[2 * i];
        at[d] = clamp_index(src, in.meta.sizes[d]);
        ExprRef ok = op(LoopOp::LogicalAnd, {op(LoopOp::Ge, {Expr::index(src), Expr::index(0)}),
                                             op(LoopOp::Lt, {Expr::index(src), Expr::index(in.meta.sizes[d])})});
        inside = inside ? op(LoopOp::LogicalAnd, {*inside, ok}) : ok;
      }
      ExprRef v = c.at(in, at);
      if (!inside) return result(v);
      return result(op(LoopOp::Where, {*inside, v, scalar(n.arg("value"), meta.dtype)}));
    }
    case OpKind::Flip: {
      const Value& in = c.value(std::get<ValueRef>(n.arg("self").value));
      SymShape at = idx;
      for (int64_t d : args.ints("dims")) {
        if (meta.dim() == 0) break;  // flipping a 0-d tensor's dim 0 (or -1) leaves it as is
        auto k = static_cast<size_t>(wrap_dim(d, meta.dim(), ""));
        at[k] = meta.sizes[k] - 1 - idx[k];
      }
      return result(c.at(in, at));
    }
    case OpKind::Repeat: {
      const Value& in = c.value(std::get<ValueRef>(n.arg("self").value));
      size_t lead = idx.size() - in.meta.sizes.size();
      SymShape at;
      for (size_t k = 0; k < in.meta.sizes.size(); ++k) at.push_back(mod(idx[k + lead], in.meta.sizes[k]));
      return result(c.at(in, at));
    }
    default: break;
  }
  fail("{} is not supported by the compiler yet", n.schema().name);
}

bool rearranging_view(const Context& c, const Node& n) {
  if (!n.schema().is_view || n.op == OpKind::AsStrided || n.op == OpKind::Expand || n.outputs.size() != 1 || n.schema().arg_index("self") < 0)
    return false;
  const auto* self = std::get_if<ValueRef>(&n.arg("self").value);
  return self && product(c.graph.meta(*self).sizes) == product(n.outputs[0].meta.sizes);
}

void realize_through_views(Context& c, ValueRef r) {
  std::vector<int> chain;  // view nodes, outermost first
  ValueRef at = r;
  while (!c.value(at).realized()) {
    const Node& node = c.graph.nodes[static_cast<size_t>(at.node)];
    if (!rearranging_view(c, node)) break;
    chain.push_back(at.node);
    at = std::get<ValueRef>(node.arg("self").value);
  }
  if (chain.empty()) return;
  c.realize(c.value(at), c.graph.value_name(at));  // (nothing when already realized)
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    c.values[static_cast<size_t>(*it)] = lower_view(c, c.graph.nodes[static_cast<size_t>(*it)]);
}

}  // namespace coil::lowering
