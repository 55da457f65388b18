#include "schedule/externs_to_loops.h"

#include <cmath>

#include "loop/conv_params.h"
#include "support/check.h"

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopOp;

SymInt var(int i) { return SymInt::symbol(loop::loop_var(i)); }
SymInt rvar(int i) { return SymInt::symbol(loop::reduce_var(i)); }

// The accumulator of a product: float for half types, int64 for integers.
DType accumulator(DType t) {
  if (t == DType::f16 || t == DType::bf16) return DType::f32;
  if (is_float(t)) return t;
  return DType::i64;
}

ExprRef load(const loop::Program& p, const loop::View& v, const std::vector<SymInt>& index, DType acc) {
  DType t = p.buffers[static_cast<size_t>(v.buffer)].dtype;
  return Expr::cast(Expr::load(v.buffer, loop::view_offset(v, index), t), acc);
}

ExprRef in_range(const SymInt& i, const SymInt& size) {
  auto idx = Expr::index(i);
  return Expr::apply(LoopOp::LogicalAnd, {Expr::apply(LoopOp::Ge, {idx, Expr::constant(0, DType::i64)}),
                                          Expr::apply(LoopOp::Lt, {idx, Expr::index(size)})});
}

ExprRef both(const ExprRef& a, const ExprRef& b) { return a ? Expr::apply(LoopOp::LogicalAnd, {a, b}) : b; }

// out[x] = sum_r a[..., x0, r] * b[..., r, x1] (+ beta * bias, scaled by alpha).
loop::LoopKernel matmul(const loop::Program& p, const loop::ExternCall& call) {
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  bool addmm = call.kind == loop::ExternKind::addmm;
  const loop::View& a = call.inputs[addmm ? 1 : 0];
  const loop::View& b = call.inputs[addmm ? 2 : 1];
  DType acc = accumulator(out.dtype);
  size_t rank = out.sizes.size();  // 2, or 3 for bmm
  std::vector<SymInt> lead;
  for (size_t d = 0; d + 2 < rank; ++d) lead.push_back(var(static_cast<int>(d)));
  SymInt i = var(static_cast<int>(rank) - 2), j = var(static_cast<int>(rank) - 1), r = rvar(0);
  std::vector<SymInt> ai = lead, bi = lead;
  ai.insert(ai.end(), {i, r});
  bi.insert(bi.end(), {r, j});
  loop::LoopKernel k;
  k.name = call.name;
  k.origins = call.origins;
  k.outer = out.sizes;
  k.inner = {a.sizes.back()};
  k.reductions.push_back({loop::ReduceKind::sum, Expr::apply(LoopOp::Mul, {load(p, a, ai, acc), load(p, b, bi, acc)}), acc});
  ExprRef value = Expr::reduced(0, acc);
  if (addmm) {
    double beta = call.params[0], alpha = call.params[1];
    if (!is_float(out.dtype)) beta = std::trunc(beta), alpha = std::trunc(alpha);  // as PyTorch does for integers
    if (alpha != 1) value = Expr::apply(LoopOp::Mul, {Expr::constant(alpha, acc), value});
    if (beta != 0) {
      // The bias broadcasts against [m, n] from the right.
      const loop::View& bias = call.inputs[0];
      std::vector<SymInt> index;
      size_t skip = rank - bias.sizes.size();
      for (size_t d = 0; d < bias.sizes.size(); ++d)
        index.push_back(bias.sizes[d] == SymInt(1) ? SymInt(0) : var(static_cast<int>(d + skip)));
      ExprRef term = load(p, bias, index, acc);
      if (beta != 1) term = Expr::apply(LoopOp::Mul, {Expr::constant(beta, acc), term});
      value = Expr::apply(LoopOp::Add, {value, term});
    }
  }
  std::vector<SymInt> oi = lead;
  oi.insert(oi.end(), {i, j});
  loop::View ov{call.output, out.sizes, out.strides, out.offset};
  k.stores.push_back({call.output, loop::view_offset(ov, oi), Expr::cast(value, out.dtype), false});
  return k;
}

