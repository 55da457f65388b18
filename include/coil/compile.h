// The compiler's entry point: a verified graph in, an Executable out (CPU code built by the
// system compiler, cached on disk by content). See docs/architecture.md for the stages.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "coil/graph.h"
#include "coil/reference.h"

namespace coil {

struct Plan;     // the runtime's step list (src/runtime/plan.h)
struct GpuPlan;  // the same on a GPU (src/runtime/cuda/gpu_plan.h)

struct CompileOptions {
  int build_threads = 0;  // translation units compiled at once; 0: one per hardware thread
  std::string cache_dir;  // empty: $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else ~/.cache/coil
  // "cpu", "cuda" (an error without a usable GPU) or "auto" (the GPU when there is one, else
  // the CPU, with the reason in Executable::device_note).
  std::string device = "cpu";
  int cuda_device = 0;     // the GPU's ordinal
  bool allow_tf32 = false; // f32 matrix products may use TF32 (torch float32_matmul_precision "high")
  bool externs_as_loops = false;  // matrix products and convolutions as loop kernels (tests)
};

struct CompileStats {
  double frontend_ms = 0;  // decompose + lower + fuse
  double codegen_ms = 0;
  double build_ms = 0;     // compiler detection, then the compiler run or the cache lookup
  bool cache_hit = false;  // every translation unit came from the cache
  int translation_units = 0;
  int loop_kernels = 0;
  int extern_calls = 0;
};

class Executable {
 public:
  Executable();
  // Runs the compiled graph: inputs by name (borrowed; copied only when their layout is not the
  // declared one), weights by key. Returns the graph outputs in order. Thread-safe.
  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights = {}) const;

  CompileStats stats;
  std::string source;           // the generated C++ or CUDA C++
  std::string device = "cpu";   // what it runs on: "cpu" or the GPU's description
  std::string device_note;      // why "auto" chose the CPU, when it did
  std::shared_ptr<Plan> plan;   // internal: the CPU executor
  std::shared_ptr<GpuPlan> gpu_plan;  // internal: the GPU executor
};

// Throws coil::Error for graphs it cannot compile (naming the node) and for build failures
// (with the compiler's log and the path of the kept source).
Executable compile(const Graph& graph, const CompileOptions& options = {});

}  // namespace coil
