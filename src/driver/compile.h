// THE pipeline, top to bottom: decompose -> lower -> fuse -> CPU codegen -> build -> Plan.
// COIL_DEBUG=graph,loop,fusion,code writes each stage to stderr.
#pragma once
#include <string>

#include "coil/graph.h"
#include "runtime/plan.h"

namespace coil {

struct CompileOptions {
  std::string cache_dir;  // empty: $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else ~/.cache/coil
};

struct CompileStats {
  double frontend_ms = 0;  // decompose + lower + fuse
  double codegen_ms = 0;
  double build_ms = 0;     // compiler detection, then the compiler run or the cache lookup
  bool cache_hit = false;
  int loop_kernels = 0;
  int extern_calls = 0;
};

struct Executable {
  Plan plan;
  CompileStats stats;
  std::string source;  // the generated C++

  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights) const { return plan.run(inputs, weights); }
};

Executable compile(const Graph& graph, const CompileOptions& options = {});

}  // namespace coil
