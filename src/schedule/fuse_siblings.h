// Horizontal fusion: loop kernels over the same loop nest that read a common buffer and do not
// depend on each other become one kernel, so the shared input is read once per point instead
// of once per kernel (q/k/v projections' epilogues, mean and max of one tensor, a value and its
// transpose-free siblings); small pointwise kernels of a nest merge without a common input too,
// saving launches (an optimizer step's updates of same-shaped parameters). A later kernel moves
// up to an earlier sibling only past kernels it does not depend on and that do not touch what it
// writes; a merged kernel touches at most 96 buffers. `one_pass_statistics` (the CUDA target):
// a sum beside a Welford mean of the same values becomes that mean times the row's length, so
// that the kernel's steps form one pass, which a GPU may split between blocks.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program fuse_siblings(const loop::Program& program, bool one_pass_statistics);

}  // namespace coil::schedule
