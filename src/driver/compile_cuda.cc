// The CUDA half of the pipeline's end: generate for the GPU at hand, build the kernels with
// NVRTC (a few units in parallel, cached by content; a tuned kernel's candidates in a unit of
// their own), measure the candidates the tuning cache does not know, load the modules into the
// primary context and assemble the GPU plan.
#include <fmt/format.h>

#include <chrono>
#include <set>
#include <thread>

#include "build/nvrtc.h"
#include "driver/autotune.h"
#include "driver/compile.h"
#include "runtime/cuda/gpu_plan.h"

namespace coil {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Executable compile_cuda(const Graph& graph, const CompileOptions& options, std::shared_ptr<cuda::Context> context) {
  Target target;
  target.cuda = true;
  target.device = context->device();
  target.cuda_candidate = options.cuda_candidate;
  Generated gen = generate(graph, target);
  Executable exe;
  exe.stats = gen.stats;
  exe.device = context->device().str();
  auto gpu = std::make_shared<GpuPlan>();

  auto t0 = std::chrono::steady_clock::now();
  build::ArtifactCache cache = options.cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(options.cache_dir);
  auto build_options = build::CudaBuildOptions::detect(cache, context->device().arch());
  std::vector<std::string> symbols;
  for (const auto& s : gen.graph.symbols) symbols.push_back(s.name);
  std::vector<TuningUnit> tuning;
  if (options.autotune && options.cuda_candidate < 0)
    tuning = tuning_units(gen.lowered.program, gen.cuda, symbols, context->device(), cache);
  std::set<size_t> tuned;
  for (const auto& t : tuning) tuned.insert(t.kernel);
  std::vector<size_t> plain;
  std::vector<std::string> plain_bodies;
  for (size_t i = 0; i < gen.cuda.kernels.size(); ++i)
    if (!tuned.count(i)) plain.push_back(i), plain_bodies.push_back(gen.cuda.bodies[i]);

  size_t threads = options.build_threads > 0 ? static_cast<size_t>(options.build_threads) : std::thread::hardware_concurrency();
  auto units = codegen::partition_bodies(plain_bodies, threads);
  for (auto& u : units)
    for (auto& i : u) i = plain[i];
  std::vector<std::string> sources;
  for (const auto& u : units) sources.push_back(gen.cuda.unit(u));
  for (const auto& t : tuning) sources.push_back(t.source);
  std::vector<build::BuildStats> stats;
  auto cubins = build::compile_cubins(sources, build_options, &stats);

  const size_t nk = gen.lowered.program.kernels.size();
  gpu->functions.assign(nk, nullptr);
  gpu->kernels.resize(nk);
  std::vector<std::string> chosen_bodies = gen.cuda.bodies;
  for (size_t u = 0; u < units.size(); ++u) {
    auto module = context->load_module(cubins[u]);
    UnitBuild report{{}, stats[u].total_seconds * 1e3, stats[u].cache_hit};
    for (size_t i : units[u]) {
      const codegen::CudaKernel& k = gen.cuda.kernels[i];
      gpu->functions[k.program_index] = context->function(*module, k.name);
      gpu->kernels[k.program_index] = k;
      report.kernels.push_back(k.name);
    }
    gpu->modules.push_back(std::move(module));
    exe.stats.units.push_back(std::move(report));
  }
  auto tune0 = std::chrono::steady_clock::now();
  for (size_t t = 0; t < tuning.size(); ++t) {
    TuningUnit& unit = tuning[t];
    const size_t u = units.size() + t;
    auto module = context->load_module(cubins[u]);
    if (unit.winner < 0) {
      measure_candidates(unit, *module, gen.lowered.program, *context, cache);
      ++exe.stats.tuned_kernels;
    } else {
      ++exe.stats.tuning_cache_hits;
    }
    const codegen::CudaKernel& k = unit.candidates[static_cast<size_t>(unit.winner)];
    gpu->functions[k.program_index] = context->function(*module, k.name);
    gpu->kernels[k.program_index] = k;
    exe.stats.units.push_back({{gen.cuda.kernels[unit.kernel].name}, stats[u].total_seconds * 1e3, stats[u].cache_hit});
    // What --emit code and Executable::source show: the winner, under the kernel's own name.
    const auto& lk = std::get<loop::LoopKernel>(gen.lowered.program.kernels[k.program_index]);
    codegen::CudaKernel ignored;
    chosen_bodies[unit.kernel] = codegen::emit_cuda_kernel(gen.lowered.program, lk, symbols, context->device(), k.config, ignored);
    gpu->modules.push_back(std::move(module));
  }
  exe.stats.tune_ms = exe.stats.tuned_kernels ? ms_since(tune0) : 0;
  exe.stats.cache_hit = std::all_of(stats.begin(), stats.end(), [](const build::BuildStats& s) { return s.cache_hit; });
  exe.stats.translation_units = static_cast<int>(sources.size());
  exe.stats.loop_kernels = static_cast<int>(gen.cuda.kernels.size());
  exe.stats.extern_calls = static_cast<int>(nk - gen.cuda.kernels.size());
  if (exe.stats.extern_calls > 0) gpu->cublas = cuda::CublasLt::load();
  exe.stats.build_ms = ms_since(t0);

  gpu->context = context;
  gpu->allocator = std::make_shared<cuda::DeviceAllocator>(context);
  gpu->tf32 = options.allow_tf32;
  gpu->memory = plan_memory(gen.lowered);
  gpu->graph = std::move(gen.graph);
  gpu->lowered = std::move(gen.lowered);
  exe.source = gen.cuda.prelude;
  for (const auto& b : chosen_bodies) exe.source += b + "\n";
  exe.gpu_plan = std::move(gpu);
  return exe;
}

}  // namespace coil
