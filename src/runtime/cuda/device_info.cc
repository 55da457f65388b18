#include "runtime/cuda/device_info.h"

#include <fmt/format.h>

#include "support/check.h"

namespace coil::cuda {

std::string DeviceInfo::arch() const {
  if (cc_major == 9 && cc_minor == 0) return "sm_90a";
  return fmt::format("sm_{}{}", cc_major, cc_minor);
}

std::string DeviceInfo::str() const {
  return fmt::format("{} (cc {}.{}, {} SMs, warp {}, {} KiB shared/block opt-in, {} MiB L2{})", name, cc_major, cc_minor,
                     sm_count, warp_size, shared_per_block_optin / 1024, l2_bytes / (1024 * 1024), tma ? ", TMA" : "");
}

std::string DeviceInfo::key() const {
  return fmt::format("{}|{}.{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", name, cc_major, cc_minor, warp_size, sm_count, max_threads_per_block,
                     max_threads_per_sm, registers_per_block, registers_per_sm, shared_per_block, shared_per_block_optin,
                     shared_per_sm, l2_bytes);
}

DeviceInfo preset_device(const std::string& arch) {
  DeviceInfo d;
  d.warp_size = 32;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.registers_per_block = 65536;
  d.registers_per_sm = 65536;
  d.shared_per_block = 48 * 1024;
  if (arch == "sm_90a" || arch == "sm_90") {
    d.name = "NVIDIA H100 80GB HBM3 (preset)";
    d.cc_major = 9;
    d.sm_count = 132;
    d.shared_per_block_optin = 227 * 1024;
    d.shared_per_sm = 228 * 1024;
    d.l2_bytes = 50 * 1024 * 1024;
    d.tma = true;
  } else if (arch == "sm_80") {
    d.name = "NVIDIA A100-SXM4-80GB (preset)";
    d.cc_major = 8;
    d.sm_count = 108;
    d.shared_per_block_optin = 163 * 1024;
    d.shared_per_sm = 164 * 1024;
    d.l2_bytes = 40 * 1024 * 1024;
  } else {
    fail("no device preset for architecture '{}' (known: sm_80, sm_90a)", arch);
  }
  return d;
}

}  // namespace coil::cuda
