#include "driver/compile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <cstdlib>
#include <iostream>

#include "build/cpu_compile.h"
#include "coil/limit_error.h"
#include "codegen/cpu/cpu_codegen.h"
#include "graph_passes/cse.h"
#include "graph_passes/decompose.h"
#include "loop/conv_params.h"
#include "loop/kernel.h"
#include "lower/lower.h"
#include "schedule/channels_last.h"
#include "schedule/conv_to_gemm.h"
#include "schedule/dead_stores.h"
#include "schedule/extern_copies.h"
#include "schedule/fuse_conv_epilogues.h"
#include "schedule/externs_to_loops.h"
#include "schedule/fuse_epilogues.h"
#include "schedule/fuse_gemm_epilogues.h"
#include "schedule/fuse_gemv_epilogues.h"
#include "schedule/fuse_gemv_prologues.h"
#include "schedule/fuse_siblings.h"
#include "schedule/inline_pointwise.h"
#include "schedule/flatten_dense_pointwise.h"
#include "schedule/pad_gemm_outputs.h"
#include "schedule/simplify_indices.h"
#include "runtime/cpu_onednn.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/gpu_plan.h"
#include "support/check.h"

namespace coil {

bool debug_enabled(std::string_view stage) {
  const char* env = std::getenv("COIL_DEBUG");
  if (!env) return false;
  std::string_view v(env);
  return v == "all" || ("," + std::string(v) + ",").find("," + std::string(stage) + ",") != std::string::npos;
}

namespace {

void dump(std::string_view stage, const std::string& text) {
  if (debug_enabled(stage)) std::cerr << "=== coil " << stage << " ===\n" << text << "\n";
}

}  // namespace

Executable::Executable() : plan(std::make_shared<Plan>()) {}

std::vector<Tensor> Executable::run(const TensorMap& inputs, const TensorMap& weights) const {
  if (gpu_plan) return gpu_plan->run(inputs, weights);
  for (const auto& [name, t] : inputs)
    if (t.device().kind != Device::Kind::cpu) fail("input %{} is on {}, but this executable runs on the CPU", name, device_name(t.device()));
  return plan->run(inputs, weights);
}

std::vector<Tensor> Executable::run_on_stream(const TensorMap& inputs, const TensorMap& weights, void* stream) const {
  if (!gpu_plan) return run(inputs, weights);
  return gpu_plan->run(inputs, weights, stream);
}

std::vector<Tensor> Executable::run_on_stream(std::vector<Tensor> inputs, const TensorMap& weights, void* stream,
                                              const std::map<std::string, int64_t>& symbols) const {
  if (gpu_plan) return gpu_plan->run(std::move(inputs), weights, stream, symbols);
  const Graph& graph = plan->graph;
  auto nodes = graph.input_nodes();
  if (inputs.size() != nodes.size()) fail("graph {} takes {} inputs, got {}", graph.name, nodes.size(), inputs.size());
  TensorMap named;
  for (size_t i = 0; i < nodes.size(); ++i) named.emplace(graph.nodes[static_cast<size_t>(nodes[i])].name(), inputs[i]);
  for (const auto& [name, t] : named)
    if (t.device().kind != Device::Kind::cpu) fail("input %{} is on {}, but this executable runs on the CPU", name, device_name(t.device()));
  return plan->run(named, weights, symbols);
}

std::vector<int> Executable::compute_outputs_in_inputs(const std::vector<int>& inputs) {
  if (gpu_plan) {
    gpu_plan->output_over_input = outputs_over_inputs(gpu_plan->lowered, gpu_plan->memory, inputs);
    gpu_plan->enable_horizontals();
    return gpu_plan->output_over_input;
  }
  return plan->output_over_input = outputs_over_inputs(plan->lowered, plan->memory, inputs);
}

std::vector<Executable::OutputLayout> Executable::output_layouts() const {
  const LoweredGraph& lowered = gpu_plan ? gpu_plan->lowered : plan->lowered;
  std::vector<OutputLayout> out;
  for (int b : lowered.output_buffers) {
    const loop::Buffer& buf = lowered.program.buffers[static_cast<size_t>(b)];
    out.push_back({buf.sizes, buf.strides, buf.dtype});
  }
  return out;
}

std::vector<SymShape> Executable::output_strides() const {
  std::vector<SymShape> out;
  for (auto& layout : output_layouts()) out.push_back(std::move(layout.strides));
  return out;
}

void Executable::synchronize() const {
  if (gpu_plan) gpu_plan->check_pending(true);
}

bool cublas_takes(const loop::ExternCall& call, const loop::Program& program) {
  if (call.kind == loop::ExternKind::convolution) return false;
  // One dtype for the operands (f32, f16, bf16 or f64) and the result, or an f32 result of f16 or
  // bf16 operands (a convolution's product, its bias still to add before rounding).
  size_t first_operand = call.kind == loop::ExternKind::addmm ? 1 : 0;
  DType t = program.buffers[static_cast<size_t>(call.inputs[first_operand].buffer)].dtype;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16 && t != DType::f64) return false;
  for (const auto& v : call.inputs)
    if (program.buffers[static_cast<size_t>(v.buffer)].dtype != t) return false;
  DType result = program.buffers[static_cast<size_t>(call.output)].dtype;
  bool f32_sum = result == DType::f32 && (t == DType::f16 || t == DType::bf16) && call.kind != loop::ExternKind::addmm &&
                 call.activation == loop::Activation::none && !call.residual;
  if (result != t && !f32_sum) return false;
  // A product over an empty dim is no product for cuBLASLt: the loop kernel gives the bias.
  auto k = call.inputs[first_operand].sizes.back().constant();
  if (!k || *k <= 0) return false;
  // Each matrix needs a unit stride in one of its two dims (else it would need packing).
  for (size_t i = first_operand; i < call.inputs.size(); ++i) {
    const auto& st = call.inputs[i].strides;
    if (st.size() < 2 || (st[st.size() - 1] != SymInt(1) && st[st.size() - 2] != SymInt(1))) return false;
  }
  const loop::Buffer& out = program.buffers[static_cast<size_t>(call.output)];
  if (out.strides.back() != SymInt(1)) return false;
  if (call.kind == loop::ExternKind::addmm) {
    // cuBLASLt's bias epilogue: alpha * a @ b + bias over the columns, bias a contiguous vector.
    const auto& bias = call.inputs[0];
    bool vector = bias.sizes.size() == 1 || (bias.sizes.size() == 2 && bias.sizes[0] == SymInt(1));
    bool per_column = vector && bias.sizes.back() == out.sizes.back();  // not a broadcast scalar
    if (call.params[0] != 1 || !vector || !per_column || bias.strides.back() != SymInt(1)) return false;
  }
  return true;
}

