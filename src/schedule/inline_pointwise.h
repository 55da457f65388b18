// Vertical fusion of pointwise kernels the lowering could not fuse (they were split by an
// extern call that was rewritten later, such as a convolution's output kernel and the relu
// after it): a pointwise kernel storing one temporary that a single later pointwise kernel over
// the same nest reads at the same index is substituted into that reader, and the temporary's
// round trip through memory goes. A graph output read by one such kernel moves into it the same
// way, its store kept as the reader's first (a dropout mask computed where it is applied, and
// stored for the backward: GPT-2's forward had a kernel of its own for the masks of each layer).
// The reader's stores may not alias the output (the same buffer).

#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program inline_pointwise(const loop::Program& program);

}  // namespace coil::schedule
