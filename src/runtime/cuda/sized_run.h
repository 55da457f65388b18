// What a GPU plan's run evaluates from its size symbols' values, evaluated once per values and
// kept: every buffer's layout and size, and each loop kernel's launch (the tuned variant of the
// values' size bucket where one applies). A run at sizes met before evaluates no size
// expression; a graph of static sizes has one SizedRun, its values empty.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "coil/graph.h"
#include "coil/tensor.h"
#include "loop/kernel.h"

namespace coil {

// A loop kernel's tuned choice for another size bucket than the compile's hints' (driver/autotune.h):
// a run whose sizes fall in `bucket` (codegen::size_bucket) launches it instead.
struct SizedVariant {
  std::vector<int64_t> bucket;
  void* function = nullptr;
  codegen::CudaKernel info;
};

struct SizedRun {
  std::map<std::string, int64_t> symbols;  // by name (library calls' problems read them so)
  std::vector<int64_t> values;             // in the graph's symbol order
  struct BufferAt {
    Shape sizes, strides;
    int64_t offset = 0;    // element [0, ...] past the base
    int64_t elements = 1;  // what its memory spans (at least 1)
    size_t bytes = 0;
  };
  std::vector<BufferAt> buffers;  // per program buffer
  struct LaunchAt {
    void* function = nullptr;  // null for extern calls
    const codegen::CudaKernel* info = nullptr;
    int64_t units = 0;  // the launch's work units (none: nothing to launch)
  };
  std::vector<LaunchAt> launches;  // per program kernel
};

// `values` (in `graph_symbols`' order) evaluated over the program: `functions` and `kernels` per
// program kernel, `variants` per program kernel (empty where none).
SizedRun evaluate_sized_run(const loop::Program& p, const std::vector<SymbolDecl>& graph_symbols, std::vector<int64_t> values,
                            const std::vector<void*>& functions, const std::vector<codegen::CudaKernel>& kernels,
                            const std::vector<std::vector<SizedVariant>>& variants);

// The SizedRuns of one plan, up to kKept sets of values (a run at further sizes evaluates its
// own), shared by the threads running it.
class SizedRuns {
 public:
  static constexpr size_t kKept = 256;
  template <typename Evaluate>
  std::shared_ptr<const SizedRun> at(const std::vector<int64_t>& values, Evaluate evaluate) const {
    {
      std::lock_guard lock(mutex_);
      if (auto it = kept_.find(values); it != kept_.end()) return it->second;
    }
    auto made = std::make_shared<const SizedRun>(evaluate(values));
    std::lock_guard lock(mutex_);
    if (kept_.size() < kKept) kept_.emplace(values, made);
    return made;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const SizedRun>> kept_;
};

}  // namespace coil
