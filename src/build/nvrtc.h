// CUDA C++ -> cubin through NVRTC, loaded with dlopen so one coil build runs with or without
// the CUDA toolkit. Cubins go to the same content-addressed cache as CPU libraries, keyed by
// (source, NVRTC version, architecture, flags); a failure raises coil::Error with NVRTC's log
// and the path of the kept source.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "build/cache.h"
#include "build/cpu_compile.h"

namespace coil::build {

// The NVRTC library: its entry points and version. Immutable once loaded; shared by threads.
class Nvrtc {
 public:
  // The first that loads of: $COIL_NVRTC, libnvrtc.so.13, libnvrtc.so,
  // /usr/local/cuda/lib64/libnvrtc.so. Throws coil::Error listing what was tried.
  static std::shared_ptr<const Nvrtc> load();
  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  const std::string& version() const { return version_; }  // "13.0"
  const std::string& path() const { return path_; }
  // Compiles one translation unit; returns the cubin, or throws with the log. `log` receives
  // NVRTC's log either way (warnings on success).
  std::string compile(const std::string& source, const std::vector<std::string>& options, std::string& log) const;

  struct Api;

 private:
  Nvrtc() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string version_, path_;
};

struct CudaBuildOptions {
  ArtifactCache cache;
  std::shared_ptr<const Nvrtc> nvrtc;  // null when loading prebuilt cubins only
  std::string nvrtc_version;           // part of every key: nvrtc->version(), or a package's record
  std::string arch = "sm_90a";  // the exact target: sm_90a for Hopper's wgmma and TMA
  std::vector<std::string> flags = {"-std=c++17", "-default-device"};
  bool compile = true;  // false: a miss is an error, NVRTC does not run (a package's prebuilt kernels)
  std::vector<std::string> all_flags() const;  // --gpu-architecture, then flags

  static CudaBuildOptions detect(ArtifactCache cache, std::string arch);
  // For loading prebuilt cubins only (compile off): NVRTC is known by its version, not loaded.
  static CudaBuildOptions prebuilt(ArtifactCache cache, std::string arch, std::string nvrtc_version);
};

std::string cubin_key(const std::string& source, const CudaBuildOptions& options);

// The cubin for `source`, from the cache or compiled.
std::string compile_cubin(const std::string& source, const CudaBuildOptions& options, BuildStats* stats = nullptr);
// Many sources at once, in parallel; results in order; the earliest failure is rethrown.
std::vector<std::string> compile_cubins(const std::vector<std::string>& sources, const CudaBuildOptions& options,
                                        std::vector<BuildStats>* stats = nullptr);

}  // namespace coil::build
