// Horizontal fusion: loop kernels over the same loop nest that read a common buffer and do not
// depend on each other become one kernel, so the shared input is read once per point instead
// of once per kernel (q/k/v projections' epilogues, mean and max of one tensor, a value and its
// transpose-free siblings); small pointwise kernels of a nest (at most `independent_points`
// points) merge without a common input too, saving launches (an optimizer step's updates of
// same-shaped parameters: kGpuIndependentPoints on a GPU; the CPU pays no launch, and its
// merged kernels of many layers' streams ran slower than their parts). A later kernel moves
// up to an earlier sibling only past kernels it does not depend on and that do not touch what it
// writes; a merged kernel touches at most 96 buffers. `one_pass_statistics` (the CUDA target):
// a sum beside a Welford mean of the same values becomes that mean times the row's length, so
// that the kernel's steps form one pass, which a GPU may split between blocks.
#pragma once
#include <cstdint>

#include "loop/kernel.h"

namespace coil::schedule {

inline constexpr int64_t kGpuIndependentPoints = int64_t{1} << 20;
// On the CPU: ViT-S's AdamW step (22M parameters, twelve layers' [1152, 384] updates merged into
// one kernel of 84 streams) took 306 ms on 2 cores of the CI's machine, 197 ms merged only up to
// this size.
inline constexpr int64_t kCpuIndependentPoints = int64_t{1} << 16;

loop::Program fuse_siblings(const loop::Program& program, bool one_pass_statistics, int64_t independent_points);

}  // namespace coil::schedule
