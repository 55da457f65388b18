// Vertical fusion of pointwise kernels the lowering could not fuse (they were split by an
// extern call that was rewritten later, such as a convolution's output kernel and the relu
// after it): a pointwise kernel storing one temporary that a single later pointwise kernel over
// the same nest reads at the same index is substituted into that reader, and the temporary's
// round trip through memory goes.
#pragma once
#include "loop/kernel.h"

namespace coil::schedule {

loop::Program inline_pointwise(const loop::Program& program);

}  // namespace coil::schedule
