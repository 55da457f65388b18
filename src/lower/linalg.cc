// Lowering of matrix products and convolution into extern calls: operands are realized (a view
// of a realized value is passed as that view, so a transposed weight costs nothing) and the
// result gets a buffer of its own.
#include <cmath>

#include "graph/infer_util.h"
#include "lower/context.h"
#include "support/check.h"

namespace coil::lowering {

namespace {

// (Products only: a convolution's or an attention's operand keeps the layout its view declares;
// see realize_through_views.)
loop::View operand(Context& c, const Node& n, std::string_view name) {
  ValueRef r = std::get<ValueRef>(n.arg(name).value);
  if (n.op == OpKind::Mm || n.op == OpKind::Bmm || n.op == OpKind::Addmm) realize_through_views(c, r);
  Value& v = c.value(r);
  c.realize(v, c.graph.value_name(r));
  return {v.buffer, v.meta.sizes, v.meta.strides, v.meta.offset};
}

// `v` broadcast to `sizes` (aligned at the last dim): stride 0 where it repeats.
loop::View broadcast_to(const loop::View& v, const SymShape& sizes) {
  loop::View out{v.buffer, sizes, SymShape(sizes.size(), 0), v.offset};
  const size_t lead = sizes.size() - v.sizes.size();
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] == sizes[lead + d]) out.strides[lead + d] = v.strides[d];
  return out;
}

}  // namespace

namespace {

// A torch call: its inputs realized and passed as the views they are, each result a buffer in
// the layout the call declares (the embedder's memory at run time: runtime/plan.h).
std::vector<Value> lower_torch_call(Context& c, const Node& n) {
  loop::ExternCall call;
  call.name = c.kernel_name(n.name());
  call.origins = {n.name()};
  call.kind = loop::ExternKind::torch;
  for (const auto& r : std::get<TensorList>(n.arg("inputs").value)) {
    Value& v = c.value(*r);
    c.realize(v, c.graph.value_name(*r));
    call.inputs.push_back({v.buffer, v.meta.sizes, v.meta.strides, v.meta.offset});
  }
  call.params = {static_cast<double>(*std::get<SymInt>(n.arg("index").value).constant())};
  std::vector<Value> out;
  for (const Output& o : n.outputs) {
    int b = c.add_buffer(o.name, loop::Buffer::Role::temporary, o.meta);
    (out.empty() ? call.output : call.more_outputs.emplace_back()) = b;
    out.push_back(Value{o.meta, b, nullptr});
  }
  c.program.kernels.push_back(std::move(call));
  return out;
}

}  // namespace

std::vector<Value> lower_linalg(Context& c, const Node& n) {
  if (n.op == OpKind::TorchCall) return lower_torch_call(c, n);
  ArgReader args(c.graph, n);
  const TensorMeta& meta = n.outputs[0].meta;
  loop::ExternCall call;
  call.name = c.kernel_name(n.name());
  call.origins = {n.name()};
  switch (n.op) {
    case OpKind::Mm:
      call.kind = loop::ExternKind::mm;
      call.inputs = {operand(c, n, "self"), operand(c, n, "mat2")};
      break;
    case OpKind::Bmm:
      call.kind = loop::ExternKind::bmm;
      call.inputs = {operand(c, n, "self"), operand(c, n, "mat2")};
      break;
    case OpKind::Addmm:
      call.kind = loop::ExternKind::addmm;
      call.inputs = {operand(c, n, "self"), operand(c, n, "mat1"), operand(c, n, "mat2")};
      call.params = {args.real("beta"), args.real("alpha")};
      break;
    case OpKind::Convolution: {
      call.kind = loop::ExternKind::convolution;
      call.inputs = {operand(c, n, "input"), operand(c, n, "weight")};
      if (!n.arg("bias").is_none()) call.inputs.push_back(operand(c, n, "bias"));
      size_t k = static_cast<size_t>(n.outputs[0].meta.dim() - 2);
      call.params.push_back(static_cast<double>(k));
      for (std::string_view name : {"stride", "padding", "dilation", "output_padding"}) {
        auto v = args.ints(name);
        v.resize(k, v.empty() ? 0 : v[0]);  // one value stands for every spatial dim
        for (int64_t x : v) call.params.push_back(static_cast<double>(x));
      }
      call.params.push_back(static_cast<double>(args.integer("groups")));
      call.params.push_back(args.flag("transposed") ? 1.0 : 0.0);
      break;
    }
    case OpKind::ScaledDotProductAttention: {  // kept by decompose only for a fused kernel
      call.kind = loop::ExternKind::attention;
      call.inputs = {operand(c, n, "query"), operand(c, n, "key"), operand(c, n, "value")};
      if (!n.arg("attn_mask").is_none()) {
        SymShape scores = call.inputs[0].sizes;
        scores.back() = call.inputs[1].sizes[scores.size() - 2];
        call.inputs.push_back(broadcast_to(operand(c, n, "attn_mask"), scores));
      }
      double scale;
      if (const Arg& a = n.arg("scale"); !a.is_none()) scale = std::get<double>(a.value);
      else scale = 1.0 / std::sqrt(static_cast<double>(*meta.sizes.back().constant()));
      call.params = {scale, args.flag("is_causal") ? 1.0 : 0.0};
      break;
    }
    default: fail("{} is not supported by the compiler yet", n.schema().name);
  }
  call.output = c.add_buffer(n.name(), loop::Buffer::Role::temporary, meta);
  int out = call.output;
  c.program.kernels.push_back(std::move(call));
  return {Value{meta, out, nullptr}};
}

}  // namespace coil::lowering
