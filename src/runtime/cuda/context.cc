#include "runtime/cuda/context.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>

#include <fmt/format.h>

#include <functional>
#include <string>

#include "support/check.h"

namespace coil::cuda {

namespace {
constexpr int kNotReady = 600;       // CUDA_ERROR_NOT_READY
constexpr unsigned kDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
constexpr unsigned kNonBlocking = 1;    // CU_STREAM_NON_BLOCKING
constexpr int kCaptureRelaxed = 2;      // CU_STREAM_CAPTURE_MODE_RELAXED
constexpr int kCaptureNone = 0;         // CU_STREAM_CAPTURE_STATUS_NONE

// cuLaunchKernelEx's CUlaunchConfig and CUlaunchAttribute, written out from CUDA 13's cuda.h (the
// attribute's value is a union padded to 64 bytes, after an int id padded to 8).
constexpr int kClusterDimension = 4;                 // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
constexpr int kProgrammaticStreamSerialization = 6;  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster_dim;
    int programmatic_stream_serialization_allowed;
  } value = {};
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  Stream stream;
  LaunchAttribute* attributes;
  unsigned attribute_count;
};
static_assert(sizeof(LaunchAttribute) == 72 && offsetof(LaunchAttribute, value) == 8);
static_assert(sizeof(LaunchConfig) == 56 && offsetof(LaunchConfig, stream) == 32 && offsetof(LaunchConfig, attributes) == 40 &&
              offsetof(LaunchConfig, attribute_count) == 48);
}  // namespace

// Driver entry points the runtime uses, resolved once through cuGetProcAddress.
struct Context::Api {
  int (*primary_retain)(void**, int) = nullptr;
  int (*primary_release)(int) = nullptr;
  int (*set_current)(void*) = nullptr;
  int (*mem_alloc)(DevicePtr*, size_t) = nullptr;
  int (*mem_free)(DevicePtr) = nullptr;
  int (*htod)(DevicePtr, const void*, size_t, Stream) = nullptr;
  int (*dtoh)(void*, DevicePtr, size_t, Stream) = nullptr;
  int (*dtod)(DevicePtr, DevicePtr, size_t, Stream) = nullptr;
  int (*memset8)(DevicePtr, unsigned char, size_t, Stream) = nullptr;
  int (*stream_sync)(Stream) = nullptr;
  int (*module_load)(void**, const void*) = nullptr;
  int (*module_unload)(void*) = nullptr;
  int (*module_function)(void**, void*, const char*) = nullptr;
  int (*func_set_attribute)(void*, int, int) = nullptr;
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Stream, void**, void**) = nullptr;
  int (*launch_ex)(const LaunchConfig*, void*, void**, void**) = nullptr;  // CUDA 12 drivers on
  bool programmatic = false;  // overlapped launches allowed
  int (*event_create)(void**, unsigned) = nullptr;
  int (*event_record)(void*, Stream) = nullptr;
  int (*event_sync)(void*) = nullptr;
  int (*event_elapsed)(float*, void*, void*) = nullptr;
  int (*event_destroy)(void*) = nullptr;
  int (*event_query)(void*) = nullptr;
  int (*host_alloc)(void**, size_t) = nullptr;
  int (*host_free)(void*) = nullptr;
  int (*stream_create)(Stream*, unsigned) = nullptr;
  int (*stream_destroy)(Stream) = nullptr;
  int (*begin_capture)(Stream, int) = nullptr;
  int (*end_capture)(Stream, void**) = nullptr;
  int (*is_capturing)(Stream, int*) = nullptr;
  int (*graph_instantiate)(void**, void*, unsigned long long) = nullptr;
  int (*graph_launch)(void*, Stream) = nullptr;
  int (*graph_destroy)(void*) = nullptr;
  int (*graph_exec_destroy)(void*) = nullptr;
};

class Context::Module {
 public:
  Module(std::shared_ptr<const Context> owner, void* handle) : owner_(std::move(owner)), handle_(handle) {}
  ~Module() {
    owner_->make_current();
    owner_->api_->module_unload(handle_);  // nothing to do about a failure while unloading
  }
  void* handle() const { return handle_; }

