// Extern calls on the CPU: matrix products through oneDNN (f32, f16 and bf16, the bias of an
// addmm added in its kernel; on the 2-core AVX-512 host it ran ConvNeXt-T's Linear shapes at
// 157-222 GFLOP/s against OpenBLAS's 116-198) and OpenBLAS where oneDNN has only a reference
// loop or for f64 (f16 and bf16 widened to f32 (cpu_convert.h), summed in f32 and rounded once),
// and convolutions through oneDNN (cpu_onednn.h). Operands are strided views; BLAS takes them as they are when one of their
// strides is 1 (a transposed weight is free), otherwise they are packed first. Other dtypes
// (integer products, f64 convolutions) never get here: they are loop kernels
// (cpu_library_takes).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "loop/kernel.h"
#include "runtime/cpu_onednn.h"

namespace coil {

void run_extern_cpu(const loop::ExternCall& call, const loop::Program& program, const std::vector<void*>& buffers,
                    const std::map<std::string, int64_t>& symbols, const onednn::Site& site = {});

}  // namespace coil
