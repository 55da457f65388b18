#include "runtime/cuda/driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "support/check.h"
#include "support/foreign_library.h"

namespace coil::cuda {

// Driver entry points, with the driver's types written out (CUresult and CUdevice are ints,
// handles are pointers) so that no CUDA header is needed to build coil.
struct Driver::Api {
  int (*get_proc_address)(const char*, void**, int, uint64_t, int*) = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*error_name)(int, const char**) = nullptr;
  int (*error_string)(int, const char**) = nullptr;
  int (*device_count)(int*) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*device_name)(char*, int, int) = nullptr;
  int (*device_attribute)(int*, int, int) = nullptr;
  void* tensor_map_encode_tiled = nullptr;  // present from CUDA 12 drivers on
};

namespace {

constexpr int kCudaVersion = 12000;  // the API version whose entry points coil asks for

// CU_DEVICE_ATTRIBUTE_* values from the driver API.
enum Attribute : int {
  kMaxThreadsPerBlock = 1, kMaxSharedPerBlock = 8, kWarpSize = 10, kMaxRegistersPerBlock = 12, kSmCount = 16,
  kL2CacheSize = 38, kMaxThreadsPerSm = 39, kCcMajor = 75, kCcMinor = 76, kMaxSharedPerSm = 81,
  kMaxRegistersPerSm = 82, kMaxSharedPerBlockOptin = 97,
};

}  // namespace

std::shared_ptr<const Driver> Driver::load() {
  const char* env = std::getenv("COIL_LIBCUDA");
  std::string path = env && *env ? env : "libcuda.so.1";
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail("no CUDA driver ({} does not load: {})", path, ::dlerror());
  std::shared_ptr<Driver> d(new Driver());
  d->handle_ = handle;
  d->api_ = std::make_unique<Api>();
  Api& a = *d->api_;
  a.get_proc_address = reinterpret_cast<decltype(a.get_proc_address)>(::dlsym(handle, "cuGetProcAddress_v2"));
  if (!a.get_proc_address) fail("the CUDA driver {} is too old: it has no cuGetProcAddress_v2 (CUDA 12 or later needed)", path);
  auto resolve = [&](const char* name, auto& fn, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(d->entry(name, required));
  };
  resolve("cuInit", a.init);
  resolve("cuGetErrorName", a.error_name);
  resolve("cuGetErrorString", a.error_string);
  resolve("cuDeviceGetCount", a.device_count);
  resolve("cuDeviceGet", a.device_get);
  resolve("cuDeviceGetName", a.device_name);
  resolve("cuDeviceGetAttribute", a.device_attribute);
  resolve("cuTensorMapEncodeTiled", a.tensor_map_encode_tiled, false);
  d->check(a.init(0), "cuInit");
  if (d->device_count() == 0) fail("the CUDA driver found no GPU");
  return d;
}

Driver::~Driver() {
  close_foreign_library(handle_);
}

void* Driver::entry(const char* name, bool required) const {
  void* p = nullptr;
  int status = 0;
  int rc = api_->get_proc_address(name, &p, kCudaVersion, 0, &status);
  if ((rc != 0 || !p) && required) fail("the CUDA driver has no {} (cuGetProcAddress returned {})", name, rc);
  return rc == 0 ? p : nullptr;
}

void Driver::check(int rc, const char* call) const {
  if (rc == 0) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_->error_name(rc, &name) != 0) name = nullptr;
  if (api_->error_string(rc, &text) != 0) text = nullptr;
  fail("{} failed: {} ({})", call, name ? name : fmt::format("CUresult {}", rc), text ? text : "no description");
}

int Driver::device_count() const {
  int n = 0;
  check(api_->device_count(&n), "cuDeviceGetCount");
  return n;
}

DeviceInfo Driver::device_info(int ordinal) const {
  const Api& a = *api_;
  int device = 0;
  check(a.device_get(&device, ordinal), "cuDeviceGet");
  auto attr = [&](int which) {
    int v = 0;
    check(a.device_attribute(&v, which, device), "cuDeviceGetAttribute");
    return v;
  };
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check(a.device_name(name, sizeof(name) - 1, device), "cuDeviceGetName");
  info.name = name;
  info.cc_major = attr(kCcMajor);
  info.cc_minor = attr(kCcMinor);
  info.warp_size = attr(kWarpSize);
  info.sm_count = attr(kSmCount);
  info.max_threads_per_block = attr(kMaxThreadsPerBlock);
  info.max_threads_per_sm = attr(kMaxThreadsPerSm);
  info.registers_per_block = attr(kMaxRegistersPerBlock);
  info.registers_per_sm = attr(kMaxRegistersPerSm);
  info.shared_per_block = attr(kMaxSharedPerBlock);
  info.shared_per_block_optin = attr(kMaxSharedPerBlockOptin);
  info.shared_per_sm = attr(kMaxSharedPerSm);
  info.l2_bytes = attr(kL2CacheSize);
  info.tma = info.cc_major >= 9 && a.tensor_map_encode_tiled != nullptr;
  return info;
}

}  // namespace coil::cuda
