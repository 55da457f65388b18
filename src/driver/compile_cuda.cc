// The CUDA half of the pipeline's end: generate for the GPU at hand, build the kernels with
// NVRTC (a few units in parallel, cached by content), load them into the primary context and
// assemble the GPU plan.
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "build/nvrtc.h"
#include "driver/compile.h"
#include "runtime/cuda/gpu_plan.h"

namespace coil {

Executable compile_cuda(const Graph& graph, const CompileOptions& options, std::shared_ptr<cuda::Context> context) {
  Target target;
  target.cuda = true;
  target.device = context->device();
  Generated gen = generate(graph, target);
  Executable exe;
  exe.stats = gen.stats;
  exe.device = context->device().str();
  auto gpu = std::make_shared<GpuPlan>();

  auto t0 = std::chrono::steady_clock::now();
  auto build_options = build::CudaBuildOptions::detect(
      options.cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(options.cache_dir),
      context->device().arch());
  size_t threads = options.build_threads > 0 ? static_cast<size_t>(options.build_threads) : std::thread::hardware_concurrency();
  auto units = codegen::partition_bodies(gen.cuda.bodies, threads);
  std::vector<std::string> sources;
  for (const auto& u : units) sources.push_back(gen.cuda.unit(u));
  std::vector<build::BuildStats> stats;
  auto cubins = build::compile_cubins(sources, build_options, &stats);
  const size_t nk = gen.lowered.program.kernels.size();
  gpu->functions.assign(nk, nullptr);
  gpu->kernels.resize(nk);
  for (size_t u = 0; u < units.size(); ++u) {
    auto module = context->load_module(cubins[u]);
    for (size_t i : units[u]) {
      const codegen::CudaKernel& k = gen.cuda.kernels[i];
      gpu->functions[k.program_index] = context->function(*module, k.name);
      gpu->kernels[k.program_index] = k;
    }
    gpu->modules.push_back(std::move(module));
  }
  exe.stats.cache_hit = std::all_of(stats.begin(), stats.end(), [](const build::BuildStats& s) { return s.cache_hit; });
  exe.stats.translation_units = static_cast<int>(units.size());
  exe.stats.loop_kernels = static_cast<int>(gen.cuda.kernels.size());
  exe.stats.extern_calls = static_cast<int>(nk - gen.cuda.kernels.size());
  if (exe.stats.extern_calls > 0) gpu->cublas = cuda::CublasLt::load();
  exe.stats.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  gpu->context = context;
  gpu->allocator = std::make_shared<cuda::DeviceAllocator>(context);
  gpu->tf32 = options.allow_tf32;
  gpu->memory = plan_memory(gen.lowered);
  gpu->graph = std::move(gen.graph);
  gpu->lowered = std::move(gen.lowered);
  exe.source = gen.cuda.code();
  exe.gpu_plan = std::move(gpu);
  return exe;
}

}  // namespace coil
