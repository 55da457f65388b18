// Extern calls on the CPU: matrix products through OpenBLAS (f32, f64), with a plain loop for
// the other dtypes. Operands are strided views; BLAS takes them as they are when one of their
// strides is 1 (a transposed weight is free), otherwise they are packed first.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "loop/kernel.h"

namespace coil {

void run_extern_cpu(const loop::ExternCall& call, const loop::Program& program, const std::vector<void*>& buffers,
                    const std::map<std::string, int64_t>& symbols);

}  // namespace coil
