// Launch heuristics for CUDA kernels, in the spirit of Inductor's pointwise / reduction /
// persistent-reduction heuristics, with every device number read from DeviceInfo: a kernel's
// form follows from its structure, its block size from its element count, threads per row from
// the row length, and the grid covers a few waves of the SMs. candidate_configs gives up to 8
// configurations, the heuristic's choice first; the autotuner measures them.
#pragma once
#include <optional>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/kernel_shape.h"

namespace coil::codegen {

inline constexpr size_t kMaxCandidates = 8;

std::vector<CudaConfig> candidate_configs(const loop::Program& program, const loop::LoopKernel& kernel,
                                          const cuda::DeviceInfo& device);
CudaLaunch launch_for(const loop::LoopKernel& kernel, const CudaConfig& config, const cuda::DeviceInfo& device);

// The widest vector (elements per access, a power of two, 16 bytes at most) a pointwise kernel
// can use along its last outer dim: every load and store of unit stride there starts aligned.
int vector_width(const loop::Program& program, const loop::LoopKernel& kernel);

}  // namespace coil::codegen
