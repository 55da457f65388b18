// The caching device allocator over a fake driver: segments by request size, best-fit blocks
// split and merged again, reuse per stream, the retry after releasing free segments when the
// driver is full, and the statistics it keeps.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "coil/error.h"
#include "runtime/cuda/allocator.h"

namespace coil {
namespace {

constexpr size_t MiB = size_t{1} << 20;

struct FakeDriver {
  std::map<cuda::DevicePtr, size_t> live;
  cuda::DevicePtr next = 0x100000;
  size_t capacity = 64 * MiB, used = 0, allocations = 0;
  cuda::DeviceAllocator::Backend backend() {
    return {[this](size_t bytes) {
              if (used + bytes > capacity) throw Error("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY");
              used += bytes;
              ++allocations;
              live[next] = bytes;
              cuda::DevicePtr p = next;
              next += bytes + MiB;  // segments are never adjacent
              return p;
            },
            [this](cuda::DevicePtr p) {
              used -= live.at(p);
              live.erase(p);
            }};
  }
};

auto* const s1 = reinterpret_cast<cuda::Stream>(1);
auto* const s2 = reinterpret_cast<cuda::Stream>(2);

TEST(DeviceAllocator, SizesAndSegments) {
  EXPECT_EQ(cuda::DeviceAllocator::round_size(1), 512u);
  EXPECT_EQ(cuda::DeviceAllocator::round_size(3 * MiB + 1), 3 * MiB + 512);
  EXPECT_EQ(cuda::DeviceAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(cuda::DeviceAllocator::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(cuda::DeviceAllocator::segment_size(3 * MiB), 20 * MiB);
  EXPECT_EQ(cuda::DeviceAllocator::segment_size(30 * MiB + 512), 32 * MiB);
}

TEST(DeviceAllocator, SplitsBlocksAndMergesThemAgain) {
  FakeDriver fake;
  {
    cuda::DeviceAllocator alloc(fake.backend());
    cuda::DevicePtr a = alloc.allocate(1000, s1), b = alloc.allocate(3000, s1);
    EXPECT_EQ(b, a + 1024);  // the small segment's next block
    EXPECT_EQ(fake.allocations, 1u);
    EXPECT_EQ(alloc.stats().live_bytes, 1024u + 3072u);
    using Live = std::tuple<cuda::DevicePtr, size_t, size_t>;
    EXPECT_EQ(alloc.live_blocks(), (std::vector<Live>{{a, 1024, 1000}, {b, 3072, 3000}}));
    EXPECT_EQ(alloc.stats().cached_bytes, 2 * MiB - 1024 - 3072);
    EXPECT_EQ(alloc.stats().requested_bytes, 4000u);
    alloc.free(a, s1);
    EXPECT_EQ(alloc.allocate(900, s1), a);  // the smallest free block that holds it
    alloc.free(a, s1);
    alloc.free(b, s1);  // merges with both neighbours: the whole segment again
    EXPECT_EQ(alloc.allocate(MiB, s1), a);
    EXPECT_EQ(fake.allocations, 1u);
    alloc.free(a, s1);
    // A large request takes a segment of its own, which later serves smaller ones, split.
    cuda::DevicePtr big = alloc.allocate(30 * MiB, s1);
    EXPECT_EQ(fake.live.at(big), 30 * MiB);
    alloc.free(big, s1);
    cuda::DevicePtr part = alloc.allocate(11 * MiB, s1), rest = alloc.allocate(12 * MiB, s1);
    EXPECT_EQ(part, big);
    EXPECT_EQ(rest, big + 11 * MiB);
    EXPECT_EQ(fake.allocations, 2u);
    // Within 1 MiB of the request a large block is not split: the 7 MiB left serves 6.5 whole.
    cuda::DevicePtr whole = alloc.allocate(6 * MiB + MiB / 2, s1);
    EXPECT_EQ(whole, big + 23 * MiB);
    EXPECT_EQ(alloc.stats().live_bytes, 30 * MiB);
    for (auto p : {part, rest, whole}) alloc.free(p, s1);
    EXPECT_EQ(alloc.stats().live_bytes, 0u);
    EXPECT_EQ(alloc.stats().requested_bytes, 0u);
    EXPECT_EQ(alloc.stats().cached_bytes, 32 * MiB);
  }
  EXPECT_TRUE(fake.live.empty());  // the destructor gives every free segment back
}

// What the adapter asks before deferring a handed tensor's drop: whether a pointer (a view's,
// inside a block) is memory of a live block of the pool.
TEST(DeviceAllocator, OwnsTheInsidesOfItsLiveBlocks) {
  FakeDriver fake;
  cuda::DeviceAllocator alloc(fake.backend());
  cuda::DevicePtr a = alloc.allocate(1000, s1), b = alloc.allocate(3000, s1);
  EXPECT_TRUE(alloc.owns(a));
  EXPECT_TRUE(alloc.owns(a + 1023));
  EXPECT_TRUE(alloc.owns(b + 100));
  EXPECT_FALSE(alloc.owns(b + 3072));  // the segment's free rest
  EXPECT_FALSE(alloc.owns(a - 1));
  EXPECT_FALSE(alloc.owns(0));
  alloc.free(a, s1);
  EXPECT_FALSE(alloc.owns(a + 10));
  alloc.free(b, s1);
}

// A block's owner mark (what CUDA graphs keep) covers its insides while it is live; its free
// clears it, so the block's next holder starts unmarked.
TEST(DeviceAllocator, OwnerMarksLastWhileTheBlockLives) {
  FakeDriver fake;
  cuda::DeviceAllocator alloc(fake.backend());
  cuda::DevicePtr a = alloc.allocate(1000, s1), b = alloc.allocate(3000, s1);
  alloc.set_owner(a, 7);
  EXPECT_EQ(alloc.owner_of(a), 7u);
  EXPECT_EQ(alloc.owner_of(a + 1000), 7u);
  EXPECT_EQ(alloc.owner_of(b + 10), 0u);
  EXPECT_EQ(alloc.owner_of(b + 3072), 0u);  // the segment's free rest
  EXPECT_THROW(alloc.set_owner(b + 8, 1), Error);  // not a block's start
  alloc.free(a, s1);
  EXPECT_EQ(alloc.owner_of(a), 0u);
  cuda::DevicePtr c = alloc.allocate(1000, s1);
  EXPECT_EQ(c, a);
  EXPECT_EQ(alloc.owner_of(c), 0u);
  alloc.free(b, s1), alloc.free(c, s1);
}

TEST(DeviceAllocator, ReusesPerStreamAndRetriesWhenFull) {
  FakeDriver fake;
  {
    cuda::DeviceAllocator alloc(fake.backend());
    cuda::DevicePtr a = alloc.allocate(3000, s1);
    alloc.free(a, s2);  // freed after work on s2: only s2's later work may take it
    cuda::DevicePtr b = alloc.allocate(3000, s1);
    EXPECT_NE(b, a);
    EXPECT_EQ(alloc.allocate(3000, s2), a);
    alloc.free(a, s2);
    alloc.free(b, s1);  // b's free neighbour was freed on s2: they stay apart
    EXPECT_EQ(alloc.stats().peak_live_bytes, 2 * 3072u);
    EXPECT_EQ(alloc.stats().peak_held_bytes, 2 * MiB);
    EXPECT_EQ(alloc.stats().peak_requested_bytes, 6000u);
    alloc.reset_peaks();
    EXPECT_EQ(alloc.stats().peak_live_bytes, 0u);
    EXPECT_EQ(alloc.stats().peak_held_bytes, 2 * MiB);
    // Full: the wholly free segments go back to the driver and the allocation is retried; a
    // segment with a live block stays.
    cuda::DevicePtr kept = alloc.allocate(5 * MiB, s1);
    cuda::DevicePtr mid = alloc.allocate(20 * MiB, s1);
    alloc.free(mid, s1);
    cuda::DevicePtr big = alloc.allocate(40 * MiB, s1);  // 2 + 20 + 20 + 40 > 64
    EXPECT_NE(big, 0u);
    EXPECT_FALSE(fake.live.count(mid));
    EXPECT_FALSE(fake.live.count(a));  // all its blocks free, if on two streams
    EXPECT_TRUE(fake.live.count(kept));
    EXPECT_THROW(alloc.allocate(16 * MiB, s1), Error);  // 20 + 40 held (15 free in kept's segment): 16 more do not fit
    for (auto p : {kept, big}) alloc.free(p, s1);
  }
  EXPECT_TRUE(fake.live.empty());
}

// Random requests and frees over two streams: blocks never overlap, every live block lies in a
// segment the driver gave, and the statistics add up at every step.
TEST(DeviceAllocator, RandomTrafficKeepsBlocksApart) {
  FakeDriver fake;
  fake.capacity = size_t{1} << 40;
  {
    cuda::DeviceAllocator alloc(fake.backend());
    std::mt19937 rng(7);
    std::map<cuda::DevicePtr, std::pair<size_t, cuda::Stream>> live;
    size_t requested = 0;
    for (int step = 0; step < 4000; ++step) {
      if (live.empty() || rng() % 3 != 0) {
        size_t bytes = rng() % 4 == 0 ? 1 + rng() % (24 * MiB) : 1 + rng() % (64 * 1024);
        cuda::Stream s = rng() % 2 ? s1 : s2;
        cuda::DevicePtr p = alloc.allocate(bytes, s);
        auto after = live.lower_bound(p);
        ASSERT_TRUE(after == live.end() || after->first >= p + bytes) << "step " << step;
        if (after != live.begin()) {
          auto before = std::prev(after);
          ASSERT_LE(before->first + before->second.first, p) << "step " << step;
        }
        auto seg = fake.live.upper_bound(p);
        ASSERT_NE(seg, fake.live.begin());
        --seg;
        ASSERT_LE(p + bytes, seg->first + seg->second) << "step " << step;
        live[p] = {bytes, s};
        requested += bytes;
      } else {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        alloc.free(it->first, it->second.second);
        requested -= it->second.first;
        live.erase(it);
      }
      auto st = alloc.stats();
      ASSERT_EQ(st.requested_bytes, requested);
      ASSERT_EQ(st.live_bytes + st.cached_bytes, fake.used);
      ASSERT_GE(st.live_bytes, requested);
    }
    for (const auto& [p, what] : live) alloc.free(p, what.second);
    EXPECT_EQ(alloc.stats().live_bytes, 0u);
    alloc.release_cached();
    EXPECT_TRUE(fake.live.empty());  // everything merged back into whole segments
  }
}

}  // namespace
}  // namespace coil
