// The GEMM tuner's choice among cuBLASLt's timed algorithms (the measuring itself runs on a GPU:
// CudaGpu.GemmAlgorithmsTunedOnceThenReadFromTheCache).
#include "driver/autotune_gemm.h"

#include <gtest/gtest.h>

#include <limits>

#include "coil/error.h"

namespace coil {
namespace {

TEST(GemmTuning, TheFirstStaysUnlessAnotherIsClearlyFaster) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(pick_algorithm({0.070, 0.072, 0.061}, 0.02), 2u);    // 13% faster
  EXPECT_EQ(pick_algorithm({0.070, 0.0695, 0.071}, 0.02), 0u);   // within the margin
  EXPECT_EQ(pick_algorithm({0.070, 0.0685, 0.0680}, 0.02), 2u);  // the fastest of those past it
  EXPECT_EQ(pick_algorithm({0.070, inf, 0.060}, 0.02), 2u);      // one that failed is never picked
  EXPECT_EQ(pick_algorithm({0.070}, 0.02), 0u);
  EXPECT_EQ(pick_algorithm({0.070, 0.069}, 0.0), 1u);
  EXPECT_THROW(pick_algorithm({}, 0.02), Error);
}

}  // namespace
}  // namespace coil
