// A caching device allocator for standalone use (PyTorch users pass their own memory): a freed
// block goes back to a pool and is handed out again without a driver call, since cuMemAlloc and
// cuMemFree synchronize the device.
//
// Memory comes from the driver in segments: 2 MiB ones shared by requests up to 1 MiB, 20 MiB ones
// by requests up to 10 MiB, and a segment of its own (rounded to 2 MiB) for each larger request.
// A request takes the smallest free block that holds it (sizes rounded to 512 B), split where
// enough is left over (any remainder in the small pool, over 1 MiB in the large one); a freed
// block merges with free neighbours of its segment. So cached memory serves requests of any
// size, and what a request is given exceeds it by less than 1 MiB (a training step's graphs
// hand their activations' memory to one another's temporaries; a pool that only reused whole
// blocks of up to twice the request held 2.3 GiB for a ResNet-50 step that needed 1.6).
//
// Pools are per stream: a block freed after work enqueued on stream S is reused only by later
// work on S, which stream order runs after the free; only blocks freed on the same stream merge.
// When the driver runs out of memory, the wholly free segments are released and the allocation
// is retried.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

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
  void release_cached();  // gives every segment whose blocks are all free back to the driver

  struct Stats {
    size_t live_bytes = 0, cached_bytes = 0;          // blocks handed out, and free blocks of the segments held
    size_t peak_live_bytes = 0, peak_held_bytes = 0;  // highest live, and live + cached, so far
    size_t requested_bytes = 0, peak_requested_bytes = 0;  // what the live blocks were asked for, and its peak
    size_t driver_allocations = 0, reuses = 0;        // segments taken from the driver; requests served from the cache
  };
  Stats stats() const;
  void reset_peaks();  // the peaks start again from what is held now
  // The blocks handed out and not freed: address, size, bytes requested (what holds memory).
  std::vector<std::tuple<DevicePtr, size_t, size_t>> live_blocks() const;
  // Whether `p` lies in a block this allocator handed out and that is not yet freed.
  bool owns(DevicePtr p) const;
  // A live block's owner, as its holder marked it (CUDA graphs mark the memory they keep), or 0:
  // for the block `p` lies in, while it is live (its free clears the mark).
  void set_owner(DevicePtr p, uintptr_t owner);
  uintptr_t owner_of(DevicePtr p) const;

  static size_t round_size(size_t bytes);      // what a request takes: a multiple of 512 B
  static size_t segment_size(size_t rounded);  // what the driver is asked for when no free block holds it

 private:
  enum class Pool { small, large };
  struct Block {
    size_t size = 0;
    DevicePtr segment = 0;  // the base of its segment
    Stream stream = nullptr;
    Pool pool = Pool::small;
    bool free = false;
    size_t requested = 0;  // while live
    uintptr_t owner = 0;   // set_owner's, while live
  };
  using FreeKey = std::tuple<Pool, uintptr_t, size_t, DevicePtr>;  // pool, stream, size, address: ordered for the best fit
  static Pool pool_of(size_t rounded);
  static FreeKey key_of(DevicePtr p, const Block& b) { return {b.pool, reinterpret_cast<uintptr_t>(b.stream), b.size, p}; }
  DevicePtr take_segment(size_t bytes, Pool pool, Stream stream);
  void merge_into(std::map<DevicePtr, Block>::iterator left, std::map<DevicePtr, Block>::iterator right);
  void release_cached_locked();
  void note_peaks();

  Backend backend_;
  mutable std::mutex mutex_;
  std::map<DevicePtr, Block> blocks_;     // every block, live or free, by address
  std::set<FreeKey> free_;                // the free ones
  std::map<DevicePtr, size_t> segments_;  // base -> size
  Stats stats_;
};

}  // namespace coil::cuda
