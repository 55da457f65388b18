// Helpers of the tests that run on a GPU (they skip without a driver): device tensors made
// from host ones and read back, a fresh tuning cache, comparisons at each dtype's tolerance.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "coil/tensor.h"
#include "runtime/cuda/context.h"
#include "support/check.h"

namespace coil {

inline bool have_gpu() {
  try {
    cuda::Context::open(0);
    return true;
  } catch (const Error&) {
    return false;
  }
}

inline std::string fresh_cache(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("coil_cuda_gpu_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  Tensor a = got.contiguous_copy(), b = want.contiguous_copy();
  double tol = got.dtype() == DType::f32 ? 1e-4 : got.dtype() == DType::f64 ? 1e-10 : 2e-2;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.load(i), y = b.load(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    ASSERT_LE(std::fabs(x - y), tol * (1 + std::fabs(y))) << what << " element " << i << ": " << x << " vs " << y;
  }
}

// Device tensors: a host tensor's copy on the GPU, as a borrowed device tensor.
struct OnDevice {
  const cuda::Context& ctx;
  std::vector<cuda::DevicePtr> owned;
  Tensor put(const Tensor& host) {
    Tensor c = host.contiguous_copy();
    size_t bytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
    owned.push_back(ctx.allocate(std::max<size_t>(bytes, 16)));
    ctx.copy_to_device(owned.back(), c.data(), bytes, nullptr);
    return Tensor::borrow(reinterpret_cast<void*>(owned.back()), c.dtype(), c.sizes(), c.strides(), 0, Device{Device::Kind::cuda, 0});
  }
  Tensor get(const Tensor& dev) {
    Tensor h = Tensor::empty_strided(dev.dtype(), dev.sizes(), dev.strides());
    size_t span = dev.numel() ? static_cast<size_t>(span_of(dev.sizes(), dev.strides(), 0)) : 0;
    ctx.copy_to_host(h.data(), reinterpret_cast<cuda::DevicePtr>(dev.data()), span * dtype_size(dev.dtype()), nullptr);
    ctx.synchronize(nullptr);
    return h;
  }
  ~OnDevice() {
    for (auto p : owned) ctx.release(p);
  }
};

}  // namespace coil
