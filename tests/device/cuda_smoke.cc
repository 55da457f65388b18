// The GPU check of the CUDA pieces built so far, run on the device machine by
// tests/device/run.sh (CI has no GPU): the driver loader and DeviceInfo against a real GPU,
// NVRTC compiling for the device's exact architecture through the cache, and the cubin
// loading and running (a kernel adds 1 to random values; every element is checked).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "build/nvrtc.h"
#include "coil/error.h"
#include "runtime/cuda/driver.h"

using coil::cuda::Driver;

namespace {

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  failures += ok ? 0 : 1;
}

template <typename Fn>
Fn resolve(const Driver& d, const char* name) {
  return reinterpret_cast<Fn>(d.entry(name));
}

const char* kKernel = R"(extern "C" __global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";

}  // namespace

int main() {
  try {
    auto driver = Driver::load();
    coil::cuda::DeviceInfo info = driver->device_info(0);
    std::printf("device: %s, arch %s\n", info.str().c_str(), info.arch().c_str());
    expect(info.warp_size == 32 && info.sm_count > 0 && info.max_threads_per_block >= 1024, "DeviceInfo reads the limits");
    expect(info.shared_per_block_optin >= info.shared_per_block && info.l2_bytes > 0, "DeviceInfo reads shared memory and L2");
    expect(info.cc_major < 9 || (info.tma && info.arch() == (info.cc_minor == 0 ? "sm_90a" : info.arch())), "TMA and arch on Hopper");

    auto cache_dir = std::filesystem::temp_directory_path() / "coil_device_smoke";
    std::filesystem::remove_all(cache_dir);
    auto options = coil::build::CudaBuildOptions::detect(coil::build::ArtifactCache(cache_dir.string()), info.arch());
    coil::build::BuildStats cold, warm;
    std::string cubin = coil::build::compile_cubin(kKernel, options, &cold);
    coil::build::compile_cubin(kKernel, options, &warm);
    std::printf("nvrtc %s: cold %.1f ms, cached %.2f ms\n", options.nvrtc->version().c_str(), cold.total_seconds * 1e3,
                warm.total_seconds * 1e3);
    expect(!cold.cache_hit && warm.cache_hit, "NVRTC cubin cached by content");

    using Ctx = void*;
    using Module = void*;
    using Function = void*;
    auto retain = resolve<int (*)(Ctx*, int)>(*driver, "cuDevicePrimaryCtxRetain");
    auto set_current = resolve<int (*)(Ctx)>(*driver, "cuCtxSetCurrent");
    auto load = resolve<int (*)(Module*, const void*)>(*driver, "cuModuleLoadData");
    auto get_function = resolve<int (*)(Function*, Module, const char*)>(*driver, "cuModuleGetFunction");
    auto alloc = resolve<int (*)(uint64_t*, size_t)>(*driver, "cuMemAlloc");
    auto free_mem = resolve<int (*)(uint64_t)>(*driver, "cuMemFree");
    auto to_device = resolve<int (*)(uint64_t, const void*, size_t)>(*driver, "cuMemcpyHtoD");
    auto to_host = resolve<int (*)(void*, uint64_t, size_t)>(*driver, "cuMemcpyDtoH");
    auto launch = resolve<int (*)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                                  void**)>(*driver, "cuLaunchKernel");
    auto synchronize = resolve<int (*)()>(*driver, "cuCtxSynchronize");

    Ctx ctx = nullptr;
    driver->check(retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    driver->check(set_current(ctx), "cuCtxSetCurrent");
    Module module = nullptr;
    driver->check(load(&module, cubin.data()), "cuModuleLoadData");
    Function fn = nullptr;
    driver->check(get_function(&fn, module, "add_one"), "cuModuleGetFunction");
    int n = 1 << 20;
    std::vector<float> host(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    for (auto& v : host) v = dist(rng);
    uint64_t dev = 0;
    driver->check(alloc(&dev, host.size() * sizeof(float)), "cuMemAlloc");
    driver->check(to_device(dev, host.data(), host.size() * sizeof(float)), "cuMemcpyHtoD");
    void* args[] = {&dev, &n};
    unsigned threads = static_cast<unsigned>(info.max_threads_per_block) / 4;
    driver->check(launch(fn, (static_cast<unsigned>(n) + threads - 1) / threads, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr),
                  "cuLaunchKernel");
    driver->check(synchronize(), "cuCtxSynchronize");
    driver->check(to_host(back.data(), dev, back.size() * sizeof(float)), "cuMemcpyDtoH");
    driver->check(free_mem(dev), "cuMemFree");
    size_t wrong = 0;
    for (size_t i = 0; i < host.size(); ++i) wrong += back[i] != host[i] + 1.0f;
    expect(wrong == 0, "the NVRTC cubin loads and runs: every element is x + 1");

    bool named = false;
    try {
      driver->device_info(driver->device_count());  // one past the last device
    } catch (const coil::Error& e) {
      named = std::string(e.what()).find("cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE") == 0;
      std::printf("error text: %s\n", e.what());
    }
    expect(named, "a failing driver call names the call and the error");
  } catch (const coil::Error& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
