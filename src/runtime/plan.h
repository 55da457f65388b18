// The Plan: a compiled graph as a flat list of steps over numbered buffers, run by a small C++
// executor. Inputs and weights are borrowed (no copy when their layout is the declared one);
// outputs are allocated per run, temporaries from the blocks earlier runs left; kernels are called with the buffer table
// and the size-symbol values.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coil/compile.h"
#include "coil/graph.h"
#include "coil/reference.h"
#include "lower/lower.h"
#include "runtime/cpu_onednn.h"
#include "runtime/memory_plan.h"

namespace coil {

// A compiled loop kernel. `status` is {0, 0, 0} on entry; a kernel that meets an index out of
// range sets it to {1, index, size}, an integer division by zero sets status[0] to 2.
using KernelFn = void (*)(void* const* buffers, const int64_t* symbols, int64_t* status);

// Temporaries' memory kept from one run to the next: allocating a large block maps fresh pages,
// which fault in on first touch every run (MobileNet-V3 on 2 cores spent ~7% of a run in the
// kernel's page faults). A run takes the blocks (a concurrent run starts without them) and
// gives its free blocks back at the end.
class TemporaryCache {
 public:
  std::vector<Tensor> take();
  void give(std::vector<Tensor> blocks);

 private:
  std::mutex mutex_;
  std::vector<Tensor> blocks_;
};

struct Plan {
  Graph graph;             // for binding inputs and naming errors
  LoweredGraph lowered;
  MemoryPlan memory;       // buffer lifetimes, from plan_memory(lowered)
  std::vector<KernelFn> kernels;  // per program kernel; nullptr for extern calls
  std::vector<std::shared_ptr<void>> libraries;  // keep the kernels' code loaded
  std::shared_ptr<TemporaryCache> temporaries = std::make_shared<TemporaryCache>();
  std::shared_ptr<onednn::Primitives> primitives = std::make_shared<onednn::Primitives>();  // the extern calls'
  // Per graph output, the graph input whose memory it is computed in (outputs_over_inputs), or
  // -1. Such an output is returned undefined when the input was borrowed (given in the declared
  // layout): its values are in the caller's input.
  std::vector<int> output_over_input;
  std::shared_ptr<const HostCalls> host_calls;  // runs the torch calls (ExternKind::torch)

  // `symbols`: values of size symbols the caller read from its tensors (GpuPlan::run's).
  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights, const std::map<std::string, int64_t>& symbols = {}) const;
};

// Shared by the CPU and GPU executors.
std::vector<int64_t> eval_all(const SymShape& s, const std::map<std::string, int64_t>& symbols);
// Storage elements a buffer's layout addresses (at least one).
int64_t buffer_elements(const loop::Buffer& buf, const std::map<std::string, int64_t>& symbols);
// The same where the layout is static; nullopt where it takes a size symbol (a kernel of static
// launch may still read a buffer of symbolic size at data-dependent places, a gather's source).
std::optional<int64_t> static_buffer_elements(const loop::Buffer& buf);
// The bytes of those elements.
size_t buffer_bytes(const loop::Buffer& buf, const std::map<std::string, int64_t>& symbols);
// `t` checked against the buffer's dtype and shape, as a tensor in the buffer's layout (a
// contiguous copy when it is not).
Tensor bind_external(const Tensor& t, const loop::Buffer& b, const std::map<std::string, int64_t>& symbols, const std::string& what);
// A torch call's results (HostCalls::call) checked against the buffers they become: per output,
// the tensor, in its buffer's dtype, sizes and strides (else an error naming the call). Each
// buffer's memory is then its tensor's, starting at the buffer's offset before the tensor's data.
std::vector<Tensor> host_call(const HostCalls* calls, const loop::ExternCall& call, const loop::Program& p,
                              const std::vector<Tensor>& inputs, const std::map<std::string, int64_t>& symbols, void* stream);
// A torch call's output buffers, in order.
std::vector<int> call_outputs(const loop::ExternCall& call);
// Per buffer, whether a torch call writes it: its memory is then the embedder's tensor, which the
// plan holds (never allocated from, nor returned to, the plan's own memory).
std::vector<bool> hosted_buffers(const loop::Program& p);

}  // namespace coil
