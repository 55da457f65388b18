// A caching device allocator for standalone use (PyTorch users pass their own memory): a freed
// block goes back to a pool and is handed out again without a driver call, since cuMemAlloc and
// cuMemFree synchronize the device. Pools are per stream: a block freed after work enqueued on
// stream S is reused only by later work on S, which stream order runs after the free. Sizes are
// rounded (512 B small, 2 MiB large) and a cached block serves requests down to half its size.
// When the driver runs out of memory, cached blocks are released and the allocation is retried.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/cuda/context.h"

namespace coil::cuda {

class DeviceAllocator {
 public:
  struct Backend {
    std::function<DevicePtr(size_t)> allocate;  // throws coil::Error when out of memory
    std::function<void(DevicePtr)> release;
  };
  explicit DeviceAllocator(Backend backend);
  explicit DeviceAllocator(std::shared_ptr<const Context> context);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  DevicePtr allocate(size_t bytes, Stream stream);
  void free(DevicePtr p, Stream stream);
  void release_cached();  // gives every cached block back to the driver

  struct Stats {
    size_t live_bytes = 0, cached_bytes = 0;
    size_t peak_live_bytes = 0, peak_held_bytes = 0;  // highest live, and live + cached, so far
    // what the live blocks were asked for (a block serves requests down to half its size), and its peak
    size_t requested_bytes = 0, peak_requested_bytes = 0;
    size_t driver_allocations = 0, reuses = 0;
  };
  Stats stats() const;
  void reset_peaks();  // the peaks start again from what is held now

  static size_t round_size(size_t bytes);

 private:
  void release_cached_locked();
  void note_peaks();
  Backend backend_;
  mutable std::mutex mutex_;
  std::multimap<std::pair<Stream, size_t>, DevicePtr> cached_;
  std::map<DevicePtr, std::pair<size_t, size_t>> live_;  // block size, bytes requested
  Stats stats_;
};

}  // namespace coil::cuda
