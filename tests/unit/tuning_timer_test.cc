// How the tuners time on a GPU (driver/tuning_timer.h): the operands' pseudo-random fill and
// the candidates taking turns. Without a CUDA driver they skip.
#include "driver/tuning_timer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "coil/error.h"

namespace coil {
namespace {

std::shared_ptr<cuda::Context> gpu() {
  try {
    return cuda::Context::open(0);
  } catch (const Error&) {
    return nullptr;
  }
}

// Floats get values in [-1, 1) from one 64 KiB block repeated to the end, including a buffer's
// ragged tail; integers get zeros.
TEST(CudaGpu, RandomFillRepeatsOneBlockOfValuesInRange) {
  auto ctx = gpu();
  if (!ctx) GTEST_SKIP() << "no CUDA device";
  const size_t floats = 3 * 16384 + 1001, ints = 777;
  cuda::DeviceScratch memory(*ctx);
  cuda::DevicePtr f = memory.take(floats * 4), i = memory.take(ints * 4);
  ctx->fill_bytes(i, 0xff, ints * 4, nullptr);
  {
    RandomFill fill(*ctx);
    fill(f, floats * 4, DType::f32);
    fill(i, ints * 4, DType::i32);
  }
  std::vector<float> hf(floats);
  std::vector<int32_t> hi(ints);
  ctx->copy_to_host(hf.data(), f, floats * 4, nullptr);
  ctx->copy_to_host(hi.data(), i, ints * 4, nullptr);
  std::set<float> distinct;
  for (size_t k = 0; k < floats; ++k) {
    ASSERT_TRUE(hf[k] >= -1.0f && hf[k] < 1.0f) << k << ": " << hf[k];
    if (k >= 16384) {
      ASSERT_EQ(hf[k], hf[k - 16384]) << k;
    }
    distinct.insert(hf[k]);
  }
  EXPECT_GT(distinct.size(), 16000u);  // not a constant, nor a short cycle
  for (size_t k = 0; k < ints; ++k) ASSERT_EQ(hi[k], 0) << k;
}

// Each candidate's median time per call; one that throws at its first call is left out
// (infinity), the first's error propagates.
TEST(CudaGpu, TimeInTurnsLeavesOutACandidateThatFails) {
  auto ctx = gpu();
  if (!ctx) GTEST_SKIP() << "no CUDA device";
  const size_t bytes = size_t{64} << 20;
  cuda::DeviceScratch memory(*ctx);
  cuda::DevicePtr p = memory.take(2 * bytes);
  std::vector<int> calls(3, 0);
  auto run = [&](size_t c, int n) {
    if (c == 1) throw Error("cannot launch");
    calls[c] += n;
    for (int r = 0; r < n; ++r) ctx->fill_bytes(p, 1, c == 2 ? 2 * bytes : bytes, nullptr);
  };
  std::vector<double> ms = time_in_turns(*ctx, 3, run, {.sample_ms = 0.3, .rounds = 5, .max_repeats = 8});
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_TRUE(std::isfinite(ms[0]) && ms[0] > 0) << ms[0];
  EXPECT_EQ(ms[1], std::numeric_limits<double>::infinity());
  EXPECT_GT(ms[2], 1.3 * ms[0]) << ms[0] << " " << ms[2];  // twice the bytes
  EXPECT_GE(calls[0], 1 + 1 + 5);  // the first use, the length probe, a call a round at least
  EXPECT_EQ(calls[2] - 1, calls[0] - 2);  // the same samples as the first
  EXPECT_THROW(time_in_turns(*ctx, 2, [&](size_t c, int n) { run(c == 0 ? 1 : 0, n); }), Error);
}

// The runoff takes the candidates within the fraction of the fastest finite median, fastest
// first, and none when only one is that close.
TEST(TuningTimer, RunoffTakesTheCandidatesCloseToTheFastest) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(runoff_candidates({0.277, 0.275, 0.322, 0.2751, inf}, 0.03), (std::vector<size_t>{1, 3, 0}));
  EXPECT_EQ(runoff_candidates({0.100, 0.104, 0.2}, 0.03), std::vector<size_t>{});  // the fastest alone
  EXPECT_EQ(runoff_candidates({0.1, 0.1}, 0), std::vector<size_t>{});                // runoff off
  EXPECT_EQ(runoff_candidates({inf, inf}, 0.03), std::vector<size_t>{});            // none usable
  EXPECT_EQ(runoff_candidates({}, 0.03), std::vector<size_t>{});
}

// Candidates timed alike on one call a sample take turns again on longer samples, many calls
// each, and their medians come from that runoff; a clearly slower one is not timed again.
TEST(CudaGpu, TimeInTurnsRunsOffTheCloseCandidates) {
  auto ctx = gpu();
  if (!ctx) GTEST_SKIP() << "no CUDA device";
  const size_t bytes = size_t{64} << 20;
  cuda::DeviceScratch memory(*ctx);
  cuda::DevicePtr p = memory.take(4 * bytes);
  std::vector<int> calls(3, 0), most(3, 0);
  auto run = [&](size_t c, int n) {
    calls[c] += n;
    most[c] = std::max(most[c], n);
    for (int r = 0; r < n; ++r) ctx->fill_bytes(p, 1, c == 2 ? 4 * bytes : bytes, nullptr);
  };
  const TurnsOptions options{.sample_ms = 0.01, .rounds = 5, .max_repeats = 64, .runoff_within = 0.5, .runoff_sample_ms = 1.0};
  std::vector<double> ms = time_in_turns(*ctx, 3, run, options);
  EXPECT_TRUE(std::isfinite(ms[0]) && std::isfinite(ms[1]) && ms[0] > 0) << ms[0] << " " << ms[1];
  EXPECT_GT(ms[2], 2 * ms[0]) << ms[0] << " " << ms[2];  // four times the bytes
  EXPECT_EQ(most[2], 1);  // the short samples only
  EXPECT_GT(most[0], 1);  // samples of several calls in the runoff
  EXPECT_EQ(most[1], most[0]);
  EXPECT_EQ(calls[1] - 1, calls[0] - 2);  // the same samples as the first (which was probed once more)
}

}  // namespace
}  // namespace coil
