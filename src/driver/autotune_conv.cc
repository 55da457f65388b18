#include "driver/autotune_conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "driver/autotune_gemm.h"
#include "driver/tuning_timer.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"
#include "support/check.h"

namespace coil {

namespace {

// Convolutions doing less are launch-bound: any plan does.
constexpr double kMinTunedFlops = double{1 << 26};
// Another plan replaces the heuristic's first only when at least this much faster.
constexpr double kMargin = 0.02;
// Plans wanting more workspace than this are left out of the timing.
constexpr size_t kMaxWorkspace = size_t{1} << 30;
constexpr TurnsOptions kTurns{.sample_ms = 0.3, .rounds = 5, .max_repeats = 32};

int64_t byte_offset(const loop::Program& program, int buffer, const SymInt& offset) {
  return offset.eval({}) * static_cast<int64_t>(dtype_size(program.buffers[static_cast<size_t>(buffer)].dtype));
}

uint32_t alignment_at(int64_t byte_offset) {
  return conv_alignment(reinterpret_cast<const void*>(uintptr_t{256} + static_cast<uintptr_t>(byte_offset)));
}

double flops(const cuda::ConvProblem& p) {
  double per_output = 2.0;
  for (size_t d = 1; d < p.w_dims.size(); ++d) per_output *= static_cast<double>(p.w_dims[d]);  // C / groups * taps
  double outputs = 1;  // of the forward convolution: a transposed one's x
  for (int64_t v : p.transposed ? p.x_dims : p.y_dims) outputs *= static_cast<double>(v);
  return per_output * outputs;
}

}  // namespace

loop::ExternCall without_bias(const loop::ExternCall& call, const loop::Program& program) {
  loop::ExternCall plain = call;
  if (plain.inputs.size() == 3) {
    const loop::Buffer& out = program.buffers[static_cast<size_t>(call.output)];
    plain.inputs.pop_back();
    plain.output_view = loop::View{call.output, out.sizes, contiguous_strides(out.sizes), 0};
  }
  return plain;
}

cuda::ConvProblem static_conv_problem(const loop::ExternCall& call, const loop::Program& program, bool tf32) {
  cuda::ConvProblem p = conv_problem(call, program, {}, tf32);
  const loop::View y = result_view(call, program);
  p.align_x = alignment_at(byte_offset(program, call.inputs[0].buffer, call.inputs[0].offset));
  p.align_w = alignment_at(byte_offset(program, call.inputs[1].buffer, call.inputs[1].offset));
  p.align_y = alignment_at(byte_offset(program, y.buffer, y.offset));
  if (call.residual) p.align_y = std::min(p.align_y, alignment_at(byte_offset(program, call.residual->buffer, call.residual->offset)));
  return p;
}

std::vector<ConvTuning> tune_convolutions(const loop::Program& program, bool tf32, const cuda::Cudnn& cudnn,
                                          const cuda::Context& context, const build::ArtifactCache& cache) {
  context.make_current();  // on this thread (compile_cuda tunes beside NVRTC)
  std::vector<ConvTuning> out;
  std::map<std::string, size_t> done;  // key -> plan, for repeats in this graph
  RandomFill fill(context);
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const auto* call = std::get_if<loop::ExternCall>(&program.kernels[k]);
    if (!call || call->kind != loop::ExternKind::convolution) continue;
    const cuda::ConvProblem p = static_conv_problem(*call, program, tf32);
    const size_t offered = cudnn.engines(p);
    if (offered < 2 || flops(p) < kMinTunedFlops) continue;
    ConvTuning t;
    t.kernel = k;
    t.name = call->name;
    t.key = build::ArtifactCache::key({"coil-conv-tune-3", cuda::str(p), context.device().key(), cudnn.version()});
    if (auto it = done.find(t.key); it != done.end()) {
      t.plan = it->second;
      out.push_back(std::move(t));
      continue;
    }
    if (auto cached = cache.read(t.key, "tune")) {
      t.plan = static_cast<size_t>(std::strtoull(cached->c_str(), nullptr, 10));
    } else {
      cuda::DeviceScratch memory(context);
      const loop::View y = result_view(*call, program);
      auto operand = [&](int buffer, const SymInt& offset) -> void* {
        const loop::Buffer& buf = program.buffers[static_cast<size_t>(buffer)];
        const size_t bytes = buffer_bytes(buf, {});
        cuda::DevicePtr base = memory.try_take(bytes);
        if (!base) return nullptr;
        fill(base, bytes, buf.dtype);
        return reinterpret_cast<void*>(base + static_cast<cuda::DevicePtr>(byte_offset(program, buffer, offset)));
      };
      cuda::ConvPointers ptrs;
      ptrs.x = operand(call->inputs[0].buffer, call->inputs[0].offset);
      ptrs.w = ptrs.x ? operand(call->inputs[1].buffer, call->inputs[1].offset) : nullptr;
      void* d = ptrs.w ? operand(y.buffer, y.offset) : nullptr;
      ptrs.y = d;
      // The epilogue's operands: each view's buffer, filled like the others.
      for (auto [view, ptr] : {std::pair{&call->scale, &ptrs.scale}, {&call->shift, &ptrs.shift}, {&call->residual, &ptrs.residual},
                               {&call->residual_scale, &ptrs.residual_scale}})
        if (*view && d && !(*ptr = operand((*view)->buffer, (*view)->offset))) d = nullptr;
      size_t workspace_bytes = 0;
      for (size_t i = 0; i < offered; ++i)
        if (size_t b = cudnn.workspace_bytes(p, i); b <= kMaxWorkspace) workspace_bytes = std::max(workspace_bytes, b);
      cuda::DevicePtr workspace = d && workspace_bytes ? memory.try_take(workspace_bytes) : 0;
      if (cudnn.workspace_bytes(p, 0) > kMaxWorkspace) {
        t.note = "not tuned: the heuristic's first plan wants more than 1 GiB of workspace";
      } else if (!d || (workspace_bytes && !workspace)) {
        t.note = "not tuned: no device memory for its operands";
      } else {
        auto run = [&](size_t i, int times) {
          if (cudnn.workspace_bytes(p, i) > workspace_bytes) fail("plan {} wants more workspace than the tuner gives", i);
          for (int r = 0; r < times; ++r) cudnn.convolution(p, i, ptrs, reinterpret_cast<void*>(workspace), nullptr);
        };
        t.ms = time_in_turns(context, offered, run, kTurns);
        t.measured = true;
        t.plan = pick_algorithm(t.ms, kMargin);
        cache.store(t.key, "tune", std::to_string(t.plan));
      }
    }
    done[t.key] = t.plan;
    out.push_back(std::move(t));
  }
  return out;
}

std::string tuning_report(const ConvTuning& t) {
  if (!t.measured) return t.name + " (cuDNN): " + (t.note.empty() ? "from the tuning cache" : t.note);
  return turns_report(t.name, "cuDNN", t.ms, t.plan);
}

}  // namespace coil
