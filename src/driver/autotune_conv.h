// Autotuning of cuDNN's convolutions. cuDNN's heuristic offers several execution plans for a
// convolution (engines and their knobs) and its first is not always the fastest; a convolution
// of static sizes and enough work has each offered plan timed on scratch operands, the plans
// taking turns round after round (tuning_timer.h), and the winner's index in the heuristic's
// list is kept in the on-disk tuning cache under the problem (dims, strides, alignments), the
// device and the cuDNN version (the list is the same for those), beside cuBLASLt's picks.
#pragma once
#include <string>
#include <vector>

#include "build/cache.h"
#include "loop/kernel.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn.h"

namespace coil {

// One convolution's tuning.
struct ConvTuning {
  size_t kernel = 0;      // index into Program::kernels (an ExternCall)
  std::string name;       // the call's name
  std::string key;        // the tuning cache's key
  size_t plan = 0;        // the plan to run (0: the heuristic's first)
  bool measured = false;  // in this compile (else from the cache or a repeat)
  std::vector<double> ms; // per offered plan, once measured (infinity: it failed or wanted too much workspace)
  std::string note;       // why it was not measured
};

// Convolution `call` as cuDNN runs it: without its bias (a pointwise kernel after the call adds
// it), writing a row-major temporary of its result's sizes in that case.
loop::ExternCall without_bias(const loop::ExternCall& call, const loop::Program& program);

// The cuDNN problem of convolution `call` of a static-size program, with the alignments its
// operands get on memory whose bases are 256-byte aligned (the allocator's).
cuda::ConvProblem static_conv_problem(const loop::ExternCall& call, const loop::Program& program, bool tf32);

// Tunes every convolution call of `program` (static sizes) that does at least 2^26 flops and for
// which cuDNN offers more than one plan: from the tuning cache where it has the problem, by
// measuring where not; a problem the graph repeats is measured once.
std::vector<ConvTuning> tune_convolutions(const loop::Program& program, bool tf32, const cuda::Cudnn& cudnn,
                                          const cuda::Context& context, const build::ArtifactCache& cache);

// "k3_convolution (cuDNN): 0.0610 ms #2, 0.0690 ms #0, ...; kept #2".
std::string tuning_report(const ConvTuning& t);

}  // namespace coil
