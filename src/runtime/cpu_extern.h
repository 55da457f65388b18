// Extern calls on the CPU: matrix products through OpenBLAS (f32 and f64; f16 and bf16 widened
// to f32 (cpu_convert.h), summed in f32 and rounded once) and convolutions through oneDNN
// (cpu_onednn.h). Operands are strided views; BLAS takes them as they are when one of their
// strides is 1 (a transposed weight is free), otherwise they are packed first. Other dtypes
// (integer products, f64 convolutions) never get here: they are loop kernels
// (cpu_library_takes).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "loop/kernel.h"

namespace coil {

void run_extern_cpu(const loop::ExternCall& call, const loop::Program& program, const std::vector<void*>& buffers,
                    const std::map<std::string, int64_t>& symbols);

}  // namespace coil
