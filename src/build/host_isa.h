// What `-march=native` means on this machine, as a short fingerprint for cache keys: a kernel
// built for one CPU must not be loaded from a shared cache on a CPU that lacks its instructions.
// Computed once by whoever builds (it is held in CpuBuildOptions), never in global state.
#pragma once
#include <string>

#include "build/compiler.h"

namespace coil::build {

// A hash of the ISA lines of the first processor in /proc/cpuinfo (vendor, family, model and
// feature flags on x86; implementer, part and features on Arm): well under a millisecond.
// Where /proc/cpuinfo says nothing useful, falls back to the macros `compiler -march=native`
// predefines (__AVX2__, ...), which cost one compiler start.
std::string host_isa_fingerprint(const Compiler& compiler);

}  // namespace coil::build
