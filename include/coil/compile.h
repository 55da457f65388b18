// The compiler's entry point: a verified graph in, an Executable out (CPU code built by the
// system compiler, cached on disk by content). See docs/architecture.md for the stages.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coil/graph.h"
#include "coil/reference.h"

namespace coil {

struct Plan;     // the runtime's step list (src/runtime/plan.h)
struct GpuPlan;  // the same on a GPU (src/runtime/cuda/gpu_plan.h)

namespace cuda {
class DeviceAllocator;
}

// Calls the program embedding coil makes as steps of a plan (graph op torch_call): the
// torch.compile adapter runs PyTorch's library kernels (attention's fused kernels, sorting, ...)
// this way inside one compiled graph instead of splitting the graph around them.
class HostCalls {
 public:
  virtual ~HostCalls() = default;
  // Call `index` on `inputs`, views of the plan's buffers valid only during the call (device
  // tensors on a GPU, where the call runs on `stream`, the plan's). Returns per output a tensor
  // in the layout the node declares; its memory is the embedder's, held by the plan (the
  // tensor's release) until the output's last reader is enqueued, or handed on as a graph output.
  virtual std::vector<Tensor> call(int index, const std::vector<Tensor>& inputs, void* stream) const = 0;
};

struct CompileOptions {
  int build_threads = 0;  // translation units compiled at once; 0: one per hardware thread
  std::string cache_dir;  // empty: $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else ~/.cache/coil
  // "cpu", "cuda" (an error without a usable GPU) or "auto" (the GPU when there is one, else
  // the CPU, with the reason in Executable::device_note).
  std::string device = "cpu";
  int cuda_device = 0;     // the GPU's ordinal
  // CUDA: the caching allocator the executable's memory comes from, shared with other
  // executables on the same GPU (a training step's forward, backward and optimizer graphs reuse
  // one another's freed blocks instead of each caching its own peak); null: one of its own.
  std::shared_ptr<cuda::DeviceAllocator> device_memory;
  // What runs the graph's torch_call nodes; null: a graph with one fails to compile.
  std::shared_ptr<const HostCalls> host_calls;
  bool allow_tf32 = false; // f32 matrix products may use TF32 (torch float32_matmul_precision "high")
  bool externs_as_loops = false;  // matrix products and convolutions as loop kernels (tests)
  // CPU: convolutions as im2col + GEMM (tests; false: oneDNN's, or a direct loop kernel for
  // dtypes oneDNN lacks). CUDA: always.
  bool conv_as_gemm = false;
  // CPU: convolution chains in channels-last layouts (schedule/channels_last.h), which oneDNN's
  // convolutions (depthwise ones above all) run fastest: on 2 cores, f32 batch 2, MobileNet-V3
  // 24.2 -> 14.5 ms, EfficientNet-B0 42.1 -> 23.7, ResNet-18 58.7 -> 47.7, ConvNeXt-T 148.7 ->
  // 138.1. false: the layouts the graph gives (tests of that path). CUDA: always, where cuDNN
  // runs the convolutions.
  bool channels_last = true;
  // CUDA: measure the candidate configurations of kernels with enough work on the device when
  // first compiled (the winner is cached on disk by kernel and device).
  bool autotune = true;
  // false: every kernel must come from the cache (a package's prebuilt kernels); a miss is an
  // error and no compiler or NVRTC runs.
  bool build = true;
  // With build off: the toolchain the kernels were built with, as Executable::toolchain gave it
  // (a package records it), so that no C++ compiler or NVRTC is looked for; empty: this
  // machine's.
  std::string toolchain;
  // CUDA: every kernel takes its i-th candidate configuration (the last when it has fewer)
  // instead of the heuristic's or the tuner's choice; -1 for none (tests of every candidate).
  int cuda_candidate = -1;
};

// One NVRTC translation unit of a CUDA compile: its kernels and how long it took.
struct UnitBuild {
  std::vector<std::string> kernels;  // its functions (a tuned kernel's candidates are <name>_c<i>)
  double ms = 0;                     // NVRTC, or the cache lookup
  bool cache_hit = false;
};

struct CompileStats {
  double frontend_ms = 0;  // decompose + lower + fuse
  double codegen_ms = 0;
  double build_ms = 0;     // compiler detection, then the compiler run or the cache lookup
  bool cache_hit = false;  // every translation unit came from the cache
  int translation_units = 0;
  int loop_kernels = 0;
  int extern_calls = 0;
  std::vector<UnitBuild> units;  // CUDA: per translation unit
  int tuned_kernels = 0;         // CUDA: kernels whose candidates were measured in this compile
  int tuning_cache_hits = 0;     // CUDA: kernels whose winner came from the tuning cache
  int size_variants = 0;         // CUDA: tuned choices of symbolic kernels for other size buckets, picked per run
  double tune_ms = 0;            // CUDA: measuring candidates (part of build_ms)
  // CUDA: per kernel measured in this compile, "<kernel>: <ms> <config>, ..." (best first).
  std::vector<std::string> tuning;
};

class Executable {
 public:
  Executable();
  // Runs the compiled graph: inputs by name (borrowed; copied only when their layout is not the
  // declared one), weights by key. Returns the graph outputs in order. Thread-safe.
  // On a GPU, tensors may also be device tensors (Tensor::borrow with a cuda Device, in the
  // graph's declared layout): used in place, and when an input is one the outputs stay on the
  // device and the run does not wait for the GPU (its errors surface at a later run or at
  // synchronize()).
  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights = {}) const;
  // The same on a caller's CUDA stream (a CUstream; nullptr: the legacy default stream).
  std::vector<Tensor> run_on_stream(const TensorMap& inputs, const TensorMap& weights, void* stream) const;
  // The same with the inputs in the graph's order (Graph::input_nodes): no names to look up, what
  // the torch.compile adapter calls a few hundred times a training step. On a GPU the run lets
  // go of each device input once its last reader is enqueued (GpuPlan::run): an input moved in
  // with its only reference is freed there, in stream order.
  // `symbols`: values of size symbols the caller read from its tensors (a graph of symbolic
  // sizes whose strided inputs carry symbols only in their views' strides), checked against them.
  std::vector<Tensor> run_on_stream(std::vector<Tensor> inputs, const TensorMap& weights, void* stream,
                                    const std::map<std::string, int64_t>& symbols = {}) const;
  // Waits for every run on the GPU and throws the first error of those that had not reported.
  void synchronize() const;
  // Graph outputs that are new values of graph inputs (`inputs`: per output, the index of the
  // input it updates, or -1), computed in that input's memory where the step order allows it
  // (runtime/memory_plan.h, outputs_over_inputs): a run then returns such an output undefined,
  // its values written over the input, whenever the input was used in place (given in the
  // declared layout; on a GPU, as a device tensor). Returns per output the input granted, or -1.
  // Call before the first run.
  std::vector<int> compute_outputs_in_inputs(const std::vector<int>& inputs);
  // Per graph output, the strides a run gives it: its value's declared ones, or those the
  // compiler picked for an any_layout output (Graph::any_layout_outputs).
  std::vector<SymShape> output_strides() const;
  // Per graph output, the sizes, strides and dtype of the tensor a run gives it (the adapter
  // decides before a first run how to hand each to PyTorch).
  struct OutputLayout {
    SymShape sizes, strides;
    DType dtype;
  };
  std::vector<OutputLayout> output_layouts() const;

  CompileStats stats;
  std::string source;           // the generated C++ or CUDA C++
  std::string device = "cpu";   // what it runs on: "cpu" or the GPU's description
  std::string device_note;      // why "auto" chose the CPU, when it did
  std::string toolchain;        // what built the kernels: the C++ compiler's version line or NVRTC's version
  std::shared_ptr<Plan> plan;   // internal: the CPU executor
  std::shared_ptr<GpuPlan> gpu_plan;  // internal: the GPU executor
};

// Throws coil::Error for graphs it cannot compile (naming the node) and for build failures
// (with the compiler's log and the path of the kept source).
Executable compile(const Graph& graph, const CompileOptions& options = {});

}  // namespace coil
