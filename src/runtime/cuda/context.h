// A GPU as coil's runtime uses it: the device's primary context (the one PyTorch's runtime
// uses too, so pointers and streams pass between them), memory, copies, modules, launches and
// events, each a driver call through Driver and each failure a coil::Error naming the call.
// Streams are the caller's (a CUstream as void*; nullptr is the legacy default stream).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/driver.h"

namespace coil::cuda {

using DevicePtr = uint64_t;  // a CUdeviceptr
using Stream = void*;        // a CUstream

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class Context : public std::enable_shared_from_this<Context> {
 public:
  // Retains device `ordinal`'s primary context. Throws coil::Error saying why there is no GPU.
  static std::shared_ptr<Context> open(int ordinal = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& device() const { return info_; }
  int ordinal() const { return device_; }
  const Driver& driver() const { return *driver_; }
  // Makes the primary context current on the calling thread (every call below does it).
  void make_current() const;

  DevicePtr allocate(size_t bytes) const;  // raw cuMemAlloc; see DeviceAllocator for caching
  DevicePtr try_allocate(size_t bytes) const;  // the same, or 0 where the device is out of memory
  void release(DevicePtr p) const;
  void copy_to_device(DevicePtr dst, const void* src, size_t bytes, Stream s) const;
  void copy_to_host(void* dst, DevicePtr src, size_t bytes, Stream s) const;
  void copy_on_device(DevicePtr dst, DevicePtr src, size_t bytes, Stream s) const;
  void fill_zero(DevicePtr dst, size_t bytes, Stream s) const;
  void fill_bytes(DevicePtr dst, unsigned char value, size_t bytes, Stream s) const;
  void synchronize(Stream s) const;

  // A loaded cubin and its functions; unloaded with the last reference.
  class Module;
  std::shared_ptr<Module> load_module(const std::string& cubin) const;
  void* function(const Module& m, const std::string& name) const;  // a CUfunction
  // Lets `function` launch with `bytes` of dynamic shared memory (past the default 48 KiB, up to
  // the device's opt-in maximum).
  void allow_shared(void* function, int bytes) const;
  // Lets `function` launch in thread-block clusters of `blocks` (past the portable 8 where the
  // device allows: 16 on sm_90).
  void allow_cluster(void* function, int blocks) const;
  // With `overlap` (where overlaps()), the launch is programmatic (PDL): the kernel may begin
  // while the previous kernel on `s` still runs, once that kernel's blocks all started or ended
  // (griddepcontrol.launch_dependents), and must wait for it (griddepcontrol.wait, which waits
  // for its completion and its memory) before touching memory another kernel writes or reads.
  // coil's generated kernels do (coil_rt::after_previous, first thing); a CUDA graph captured
  // from such launches keeps the overlap. With `cluster` > 0, consecutive blocks along x form
  // thread-block clusters of that many (grid.x a multiple of it).
  void launch(void* function, Dim3 grid, Dim3 block, unsigned shared_bytes, Stream s, void** params, bool overlap = false,
              unsigned cluster = 0) const;
  // Whether launches can overlap: compute capability 9.0 on, a CUDA 12.3 driver on (with
  // cuLaunchKernelEx), and COIL_LAUNCH_OVERLAP not 0.
  bool overlaps() const;

  // Page-locked host memory (asynchronous copies to it overlap with the host).
  void* allocate_host(size_t bytes) const;
  void release_host(void* p) const;
  // Events without timing: record marks the work queued on `s` so far; done once it finished.
  void* create_event() const;
  void record(void* event, Stream s) const;
  bool event_done(void* event) const;
  void wait_event(void* event) const;
  void destroy_event(void* event) const;

  // Streams of coil's own (non-blocking: they do not wait for the legacy default stream).
  Stream create_stream() const;
  void destroy_stream(Stream s) const;
  // Whether work enqueued on `s` is being captured into a graph (by coil or by PyTorch).
  bool capturing(Stream s) const;
  // CUDA graphs: `work` enqueues on `s` (a stream of coil's own) while the driver captures it
  // (relaxed mode: allocating memory stays allowed); returns the instantiated executable graph
  // (a CUgraphExec). A failure inside `work` ends the capture and is rethrown.
  void* capture(Stream s, const std::function<void()>& work) const;
  void launch_graph(void* exec, Stream s) const;
  void destroy_graph(void* exec) const;

  // Elapsed milliseconds between two events recorded on `s` around `work`, after a sync.
  double time_ms(Stream s, const std::function<void()>& work) const;

  struct Api;

 private:
  Context() = default;
  DevicePtr mem_alloc(size_t bytes, bool zero_when_full) const;
  std::shared_ptr<const Driver> driver_;
  std::unique_ptr<Api> api_;
  DeviceInfo info_;
  int device_ = 0;
  void* context_ = nullptr;  // CUcontext
};

// Raw device allocations (Context::allocate) released together when it goes: scratch for a
// measurement, freed however the measurement ends.
class DeviceScratch {
 public:
  explicit DeviceScratch(const Context& context) : context_(context) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  DevicePtr take(size_t bytes);  // at least 16 bytes
  DevicePtr try_take(size_t bytes);  // the same, or 0 where the device is out of memory

 private:
  const Context& context_;
  std::vector<DevicePtr> owned_;
};

}  // namespace coil::cuda
