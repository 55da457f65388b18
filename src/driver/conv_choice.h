// cuDNN or coil's own loop kernel for a convolution cuDNN can run. A convolution with a short
// reduction per output (few input channels times taps: a network's first layer over RGB) leaves
// cuDNN's tensor-core tiles mostly idle, where a direct loop kernel reads its input once and
// takes the normalization and activation after it into the same kernel. On the H200 the
// yardstick CNN's first layer (3 -> 32 channels, 3x3, bf16) measured 0.39 ms as a loop kernel
// against cuDNN's 0.13 (its input padded to 8 channels), so cuDNN keeps it; a tiny test
// convolution went the other way. The
// choice is measured, not guessed: cuDNN's plans for the problem as layout planning would give
// it (channels-last, too few input channels padded) against the loop kernel compiled and tuned
// on its own (NCHW operands of the same sizes, random values), the winner kept in the tuning
// cache under the problem, the device and the cuDNN version.
#pragma once
#include <memory>
#include <string>

#include "build/cache.h"
#include "coil/compile.h"
#include "loop/kernel.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn.h"

namespace coil {

// Reductions per output longer than this stay cuDNN's without a measurement (tensor cores win).
inline constexpr int64_t kLoopConvolutionMaxReduction = 32;

struct ConvPathChoice {
  bool loop = false;      // the loop kernel was faster
  bool measured = false;  // in this compile (else from the tuning cache)
  double cudnn_ms = 0, loop_ms = 0;
};

// Whether `call` (a convolution cuDNN takes) is worth measuring against a loop kernel: static
// sizes and at most kLoopConvolutionMaxReduction input channels per group times taps.
bool loop_convolution_candidate(const loop::ExternCall& call, const loop::Program& program);

// The problem's key: the same for the convolution in any operand layout (the choice must not
// change when layout planning moves its operands).
std::string conv_path_key(const loop::ExternCall& call, const loop::Program& program, bool tf32);

ConvPathChoice choose_conv_path(const loop::ExternCall& call, const loop::Program& program, const CompileOptions& options,
                                const cuda::Cudnn& cudnn, const std::shared_ptr<cuda::Context>& context,
                                const build::ArtifactCache& cache);

// "k0_convolution: a loop kernel, 0.031 ms against cuDNN's best plan 0.156 ms (measured)".
std::string conv_path_report(const std::string& name, const ConvPathChoice& c);

}  // namespace coil
