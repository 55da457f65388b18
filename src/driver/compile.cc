#include "driver/compile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <cstdlib>
#include <iostream>

#include "build/cpu_compile.h"
#include "codegen/cpu/cpu_codegen.h"
#include "graph_passes/decompose.h"
#include "loop/kernel.h"
#include "lower/lower.h"
#include "schedule/dead_stores.h"
#include "schedule/fuse_epilogues.h"
#include "schedule/fuse_siblings.h"
#include "support/check.h"

namespace coil {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

bool debug_enabled(std::string_view stage) {
  const char* env = std::getenv("COIL_DEBUG");
  if (!env) return false;
  std::string_view v(env);
  return v == "all" || ("," + std::string(v) + ",").find("," + std::string(stage) + ",") != std::string::npos;
}

void dump(std::string_view stage, const std::string& text) {
  if (debug_enabled(stage)) std::cerr << "=== coil " << stage << " ===\n" << text << "\n";
}

}  // namespace

Executable::Executable() : plan(std::make_shared<Plan>()) {}

std::vector<Tensor> Executable::run(const TensorMap& inputs, const TensorMap& weights) const {
  return plan->run(inputs, weights);
}

Generated generate(const Graph& graph) {
  Generated out;
  auto t0 = std::chrono::steady_clock::now();
  dump("graph", print_graph(graph));
  out.graph = decompose(graph);
  out.lowered = lower(out.graph);
  dump("loop", loop::to_string(out.lowered.program));
  out.lowered.program = schedule::fuse_siblings(schedule::drop_dead_stores(schedule::fuse_epilogues(out.lowered.program)));
  dump("fusion", loop::to_string(out.lowered.program));
  out.stats.frontend_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> symbols;
  for (const auto& s : graph.symbols) symbols.push_back(s.name);
  out.source = codegen::generate_cpu(out.lowered.program, symbols);
  out.stats.codegen_ms = ms_since(t1);
  if (debug_enabled("code")) dump("code", out.source.code());
  return out;
}

Executable compile(const Graph& graph, const CompileOptions& options) {
  Generated gen = generate(graph);
  Executable exe;
  exe.stats = gen.stats;
  Plan& plan = *exe.plan;

  // The kernels compile as a few translation units in parallel, one per hardware thread.
  auto t2 = std::chrono::steady_clock::now();
  auto build_options = build::CpuBuildOptions::detect(
      options.cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(options.cache_dir));
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
  plan.graph = std::move(gen.graph);
  plan.lowered = std::move(gen.lowered);
  return exe;
}

}  // namespace coil
