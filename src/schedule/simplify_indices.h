// Index simplification with each kernel's loop bounds: view index maps compose into floor
// divisions and modulos (a reshape of a permute, say) that SymInt's constructors cannot remove
// without ranges; with x_i in [0, outer_i) and r_i in [0, inner_i) the range-aware simplifier
// (arith/simplify.h) turns most back into plain affine indices, which the C++ compiler
// vectorizes and the CUDA code computes without divisions.
#pragma once
#include "arith/bounds.h"
#include "loop/kernel.h"

namespace coil::schedule {

// The ranges of a loop kernel's variables (x*, r*): [0, extent - 1], or [0, +inf) when symbolic.
RangeEnv kernel_ranges(const loop::LoopKernel& kernel);

loop::Program simplify_indices(const loop::Program& program);

}  // namespace coil::schedule
