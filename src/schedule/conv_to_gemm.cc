#include "schedule/conv_to_gemm.h"

#include "coil/graph.h"
#include "loop/conv_params.h"
#include "support/check.h"

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopOp;

SymInt var(int i) { return SymInt::symbol(loop::loop_var(i)); }

using loop::ConvParams;

ConvParams params_of(const loop::ExternCall& call) { return loop::conv_params(call.params); }

SymInt product(const SymShape& s, size_t from, size_t to) {
  SymInt p = 1;
  for (size_t d = from; d < to; ++d) p = p * s[d];
  return p;
}

// Whether dims [from, end) of a view are dense row-major (the last one has unit stride).
bool dense_from(const SymShape& sizes, const SymShape& strides, size_t from) {
  SymInt expect = 1;
  for (size_t d = sizes.size(); d-- > from;) {
    if (sizes[d] != SymInt(1) && strides[d] != expect) return false;
    expect = expect * sizes[d];
  }
  return true;
}

// A 1x1 convolution with unit stride and no padding over dense spatial dims: the product reads
// the input itself as [n, c_in, positions].
bool reads_input_directly(const ConvParams& c, const loop::View& x, const loop::View& w) {
  for (size_t d = 0; d < c.k; ++d)
    if (w.sizes[2 + d] != SymInt(1) || c.stride[d] != 1 || c.padding[d] != 0) return false;
  return dense_from(x.sizes, x.strides, 2);
}

int add_temp(loop::Program& p, const std::string& name, DType dtype, SymShape sizes) {
  loop::Buffer b;
  b.name = name;
  b.role = loop::Buffer::Role::temporary;
  b.dtype = dtype;
  b.strides = contiguous_strides(sizes);
  b.sizes = std::move(sizes);
  p.buffers.push_back(std::move(b));
  return static_cast<int>(p.buffers.size()) - 1;
}

// col[n, (c, t...), (o...)] = x[n, c, o*stride - padding + t*dilation], 0 outside the input.
loop::LoopKernel im2col(const loop::Program& p, const loop::ExternCall& call, const ConvParams& c, int col, const SymInt& taps,
                        const SymInt& positions) {
  const loop::View& x = call.inputs[0];
  const loop::View& w = call.inputs[1];
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  DType t = p.buffers[static_cast<size_t>(x.buffer)].dtype;
  loop::LoopKernel k;
  k.name = call.name + "_im2col";
  k.origins = call.origins;
  k.outer = {x.sizes[0], x.sizes[1]};
  for (size_t d = 0; d < c.k; ++d) k.outer.push_back(w.sizes[2 + d]);
  for (size_t d = 0; d < c.k; ++d) k.outer.push_back(out.sizes[2 + d]);
  SymInt n = var(0), ch = var(1), tap = ch, pos_lin = 0;
  std::vector<SymInt> xi = {n, ch};
  ExprRef valid = nullptr;
  for (size_t d = 0; d < c.k; ++d) {
    SymInt td = var(static_cast<int>(2 + d)), od = var(static_cast<int>(2 + c.k + d));
    tap = tap * w.sizes[2 + d] + td;
    pos_lin = pos_lin * out.sizes[2 + d] + od;
    SymInt size = x.sizes[2 + d];
    SymInt pos = od * SymInt(c.stride[d]) - SymInt(c.padding[d]) + td * SymInt(c.dilation[d]);
    auto idx = Expr::index(pos);
    ExprRef in = Expr::apply(LoopOp::LogicalAnd, {Expr::apply(LoopOp::Ge, {idx, Expr::constant(0, DType::i64)}),
                                                  Expr::apply(LoopOp::Lt, {idx, Expr::index(size)})});
    valid = valid ? Expr::apply(LoopOp::LogicalAnd, {valid, in}) : in;
    xi.push_back(max(SymInt(0), min(pos, size - SymInt(1))));  // clamped: loads never leave the input
  }
  ExprRef value = Expr::load(x.buffer, loop::view_offset(x, xi), t);
  if (valid) value = Expr::apply(LoopOp::Where, {valid, value, Expr::constant(0, t)});
  k.stores.push_back({col, n * taps * positions + tap * positions + pos_lin, value, false});
  return k;
}

// out[n, o, p...] = y[n, o, (p...)] (+ bias[o]), in the output's layout.
loop::LoopKernel write_out(const loop::Program& p, const loop::ExternCall& call, const ConvParams& c, int y, const SymInt& positions) {
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  constexpr DType acc = DType::f32;  // the bias is added before rounding
  loop::LoopKernel k;
  k.name = call.name + "_out";
  k.origins = call.origins;
  k.outer = out.sizes;
  std::vector<SymInt> oi = {var(0), var(1)};
  SymInt pos_lin = 0;
  for (size_t d = 0; d < c.k; ++d) {
    oi.push_back(var(static_cast<int>(2 + d)));
    pos_lin = pos_lin * out.sizes[2 + d] + var(static_cast<int>(2 + d));
  }
  SymInt c_out = out.sizes[1];
  ExprRef value = Expr::load(y, var(0) * c_out * positions + var(1) * positions + pos_lin, p.buffers[static_cast<size_t>(y)].dtype);
  if (call.inputs.size() > 2) {
    const loop::View& b = call.inputs[2];
    DType bt = p.buffers[static_cast<size_t>(b.buffer)].dtype;
    value = Expr::apply(LoopOp::Add, {Expr::cast(value, acc), Expr::cast(Expr::load(b.buffer, loop::view_offset(b, {var(1)}), bt), acc)});
    value = Expr::cast(value, out.dtype);
  }
  loop::View ov{call.output, out.sizes, out.strides, out.offset};
  k.stores.push_back({call.output, loop::view_offset(ov, oi), value, false});
  return k;
}

