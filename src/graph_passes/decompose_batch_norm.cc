#include "graph_passes/decompose_batch_norm.h"

#include "support/check.h"

namespace coil {

bool is_batch_norm(OpKind op) { return op == OpKind::BatchNormFunctional || op == OpKind::BatchNormNoStats; }

std::vector<ValueRef> decompose_batch_norm(Graph& g, const Node& n,
                                           const std::function<std::optional<ValueRef>(std::string_view)>& tensor,
                                           const std::function<std::string(const std::string&)>& fresh) {
  COIL_CHECK(is_batch_norm(n.op)) << "not a batch norm: " << n.schema().name;
  using Keywords = std::vector<std::pair<std::string, Arg>>;
  auto call = [&](OpKind op, std::vector<Arg> args, Keywords kw = {}) {
    return g.call1(op, std::move(args), std::move(kw), fresh(n.name() + "_bn"));
  };
  auto cast = [&](ValueRef v, DType t) { return g.meta(v).dtype == t ? v : call(OpKind::ToCopy, {v}, {{"dtype", t}}); };
  // The node's output i: a new contiguous tensor of its declared dtype.
  auto output = [&](size_t i, ValueRef v) {
    return g.call1(OpKind::ToCopy, {v}, {{"dtype", n.outputs[i].meta.dtype}, {"memory_format", "contiguous_format"}},
                   n.outputs[i].name);
  };
  const bool functional = n.op == OpKind::BatchNormFunctional;
  const bool training = std::get<bool>(n.arg("training").value);
  const double momentum = std::get<double>(n.arg("momentum").value), eps = std::get<double>(n.arg("eps").value);
  const ValueRef x = *tensor("input");
  const TensorMeta xm = g.meta(x);
  const DType compute = xm.dtype == DType::f16 || xm.dtype == DType::bf16 ? DType::f32 : xm.dtype;
  const int64_t rank = xm.dim();
  const SymInt channels = xm.sizes[1];
  // A [C] tensor as [C, 1, ...], which broadcasts against [N, C, ...].
  auto per_channel = [&](ValueRef v) {
    for (int64_t d = 2; d < rank; ++d) v = call(OpKind::Unsqueeze, {v, int64_t{-1}});
    return v;
  };
  const ValueRef xc = cast(x, compute);
  ValueRef mean, var;  // [C], in the computation dtype
  if (training) {
    IntList dims = {0};
    for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
    mean = call(OpKind::View, {call(OpKind::MeanDim, {xc, dims, true}), IntList{channels}});
    var = call(OpKind::View, {call(OpKind::VarCorrection, {xc, dims}, {{"correction", int64_t{0}}, {"keepdim", true}}), IntList{channels}});
  } else {
    mean = cast(*tensor("running_mean"), compute);
    var = cast(*tensor("running_var"), compute);
  }
  const ValueRef rstd = call(OpKind::Rsqrt, {call(OpKind::AddScalar, {var, eps})});
  ValueRef y = call(OpKind::MulTensor, {call(OpKind::SubTensor, {xc, per_channel(mean)}), per_channel(rstd)});
  if (auto w = tensor("weight")) y = call(OpKind::MulTensor, {y, per_channel(*w)});
  if (auto b = tensor("bias")) y = call(OpKind::AddTensor, {y, per_channel(*b)});
  std::vector<ValueRef> out = {output(0, y)};
  if (n.outputs[1].meta.sizes == SymShape{0}) {  // eval mode on the CPU saves nothing
    for (size_t i = 1; i < 3; ++i)
      out.push_back(g.call1(OpKind::Full, {IntList{0}, 0.0}, {{"dtype", n.outputs[i].meta.dtype}, {"device", xm.device}},
                            n.outputs[i].name));
  } else {
    out.push_back(output(1, mean));
    out.push_back(output(2, rstd));
  }
  if (!functional) return out;
  const ValueRef running_mean = *tensor("running_mean"), running_var = *tensor("running_var");
  if (!training) {
    out.push_back(output(3, running_mean));
    out.push_back(output(4, running_var));
    return out;
  }
  // momentum * batch statistic + (1 - momentum) * running statistic, in the new statistic's dtype.
  auto update = [&](size_t i, ValueRef batch, ValueRef running) {
    DType t = n.outputs[i].meta.dtype;
    ValueRef now = call(OpKind::MulScalar, {cast(batch, t), momentum});
    return output(i, call(OpKind::AddTensor, {now, call(OpKind::MulScalar, {cast(running, t), 1.0 - momentum})}));
  };
  SymInt count = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != 1) count = count * xm.sizes[static_cast<size_t>(d)];
  // The unbiased variance: the batch's times n / (n - 1), n the values a channel averages.
  ValueRef unbiased;
  if (auto per_channel_count = count.constant()) {
    const double nn = static_cast<double>(*per_channel_count);
    unbiased = call(OpKind::MulScalar, {var, nn / (nn - 1)});
  } else {  // over symbolic sizes: n as a 0-d tensor (the last of arange(0, n + 1), which the
            // fused kernel computes alone), the factor in f64
    const ValueRef all = call(OpKind::ArangeStartStep, {int64_t{0}, count + SymInt(1)}, {{"device", xm.device}});
    const ValueRef nt = cast(call(OpKind::SelectInt, {all, int64_t{0}, count}), DType::f64);
    const ValueRef factor = call(OpKind::DivTensor, {nt, call(OpKind::SubScalar, {nt, 1.0})});
    unbiased = call(OpKind::MulTensor, {var, cast(factor, g.meta(var).dtype)});
  }
  out.push_back(update(3, mean, running_mean));
  out.push_back(update(4, unbiased, running_var));
  return out;
}

}  // namespace coil
