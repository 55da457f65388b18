// Horizontal kernels: a run of small independent pointwise kernels of one plan (an optimizer
// step's per-parameter updates: a GPT-2 AdamW step has about a hundred kernels of a few thousand
// elements) launched as one kernel, whose blocks each run one member's block. Each member keeps
// its own grid-stride loop over its own block range; the runtime launches the sum of the
// members' grids.
#pragma once
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"

namespace coil::codegen {

// Whether a kernel in this configuration may be a member: the pointwise form, or a scatter of
// one thread a point (few positions in order: a KV cache's update), with static sizes, no
// scratch, no dynamic shared memory and one row of threads. A member that may fail writes its
// own status words (the group's, three a kernel on from its first member's).
bool horizontal_member(const loop::LoopKernel& kernel, const CudaKernel& info);

// The kernel running `members` (their bodies as emit_cuda_kernel printed them, each member's
// kernel description beside it; all with one block size): its source, and in `info` its
// parameters (the members' buffers, each once, then the status word) and launch (the sum of the
// members' grids, `grids`).
std::string emit_horizontal_kernel(const std::string& name, const std::vector<std::string>& bodies,
                                   const std::vector<CudaKernel>& members, const std::vector<int64_t>& grids,
                                   CudaKernel& info);

// A member's grid: its launch's blocks for static sizes.
int64_t static_grid(const CudaKernel& info);

}  // namespace coil::codegen
