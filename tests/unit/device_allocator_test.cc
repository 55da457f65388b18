// The caching device allocator over a fake driver: reuse per stream and within twice the
// request, the retry after releasing the cache when the driver is full, the peaks it records.
#include <gtest/gtest.h>

#include <map>

#include "coil/error.h"
#include "runtime/cuda/allocator.h"

namespace coil {
namespace {

struct FakeDriver {
  std::map<cuda::DevicePtr, size_t> live;
  cuda::DevicePtr next = 0x1000;
  size_t capacity = size_t{64} << 20, used = 0, allocations = 0;
  cuda::DeviceAllocator::Backend backend() {
    return {[this](size_t bytes) {
              if (used + bytes > capacity) throw Error("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY");
              used += bytes;
              ++allocations;
              live[next] = bytes;
              cuda::DevicePtr p = next;
              next += bytes;
              return p;
            },
            [this](cuda::DevicePtr p) {
              used -= live.at(p);
              live.erase(p);
            }};
  }
};

TEST(DeviceAllocator, ReusesPerStreamAndRetriesWhenFull) {
  FakeDriver fake;
  {
    cuda::DeviceAllocator alloc(fake.backend());
    auto* s1 = reinterpret_cast<cuda::Stream>(1);
    auto* s2 = reinterpret_cast<cuda::Stream>(2);
    EXPECT_EQ(cuda::DeviceAllocator::round_size(1), 512u);
    EXPECT_EQ(cuda::DeviceAllocator::round_size(3 << 20), size_t{4} << 20);
    cuda::DevicePtr a = alloc.allocate(3000, s1);
    alloc.free(a, s1);
    EXPECT_EQ(alloc.allocate(2900, s1), a);  // the same rounded size, same stream: reused
    alloc.free(a, s1);
    cuda::DevicePtr b = alloc.allocate(2900, s2);  // another stream: not reused
    EXPECT_NE(b, a);
    EXPECT_EQ(fake.allocations, 2u);
    cuda::DevicePtr small = alloc.allocate(100, s1);
    EXPECT_NE(small, a);  // a cached block more than twice the request is left alone
    alloc.free(b, s2);
    alloc.free(small, s1);
    EXPECT_EQ(alloc.stats().live_bytes, 0u);
    EXPECT_EQ(alloc.stats().peak_live_bytes, 3072u + 512u);  // b and small at once (a cached meanwhile)
    EXPECT_EQ(alloc.stats().peak_held_bytes, 3072u + 3072u + 512u);
    // Full: the cached blocks go back to the driver and the allocation is retried.
    cuda::DevicePtr big = alloc.allocate(size_t{63} << 20, s1);
    EXPECT_NE(big, 0u);
    EXPECT_EQ(alloc.stats().cached_bytes, 0u);
    EXPECT_THROW(alloc.allocate(size_t{8} << 20, s1), Error);
    alloc.free(big, s1);
  }
  EXPECT_TRUE(fake.live.empty());  // the destructor gives everything back
}

}  // namespace
}  // namespace coil
