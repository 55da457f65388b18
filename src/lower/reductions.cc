// Lowering of reductions and normalizations into loop kernels: the kept dims are the outer
// loop (x*), the reduced dims the inner loop (r*). softmax, log_softmax, layer_norm and
// group_norm are one kernel each: their statistics are reduction steps and the normalized
// output is an inner store. Inputs stay inline: pointwise producers fuse in as a prologue.
#include "graph/infer_util.h"
#include "lower/context.h"
#include "support/check.h"

namespace coil::lowering {

namespace {

ExprRef op(LoopOp o, std::vector<ExprRef> a) { return Expr::apply(o, std::move(a)); }
ExprRef k(double v, DType t) { return Expr::constant(v, t); }

// The loop nest of a reduction of `in_sizes` over `dims`.
struct Nest {
  SymShape outer, inner;
  SymShape in_index;   // over x*, r*
  SymShape out_index;  // over x*, for an output with keepdim's shape when `keepdim`
  SymInt count = 1;    // elements per reduction
};

Nest make_nest(const SymShape& in_sizes, const std::vector<int64_t>& dims, bool keepdim) {
  Nest n;
  for (size_t d = 0; d < in_sizes.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (reduced) {
      n.in_index.push_back(SymInt::symbol(loop::reduce_var(static_cast<int>(n.inner.size()))));
      n.inner.push_back(in_sizes[d]);
      n.count = n.count * in_sizes[d];
      if (keepdim) n.out_index.push_back(0);
    } else {
      SymInt x = SymInt::symbol(loop::loop_var(static_cast<int>(n.outer.size())));
      n.in_index.push_back(x);
      n.out_index.push_back(x);
      n.outer.push_back(in_sizes[d]);
    }
  }
  return n;
}

std::vector<int64_t> all_or(const std::optional<std::vector<int64_t>>& dims, int64_t rank) {
  std::vector<int64_t> out;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) out.push_back(wrap_dim(d, rank, ""));
  return out;
}

class ReductionBuilder {
 public:
  ReductionBuilder(Context& c, const Node& n, const Nest& nest) : c_(c), n_(n), nest_(nest) {
    kernel_.name = c.kernel_name(n.name());
    kernel_.outer = nest.outer;
    kernel_.inner = nest.inner;
    kernel_.origins = {n.name()};
  }
  ExprRef reduce(loop::ReduceKind kind, ExprRef value, DType acc, bool scan = false) {
    kernel_.reductions.push_back({kind, cast(value, acc), acc, scan});
    return Expr::reduced(static_cast<int>(kernel_.reductions.size()) - 1, acc);
  }
  // A buffer for output `o` and a store of `value` at `index` (inner stores index with r*).
  Value store(size_t o, ExprRef value, const SymShape& index, bool inner) {
    const TensorMeta& meta = n_.outputs[o].meta;
    int b = c_.add_buffer(n_.outputs[o].name, loop::Buffer::Role::temporary, meta);
    kernel_.stores.push_back({b, element_offset(meta, index), cast(value, meta.dtype), inner});
    return Value{meta, b, nullptr};
  }
  // The running value the next scan step will have (a carry step reads its own).
  ExprRef running(DType acc) const { return Expr::reduced(static_cast<int>(kernel_.reductions.size()), acc); }
  void emit() { c_.program.kernels.push_back(std::move(kernel_)); }

