// The Plan on a GPU: the same step list and memory plan as the CPU executor, run on a stream
// with device buffers. Loop kernels launch from loaded cubins with their launch description
// (grid from the sizes at run time); matrix products go to cuBLASLt, convolutions to cuDNN. Temporaries come from the
// caching allocator just before their first step and go back after their last (stream order
// makes the reuse safe); each kernel reports index and division errors in its own slot of a
// device status array, read once at the end of the run.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "coil/compile.h"
#include "coil/graph.h"
#include "coil/reference.h"
#include "lower/lower.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cudnn.h"
#include "runtime/cuda/gemm_problem.h"
#include "runtime/cuda/graph_replays.h"
#include "runtime/cuda/sized_run.h"
#include "runtime/memory_plan.h"

namespace coil {

// Where split reductions' scratch lies for a list of kernels sharing one region: each kernel with
// scratch (launch.scratch_bytes) gets bytes of its own, 256-byte aligned (offset -1: none), so
// the partials one kernel leaves never lie where another keeps its tickets (a kernel finds its
// tickets zero, as the last block of each tile leaves them, only in a region of its own).
struct SplitScratchLayout {
  std::vector<int64_t> offsets;  // per kernel
  int64_t bytes = 0;             // the region's size
};
SplitScratchLayout split_scratch_layout(const std::vector<codegen::CudaKernel>& kernels);

// What a plan keeps per step across runs (a library call described once), shared by the
// threads running it.
template <typename T>
class PerStep {
 public:
  std::shared_ptr<T> get(size_t step) const {
    std::lock_guard lock(mutex_);
    return step < kept_.size() ? kept_[step] : nullptr;
  }
  void put(size_t step, std::shared_ptr<T> value) {
    std::lock_guard lock(mutex_);
    if (kept_.size() <= step) kept_.resize(step + 1);
    kept_[step] = std::move(value);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<T>> kept_;
};

// Where a run's device memory comes from: the plan's caching allocator, or, for a run captured
// into a CUDA graph, the blocks the graph keeps (graph_replays.h).
class RunBlocks {
 public:
  virtual ~RunBlocks() = default;
  virtual cuda::DevicePtr take(size_t bytes, cuda::Stream stream) = 0;
  virtual void give(cuda::DevicePtr p, cuda::Stream stream) = 0;
};

// What a run captured into a CUDA graph takes instead of what a plain run allocates: its
// memory, its status words (zeroed once, before the capture: an error stays set, and each
// replay copies the words to `words`, page-locked) and its split reductions' scratch.
struct CaptureTarget {
  RunBlocks* blocks = nullptr;
  cuda::DevicePtr status = 0, scratch = 0;
  int64_t* words = nullptr;
};

struct GpuPlan {
  Graph graph;
  LoweredGraph lowered;
  MemoryPlan memory;
  std::shared_ptr<cuda::Context> context;
  std::shared_ptr<cuda::DeviceAllocator> allocator;
  std::shared_ptr<const cuda::CublasLt> cublas;  // when the program has extern calls
  std::vector<std::shared_ptr<cuda::Context::Module>> modules;
  std::vector<void*> functions;                // per program kernel; nullptr for extern calls
  std::vector<codegen::CudaKernel> kernels;    // per program kernel (launch descriptions)
  // Tuned choices of symbolic kernels for other size buckets than the hints' (the tuning cache's,
  // driver/autotune.h): per program kernel, each bucket's function and launch; a run whose sizes
  // fall in one (codegen::size_bucket) launches it instead of functions[k] / kernels[k].
  std::vector<std::vector<SizedVariant>> variants;  // per program kernel; empty where none
  std::vector<std::optional<cuda::GemmAlgo>> gemm_algos;  // per program kernel: the tuner's pick, if any
  // A graph of symbolic sizes: the size bucket of the hints its products were tuned at (their
  // picks hold for runs in it; runs at other sizes take the heuristic's choice).
  std::vector<int64_t> gemm_bucket;
  std::shared_ptr<const cuda::Cudnn> cudnn;    // when the program has convolutions
  std::vector<size_t> conv_plans;              // per program kernel: the tuner's cuDNN plan (0: the heuristic's first)
  bool tf32 = false;                           // f32 matrix products may use TF32
  std::shared_ptr<const HostCalls> host_calls;  // runs the torch calls (ExternKind::torch)
  bool status_words = true;                    // some kernel may report an error (loop::may_fail)
  SplitScratchLayout scratch_layout;           // of `kernels`, in each stream's split scratch
  // Per graph output, the graph input whose memory it is computed in (outputs_over_inputs), or
  // -1: done when the input is a device tensor borrowed in place (the output is then returned
  // undefined, its values in the caller's input).
  std::vector<int> output_over_input;
  // Runs of consecutive small pointwise steps launched as one kernel (codegen/cuda/horizontal.h);
  // each member keeps its own function for when the group is off: where graph outputs computed
  // over inputs (output_over_input) make a member write what another reads.
  struct Horizontal {
    std::vector<size_t> steps;  // consecutive program kernels
    void* function = nullptr;
    codegen::CudaKernel info;
    bool on = true;
  };
  std::vector<Horizontal> horizontals;
  // Per step, the outputs it only copies from the inputs they are computed over
  // (memory_plan.h's copies_onto_inputs): skipped where they are.
  std::vector<std::vector<size_t>> copies_onto_inputs;
  // Turns each group on or off for the current output_over_input, and finds the steps that only
  // copy an input onto itself.
  void enable_horizontals();