 private:
  std::shared_ptr<const Context> owner_;
  void* handle_;
};

std::shared_ptr<Context> Context::open(int ordinal) {
  std::shared_ptr<Context> c(new Context());
  c->driver_ = Driver::load();
  if (ordinal < 0 || ordinal >= c->driver_->device_count())
    fail("there is no CUDA device {} ({} found)", ordinal, c->driver_->device_count());
  c->info_ = c->driver_->device_info(ordinal);
  c->api_ = std::make_unique<Api>();
  Api& a = *c->api_;
  auto resolve = [&](const char* name, auto& fn) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(c->driver_->entry(name)); };
  resolve("cuDevicePrimaryCtxRetain", a.primary_retain);
  resolve("cuDevicePrimaryCtxRelease", a.primary_release);
  resolve("cuCtxSetCurrent", a.set_current);
  resolve("cuMemAlloc", a.mem_alloc);
  resolve("cuMemFree", a.mem_free);
  resolve("cuMemcpyHtoDAsync", a.htod);
  resolve("cuMemcpyDtoHAsync", a.dtoh);
  resolve("cuMemcpyDtoDAsync", a.dtod);
  resolve("cuMemsetD8Async", a.memset8);
  resolve("cuStreamSynchronize", a.stream_sync);
  resolve("cuModuleLoadData", a.module_load);
  resolve("cuModuleUnload", a.module_unload);
  resolve("cuModuleGetFunction", a.module_function);
  resolve("cuFuncSetAttribute", a.func_set_attribute);
  resolve("cuLaunchKernel", a.launch);
  // cuLaunchKernelEx launches thread-block clusters, and overlapped launches. Those need a driver
  // of CUDA 12.3 on (graphs keep programmatic edges from 12.3); COIL_LAUNCH_OVERLAP=0 turns them
  // off (a measurement's baseline, or a way round a driver that mishandles them), not clusters.
  a.launch_ex = reinterpret_cast<decltype(a.launch_ex)>(c->driver_->entry("cuLaunchKernelEx", false));
  auto driver_version = reinterpret_cast<int (*)(int*)>(c->driver_->entry("cuDriverGetVersion", false));
  int version = 0;
  if (driver_version && driver_version(&version) != 0) version = 0;
  const char* overlap = std::getenv("COIL_LAUNCH_OVERLAP");
  a.programmatic = a.launch_ex && version >= 12030 && (!overlap || std::string(overlap) != "0");
  resolve("cuEventCreate", a.event_create);
  resolve("cuEventRecord", a.event_record);
  resolve("cuEventSynchronize", a.event_sync);
  resolve("cuEventElapsedTime", a.event_elapsed);
  resolve("cuEventDestroy", a.event_destroy);
  resolve("cuEventQuery", a.event_query);
  resolve("cuMemAllocHost", a.host_alloc);
  resolve("cuMemFreeHost", a.host_free);
  resolve("cuStreamCreate", a.stream_create);
  resolve("cuStreamDestroy", a.stream_destroy);
  resolve("cuStreamBeginCapture", a.begin_capture);
  resolve("cuStreamEndCapture", a.end_capture);
  resolve("cuStreamIsCapturing", a.is_capturing);
  resolve("cuGraphInstantiateWithFlags", a.graph_instantiate);
  resolve("cuGraphLaunch", a.graph_launch);
  resolve("cuGraphDestroy", a.graph_destroy);
  resolve("cuGraphExecDestroy", a.graph_exec_destroy);
  c->device_ = ordinal;
  c->driver_->check(a.primary_retain(&c->context_, ordinal), "cuDevicePrimaryCtxRetain");
  c->make_current();
  return c;
}

Context::~Context() {
  if (context_) api_->primary_release(device_);
}

void Context::make_current() const { driver_->check(api_->set_current(context_), "cuCtxSetCurrent"); }

namespace {
constexpr int kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
}  // namespace

