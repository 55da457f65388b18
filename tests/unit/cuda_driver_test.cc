// The CUDA driver loader without a GPU: with no driver it says why (coil then runs on the CPU);
// against a fake libcuda built here, it resolves every entry point through cuGetProcAddress,
// reads DeviceInfo from device attributes, turns failing calls into named errors, and tells an
// allocation that finds the device full from other failures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "coil/error.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"

namespace coil::cuda {
namespace {

// A stand-in driver: one Hopper-like device (warp 32, 132 SMs) and real-looking error names.
const char* kFakeDriver = R"(
#include <cstring>
#include <cstdint>
extern "C" {
static int init(unsigned) { return 0; }
static int count(int* n) { *n = 1; return 0; }
static int get(int* d, int ordinal) { if (ordinal != 0) return 101; *d = 0; return 0; }
static int name(char* out, int len, int) { std::strncpy(out, "Fake H100", len); return 0; }
static int attribute(int* v, int which, int) {
  switch (which) {
    case 1: *v = 1024; return 0;     case 8: *v = 49152; return 0;   case 10: *v = 32; return 0;
    case 12: *v = 65536; return 0;   case 16: *v = 132; return 0;    case 38: *v = 52428800; return 0;
    case 39: *v = 2048; return 0;    case 75: *v = 9; return 0;      case 76: *v = 0; return 0;
    case 81: *v = 233472; return 0;  case 82: *v = 65536; return 0;  case 97: *v = 232448; return 0;
  }
  return 1;
}
static int error_name(int rc, const char** s) {
  *s = rc == 101 ? "CUDA_ERROR_INVALID_DEVICE" : rc == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_INVALID_VALUE";
  return 0;
}
static int error_string(int rc, const char** s) {
  *s = rc == 101 ? "invalid device ordinal" : rc == 2 ? "out of memory" : "invalid argument";
  return 0;
}
static int encode_tiled() { return 0; }
// Contexts and 100 MiB of device memory (addresses from 4096 up, never reused).
static int retain(void** c, int) { static int primary; *c = &primary; return 0; }
static int noop() { return 0; }
static uint64_t used = 0, next_address = 4096;
static int mem_alloc(uint64_t* p, size_t bytes) {
  if (bytes == 0) return 1;
  if (used + bytes > (uint64_t{100} << 20)) return 2;
  used += bytes;
  *p = next_address;
  next_address += bytes;
  return 0;
}
static int mem_free(uint64_t) { used = 0; return 0; }  // the tests free their one allocation
int cuGetProcAddress_v2(const char* symbol, void** fn, int, uint64_t, int* status) {
  struct { const char* name; void* fn; } table[] = {
    {"cuInit", (void*)init}, {"cuDeviceGetCount", (void*)count}, {"cuDeviceGet", (void*)get},
    {"cuDeviceGetName", (void*)name}, {"cuDeviceGetAttribute", (void*)attribute},
    {"cuGetErrorName", (void*)error_name}, {"cuGetErrorString", (void*)error_string},
    {"cuTensorMapEncodeTiled", (void*)encode_tiled}, {"cuDevicePrimaryCtxRetain", (void*)retain},
    {"cuMemAlloc", (void*)mem_alloc}, {"cuMemFree", (void*)mem_free}};
  static const char* quiet[] = {"cuDevicePrimaryCtxRelease", "cuCtxSetCurrent", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync", "cuMemsetD8Async", "cuStreamSynchronize", "cuModuleLoadData", "cuModuleUnload", "cuModuleGetFunction",
    "cuFuncSetAttribute", "cuLaunchKernel", "cuEventCreate", "cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime",
    "cuEventDestroy", "cuEventQuery", "cuMemAllocHost", "cuMemFreeHost", "cuStreamCreate", "cuStreamDestroy",
    "cuStreamBeginCapture", "cuStreamEndCapture", "cuStreamIsCapturing", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
    "cuGraphDestroy", "cuGraphExecDestroy"};
  for (const char* q : quiet) if (std::strcmp(q, symbol) == 0) { *fn = (void*)noop; if (status) *status = 0; return 0; }
  for (auto& e : table) if (std::strcmp(e.name, symbol) == 0) { *fn = e.fn; if (status) *status = 0; return 0; }
  *fn = nullptr;
  return 500;
}
}
)";

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("coil_fake_cuda_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "fake.cc") << kFakeDriver;
    std::string cmd = "g++ -shared -fPIC -o " + (dir_ / "libcuda.so.1").string() + " " + (dir_ / "fake.cc").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ::setenv("COIL_LIBCUDA", (dir_ / "libcuda.so.1").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("COIL_LIBCUDA");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(FakeDriver, ReadsDeviceFactsThroughGetProcAddress) {
  auto driver = Driver::load();
  ASSERT_EQ(driver->device_count(), 1);
  DeviceInfo info = driver->device_info(0);
  EXPECT_EQ(info.name, "Fake H100");
  EXPECT_EQ(info.warp_size, 32);
  EXPECT_EQ(info.sm_count, 132);
  EXPECT_EQ(info.shared_per_block_optin, 232448);
  EXPECT_EQ(info.l2_bytes, 52428800);
  EXPECT_TRUE(info.tma);
  EXPECT_EQ(info.arch(), "sm_90a");
  EXPECT_NE(info.str().find("132 SMs"), std::string::npos) << info.str();
  EXPECT_NE(driver->entry("cuDeviceGetName"), nullptr);
  EXPECT_EQ(driver->entry("cuNoSuchCall", false), nullptr);
  EXPECT_THROW(driver->entry("cuNoSuchCall"), Error);
}

TEST_F(FakeDriver, FailingCallsNameTheCallTheErrorAndItsMeaning) {
  auto driver = Driver::load();
  try {
    driver->device_info(3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE (invalid device ordinal)");
  }
}

// Device memory runs out: try_allocate (and DeviceScratch::try_take) give 0, allocate names the
// error; any other failing allocation is an error from both.
TEST_F(FakeDriver, OutOfMemoryIsZeroForTheTryingAllocations) {
  auto ctx = Context::open(0);
  const size_t mib60 = size_t{60} << 20;
  DevicePtr a = ctx->try_allocate(mib60);
  EXPECT_NE(a, 0u);
  EXPECT_EQ(ctx->try_allocate(mib60), 0u);
  {
    DeviceScratch scratch(*ctx);
    EXPECT_EQ(scratch.try_take(mib60), 0u);
  }
  try {
    ctx->allocate(mib60);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory) (62914560 bytes on Fake H100)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ctx->try_allocate(0), Error);  // invalid, not out of memory
  ctx->release(a);
  EXPECT_NE(ctx->try_allocate(mib60), 0u);
}

TEST(CudaDriver, WithoutADriverTheErrorSaysWhy) {
  ::setenv("COIL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  try {
    Driver::load();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver (/nonexistent/libcuda.so.1 does not load"), std::string::npos) << e.what();
  }
  ::unsetenv("COIL_LIBCUDA");
}

}  // namespace
}  // namespace coil::cuda
