#include "driver/compile.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "build/cpu_compile.h"
#include "codegen/cpu/cpu_codegen.h"
#include "graph_passes/decompose.h"
#include "loop/kernel.h"
#include "lower/lower.h"
#include "schedule/fuse_epilogues.h"
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

Executable compile(const Graph& graph, const CompileOptions& options) {
  Executable exe;
  auto t0 = std::chrono::steady_clock::now();
  dump("graph", print_graph(graph));
  Graph decomposed = decompose(graph);
  LoweredGraph lowered = lower(decomposed);
  dump("loop", loop::to_string(lowered.program));
  lowered.program = schedule::fuse_epilogues(lowered.program);
  dump("fusion", loop::to_string(lowered.program));
  exe.stats.frontend_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> symbols;
  for (const auto& s : graph.symbols) symbols.push_back(s.name);
  codegen::CpuSource src = codegen::generate_cpu(lowered.program, symbols);
  exe.source = src.code;
  dump("code", src.code);
  exe.stats.codegen_ms = ms_since(t1);

  auto t2 = std::chrono::steady_clock::now();
  auto build_options = build::CpuBuildOptions::detect(
      options.cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(options.cache_dir));
  build::BuildStats build_stats;
  auto library = build::compile_cpu_library(src.code, build_options, &build_stats);
  exe.plan.library = library;
  exe.stats.cache_hit = build_stats.cache_hit;
  exe.stats.build_ms = ms_since(t2);

  for (const auto& k : lowered.program.kernels) {
    const auto* lk = std::get_if<loop::LoopKernel>(&k);
    if (!lk) {
      exe.plan.kernels.push_back(nullptr);
      ++exe.stats.extern_calls;
      continue;
    }
    exe.plan.kernels.push_back(library->function<KernelFn>(lk->name));
    ++exe.stats.loop_kernels;
  }
  exe.plan.graph = std::move(decomposed);
  exe.plan.lowered = std::move(lowered);
  return exe;
}

}  // namespace coil