// The most bytes one image's col may take; beyond it the direct loop kernel is used.
constexpr int64_t kMaxColBytes = int64_t{256} << 20;

bool applies(const loop::ExternCall& call, const loop::Program& p) {
  if (call.kind != loop::ExternKind::convolution) return false;
  ConvParams c = params_of(call);
  if (c.transposed || c.groups != 1 || c.k == 0) return false;
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  if (out.dtype != DType::f32 && out.dtype != DType::f16 && out.dtype != DType::bf16) return false;
  const loop::View& x = call.inputs[0];
  const loop::View& w = call.inputs[1];
  if (p.buffers[static_cast<size_t>(x.buffer)].dtype != out.dtype || p.buffers[static_cast<size_t>(w.buffer)].dtype != out.dtype) return false;
  if (!dense_from(w.sizes, w.strides, 1)) return false;
  // The product's inner dim needs a static size.
  auto reduce = product(w.sizes, 1, w.sizes.size()).constant();
  if (!reduce || *reduce <= 0) return false;
  if (reads_input_directly(c, x, w)) return true;
  // One image's col must have a static size under the limit (the batch may be symbolic).
  auto col = (product(w.sizes, 1, w.sizes.size()) * product(out.sizes, 2, out.sizes.size())).constant();
  return col && *col * static_cast<int64_t>(dtype_size(out.dtype)) <= kMaxColBytes;
}

}  // namespace

loop::Program convolutions_to_gemm(const loop::Program& program, const std::function<bool(const loop::ExternCall&)>& library_takes) {
  loop::Program p = program;
  std::vector<loop::Kernel> kernels;
  for (const auto& kernel : program.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&kernel);
    if (call && call->kind == loop::ExternKind::convolution && library_takes && library_takes(*call)) {
      if (call->inputs.size() == 2) {  // no bias: the call writes the output itself
        kernels.push_back(kernel);
        continue;
      }
      const loop::Buffer out = p.buffers[static_cast<size_t>(call->output)];
      SymInt positions = product(out.sizes, 2, out.sizes.size());
      int y = add_temp(p, out.name + "_conv", out.dtype, out.sizes);
      loop::ExternCall conv = *call;
      conv.inputs.pop_back();
      conv.output = y;
      kernels.push_back(std::move(conv));
      kernels.push_back(write_out(p, *call, params_of(*call), y, positions));
      continue;
    }
    if (!call || !applies(*call, p)) {
      kernels.push_back(kernel);
      continue;
    }
    ConvParams c = params_of(*call);
    const loop::View& x = call->inputs[0];
    const loop::View& w = call->inputs[1];
    const loop::Buffer out = p.buffers[static_cast<size_t>(call->output)];
    SymInt batch = x.sizes[0], c_out = out.sizes[1];
    SymInt taps = product(w.sizes, 1, w.sizes.size());
    SymInt positions = product(out.sizes, 2, out.sizes.size());
    loop::View cols;
    if (reads_input_directly(c, x, w)) {
      cols = {x.buffer, {batch, taps, positions}, {x.strides[0], x.strides[1], 1}, x.offset};
    } else {
      int col = add_temp(p, out.name + "_col", out.dtype, {batch, taps, positions});
      kernels.push_back(im2col(p, *call, c, col, taps, positions));
      cols = {col, p.buffers[static_cast<size_t>(col)].sizes, p.buffers[static_cast<size_t>(col)].strides, 0};
    }
    // A 16-bit product with a bias stays an f32 sum until the bias is added: one rounding, as
    // the direct convolution and PyTorch's CPU kernels round.
    bool f32_sum = call->inputs.size() > 2 && (out.dtype == DType::f16 || out.dtype == DType::bf16);
    int y = add_temp(p, out.name + "_gemm", f32_sum ? DType::f32 : out.dtype, {batch, c_out, positions});
    loop::ExternCall gemm;
    gemm.name = call->name;
    gemm.kind = loop::ExternKind::bmm;
    gemm.inputs = {loop::View{w.buffer, {batch, c_out, taps}, {0, w.strides[0], 1}, w.offset}, cols};
    gemm.output = y;
    gemm.origins = call->origins;
    kernels.push_back(std::move(gemm));
    kernels.push_back(write_out(p, *call, c, y, positions));
  }
  p.kernels = std::move(kernels);
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
