// Autotuning of CUDA loop kernels: a kernel with several candidate configurations
// (codegen/cuda/launch.h) and enough work to matter is built with all of them, each candidate
// is timed on the device on buffers of the kernel's sizes, and the winner is kept in the
// on-disk tuning cache under the kernel's structural hash and the device's key, so a later
// compile of the same kernel on the same device skips the measuring. A kernel over symbolic
// sizes (dynamic shapes) is timed at the graph's size hints; the cache keeps its winner per size
// bucket (each of its symbols rounded up to a power of two: codegen::size_bucket), and the plan
// picks among the buckets the cache knows by each run's sizes.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "build/cache.h"
#include "codegen/cuda/cuda_codegen.h"
#include "coil/graph.h"
#include "runtime/cuda/context.h"

namespace coil {

// One kernel's candidates, each emitted as a function of its own (<name>_c<i>).
struct TuningUnit {
  size_t kernel = 0;  // index into CudaSource::kernels
  std::vector<codegen::CudaKernel> candidates;
  std::vector<std::string> bodies;  // per candidate
  std::string key;                  // the tuning cache's key
  int winner = -1;     // from the tuning cache, or once measured
  // The library's call (cuBLASLt, for a product of a few rows) beat every candidate: the plan
  // runs the call, not the kernel (winner then 0, unused).
  bool library = false;
  std::vector<double> ms;  // per candidate once measured (infinity: it did not launch), then the library's
  std::string note;        // how the measurement fell short of the usual (device memory), if it did
  // A symbolic kernel's: the sizes it is timed at (every size symbol at its hint; empty for a
  // static kernel), their bucket, and the cache's winners of other buckets (bucket, candidate).
  std::map<std::string, int64_t> sizes;
  std::vector<int64_t> symbol_values;  // `sizes` in the graph's order
  std::vector<int64_t> bucket;
  std::vector<std::pair<std::vector<int64_t>, int>> others;
};
// "k0_y: 0.120 ms column block=32x8 vector=8 splits=33, 0.131 ms ..." (fastest first).
std::string tuning_report(const TuningUnit& unit);

// The kernels of `source` worth tuning (several candidates, at least 1 MiB of traffic at their
// sizes: static, or the hints of the graph's `symbols` where every one has a hint), with their
// winners where the tuning cache has them.
std::vector<TuningUnit> tuning_units(const loop::Program& program, const codegen::CudaSource& source,
                                     const std::vector<SymbolDecl>& symbols, const cuda::DeviceInfo& device,
                                     const build::ArtifactCache& cache);

// What a kernel's candidates are timed against where a library can run the same call: it runs
// the call once on the given buffer pointers (indexed by buffer id), on the null stream.
using LibraryRival = std::function<void(const std::vector<cuda::DevicePtr>& buffers)>;

// Times every candidate of `unit` (functions[c] is candidate c's CUfunction), and `rival` if
// given, on scratch buffers and returns the fastest candidate's index (unit.library where the
// rival was faster); records the choice in the tuning cache. Where the device has no memory for
// the buffers, returns the heuristic's candidate (0) unmeasured and uncached (unit.note says so).
int measure_candidates(TuningUnit& unit, const std::vector<void*>& functions, const loop::Program& program,
                       const cuda::Context& context, const build::ArtifactCache& cache, const LibraryRival& rival = {});

}  // namespace coil
