// The GPU plan's library steps: matrix products through cuBLASLt (their problems from the
// extern call's views; for a graph of static sizes, the call described once and run with each
// step's pointers) and convolutions through cuDNN.
#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

#include "loop/conv_params.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"
#include "support/check.h"

namespace coil {

loop::View result_view(const loop::ExternCall& call, const loop::Program& p) {
  if (call.output_view) return *call.output_view;
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  return {call.output, out.sizes, out.strides, out.offset};
}

cuda::ConvProblem conv_problem(const loop::ExternCall& call, const loop::Program& p, const std::map<std::string, int64_t>& symbols,
                               bool tf32) {
  const loop::ConvParams c = loop::conv_params(call.params);
  COIL_CHECK(call.kind == loop::ExternKind::convolution && call.inputs.size() == 2)
      << call.name << ": cuDNN runs convolutions without a bias";
  const loop::View& x = call.inputs[0];
  const loop::View& w = call.inputs[1];
  const loop::Buffer& out = p.buffers[static_cast<size_t>(call.output)];
  const loop::View y = result_view(call, p);
  cuda::ConvProblem g;
  g.transposed = c.transposed;
  g.dtype = out.dtype;
  g.tf32 = tf32;
  g.x_dims = eval_all(x.sizes, symbols), g.x_strides = eval_all(x.strides, symbols);
  g.w_dims = eval_all(w.sizes, symbols), g.w_strides = eval_all(w.strides, symbols);
  g.y_dims = eval_all(y.sizes, symbols), g.y_strides = eval_all(y.strides, symbols);
  for (size_t d = 0; d < c.k; ++d) {
    g.stride.push_back(c.stride[d]);
    g.dilation.push_back(c.dilation[d]);
    // PyTorch's padding on both sides: cuDNN's output size formula then gives PyTorch's (trailing
    // input no window reaches is dropped by the same floor division; for a transposed
    // convolution, the output padding is the input rows no window reaches).
    g.pre_padding.push_back(c.padding[d]);
    g.post_padding.push_back(c.padding[d]);
  }
  for (auto [dims, strides] : {std::pair{&g.x_dims, &g.x_strides}, {&g.w_dims, &g.w_strides}, {&g.y_dims, &g.y_strides}})
    *strides = cuda::packed_conv_strides(*dims, *strides).value_or(*strides);
  g.epilogue.scale = call.scale.has_value();
  g.epilogue.shift = call.shift.has_value();
  g.epilogue.residual = call.residual.has_value();
  g.epilogue.residual_scale = call.residual_scale.has_value();
  g.epilogue.relu = call.activation == loop::Activation::relu;
  if (c.k == 1) {  // [N, C, L] as [N, C, 1, L]
    for (auto [dims, strides] : {std::pair{&g.x_dims, &g.x_strides}, {&g.w_dims, &g.w_strides}, {&g.y_dims, &g.y_strides}}) {
      strides->insert(strides->begin() + 2, (*strides)[2] * (*dims)[2]);  // as if packed over the unit dim
      dims->insert(dims->begin() + 2, 1);
    }
    g.stride.insert(g.stride.begin(), 1), g.dilation.insert(g.dilation.begin(), 1);
    g.pre_padding.insert(g.pre_padding.begin(), 0), g.post_padding.insert(g.post_padding.begin(), 0);
  }
  return g;
}

uint32_t conv_alignment(const void* ptr) { return std::min<uint32_t>(16, cuda::pointer_alignment(ptr)); }

void GpuPlan::run_convolution(size_t k, const loop::ExternCall& call, const cuda::ConvPointers& operands, size_t plan,
                              const std::map<std::string, int64_t>& symbols, cuda::Stream stream, RunBlocks& blocks) const {
  const uint32_t align_x = conv_alignment(operands.x), align_w = conv_alignment(operands.w),
                 align_y = std::min(conv_alignment(operands.y), operands.residual ? conv_alignment(operands.residual) : 16u);
  // A graph of static sizes keeps the problem and its plan per step, while the pointers keep
  // their alignments.
  const bool keep = graph.symbols.empty();
  std::shared_ptr<const cuda::Cudnn::Prepared> prepared = keep ? conv_calls_.get(k) : nullptr;
  if (prepared) {
    const cuda::ConvProblem& p = prepared->problem;
    if (p.align_x != align_x || p.align_w != align_w || p.align_y != align_y) prepared = nullptr;
  }
  if (!prepared) {
    cuda::ConvProblem p = conv_problem(call, lowered.program, symbols, tf32);
    p.align_x = align_x, p.align_w = align_w, p.align_y = align_y;
    // Symbolic sizes: the plan prepared for this problem before (a run at a batch met before).
    const std::pair<size_t, std::string> sized{k, keep ? std::string() : str(p)};
    if (!keep) {
      std::lock_guard lock(sized_calls_mutex_);
      if (auto it = sized_conv_calls_.find(sized); it != sized_conv_calls_.end()) prepared = it->second;
    }
    if (!prepared) {
      prepared = std::make_shared<const cuda::Cudnn::Prepared>(cudnn->prepare(p, plan));
      if (keep) {
        conv_calls_.put(k, prepared);
      } else {
        std::lock_guard lock(sized_calls_mutex_);
        if (sized_conv_calls_.size() < kSizedCalls) sized_conv_calls_[sized] = prepared;
      }
    }
  }
  const size_t bytes = prepared->workspace;
  const cuda::DevicePtr workspace = bytes ? blocks.take(bytes, stream) : 0;
  try {
    cudnn->convolution(*prepared, operands, reinterpret_cast<void*>(workspace), stream);
  } catch (...) {
    if (workspace) blocks.give(workspace, stream);
    throw;
  }
  if (workspace) blocks.give(workspace, stream);
}

void GpuPlan::run_gemm(size_t k, const loop::ExternCall& call, const cuda::GemmPointers& q, cuda::DevicePtr workspace,
                       const SizedRun& at, cuda::Stream stream) const {
  auto* ws = reinterpret_cast<void*>(workspace);
  const bool keep = graph.symbols.empty();
  std::shared_ptr<cuda::GemmCall> prepared = keep ? gemm_calls_.get(k) : nullptr;
  if (prepared && cublas->run(*prepared, q.a, q.b, q.c, q.d, q.bias, ws, kGemmWorkspace, stream)) return;
  // Symbolic sizes: the call described at these sizes before (describing one takes cuBLASLt's
  // heuristic, tens of microseconds a product: a small block's run was host-bound by them).
  std::pair<size_t, std::vector<int64_t>> sized{k, keep ? std::vector<int64_t>{} : at.values};
  if (!keep) {
    {
      std::lock_guard lock(sized_calls_mutex_);
      if (auto it = sized_gemm_calls_.find(sized); it != sized_gemm_calls_.end()) prepared = it->second;
    }
    if (prepared && cublas->run(*prepared, q.a, q.b, q.c, q.d, q.bias, ws, kGemmWorkspace, stream)) return;
  }
  cuda::GemmProblem g = gemm_problem(call, lowered.program, at.symbols, tf32);
  COIL_CHECK(g.k > 0) << "cublas_takes admits only products over a non-empty dim";
  const bool tuned_here = gemm_algos[k] && (keep || codegen::size_bucket(at.values) == gemm_bucket);
  prepared = cublas->prepare(g, q.a, q.b, q.c, q.d, q.bias, kGemmWorkspace, tuned_here ? &*gemm_algos[k] : nullptr);
  COIL_CHECK(cublas->run(*prepared, q.a, q.b, q.c, q.d, q.bias, ws, kGemmWorkspace, stream)) << call.name << ": a product prepared for its pointers did not run";
  if (keep) {
    gemm_calls_.put(k, std::move(prepared));
  } else {
    std::lock_guard lock(sized_calls_mutex_);
    if (sized_gemm_calls_.size() < kSizedCalls || sized_gemm_calls_.count(sized)) sized_gemm_calls_[sized] = std::move(prepared);
  }
}

std::vector<Tensor> GpuPlan::run_torch_call(const loop::ExternCall& call, const std::vector<cuda::DevicePtr>& ptrs,
                                            const std::map<std::string, int64_t>& symbols, cuda::Stream stream) const {
  const auto& buffers = lowered.program.buffers;
  const Device device{Device::Kind::cuda, context->ordinal()};
  std::vector<Tensor> inputs;
  for (const auto& v : call.inputs) {
    const loop::Buffer& b = buffers[static_cast<size_t>(v.buffer)];
    auto* data = reinterpret_cast<void*>(ptrs[static_cast<size_t>(v.buffer)] +
                                         static_cast<cuda::DevicePtr>(v.offset.eval(symbols) * static_cast<int64_t>(dtype_size(b.dtype))));
    inputs.push_back(Tensor::borrow(data, b.dtype, eval_all(v.sizes, symbols), eval_all(v.strides, symbols), 0, device));
  }
  return host_call(host_calls.get(), call, lowered.program, inputs, symbols, stream);
}

}  // namespace coil