// cuMemAlloc of `bytes`; where it fails, an error naming the size and device unless the device
// is out of memory and `zero_when_full` (then 0).
DevicePtr Context::mem_alloc(size_t bytes, bool zero_when_full) const {
  make_current();
  DevicePtr p = 0;
  int rc = api_->mem_alloc(&p, bytes);
  if (rc == 0 || (rc == kOutOfMemory && zero_when_full)) return rc == 0 ? p : 0;
  try {
    driver_->check(rc, "cuMemAlloc");
  } catch (const Error& e) {
    fail("{} ({} bytes on {})", e.what(), bytes, info_.name);
  }
  return 0;
}

DevicePtr Context::allocate(size_t bytes) const { return mem_alloc(bytes, false); }

DevicePtr Context::try_allocate(size_t bytes) const { return mem_alloc(bytes, true); }

void Context::release(DevicePtr p) const {
  make_current();
  driver_->check(api_->mem_free(p), "cuMemFree");
}

void Context::copy_to_device(DevicePtr dst, const void* src, size_t bytes, Stream s) const {
  if (bytes == 0) return;
  make_current();
  driver_->check(api_->htod(dst, src, bytes, s), "cuMemcpyHtoDAsync");
}

void Context::copy_to_host(void* dst, DevicePtr src, size_t bytes, Stream s) const {
  if (bytes == 0) return;
  make_current();
  driver_->check(api_->dtoh(dst, src, bytes, s), "cuMemcpyDtoHAsync");
}

void Context::copy_on_device(DevicePtr dst, DevicePtr src, size_t bytes, Stream s) const {
  if (bytes == 0) return;
  make_current();
  driver_->check(api_->dtod(dst, src, bytes, s), "cuMemcpyDtoDAsync");
}

void Context::fill_zero(DevicePtr dst, size_t bytes, Stream s) const { fill_bytes(dst, 0, bytes, s); }

void Context::fill_bytes(DevicePtr dst, unsigned char value, size_t bytes, Stream s) const {
  if (bytes == 0) return;
  make_current();
  driver_->check(api_->memset8(dst, value, bytes, s), "cuMemsetD8Async");
}

void Context::synchronize(Stream s) const {
  make_current();
  driver_->check(api_->stream_sync(s), "cuStreamSynchronize");
}

std::shared_ptr<Context::Module> Context::load_module(const std::string& cubin) const {
  make_current();
  void* handle = nullptr;
  driver_->check(api_->module_load(&handle, cubin.data()), "cuModuleLoadData");
  // A module keeps its context alive; the Context outlives every user through shared_ptr.
  return std::make_shared<Module>(shared_from_this(), handle);
}

void* Context::function(const Module& m, const std::string& name) const {
  void* f = nullptr;
  driver_->check(api_->module_function(&f, m.handle(), name.c_str()), ("cuModuleGetFunction(" + name + ")").c_str());
  return f;
}

