// Extern calls as loop kernels: a matrix product or convolution written as a reduction per
// output element (direct convolution, transposed convolution as a gather), for every dtype and
// layout. The CUDA target uses it for what its libraries do not take (integer matrix products,
// convolution), so every graph the CPU compiles also runs on the GPU.
#pragma once
#include <functional>

#include "loop/kernel.h"

namespace coil::schedule {

// Replaces the extern calls for which `convert` is true.
loop::Program externs_to_loops(const loop::Program& program, const std::function<bool(const loop::ExternCall&)>& convert);

}  // namespace coil::schedule
