// CPU code generation: a loop-IR program becomes one C++ translation unit with one
// `extern "C" void <kernel>(void* const* buffers, const int64_t* symbols)` per loop kernel.
// Outer loops run under OpenMP when there is enough work; the prelude is the only include.
#pragma once
#include <string>
#include <vector>

#include "loop/kernel.h"

namespace coil::codegen {

struct CpuSource {
  std::string prelude;               // what every translation unit starts with
  std::vector<std::string> kernels;  // entry points, in program order (extern calls excluded)
  std::vector<std::string> bodies;   // each kernel's definition

  // One translation unit holding the given kernels (indices into `kernels`), or all of them.
  std::string unit(const std::vector<size_t>& which) const;
  std::string code() const;
};

// Splits the kernels into at most `parts` translation units of about equal source size, to be
// compiled in parallel. Deterministic (so cache keys repeat); every unit is non-empty.
std::vector<std::vector<size_t>> partition_kernels(const CpuSource& source, size_t parts);
// The same over any kernel bodies (the CUDA backend's too).
std::vector<std::vector<size_t>> partition_bodies(const std::vector<std::string>& bodies, size_t parts);

// `symbols` lists the size symbols in the order the runtime passes their values.
CpuSource generate_cpu(const loop::Program& program, const std::vector<std::string>& symbols);

}  // namespace coil::codegen