void Context::allow_shared(void* function, int bytes) const {
  constexpr int kMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  driver_->check(api_->func_set_attribute(function, kMaxDynamicSharedSizeBytes, bytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
}

void Context::allow_cluster(void* function, int blocks) const {
  constexpr int kNonPortableClusterSizeAllowed = 14;  // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
  if (blocks > 8)
    driver_->check(api_->func_set_attribute(function, kNonPortableClusterSizeAllowed, 1), "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
}

bool Context::overlaps() const { return info_.cc_major >= 9 && api_->programmatic; }

void Context::launch(void* function, Dim3 grid, Dim3 block, unsigned shared_bytes, Stream s, void** params, bool overlap, unsigned cluster) const {
  const bool programmatic = overlap && overlaps();
  if (programmatic || cluster > 0) {
    COIL_CHECK(api_->launch_ex) << "a thread-block cluster launch needs cuLaunchKernelEx (a CUDA 12 driver)";
    LaunchAttribute attributes[2];
    unsigned count = 0;
    if (programmatic) {
      attributes[count].id = kProgrammaticStreamSerialization;
      attributes[count++].value.programmatic_stream_serialization_allowed = 1;
    }
    if (cluster > 0) {
      attributes[count].id = kClusterDimension;
      attributes[count++].value.cluster_dim = {cluster, 1, 1};
    }
    const LaunchConfig config{grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, s, attributes, count};
    driver_->check(api_->launch_ex(&config, function, params, nullptr), "cuLaunchKernelEx");
    return;
  }
  driver_->check(api_->launch(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, s, params, nullptr),
                 "cuLaunchKernel");
}

void* Context::allocate_host(size_t bytes) const {
  make_current();
  void* p = nullptr;
  driver_->check(api_->host_alloc(&p, std::max<size_t>(bytes, 1)), "cuMemAllocHost");
  return p;
}

void Context::release_host(void* p) const {
  make_current();
  api_->host_free(p);  // nothing to do about a failure while freeing
}

void* Context::create_event() const {
  make_current();
  void* e = nullptr;
  driver_->check(api_->event_create(&e, kDisableTiming), "cuEventCreate");
  return e;
}

void Context::record(void* event, Stream s) const {
  make_current();
  driver_->check(api_->event_record(event, s), "cuEventRecord");
}

bool Context::event_done(void* event) const {
  make_current();
  int rc = api_->event_query(event);
  if (rc == kNotReady) return false;
  driver_->check(rc, "cuEventQuery");
  return true;
}

void Context::wait_event(void* event) const {
  make_current();
  driver_->check(api_->event_sync(event), "cuEventSynchronize");
}

void Context::destroy_event(void* event) const {
  make_current();
  api_->event_destroy(event);
}

double Context::time_ms(Stream s, const std::function<void()>& work) const {
  make_current();
  void* start = nullptr;
  void* stop = nullptr;
  driver_->check(api_->event_create(&start, 0), "cuEventCreate");
  driver_->check(api_->event_create(&stop, 0), "cuEventCreate");
  float ms = 0;
  try {
    driver_->check(api_->event_record(start, s), "cuEventRecord");
    work();
    driver_->check(api_->event_record(stop, s), "cuEventRecord");
    driver_->check(api_->event_sync(stop), "cuEventSynchronize");
    driver_->check(api_->event_elapsed(&ms, start, stop), "cuEventElapsedTime");
  } catch (...) {
    api_->event_destroy(start);
    api_->event_destroy(stop);
    throw;
  }
  api_->event_destroy(start);
  api_->event_destroy(stop);
  return ms;
}

Stream Context::create_stream() const {
  make_current();
  Stream s = nullptr;
  driver_->check(api_->stream_create(&s, kNonBlocking), "cuStreamCreate");
  return s;
}

void Context::destroy_stream(Stream s) const {
  make_current();
  api_->stream_destroy(s);  // nothing to do about a failure while destroying
}

bool Context::capturing(Stream s) const {
  make_current();
  int status = kCaptureNone;
  driver_->check(api_->is_capturing(s, &status), "cuStreamIsCapturing");
  return status != kCaptureNone;
}

void* Context::capture(Stream s, const std::function<void()>& work) const {
  make_current();
  driver_->check(api_->begin_capture(s, kCaptureRelaxed), "cuStreamBeginCapture");
  void* graph = nullptr;
  try {
    work();
  } catch (...) {
    if (api_->end_capture(s, &graph) == 0 && graph) api_->graph_destroy(graph);
    throw;
  }
  driver_->check(api_->end_capture(s, &graph), "cuStreamEndCapture");
  void* exec = nullptr;
  const int rc = api_->graph_instantiate(&exec, graph, 0);
  api_->graph_destroy(graph);  // (the executable graph keeps what it needs)
  driver_->check(rc, "cuGraphInstantiateWithFlags");
  return exec;
}

void Context::launch_graph(void* exec, Stream s) const {
  make_current();
  driver_->check(api_->graph_launch(exec, s), "cuGraphLaunch");
}

void Context::destroy_graph(void* exec) const {
  make_current();
  api_->graph_exec_destroy(exec);
}

DeviceScratch::~DeviceScratch() {
  for (DevicePtr p : owned_) context_.release(p);
}

DevicePtr DeviceScratch::take(size_t bytes) {
  owned_.push_back(context_.allocate(std::max<size_t>(bytes, 16)));
  return owned_.back();
}

DevicePtr DeviceScratch::try_take(size_t bytes) {
  DevicePtr p = context_.try_allocate(std::max<size_t>(bytes, 16));
  if (p) owned_.push_back(p);
  return p;
}

}  // namespace coil::cuda
