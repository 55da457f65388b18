#include "runtime/cuda/allocator.h"

#include <algorithm>

#include "support/check.h"

namespace coil::cuda {

namespace {
constexpr size_t kRound = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;  // requests up to this share 2 MiB segments
constexpr size_t kSmallSegment = size_t{2} << 20;
constexpr size_t kMediumLimit = size_t{10} << 20;  // larger ones up to this share 20 MiB segments
constexpr size_t kMediumSegment = size_t{20} << 20;
constexpr size_t kLargeRound = size_t{2} << 20;  // a larger request's own segment is a multiple of this
constexpr size_t kLargeSplit = size_t{1} << 20;  // a large-pool block is split where more than this is left
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

size_t DeviceAllocator::round_size(size_t bytes) { return std::max(kRound, (bytes + kRound - 1) / kRound * kRound); }

size_t DeviceAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallLimit) return kSmallSegment;
  if (rounded <= kMediumLimit) return kMediumSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

DeviceAllocator::Pool DeviceAllocator::pool_of(size_t rounded) { return rounded <= kSmallLimit ? Pool::small : Pool::large; }

DevicePtr DeviceAllocator::take_segment(size_t bytes, Pool pool, Stream stream) {
  DevicePtr p = 0;
  try {
    p = backend_.allocate(bytes);
  } catch (const Error&) {
    if (stats_.cached_bytes == 0) throw;
    release_cached_locked();  // out of memory, perhaps only because of the cache: retry once
    p = backend_.allocate(bytes);
  }
  segments_[p] = bytes;
  blocks_[p] = Block{.size = bytes, .segment = p, .stream = stream, .pool = pool};
  ++stats_.driver_allocations;
  return p;
}

DevicePtr DeviceAllocator::allocate(size_t bytes, Stream stream) {
  const size_t size = round_size(bytes);
  const Pool pool = pool_of(size);
  std::lock_guard<std::mutex> lock(mutex_);
  DevicePtr p = 0;
  auto fit = free_.lower_bound({pool, reinterpret_cast<uintptr_t>(stream), size, 0});
  if (fit != free_.end() && std::get<0>(*fit) == pool && std::get<1>(*fit) == reinterpret_cast<uintptr_t>(stream)) {
    p = std::get<3>(*fit);
    free_.erase(fit);
    stats_.cached_bytes -= blocks_.at(p).size;
    ++stats_.reuses;
  } else {
    p = take_segment(segment_size(size), pool, stream);
  }
  Block& b = blocks_.at(p);
  const size_t rest = b.size - size;
  if (rest > 0 && (pool == Pool::small || rest > kLargeSplit)) {  // the remainder stays free
    Block r{.size = rest, .segment = b.segment, .stream = b.stream, .pool = b.pool, .free = true};
    free_.insert(key_of(p + size, r));
    blocks_.emplace(p + size, r);
    stats_.cached_bytes += rest;
    b.size = size;
  }
  b.free = false;
  b.requested = bytes;
  stats_.live_bytes += b.size;
  stats_.requested_bytes += bytes;
  note_peaks();
  return p;
}

void DeviceAllocator::merge_into(std::map<DevicePtr, Block>::iterator left, std::map<DevicePtr, Block>::iterator right) {
  left->second.size += right->second.size;
  blocks_.erase(right);
}

void DeviceAllocator::free(DevicePtr p, Stream stream) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(p);
  COIL_CHECK(it != blocks_.end() && !it->second.free) << "freeing device memory the allocator did not hand out";
  Block& b = it->second;
  stats_.live_bytes -= b.size;
  stats_.requested_bytes -= b.requested;
  stats_.cached_bytes += b.size;
  b.requested = 0;
  b.owner = 0;
  b.free = true;
  b.stream = stream;
  // Free neighbours of the segment, freed on the same stream, become one block with it.
  auto joins = [&](const Block& other) { return other.free && other.segment == b.segment && other.stream == stream; };
  if (auto next = std::next(it); next != blocks_.end() && joins(next->second)) {
    free_.erase(key_of(next->first, next->second));
    merge_into(it, next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (joins(prev->second)) {
      free_.erase(key_of(prev->first, prev->second));
      merge_into(prev, it);
      it = prev;
    }
  }
  free_.insert(key_of(it->first, it->second));
}

void DeviceAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void DeviceAllocator::release_cached_locked() {
  for (auto s = segments_.begin(); s != segments_.end();) {
    // Its blocks, in address order; released only when all are free (whatever their streams:
    // cuMemFree waits for the device).
    auto first = blocks_.find(s->first), end = first;
    bool all_free = true;
    for (; end != blocks_.end() && end->second.segment == s->first; ++end) all_free = all_free && end->second.free;
    if (!all_free) {
      ++s;
      continue;
    }
    for (auto it = first; it != end; ++it) free_.erase(key_of(it->first, it->second));
    blocks_.erase(first, end);
    stats_.cached_bytes -= s->second;
    backend_.release(s->first);
    s = segments_.erase(s);
  }
}

void DeviceAllocator::note_peaks() {
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  stats_.peak_held_bytes = std::max(stats_.peak_held_bytes, stats_.live_bytes + stats_.cached_bytes);
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
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

bool DeviceAllocator::owns(DevicePtr p) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return false;
  --it;
  return !it->second.free && p < it->first + it->second.size;
}

void DeviceAllocator::set_owner(DevicePtr p, uintptr_t owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(p);
  COIL_CHECK(it != blocks_.end() && !it->second.free) << "marking device memory the allocator did not hand out";
  it->second.owner = owner;
}

uintptr_t DeviceAllocator::owner_of(DevicePtr p) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return 0;
  --it;
  return !it->second.free && p < it->first + it->second.size ? it->second.owner : 0;
}

std::vector<std::tuple<DevicePtr, size_t, size_t>> DeviceAllocator::live_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::tuple<DevicePtr, size_t, size_t>> out;
  for (const auto& [p, b] : blocks_)
    if (!b.free) out.emplace_back(p, b.size, b.requested);
  return out;
}

}  // namespace coil::cuda
