// CUDA graphs for a GpuPlan (the torch.compile adapter's mode="reduce-overhead"): a run on device
// tensors is captured once into a CUDA graph, and later runs replay it: one driver call in place
// of a launch per kernel and library call, and none of the plan's host work.
//
// Per sizes (the graph's symbol values; one set for a graph of static sizes) the first run is
// plain, a warm-up that uploads constants and describes library calls; the second is captured.
// A captured graph reads each input either in place, at the address it had when captured, or
// from a slot of its own that each replay copies the input into first. In place: an input whose
// address did not change since the call before (a parameter, a buffer, a KV cache), and memory
// that another plan's graphs keep (a forward's saved activations read by the backward). A graph
// replays only for inputs in place at their captured addresses and of the captured layouts.
//
// Outputs live in the memory a graph keeps, which a replay overwrites. So a graph replays only
// once every output of its last replay is gone; while some are held, the run replays or captures
// another graph (up to kInstances per sizes; beyond, an idle one is replaced), and with all of
// them held it runs plain. Outputs therefore stay valid as long as they are held (Inductor's
// are overwritten by the next replay, and reading one after that raises).
//
// Where a run cannot be captured (a host input, a stream PyTorch is capturing, sizes beyond
// kBuckets, inputs whose addresses keep changing, a failed capture) it runs plain, and `note` is
// told the reason once. Index and division errors stay set in a graph's status words, which
// each replay copies to the host; the next run of the plan (or check) throws them.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "coil/reference.h"
#include "coil/tensor.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/sized_run.h"

namespace coil {

struct GpuPlan;

// What a plan's CUDA graphs did so far.
struct CudaGraphStats {
  int64_t captures = 0, replays = 0, plain_runs = 0, graphs = 0, copied_inputs = 0;
};

class CudaGraphs {
 public:
  static constexpr size_t kInstances = 4;  // graphs per sizes
  static constexpr size_t kBuckets = 16;   // sizes captured per plan
  static constexpr int kCaptures = 16;     // captures per sizes before their runs stay plain

  CudaGraphs(const GpuPlan& plan, std::function<void(const std::string&)> note);
  ~CudaGraphs();
  CudaGraphs(const CudaGraphs&) = delete;
  CudaGraphs& operator=(const CudaGraphs&) = delete;

  std::vector<Tensor> run(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream,
                          const std::map<std::string, int64_t>& given);
  // Throws the first error a replay's status words report (after every replay finished: `wait`).
  void check(bool wait);

  CudaGraphStats stats() const;

 private:
  struct Instance;
  struct Bucket;
  std::vector<Tensor> plain(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream,
                            const SizedRun& sized, const std::string& why);
  std::unique_ptr<Instance> capture(const std::vector<Tensor>& inputs, const std::vector<cuda::DevicePtr>& before,
                                    const TensorMap& weights, cuda::Stream stream, const SizedRun& sized);
  std::vector<Tensor> replay(Instance& g, const std::vector<Tensor>& inputs, cuda::Stream stream);
  void check_instance(Instance& g, bool wait);
  // Per weight node of the plan's graph, the data of the weight given (read in place by a graph).
  std::vector<const void*> weight_data(const TensorMap& weights) const;

  const GpuPlan& plan_;
  std::function<void(const std::string&)> note_;
  std::set<std::string> noted_;
  mutable std::mutex mutex_;
  std::map<std::vector<int64_t>, std::unique_ptr<Bucket>> buckets_;
  cuda::Stream capture_stream_ = nullptr;  // coil's own: the caller's may be the legacy default stream
  uint64_t clock_ = 0;                     // counts replays, for the least recently used
  CudaGraphStats stats_;
};

}  // namespace coil
