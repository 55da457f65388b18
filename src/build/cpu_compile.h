// C++ source -> shared library -> dlopen, through the artifact cache. The cache key covers
// everything the bytes of the library depend on: the source, the compiler's version line, the
// flags, and (when a flag says "native") the host's instruction set. A miss runs the system
// compiler without a shell; a failure raises coil::Error with the compiler's log and a kept
// copy of the source under `<cache>/failed/`.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "build/cache.h"
#include "build/compiler.h"

namespace coil::build {

// One dlopen handle (opened RTLD_NODELETE: the code stays mapped for the process, since OpenMP
// worker threads may still run in it); dlclose when the last owner lets go. Symbols taken from it are valid only
// while it lives, so whoever keeps a function pointer keeps the shared_ptr too.
class CompiledLibrary {
 public:
  // Throws coil::Error with dlerror()'s text if the library does not load.
  static std::shared_ptr<CompiledLibrary> open(const std::string& path);
  ~CompiledLibrary();
  CompiledLibrary(const CompiledLibrary&) = delete;
  CompiledLibrary& operator=(const CompiledLibrary&) = delete;

  // Throws coil::Error naming the symbol and the library if it is missing.
  void* symbol(const std::string& name) const;
  template <typename Fn>
  Fn function(const std::string& name) const {
    return reinterpret_cast<Fn>(symbol(name));
  }
  const std::string& path() const { return path_; }

 private:
  CompiledLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

// -O3 -march=native -fPIC -shared -fopenmp -std=c++17 -ffp-contract=off -fno-math-errno
std::vector<std::string> default_cpu_flags();
// Libraries linked after the source: -lmvec (vector libm) on x86-64 glibc >= 2.35.
std::vector<std::string> default_cpu_libraries();

struct CpuBuildOptions {
  ArtifactCache cache;
  Compiler compiler;
  std::string host_isa;  // host_isa_fingerprint(compiler); in the key when a flag is "native"
  std::vector<std::string> flags = default_cpu_flags();
  std::vector<std::string> libraries = default_cpu_libraries();
  bool compile = true;  // false: a miss is an error, no compiler runs (a package's prebuilt kernels)
  std::vector<std::string> all_flags() const;  // flags, then libraries: what the cache key covers

  // Detects the compiler and the host ISA once; keep the result and reuse it for every build.
  static CpuBuildOptions detect(ArtifactCache cache = ArtifactCache::from_environment());
  // For loading prebuilt kernels only (compile off): the compiler is known by its version line
  // and never run, so loading needs no compiler on the machine.
  static CpuBuildOptions prebuilt(ArtifactCache cache, std::string compiler_id);
};

// What one build did. compile_seconds is the compiler's own run (0 on a hit); total_seconds
// covers hashing, lookup, compiling, storing and loading.
struct BuildStats {
  bool cache_hit = false;
  double compile_seconds = 0;
  double total_seconds = 0;
  std::string key;
};

std::string cpu_build_key(const std::string& source, const CpuBuildOptions& options);

std::shared_ptr<CompiledLibrary> compile_cpu_library(const std::string& source, const CpuBuildOptions& options,
                                                     BuildStats* stats = nullptr);

// Builds many sources at once: misses compile in parallel (one worker per hardware thread),
// identical sources are built once, and results come back in the order of `sources`. If any
// build fails, no new builds start and the error of the earliest failed source is rethrown.
std::vector<std::shared_ptr<CompiledLibrary>> compile_cpu_libraries(const std::vector<std::string>& sources,
                                                                    const CpuBuildOptions& options,
                                                                    std::vector<BuildStats>* stats = nullptr);

}  // namespace coil::build