 private:
  Context& c_;
  const Node& n_;
  const Nest& nest_;
  loop::LoopKernel kernel_;
};

// A row's mean and M2 (sum of squared deviations) by Welford's algorithm: one pass.
std::pair<ExprRef, ExprRef> welford(ReductionBuilder& b, const ExprRef& x, DType acc) {
  ExprRef mean = b.reduce(loop::ReduceKind::welford_mean, x, acc);
  ExprRef m2 = b.reduce(loop::ReduceKind::welford_m2, x, acc);
  return {mean, m2};
}

// (x - mean) * rstd over one row, with the row's mean and 1/sqrt(var + eps): the statistics in
// one Welford pass, the normalized row in a second.
struct Standardized {
  ExprRef y, mean, rstd;
};
Standardized standardize(ReductionBuilder& b, const ExprRef& x, const SymInt& n, double eps, DType acc) {
  auto [mean, m2] = welford(b, x, acc);
  ExprRef var = op(LoopOp::Div, {m2, cast(Expr::index(n), acc)});
  ExprRef rstd = op(LoopOp::Rsqrt, {op(LoopOp::Add, {var, k(eps, acc)})});
  return {op(LoopOp::Mul, {op(LoopOp::Sub, {x, mean}), rstd}), mean, rstd};
}

// A scan along one dim (a 0-d input is a one-element row): one kernel, a running value per row
// advanced in order. cumsum and cumprod in the result dtype's opmath; cummax/cummin a running
// max/min (NaN propagating) with the index of the last element that was >= it (<= for min) or
// NaN, as ATen's kernels take it; logcumsumexp in opmath, each step max + log1p(exp(min - max))
// of the running value and the element (the element itself where both are the same infinity).
std::vector<Value> scan(Context& c, const Node& n, const ArgReader& args, const Value& in) {
  using RK = loop::ReduceKind;
  int64_t rank = in.meta.dim();
  const TensorMeta& out = n.outputs[0].meta;
  std::vector<int64_t> dim;
  if (rank > 0) dim.push_back(wrap_dim(args.integer("dim"), rank, ""));
  Nest nest = make_nest(in.meta.sizes, dim, true);
  if (nest.inner.empty()) nest.inner = {1};
  ReductionBuilder b(c, n, nest);
  DType acc = opmath(out.dtype);
  ExprRef x = cast(cast(c.at(in, nest.in_index), out.dtype), acc);
  ExprRef j = Expr::index(SymInt::symbol(loop::reduce_var(0)));
  std::vector<Value> values;
  switch (n.op) {
    case OpKind::Cumsum: case OpKind::Cumprod:
      values = {b.store(0, b.reduce(n.op == OpKind::Cumsum ? RK::sum : RK::prod, x, acc, true), nest.in_index, true)};
      break;
    case OpKind::Cummax: case OpKind::Cummin: {
      bool is_max = n.op == OpKind::Cummax;
      ExprRef best = b.reduce(is_max ? RK::max : RK::min, x, acc, true);
      ExprRef take = op(is_max ? LoopOp::Ge : LoopOp::Le, {x, best});
      if (is_float(acc)) take = op(LoopOp::LogicalOr, {op(LoopOp::IsNan, {x}), take});
      ExprRef index = b.reduce(RK::carry, op(LoopOp::Where, {take, j, b.running(DType::i64)}), DType::i64, true);
      values = {b.store(0, best, nest.in_index, true), b.store(1, index, nest.in_index, true)};
      break;
    }
    default: {  // logcumsumexp
      ExprRef prev = b.running(acc);
      ExprRef lo = op(LoopOp::Minimum, {x, prev}), hi = op(LoopOp::Maximum, {x, prev});
      ExprRef finite = op(LoopOp::LogicalNot, {op(LoopOp::LogicalOr, {op(LoopOp::IsInf, {lo}), op(LoopOp::IsNan, {lo})})});
      ExprRef added = op(LoopOp::Add, {hi, op(LoopOp::Log1p, {op(LoopOp::Exp, {op(LoopOp::Sub, {lo, hi})})})});
      ExprRef step = op(LoopOp::Where, {op(LoopOp::LogicalOr, {op(LoopOp::Ne, {lo, hi}), finite}), added, x});
      // The first element starts the row (the running value's -inf start, without an init).
      ExprRef first = op(LoopOp::Eq, {j, Expr::index(0)});
      values = {b.store(0, b.reduce(RK::carry, op(LoopOp::Where, {first, x, step}), acc, true), nest.in_index, true)};
    }
  }
  b.emit();
  return values;
}

std::vector<Value> reductions(Context& c, const Node& n, const ArgReader& args) {
  const Value& in = c.value(std::get<ValueRef>(n.arg("self").value));
  int64_t rank = in.meta.dim();
  const TensorMeta& out = n.outputs[0].meta;
  using RK = loop::ReduceKind;
  std::vector<int64_t> dims;
  bool keepdim = n.schema().arg_index("keepdim") >= 0 && args.flag("keepdim");
  switch (n.op) {
    case OpKind::SumDimIntList: case OpKind::MeanDim: case OpKind::VarCorrection:
      dims = all_or(args.opt_ints("dim"), rank); break;
    case OpKind::AnyDims: {  // unlike sum's, an empty dim list reduces nothing
      auto given = args.opt_ints("dim");
      dims = given && given->empty() ? std::vector<int64_t>{} : all_or(given, rank);
      break;
    }
    case OpKind::Amax: case OpKind::Amin: dims = all_or(args.ints("dim"), rank); break;
    case OpKind::ProdDimInt: case OpKind::AnyDim: case OpKind::MaxDim: case OpKind::MinDim:
      dims = {wrap_dim(args.integer("dim"), rank, "")}; break;
    case OpKind::Argmax: case OpKind::Argmin:
      dims = args.opt_sym("dim") ? std::vector<int64_t>{wrap_dim(args.integer("dim"), rank, "")} : all_or(std::nullopt, rank);
      break;
    case OpKind::Cumsum: case OpKind::Cumprod: case OpKind::Cummax: case OpKind::Cummin: case OpKind::Logcumsumexp:
      return scan(c, n, args, in);
    default: dims = all_or(std::nullopt, rank);
  }
  Nest nest = make_nest(in.meta.sizes, dims, keepdim);
  if (nest.inner.empty()) nest.inner = {1};  // nothing reduced (a 0-d input): one-element rows
  if ((n.op == OpKind::Argmax || n.op == OpKind::Argmin) && !args.opt_sym("dim")) nest.out_index = SymShape(out.sizes.size(), 0);
  ReductionBuilder b(c, n, nest);
  DType acc = opmath(out.dtype);
  ExprRef x = c.at(in, nest.in_index);
  std::vector<Value> values;
  switch (n.op) {
    case OpKind::Sum: case OpKind::SumDimIntList:
      values = {b.store(0, b.reduce(RK::sum, x, acc), nest.out_index, false)}; break;
    case OpKind::Mean: case OpKind::MeanDim:
      values = {b.store(0, op(LoopOp::Div, {b.reduce(RK::sum, x, acc), cast(Expr::index(nest.count), acc)}), nest.out_index, false)};
      break;
    case OpKind::Prod: case OpKind::ProdDimInt: values = {b.store(0, b.reduce(RK::prod, x, acc), nest.out_index, false)}; break;
    case OpKind::Max: case OpKind::Amax: values = {b.store(0, b.reduce(RK::max, x, acc), nest.out_index, false)}; break;
    case OpKind::Min: case OpKind::Amin: values = {b.store(0, b.reduce(RK::min, x, acc), nest.out_index, false)}; break;
    case OpKind::Any: case OpKind::AnyDim: case OpKind::AnyDims:
      values = {b.store(0, b.reduce(RK::max, op(LoopOp::Ne, {x, k(0, x->dtype())}), DType::b8), nest.out_index, false)};
      break;
    case OpKind::Argmax: values = {b.store(0, b.reduce(RK::argmax, x, opmath(in.meta.dtype)), nest.out_index, false)}; break;
    case OpKind::Argmin: values = {b.store(0, b.reduce(RK::argmin, x, opmath(in.meta.dtype)), nest.out_index, false)}; break;
    case OpKind::MaxDim: case OpKind::MinDim: {
      bool is_max = n.op == OpKind::MaxDim;
      ExprRef v = b.reduce(is_max ? RK::max : RK::min, x, acc);
      ExprRef i = b.reduce(is_max ? RK::argmax : RK::argmin, x, acc);
      values = {b.store(0, v, nest.out_index, false), b.store(1, i, nest.out_index, false)};
      break;
    }
    case OpKind::VarCorrection: {
      ExprRef count = cast(Expr::index(nest.count), acc);
      ExprRef ss = welford(b, cast(x, acc), acc).second;
      double correction = args.is_none("correction") ? 1.0 : args.real("correction");
      ExprRef denom = op(LoopOp::Maximum, {op(LoopOp::Sub, {count, k(correction, acc)}), k(0, acc)});
      values = {b.store(0, op(LoopOp::Div, {ss, denom}), nest.out_index, false)};
      break;
    }
    default: fail("{} is not supported by the compiler yet", n.schema().name);
  }
  b.emit();
  return values;
}

std::vector<Value> normalizations(Context& c, const Node& n, const ArgReader& args) {
  switch (n.op) {
    case OpKind::Softmax: case OpKind::LogSoftmax: {
      const Value& in = c.value(std::get<ValueRef>(n.arg("self").value));
      int64_t d = wrap_dim(args.integer("dim"), in.meta.dim(), "");
      Nest nest = make_nest(in.meta.sizes, in.meta.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d}, true);
      if (nest.inner.empty()) nest.inner = {1};  // a 0-d input: a one-element row
      ReductionBuilder b(c, n, nest);
      DType acc = opmath(n.outputs[0].meta.dtype);
      ExprRef x = cast(c.at(in, nest.in_index), acc);
      ExprRef m = b.reduce(loop::ReduceKind::max, x, acc);
      ExprRef shifted = op(LoopOp::Sub, {x, m});
      ExprRef s = b.reduce(loop::ReduceKind::sum, op(LoopOp::Exp, {shifted}), acc);
      ExprRef y = n.op == OpKind::Softmax ? op(LoopOp::Div, {op(LoopOp::Exp, {shifted}), s})
                                          : op(LoopOp::Sub, {shifted, op(LoopOp::Log, {s})});
      std::vector<Value> v = {b.store(0, y, nest.in_index, true)};
      b.emit();
      return v;
    }
    case OpKind::NativeLayerNorm: {
      const Value& in = c.value(std::get<ValueRef>(n.arg("input").value));
      size_t k_dims = args.syms("normalized_shape").size();
      std::vector<int64_t> dims;
      for (int64_t d = in.meta.dim() - static_cast<int64_t>(k_dims); d < in.meta.dim(); ++d) dims.push_back(d);
      Nest nest = make_nest(in.meta.sizes, dims, true);
      ReductionBuilder b(c, n, nest);
      DType acc = opmath(n.outputs[0].meta.dtype);
      auto [y, mean, rstd] = standardize(b, cast(c.at(in, nest.in_index), acc), nest.count, args.real("eps"), acc);
      SymShape feature(nest.in_index.end() - static_cast<std::ptrdiff_t>(k_dims), nest.in_index.end());
      if (auto w = n.arg("weight"); !w.is_none()) y = op(LoopOp::Mul, {y, cast(c.at(c.value(std::get<ValueRef>(w.value)), feature), acc)});
      if (auto bias = n.arg("bias"); !bias.is_none()) y = op(LoopOp::Add, {y, cast(c.at(c.value(std::get<ValueRef>(bias.value)), feature), acc)});
      std::vector<Value> v = {b.store(0, y, nest.in_index, true), b.store(1, mean, nest.out_index, false),
                              b.store(2, rstd, nest.out_index, false)};
      b.emit();
      return v;
    }
    case OpKind::NativeGroupNorm: {
      // Per (n, group): the statistics reduce the group's channels and every spatial position.
      const Value& in = c.value(std::get<ValueRef>(n.arg("input").value));
      int64_t groups = args.integer("group");
      SymInt per_group = floordiv(in.meta.sizes[1], groups);
      Nest nest;
      nest.outer = {in.meta.sizes[0], groups};
      nest.inner = {per_group};
      SymInt x0 = SymInt::symbol(loop::loop_var(0)), x1 = SymInt::symbol(loop::loop_var(1));
      SymInt channel = x1 * per_group + SymInt::symbol(loop::reduce_var(0));
      nest.in_index = {x0, channel};
      for (size_t d = 2; d < in.meta.sizes.size(); ++d) {
        nest.in_index.push_back(SymInt::symbol(loop::reduce_var(static_cast<int>(nest.inner.size()))));
        nest.inner.push_back(in.meta.sizes[d]);
      }
      nest.out_index = {x0, x1};
      nest.count = product(nest.inner);
      ReductionBuilder b(c, n, nest);
      DType acc = opmath(n.outputs[0].meta.dtype);
      auto [y, mean, rstd] = standardize(b, cast(c.at(in, nest.in_index), acc), nest.count, args.real("eps"), acc);
      if (auto w = n.arg("weight"); !w.is_none()) y = op(LoopOp::Mul, {y, cast(c.at(c.value(std::get<ValueRef>(w.value)), {channel}), acc)});
      if (auto bias = n.arg("bias"); !bias.is_none()) y = op(LoopOp::Add, {y, cast(c.at(c.value(std::get<ValueRef>(bias.value)), {channel}), acc)});
      std::vector<Value> v = {b.store(0, y, nest.in_index, true), b.store(1, mean, nest.out_index, false),
                              b.store(2, rstd, nest.out_index, false)};
      b.emit();
      return v;
    }
    case OpKind::BatchNormNoTraining: {
      const Value& in = c.value(std::get<ValueRef>(n.arg("input").value));
      const TensorMeta& meta = n.outputs[0].meta;
      DType acc = opmath(meta.dtype);
      SymShape idx = index_vars(meta.sizes.size());
      SymShape ch = {idx[1]};
      auto per_channel = [&](std::string_view name) { return cast(c.at(c.value(std::get<ValueRef>(n.arg(name).value)), ch), acc); };
      ExprRef y = op(LoopOp::Mul, {op(LoopOp::Sub, {cast(c.at(in, idx), acc), per_channel("running_mean")}),
                                   op(LoopOp::Rsqrt, {op(LoopOp::Add, {per_channel("running_var"), k(args.real("eps"), acc)})})});
      if (!n.arg("weight").is_none()) y = op(LoopOp::Mul, {y, per_channel("weight")});
      if (!n.arg("bias").is_none()) y = op(LoopOp::Add, {y, per_channel("bias")});
      std::vector<Value> v = {Value{meta, -1, cast(y, meta.dtype)}};
      const TensorMeta& saved = n.outputs[1].meta;
      if (saved.sizes == SymShape{0}) {  // save_mean / save_invstd: empty in inference (CPU)
        for (size_t o = 1; o < 3; ++o)
          v.push_back(Value{n.outputs[o].meta, c.add_buffer(n.outputs[o].name, loop::Buffer::Role::temporary, n.outputs[o].meta), nullptr});
        return v;
      }
      // CUDA: the running mean and 1 / sqrt(running_var + eps), per channel.
      SymShape own = index_vars(1);
      auto stat = [&](std::string_view name) { return cast(c.at(c.value(std::get<ValueRef>(n.arg(name).value)), own), saved.dtype); };
      v.push_back(Value{saved, -1, stat("running_mean")});
      v.push_back(Value{n.outputs[2].meta, -1, op(LoopOp::Rsqrt, {op(LoopOp::Add, {stat("running_var"), k(args.real("eps"), saved.dtype)})})});
      return v;
    }
    default: fail("{} is not supported by the compiler yet", n.schema().name);
  }
}

}  // namespace

std::vector<Value> lower_reduction(Context& c, const Node& n) {
  ArgReader args(c.graph, n);
  if (n.schema().family == OpFamily::normalization) return normalizations(c, n, args);
  return reductions(c, n, args);
}

}  // namespace coil::lowering
