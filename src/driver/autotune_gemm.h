// Autotuning of matrix products. cuBLASLt's heuristic offers several algorithms for a product
// and its first is not always the fastest (on the H100, the GPT-2 block's bf16 [8192, 768] x
// [768, 3072] bias+gelu product: 0.069 ms with the first, 0.061 with the eighth). A product of
// static sizes and enough work has each offered algorithm timed on scratch operands, the
// algorithms taking turns round after round (a GPU's clocks drift over tens of milliseconds);
// the winner is kept in the on-disk tuning cache under the problem, its operands' alignments,
// the device and the cuBLASLt version, and the GPU plan asks cuBLASLt for it
// (CublasLt::gemm's `prefer`).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "build/cache.h"
#include "coil/graph.h"
#include "loop/kernel.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cublaslt.h"

namespace coil {

// One product's tuning.
struct GemmTuning {
  size_t kernel = 0;  // index into Program::kernels (an ExternCall)
  std::string name;   // the call's name
  std::string key;    // the tuning cache's key
  std::optional<cuda::GemmAlgo> winner;  // nullopt: the heuristic's first
  bool measured = false;                 // in this compile (else from the cache or a repeat)
  std::vector<double> ms;                // per offered algorithm, once measured (infinity: it failed)
  size_t kept = 0;                       // once measured: the index of the winner in `ms`
  std::string note;                      // why it was not measured, where the device had no memory
};

// The index of the algorithm to keep given each one's time: the fastest, unless it beats the
// heuristic's first (index 0) by less than `margin` (a fraction), which then stays.
size_t pick_algorithm(const std::vector<double>& ms, double margin);

// Tunes every matrix product of `program` that does at least 2^28 flops and for which cuBLASLt
// offers more than one algorithm, from the tuning cache where it has the product and by measuring
// where not. A product the graph repeats (a model's layers) is measured once. A graph of size
// `symbols` has its products tuned at the symbols' hints (none where a symbol has no hint): the
// winner holds for runs in the hints' size bucket (codegen::size_bucket), the heuristic's choice
// elsewhere.
std::vector<GemmTuning> tune_gemms(const loop::Program& program, const std::vector<SymbolDecl>& symbols, bool tf32,
                                   const cuda::CublasLt& cublas, const cuda::Context& context, const build::ArtifactCache& cache);

// "k3_addmm (cuBLASLt): 0.0610 ms #7, 0.0690 ms #0, ...; kept #7" (fastest first; #0 the
// heuristic's first).
std::string tuning_report(const GemmTuning& t);

}  // namespace coil
