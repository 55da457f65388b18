// The Plan on a GPU: the same step list and memory plan as the CPU executor, run on a stream
// with device buffers. Loop kernels launch from loaded cubins with their launch description
// (grid from the sizes at run time); matrix products go to cuBLASLt. Temporaries come from the
// caching allocator just before their first step and go back after their last (stream order
// makes the reuse safe); each kernel reports index and division errors in its own slot of a
// device status array, read once at the end of the run.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "coil/graph.h"
#include "coil/reference.h"
#include "lower/lower.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/memory_plan.h"

namespace coil {

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
  bool tf32 = false;                           // f32 matrix products may use TF32

  // Host tensors in and out: inputs are copied to the device, outputs back. Weights are copied
  // once and kept on the device (keyed by their host storage), so they must not change between
  // runs of one executable.
  std::vector<Tensor> run(const TensorMap& inputs, const TensorMap& weights, cuda::Stream stream = nullptr) const;

 private:
  mutable std::mutex weights_mutex_;
  mutable std::map<std::pair<const void*, size_t>, cuda::DevicePtr> device_weights_;  // by (host data, buffer)

 public:
  ~GpuPlan();
};

}  // namespace coil