  // Host tensors in and out: inputs are copied to the device, outputs back, and errors (index,
  // division) are thrown here. Host weights are copied once and kept on the device (keyed by
  // their host storage), so they must not change between runs of one executable.
  // Device tensors (Device::Kind::cuda, borrowed pointers in the declared layout) are used in
  // place; when any input is one, the outputs stay on the device (freed to the allocator on
  // `stream` with their last tensor), nothing waits for the GPU, and a run's errors are thrown
  // by a later run or by check_pending.
  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights, cuda::Stream stream = nullptr) const;
  // The same with the inputs in graph order (Graph::input_nodes), as the torch.compile adapter
  // calls it: no names looked up, and a graph of static sizes binds no symbols. The run holds
  // each device input only until its last reader is enqueued: a caller that moves its only
  // reference in (a backward graph's saved activations) has it freed there, in stream order,
  // for the later steps to reuse. Outputs, too, are allocated at their first writer.
  // `symbols`: values of size symbols the caller read from its tensors (the adapter's strided
  // inputs carry theirs only in the strides of a flat input's view); checked against the inputs.
  std::vector<Tensor> run(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream,
                          const std::map<std::string, int64_t>& symbols = {}) const;
  // Throws the first error of earlier device-output runs that finished (all of them: `wait`).
  void check_pending(bool wait) const;

  // CUDA graphs (graph_replays.h): from now on, runs on device tensors replay a graph captured
  // per sizes where they can; `note` is told once each reason a run cannot (it then runs as
  // before). Off again with a null function.
  void use_cuda_graphs(std::function<void(const std::string&)> note);
  // What CUDA graphs did so far (all zero when off).
  CudaGraphStats graph_stats() const;

  // The host's time in run(), summed over the runs: binding and allocation before the first
  // kernel, loop-kernel launches, cuBLASLt and cuDNN calls, the allocator's time between them,
  // handing the outputs back (what a launch-bound step spends per graph; bench.train --profile
  // reports it).
  struct HostTimes {
    int64_t runs = 0, setup_ns = 0, loop_ns = 0, loops = 0, gemm_ns = 0, gemms = 0, conv_ns = 0, convs = 0, memory_ns = 0,
            finish_ns = 0, torch_ns = 0, torch_calls = 0;
  };
  HostTimes host_times() const;

