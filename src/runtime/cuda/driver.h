// The CUDA driver API, loaded with dlopen (libcuda.so.1) and resolved through cuGetProcAddress,
// so one coil build runs on machines with and without a GPU. Every failing call becomes a
// coil::Error naming the call, the error's name and its description. DeviceInfo holds the
// facts codegen and heuristics read (never literals): warp size, SM count, limits, L2, TMA.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/cuda/device_info.h"

namespace coil::cuda {

class Driver {
 public:
  // Loads libcuda.so.1 ($COIL_LIBCUDA overrides) and runs cuInit. Throws coil::Error saying
  // why not (no driver installed, no device, init failure): callers fall back to the CPU.
  static std::shared_ptr<const Driver> load();
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  int device_count() const;
  DeviceInfo device_info(int ordinal) const;
  // Throws coil::Error "<call> failed: <NAME> (<description>)" unless rc is CUDA_SUCCESS.
  void check(int rc, const char* call) const;
  // A driver entry point by its base name (cuGetProcAddress picks the current version, e.g.
  // cuMemAlloc_v2); nullptr when absent and not `required`, else a coil::Error.
  void* entry(const char* name, bool required = true) const;

  struct Api;

 private:
  Driver() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

}  // namespace coil::cuda
