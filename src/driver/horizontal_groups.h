// Which steps of a GPU plan run as horizontal kernels (codegen/cuda/horizontal.h): runs of
// consecutive small pointwise kernels, independent of each other, that would each be launched
// for a few microseconds of work.
#pragma once
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "runtime/memory_plan.h"

namespace coil {

// Kernels reading and writing less than this together are small enough to group (of a buffer a
// scatter stores into, the elements it stores count).
inline constexpr int64_t kHorizontalMemberBytes = int64_t{1} << 20;
inline constexpr size_t kHorizontalMembers = 64;   // members a group, at most
inline constexpr size_t kHorizontalBuffers = 384;  // parameters a group's kernel, at most

// `plain`: per program kernel, its description where it is an untuned loop kernel, else null.
// Each group: two or more consecutive program kernels, of one block size, none reading or writing
// what another writes, none taking over in place a buffer another member reads. Whether graph
// outputs computed over inputs keep them independent is decided when those are known
// (GpuPlan::enable_horizontals).
std::vector<std::vector<size_t>> horizontal_groups(const loop::Program& program, const std::vector<const codegen::CudaKernel*>& plain,
                                                   const MemoryPlan& memory);

}  // namespace coil