bool cpu_library_takes(const loop::ExternCall& call, const loop::Program& program) {
  auto dtype = [&](int buffer) { return program.buffers[static_cast<size_t>(buffer)].dtype; };
  DType t = dtype(call.inputs[call.kind == loop::ExternKind::addmm ? 1 : 0].buffer);
  for (const auto& v : call.inputs)
    if (dtype(v.buffer) != t) return false;
  DType result = dtype(call.output);
  switch (call.kind) {
    case loop::ExternKind::convolution: return result == t && onednn::takes_convolution(t);
    case loop::ExternKind::mm:
    case loop::ExternKind::bmm:
    case loop::ExternKind::addmm: {
      bool half = t == DType::f16 || t == DType::bf16;
      // An f32 sum of 16-bit operands: an im2col product whose bias is still to be added.
      bool f32_sum = half && result == DType::f32 && call.kind != loop::ExternKind::addmm;
      return (t == DType::f32 || t == DType::f64 || half) && (result == t || f32_sum);
    }
    case loop::ExternKind::attention:
    case loop::ExternKind::torch: return false;
  }
  return false;
}

namespace {

// Generated code past this size would keep the C++ compiler or NVRTC busy for minutes (a
// graph of tens of thousands of ops; GPT-2's whole forward is about 1 MB): a LimitError that says
// so, which torch.compile turns into running the graph in PyTorch. COIL_MAX_SOURCE_MB sets it.
constexpr double kDefaultMaxSourceMb = 32;

double max_source_mb() {
  const char* env = std::getenv("COIL_MAX_SOURCE_MB");
  if (!env || !*env) return kDefaultMaxSourceMb;
  char* end = nullptr;
  double mb = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(mb > 0) || mb > 1e6)
    fail("COIL_MAX_SOURCE_MB is '{}': give the budget for generated code in megabytes (a positive number; {} by default)",
         env, kDefaultMaxSourceMb);
  return mb;
}

