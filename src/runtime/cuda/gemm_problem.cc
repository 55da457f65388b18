#include "runtime/cuda/gemm_problem.h"

#include "runtime/plan.h"
#include "support/check.h"

namespace coil {

GemmViews gemm_views(const loop::ExternCall& call) {
  bool addmm = call.kind == loop::ExternKind::addmm;
  return GemmViews{.a = &call.inputs[addmm ? 1 : 0],
                   .b = &call.inputs[addmm ? 2 : 1],
                   .bias = addmm ? &call.inputs[0] : nullptr,
                   .c = call.residual ? &*call.residual : nullptr};
}

cuda::GemmProblem gemm_problem(const loop::ExternCall& call, const loop::Program& p, const std::map<std::string, int64_t>& symbols,
                               bool tf32) {
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  bool addmm = call.kind == loop::ExternKind::addmm;
  const GemmViews views = gemm_views(call);
  const loop::View& a = *views.a;
  const loop::View& b = *views.b;
  auto sizes = eval_all(out.sizes, symbols), ostrides = eval_all(out.strides, symbols);
  auto as = eval_all(a.strides, symbols), bs = eval_all(b.strides, symbols);
  auto asz = eval_all(a.sizes, symbols);
  size_t r = asz.size();
  // An output of more dims than the operands (schedule/pad_gemm_outputs.h) merges its leading
  // dims into the rows: each of their strides covers the dims after it.
  if (sizes.size() > r) {
    for (size_t d = 0; d + r < sizes.size(); ++d) {
      COIL_CHECK(ostrides[d] == sizes[d + 1] * ostrides[d + 1]) << call.name << ": output dims that do not merge";
      sizes[d + 1] *= sizes[d];
    }
    sizes.erase(sizes.begin(), sizes.end() - static_cast<std::ptrdiff_t>(r));
    ostrides.erase(ostrides.begin(), ostrides.end() - static_cast<std::ptrdiff_t>(r));
  }
  cuda::GemmProblem g;
  g.dtype = p.buffers[static_cast<size_t>(a.buffer)].dtype;
  g.f32_output = out.dtype != g.dtype;  // an f32 sum of f16/bf16 operands (cublas_takes admits no other mix)
  g.m = sizes[r - 2];
  g.n = sizes[r - 1];
  g.k = asz.back();
  g.batch = r == 3 ? sizes[0] : 1;
  g.a_rs = as[r - 2], g.a_cs = as[r - 1], g.a_bs = r == 3 ? as[0] : 0;
  g.b_rs = bs[r - 2], g.b_cs = bs[r - 1], g.b_bs = r == 3 ? bs[0] : 0;
  g.d_rs = ostrides[r - 2], g.d_cs = ostrides[r - 1], g.d_bs = r == 3 ? ostrides[0] : 0;
  g.tf32 = tf32;
  if (addmm) g.alpha = call.params[1];
  if (views.c) {
    // The residual's view has the logical sizes of the output before any row padding: its
    // leading dims merge into the rows the same way.
    auto cs = eval_all(views.c->strides, symbols);
    cs.erase(cs.begin(), cs.end() - static_cast<std::ptrdiff_t>(r));
    g.beta = 1;
    g.c_rs = cs[r - 2], g.c_cs = cs[r - 1], g.c_bs = r == 3 ? cs[0] : 0;
  }
  switch (call.activation) {
    case loop::Activation::none: g.epilogue = addmm ? cuda::Epilogue::bias : cuda::Epilogue::none; break;
    case loop::Activation::relu: g.epilogue = addmm ? cuda::Epilogue::bias_relu : cuda::Epilogue::relu; break;
    case loop::Activation::gelu_tanh: g.epilogue = addmm ? cuda::Epilogue::bias_gelu : cuda::Epilogue::gelu; break;
  }
  return g;
}

GemmPlaces gemm_places(const loop::ExternCall& call, const loop::Program& p, const std::map<std::string, int64_t>& sizes) {
  auto at = [&](const loop::View* v) {
    if (!v) return GemmPlace{};
    return GemmPlace{v->buffer, v->offset.eval(sizes) * static_cast<int64_t>(dtype_size(p.buffers[static_cast<size_t>(v->buffer)].dtype))};
  };
  const GemmViews views = gemm_views(call);
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  const loop::View d = call.output_view ? *call.output_view : loop::View{call.output, out.sizes, out.strides, out.offset};
  return GemmPlaces{.a = at(views.a), .b = at(views.b), .c = at(views.c), .d = at(&d), .bias = at(views.bias)};
}

}  // namespace coil