// Direct convolution: out[n, oc, o...] = bias[oc] + sum over the group's input channels c and
// taps t of x[n, g*cg + c, pos] * w[oc, c, t...], pos = o*stride - padding + t*dilation (zero
// outside the input). Transposed: out[n, oc, y...] gathers x[n, g*cg + c, i] * w[g*cg + c,
// oc % og, t...] over the i with i*stride - padding + t*dilation = y.
loop::LoopKernel convolution(const loop::Program& p, const loop::ExternCall& call) {
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  const loop::View& x = call.inputs[0];
  const loop::View& w = call.inputs[1];
  const loop::ConvParams cp = loop::conv_params(call.params);
  const size_t k = cp.k;
  const int64_t groups = cp.groups;
  const bool transposed = cp.transposed;
  DType acc = accumulator(out.dtype);
  SymInt c_out = out.sizes[1], c_in = x.sizes[1];
  SymInt cg = floordiv(c_in, SymInt(groups)), og = floordiv(c_out, SymInt(groups));
  // One channel a group (depthwise): the channel reduction's variable is always 0, and left out
  // of the indices it keeps them multiples of what vector accesses need.
  SymInt n = var(0), oc = var(1), c = cg == SymInt(1) ? SymInt(0) : rvar(0), g = floordiv(oc, og);
  SymInt in_channel = g * cg + c;
  loop::LoopKernel kern;
  kern.name = call.name;
  kern.origins = call.origins;
  kern.outer = out.sizes;
  kern.inner = {cg};
  std::vector<SymInt> xi = {n, in_channel}, wi;
  if (transposed) wi = {in_channel, oc - g * og};
  else wi = {oc, c};
  ExprRef valid = nullptr;
  for (size_t d = 0; d < k; ++d) {
    SymInt o = var(static_cast<int>(d) + 2), t = rvar(static_cast<int>(d) + 1);
    kern.inner.push_back(w.sizes[d + 2]);
    wi.push_back(t);
    SymInt size = x.sizes[d + 2], stride = cp.stride[d], pad = cp.padding[d], dil = cp.dilation[d];
    SymInt pos;
    if (!transposed) {
      pos = o * stride - pad + t * dil;
    } else {
      SymInt num = o + pad - t * dil;
      valid = both(valid, Expr::apply(LoopOp::Eq, {Expr::index(mod(num, stride)), Expr::constant(0, DType::i64)}));
      pos = floordiv(num, stride);
    }
    valid = both(valid, in_range(pos, size));
    xi.push_back(max(SymInt(0), min(pos, size - SymInt(1))));  // clamped: loads never leave the input
  }
  ExprRef prod = Expr::apply(LoopOp::Mul, {load(p, x, xi, acc), load(p, w, wi, acc)});
  if (valid) prod = Expr::apply(LoopOp::Where, {valid, prod, Expr::constant(0, acc)});
  kern.reductions.push_back({loop::ReduceKind::sum, prod, acc});
  ExprRef value = Expr::reduced(0, acc);
  if (call.inputs.size() > 2) value = Expr::apply(LoopOp::Add, {value, load(p, call.inputs[2], {oc}, acc)});
  std::vector<SymInt> oi;
  for (size_t d = 0; d < out.sizes.size(); ++d) oi.push_back(var(static_cast<int>(d)));
  loop::View ov{call.output, out.sizes, out.strides, out.offset};
  kern.stores.push_back({call.output, loop::view_offset(ov, oi), Expr::cast(value, out.dtype), false});
  return kern;
}

}  // namespace

loop::Program externs_to_loops(const loop::Program& program, const std::function<bool(const loop::ExternCall&)>& convert) {
  loop::Program out = program;
  for (auto& kernel : out.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&kernel);
    if (!call || !convert(*call)) continue;
    if (call->kind == loop::ExternKind::convolution) kernel = convolution(program, *call);
    else kernel = matmul(program, *call);
  }
  loop::verify(out);
  return out;
}

}  // namespace coil::schedule