void check_source_budget(size_t bytes) {
  const double mb = static_cast<double>(bytes) / (1 << 20);
  const double budget = max_source_mb();
  if (mb > budget)
    throw LimitError(fmt::format("the generated code is {:.2f} MB, more than the {:g} MB coil compiles at once (building "
                                 "it would take the compiler minutes): split the graph, or raise COIL_MAX_SOURCE_MB",
                                 mb, budget));
}

}  // namespace

Generated generate(const Graph& graph, const Target& target) {
  Generated out;
  auto t0 = std::chrono::steady_clock::now();
  dump("graph", print_graph(graph));
  out.graph = eliminate_common_subexpressions(graph);
  dump("cse", print_graph(out.graph));
  out.graph = decompose(out.graph, target.cuda && !target.externs_as_loops);
  out.lowered = lower(out.graph);
  // CUDA: cuDNN's convolutions (their bias split off), else im2col + cuBLASLt where it applies.
  auto library_convolution = [&](const loop::ExternCall& c, const loop::Program& p) {
    return !target.externs_as_loops && target.library_convolution && target.library_convolution(c, p);
  };
  auto loop_convolution = [&](const loop::ExternCall& c, const loop::Program& p) {
    return !target.externs_as_loops && target.loop_convolution && target.loop_convolution(c, p);
  };
  // On CUDA with every extern as loops, convolutions are direct loop kernels, not im2col.
  if ((target.cuda && !target.externs_as_loops) || target.conv_as_gemm) {
    const loop::Program& p = out.lowered.program;
    out.lowered.program = schedule::convolutions_to_gemm(
        p, [&](const loop::ExternCall& c) { return library_convolution(c, p) || loop_convolution(c, p); });
  }
  {
    const loop::Program& p = out.lowered.program;
    out.lowered.program = schedule::externs_to_loops(p, [&](const loop::ExternCall& c) {
      if (c.kind == loop::ExternKind::attention || c.kind == loop::ExternKind::torch) return false;
      if (target.externs_as_loops) return true;
      if (!target.cuda) return !cpu_library_takes(c, p);
      return c.kind == loop::ExternKind::convolution ? !library_convolution(c, p) : !cublas_takes(c, p);
    });
  }
  if (target.cuda && target.library_convolution && !target.externs_as_loops)
    out.lowered.program = schedule::convolutions_channels_last(out.lowered.program, library_convolution);
  else if (!target.cuda && target.channels_last)
    // Transposed convolutions keep their layouts: oneDNN creates no channels-last dilated
    // deconvolution with groups (a run-time failure, then eager).
    out.lowered.program = schedule::convolutions_channels_last(out.lowered.program, [](const loop::ExternCall& c, const loop::Program& p) {
      return cpu_library_takes(c, p) && !(c.kind == loop::ExternKind::convolution && loop::conv_params(c.params).transposed);
    });
  if (!target.kernel_prefix.empty())
    for (auto& k : out.lowered.program.kernels) std::visit([&](auto& x) { x.name = target.kernel_prefix + x.name; }, k);
  dump("loop", loop::to_string(out.lowered.program));
  // cuBLASLt applies relu/gelu epilogues in its kernels; on the CPU a generated (vectorized,
  // parallel) kernel does them faster than a pass after the BLAS call.
  if (target.cuda) out.lowered.program = schedule::fuse_gemm_epilogues(out.lowered.program);
  out.lowered.program = schedule::fuse_siblings(
      schedule::drop_dead_stores(schedule::fuse_epilogues(schedule::inline_pointwise(out.lowered.program))), target.cuda,
      target.cuda ? schedule::kGpuIndependentPoints : schedule::kCpuIndependentPoints);
  // cuDNN applies the batch norm, bias, shortcut and ReLU after a convolution in its kernel.
  if (target.cuda && target.library_convolution && !target.externs_as_loops)
    out.lowered.program = schedule::fuse_conv_epilogues(out.lowered.program, library_convolution, target.prefetch_convolutions);
  out.lowered.program = schedule::simplify_indices(out.lowered.program);
  if (target.cuda)
    out.lowered.program = schedule::flatten_dense_pointwise(schedule::pad_gemm_outputs(schedule::externs_write_copies(out.lowered.program)));
  // Pointwise kernels after products of a few rows, and the row kernels before them, run in
  // coil's product kernel.
  if (target.cuda && !target.externs_as_loops) {
    auto takes = [&](const loop::ExternCall& c, const loop::Program& p) { return !codegen::gemv_configs(p, c, target.device).empty(); };
    out.lowered.program = schedule::fuse_gemv_epilogues(out.lowered.program, takes);
    if (target.gemv_prologues) out.lowered.program = schedule::fuse_gemv_prologues(out.lowered.program, takes);
  }
  dump("fusion", loop::to_string(out.lowered.program));
  out.stats.frontend_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> symbols;
  for (const auto& s : graph.symbols) symbols.push_back(s.name);
  if (target.cuda) {
    out.cuda = codegen::generate_cuda(out.lowered.program, symbols, target.device, target.cuda_candidate);
    if (debug_enabled("code")) dump("code", out.cuda.code());
  } else {
    out.source = codegen::generate_cpu(out.lowered.program, symbols);
    if (debug_enabled("code")) dump("code", out.source.code());
  }
  check_source_budget(target.cuda ? out.cuda.code().size() : out.source.code().size());
  out.stats.codegen_ms = ms_since(t1);
  return out;
}

