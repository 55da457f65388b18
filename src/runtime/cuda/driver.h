// The CUDA driver API, loaded with dlopen (libcuda.so.1) and resolved through cuGetProcAddress,
// so one coil build runs on machines with and without a GPU. Every failing call becomes a
// coil::Error naming the call, the error's name and its description. DeviceInfo holds the
// facts codegen and heuristics read (never literals): warp size, SM count, limits, L2, TMA.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace coil::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int warp_size = 0;
  int sm_count = 0;
  int max_threads_per_block = 0, max_threads_per_sm = 0;
  int registers_per_block = 0, registers_per_sm = 0;
  int64_t shared_per_block = 0, shared_per_block_optin = 0, shared_per_sm = 0;
  int64_t l2_bytes = 0;
  bool tma = false;  // cc >= 9.0 and the driver has cuTensorMapEncodeTiled

  // NVRTC's target: "sm_90a" on Hopper (its wgmma/TMA instructions), else "sm_<major><minor>".
  std::string arch() const;
  std::string str() const;  // one line, for logs and `coil` output
};

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