 private:
  friend class CudaGraphs;
  struct Pending {
    void* event = nullptr;     // recorded after the status words' copy
    int64_t* words = nullptr;  // page-locked
  };
  struct Naming {  // what a bound tensor is called in an error: prefix, name, suffix
    std::string_view prefix;
    const std::string& name;
    std::string_view suffix;
  };
  // Input or weight `t` for buffer `b` (laid out as `at`): a device tensor is checked and used in
  // place, a host tensor copied where its layout is another.
  Tensor bind(const Tensor& t, const loop::Buffer& b, const SizedRun::BufferAt& at, const SizedRun& sized, const Naming& naming) const;
  // The symbol values of a run on `inputs` (graph order), `given` by the caller where they are
  // not in the inputs' shapes, and what the run evaluates from them. Given them all, the inputs'
  // sizes are checked against them (bind() checks the rest).
  std::shared_ptr<const SizedRun> run_symbols(const std::vector<Tensor>& inputs, const std::map<std::string, int64_t>& given) const;
  std::shared_ptr<const SizedRun> sized_run(const std::vector<int64_t>& values) const;
  SizedRuns sized_runs_;
  // Why a run of this plan cannot be captured into a CUDA graph, or "" where it can.
  std::string uncapturable() const;
  size_t status_bytes() const { return std::max<size_t>(lowered.program.kernels.size(), 1) * 3 * sizeof(int64_t); }
  // Throws the error a run's status words report, if any.
  void report_status(const int64_t* words) const;
  // The run: with `target`, a run on device inputs enqueued while CudaGraphs captures it, its
  // memory and status words from the target and its outputs' memory the target's to keep (no
  // release); else a plain run.
  std::vector<Tensor> run_steps(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream, const SizedRun& sized,
                                const CaptureTarget* target) const;
  std::unique_ptr<CudaGraphs> cuda_graphs_;  // when on (use_cuda_graphs)
  // Queues the copy of a run's status words into a page-locked slot checked by check_pending.
  void defer_status(cuda::DevicePtr status, size_t bytes, cuda::Stream stream) const;
  // check_pending for the plain runs' status words (not the CUDA graphs').
  void check_runs(bool wait) const;
  mutable std::mutex pending_mutex_;
  mutable std::vector<Pending> pending_;     // runs whose status words are on their way
  mutable std::vector<Pending> free_slots_;  // for reuse

  // Split reductions' scratch, one region a stream (split_scratch_layout), zeroed when made: the
  // last block of a split row or column tile sets its ticket back to zero, so the runs on a
  // stream, which it orders, share it without a fill before every launch.
  cuda::DevicePtr split_scratch(size_t bytes, cuda::Stream stream) const;
  mutable std::mutex scratch_mutex_;
  mutable std::map<cuda::Stream, std::pair<cuda::DevicePtr, size_t>> split_scratch_;

  // Convolution `call` through cuDNN with plan `plan` (the tuner's; the heuristic's first where
  // these pointers' alignments give other plans), its workspace from the allocator.
  // (step `k`: a graph of static sizes keeps its problem and plan, cuda::Cudnn::Prepared)
  void run_convolution(size_t k, const loop::ExternCall& call, const cuda::ConvPointers& operands, size_t plan,
                       const std::map<std::string, int64_t>& symbols, cuda::Stream stream, RunBlocks& blocks) const;
  mutable PerStep<const cuda::Cudnn::Prepared> conv_calls_;
  // A graph of symbolic sizes keeps, per step and the sizes (cuDNN: the problem) they ran at, the
  // prepared library call (up to kSizedCalls of each kind): runs at sizes met before describe
  // nothing again.
  static constexpr size_t kSizedCalls = 256;
  mutable std::mutex sized_calls_mutex_;
  mutable std::map<std::pair<size_t, std::string>, std::shared_ptr<const cuda::Cudnn::Prepared>> sized_conv_calls_;

