// The facts about a GPU that code generation and launch heuristics read: warp size, SM count,
// limits, shared memory, L2 and TMA. Nothing in codegen or heuristics is a literal of these:
// they come from the driver (Driver::device_info) or, when compiling without a GPU, from a
// named preset of a real device.
#pragma once
#include <cstdint>
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
  // The GPU's identity for caches: name, compute capability and the limits above.
  std::string key() const;
};

// A real device's facts, for building without one: "sm_90a" (H100 SXM), "sm_80" (A100).
// Throws coil::Error for other architectures.
DeviceInfo preset_device(const std::string& arch);

}  // namespace coil::cuda