Executable compile(const Graph& graph, const CompileOptions& options) {
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto")
    fail("unknown device '{}' (expected cpu, cuda or auto)", options.device);
  for (const Node& n : graph.nodes)
    if (n.op == OpKind::TorchCall && !options.host_calls)
      fail("%{} is a torch_call: it runs only inside the program that made it (the torch.compile adapter)", n.name());
  std::string note;
  if (options.device != "cpu") {
    std::shared_ptr<cuda::Context> context;
    try {
      context = cuda::Context::open(options.cuda_device);
    } catch (const Error& e) {
      if (options.device == "cuda") throw;
      note = fmt::format("running on the CPU: {}", e.what());
    }
    if (context) return compile_cuda(graph, options, std::move(context));
  }
  Executable exe = compile_cpu(graph, options);
  exe.device_note = note;
  return exe;
}

Executable compile_cpu(const Graph& graph, const CompileOptions& options) {
  Target target;
  target.externs_as_loops = options.externs_as_loops;
  target.conv_as_gemm = options.conv_as_gemm;
  target.channels_last = options.channels_last;
  Generated gen = generate(graph, target);
  Executable exe;
  exe.stats = gen.stats;
  Plan& plan = *exe.plan;

  // The kernels compile as a few translation units in parallel, one per hardware thread.
  auto t2 = std::chrono::steady_clock::now();
  build::ArtifactCache cache =
      options.cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(options.cache_dir);
  auto build_options = options.build || options.toolchain.empty() ? build::CpuBuildOptions::detect(std::move(cache))
                                                                  : build::CpuBuildOptions::prebuilt(std::move(cache), options.toolchain);
  build_options.compile = options.build;
  exe.toolchain = build_options.compiler.id;
  size_t threads = options.build_threads > 0 ? static_cast<size_t>(options.build_threads) : std::thread::hardware_concurrency();
  auto units = codegen::partition_kernels(gen.source, threads);
  std::vector<std::string> sources;
  for (const auto& u : units) sources.push_back(gen.source.unit(u));
  std::vector<build::BuildStats> build_stats;
  auto libraries = build::compile_cpu_libraries(sources, build_options, &build_stats);
  std::map<std::string, KernelFn> entry;
  for (size_t u = 0; u < units.size(); ++u) {
    plan.libraries.push_back(libraries[u]);
    for (size_t k : units[u]) entry[gen.source.kernels[k]] = libraries[u]->function<KernelFn>(gen.source.kernels[k]);
  }
  exe.stats.cache_hit = std::all_of(build_stats.begin(), build_stats.end(), [](const build::BuildStats& b) { return b.cache_hit; });
  exe.stats.translation_units = static_cast<int>(units.size());
  exe.stats.build_ms = ms_since(t2);

  for (const auto& k : gen.lowered.program.kernels) {
    const auto* lk = std::get_if<loop::LoopKernel>(&k);
    plan.kernels.push_back(lk ? entry.at(lk->name) : nullptr);
    ++(lk ? exe.stats.loop_kernels : exe.stats.extern_calls);
  }
  exe.source = gen.source.code();
  plan.memory = plan_memory(gen.lowered);
  plan.host_calls = options.host_calls;
  plan.graph = std::move(gen.graph);
  plan.lowered = std::move(gen.lowered);
  return exe;
}

}  // namespace coil
