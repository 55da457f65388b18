// Which system C++ compiler builds CPU kernels. Detected once and held by the caller: the
// `id` is part of every cache key, so a compiler upgrade never reuses stale objects.
#pragma once
#include <string>

namespace coil::build {

struct Compiler {
  std::string path;  // what is executed: absolute when found in $PATH
  std::string id;    // first line of `path --version`, e.g. "g++ (Debian 12.2.0-14) 12.2.0"
};

// The first that runs of: $COIL_CXX, $CXX, g++, clang++ (unset or empty variables are skipped).
// A variable holds one program, not a command line ("ccache g++" is not split). Throws
// coil::Error listing every candidate tried and why each failed.
Compiler detect_compiler();

// Probes one candidate; throws coil::Error saying why it does not run.
Compiler probe_compiler(const std::string& program);

}  // namespace coil::build
