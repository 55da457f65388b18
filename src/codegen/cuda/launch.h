// Launch heuristics for CUDA kernels, in the spirit of Inductor's pointwise / reduction /
// persistent-reduction heuristics, with every device number read from DeviceInfo: a kernel's
// form follows from its structure, its block size from its element count, threads per row from
// the row length, and the grid covers a few waves of the SMs. candidate_configs gives up to 8
// configurations, the heuristic's choice first; the autotuner measures them.
#pragma once
#include <optional>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"

namespace coil::codegen {

inline constexpr size_t kMaxCandidates = 8;

std::vector<CudaConfig> candidate_configs(const loop::Program& program, const loop::LoopKernel& kernel,
                                          const cuda::DeviceInfo& device);
CudaLaunch launch_for(const loop::LoopKernel& kernel, const CudaConfig& config, const cuda::DeviceInfo& device);

// Structure the heuristics and the emitter share.
// The constant stride of `var` in `offset` when `offset` is affine in it, else nullopt.
std::optional<int64_t> affine_stride(const SymInt& offset, const std::string& var);
// Whether `offset` is a multiple of `n` for every value of its variables.
bool multiple_of(const SymInt& offset, int64_t n);
// The widest vector (elements per access, a power of two, 16 bytes at most) a pointwise kernel
// can use along its last outer dim: every load and store of unit stride there starts aligned.
int vector_width(const loop::Program& program, const loop::LoopKernel& kernel);
// A reduction whose loads are contiguous across outputs and strided along the row.
bool is_column_reduction(const loop::LoopKernel& kernel);
// A pointwise kernel with an access of unit stride along the second-to-last outer dim but not
// the last (a transpose).
bool is_transposing(const loop::LoopKernel& kernel);
// The loads of `e` (each distinct one once, in first-use order).
void collect_loads(const loop::ExprRef& e, std::vector<loop::ExprRef>& out);

}  // namespace coil::codegen
