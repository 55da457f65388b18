// THE pipeline, top to bottom: decompose -> lower -> fuse -> CPU codegen -> build -> Plan.
// COIL_DEBUG=graph,loop,fusion,code writes each stage to stderr.
#pragma once
#include <string>

#include "coil/graph.h"
#include "codegen/cpu/cpu_codegen.h"
#include "runtime/plan.h"

namespace coil {

struct CompileOptions {
  int build_threads = 0;  // translation units compiled at once; 0: one per hardware thread
  std::string cache_dir;  // empty: $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else ~/.cache/coil
};

struct CompileStats {
  double frontend_ms = 0;  // decompose + lower + fuse
  double codegen_ms = 0;
  double build_ms = 0;     // compiler detection, then the compiler run or the cache lookup
  bool cache_hit = false;     // every translation unit came from the cache
  int translation_units = 0;
  int loop_kernels = 0;
  int extern_calls = 0;
};

struct Executable {
  Plan plan;
  CompileStats stats;
  std::string source;  // the generated C++

  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights) const { return plan.run(inputs, weights); }
};

// Everything before the system compiler: the decomposed graph, the fused loop program and the
// generated C++ (what `coil compile --emit` prints).
struct Generated {
  Graph graph;
  LoweredGraph lowered;
  codegen::CpuSource source;
  CompileStats stats;  // frontend and codegen times
};
Generated generate(const Graph& graph);

Executable compile(const Graph& graph, const CompileOptions& options = {});

}  // namespace coil
