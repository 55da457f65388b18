#include "runtime/cuda/allocator.h"

#include <algorithm>

#include "support/check.h"

namespace coil::cuda {

namespace {
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;
constexpr size_t kSmallLimit = size_t{1} << 20;
}  // namespace

DeviceAllocator::DeviceAllocator(Backend backend) : backend_(std::move(backend)) {}

DeviceAllocator::DeviceAllocator(std::shared_ptr<const Context> context)
    : backend_{[context](size_t bytes) { return context->allocate(bytes); }, [context](DevicePtr p) { context->release(p); }} {}

DeviceAllocator::~DeviceAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    release_cached_locked();
  } catch (const Error&) {  // a driver torn down at exit: nothing left to free
  }
}

size_t DeviceAllocator::round_size(size_t bytes) {
  size_t unit = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return std::max(unit, (bytes + unit - 1) / unit * unit);
}

DevicePtr DeviceAllocator::allocate(size_t bytes, Stream stream) {
  size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cached_.lower_bound({stream, size});
  if (it != cached_.end() && it->first.first == stream && it->first.second <= 2 * size) {
    DevicePtr p = it->second;
    live_[p] = {it->first.second, bytes};
    stats_.requested_bytes += bytes;
    stats_.cached_bytes -= it->first.second;
    stats_.live_bytes += it->first.second;
    ++stats_.reuses;
    cached_.erase(it);
    note_peaks();
    return p;
  }
  DevicePtr p = 0;
  try {
    p = backend_.allocate(size);
  } catch (const Error&) {
    if (cached_.empty()) throw;
    release_cached_locked();  // out of memory, perhaps only because of the cache: retry once
    p = backend_.allocate(size);
  }
  live_[p] = {size, bytes};
  stats_.requested_bytes += bytes;
  stats_.live_bytes += size;
  ++stats_.driver_allocations;
  note_peaks();
  return p;
}

void DeviceAllocator::note_peaks() {
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  stats_.peak_held_bytes = std::max(stats_.peak_held_bytes, stats_.live_bytes + stats_.cached_bytes);
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
}

void DeviceAllocator::free(DevicePtr p, Stream stream) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(p);
  COIL_CHECK(it != live_.end()) << "freeing device memory the allocator did not hand out";
  const auto [size, requested] = it->second;
  cached_.emplace(std::make_pair(stream, size), p);
  stats_.live_bytes -= size;
  stats_.requested_bytes -= requested;
  stats_.cached_bytes += size;
  live_.erase(it);
}

void DeviceAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void DeviceAllocator::release_cached_locked() {
  for (const auto& [key, p] : cached_) backend_.release(p);
  cached_.clear();
  stats_.cached_bytes = 0;
}

DeviceAllocator::Stats DeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DeviceAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_live_bytes = stats_.peak_held_bytes = stats_.peak_requested_bytes = 0;
  note_peaks();
}

}  // namespace coil::cuda