  // Matrix product step `k` through cuBLASLt on these operand pointers and workspace. A graph of
  // static sizes keeps each product's described call (cuda::GemmCall) for the next run; a graph
  // of symbolic sizes keeps one per sizes it ran at (sized_calls_mutex_); pointers of
  // other alignments describe it again.
  void run_gemm(size_t k, const loop::ExternCall& call, const cuda::GemmPointers& operands, cuda::DevicePtr workspace,
                const SizedRun& sized, cuda::Stream stream) const;
  mutable PerStep<cuda::GemmCall> gemm_calls_;
  mutable std::map<std::pair<size_t, std::vector<int64_t>>, std::shared_ptr<cuda::GemmCall>> sized_gemm_calls_;
  // Torch call `call` (host_calls) on the views of `ptrs` it reads, on `stream`: per output, the
  // embedder's tensor (the buffer's memory until released).
  std::vector<Tensor> run_torch_call(const loop::ExternCall& call, const std::vector<cuda::DevicePtr>& ptrs,
                                     const std::map<std::string, int64_t>& symbols, cuda::Stream stream) const;

  mutable std::mutex times_mutex_;
  mutable HostTimes times_;

  mutable std::mutex weights_mutex_;  // and the constants'
  mutable std::map<std::pair<const void*, size_t>, cuda::DevicePtr> device_weights_;  // by (host data, buffer)
  // Constant buffer `b` on the device: uploaded by the first run, kept for the plan's life (no
  // step writes a constant: only temporaries are taken over in place).
  cuda::DevicePtr constant_on_device(size_t b, const std::map<std::string, int64_t>& symbols, cuda::Stream stream) const;
  mutable std::map<size_t, cuda::DevicePtr> device_constants_;

  // What every run walks, found by the first: the graph's input and weight nodes, and which
  // buffers a run allocates before which step (temporaries), uploads (constants) or takes at
  // its start (outputs not computed over an input).
  struct RunLayout {
    std::vector<int> input_nodes, weight_nodes;
    std::vector<std::vector<size_t>> temporaries_before;  // per step (graph outputs too, at their first writer)
    std::vector<std::vector<size_t>> inputs_after;        // per step: the inputs (by index) no later step reads
    std::vector<size_t> constants, outputs;
  };
  const RunLayout& run_layout() const;
  mutable std::once_flag layout_once_;
  mutable RunLayout layout_;

 public:
  ~GpuPlan();
};

// cuBLASLt's larger kernels want a workspace of this size on Hopper.
inline constexpr size_t kGemmWorkspace = size_t{32} << 20;

// Where extern call `call` writes its result: its output_view, else its whole output buffer.
loop::View result_view(const loop::ExternCall& call, const loop::Program& p);

// Convolution `call` (forward, with no bias: schedule/conv_to_gemm.h splits it off) as cuDNN's
// problem, with the graph's symbol values; the pointers' alignments are the caller's to set.
// A 1-D convolution gets a unit spatial dim (cuDNN takes 2 or 3).
cuda::ConvProblem conv_problem(const loop::ExternCall& call, const loop::Program& p, const std::map<std::string, int64_t>& symbols,
                               bool tf32);
// The byte alignment cuDNN is told for a pointer: at most 16.
uint32_t conv_alignment(const void* ptr);

// Launches loop kernel `info` (a CUfunction) over device buffers indexed by buffer id, with the
// graph's symbol values, its work `units` at them (info.launch.units evaluated), its status slot
// and its scratch (launch.scratch_bytes, its tickets zero; 0 when it needs none). Does nothing
// when the kernel has no work for these sizes. With `overlap` the launch is programmatic where the
// device allows (Context::launch): a plan's launches overlap the previous kernel's tail; the
// autotuner's do not, so that each candidate is timed on its own.
void launch_loop_kernel(const cuda::Context& ctx, void* function, const codegen::CudaKernel& info, const std::vector<cuda::DevicePtr>& ptrs,
                        const std::vector<int64_t>& symbol_values, int64_t units, cuda::DevicePtr status, cuda::DevicePtr scratch,
                        cuda::Stream stream, bool overlap);

}  // namespace coil
