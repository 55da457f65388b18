// CPU code generation: a loop-IR program becomes one C++ translation unit with one
// `extern "C" void <kernel>(void* const* buffers, const int64_t* symbols)` per loop kernel.
// Outer loops run under OpenMP when there is enough work; the prelude is the only include.
#pragma once
#include <string>
#include <vector>

#include "loop/kernel.h"

namespace coil::codegen {

struct CpuSource {
  std::string code;
  std::vector<std::string> kernels;  // entry points, in program order (extern calls excluded)
};

// `symbols` lists the size symbols in the order the runtime passes their values.
CpuSource generate_cpu(const loop::Program& program, const std::vector<std::string>& symbols);

}  // namespace coil::codegen
