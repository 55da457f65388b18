// philox_random: Philox4x32-10 (codegen/philox.h, which generated code and the reference share)
// against the known-answer vectors of its authors (Random123's kat_vectors), and the reference
// evaluator's values built from it: uniform values on the dtype's significand grid in [0, 1),
// normal ones by Box and Muller's transform, each a function of seed, index and stream only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>

#include "test_util.h"

namespace coil::testing {
namespace {

#define COIL_FN inline
#include "codegen/philox.h"
#undef COIL_FN

// The uniform double philox_uniform makes of Philox's first two output words.
double from_words(uint32_t x0, uint32_t x1) {
  return static_cast<double>(((static_cast<uint64_t>(x0) << 32) | x1) >> 11) * 0x1p-53;
}

TEST(Philox, MatchesTheKnownAnswerVectors) {
  // key (k1:k0) = seed, counter (c1:c0) = index and (c3:c2) = stream.
  EXPECT_EQ(philox_uniform(0, 0, 0), from_words(0x6627e8d5u, 0xe169c58du));
  EXPECT_EQ(philox_uniform(-1, -1, -1), from_words(0x408f276du, 0x41c83b0eu));
  EXPECT_EQ(philox_uniform(static_cast<int64_t>(0x299f31d0a4093822ull), static_cast<int64_t>(0x85a308d3243f6a88ull),
                           static_cast<int64_t>(0x0370734413198a2eull)),
            from_words(0xd16cfe09u, 0x94fdccebu));
}

Graph random_graph(const char* distribution, DType dtype, IntList size, int64_t stream) {
  Graph g;
  ValueRef seed = g.add_input("seed", DType::i64, {});
  g.outputs = {g.call1(OpKind::PhiloxRandom, {seed, size, stream, std::string(distribution), dtype})};
  return g;
}

Tensor seed_tensor(int64_t v) {
  Tensor t = Tensor::empty_strided(DType::i64, {}, {});
  t.store_int(0, v);
  return t;
}

REF_TEST(PhiloxRandom, UniformValuesAreTheGeneratorsOnTheDtypesGrid) {
  Tensor f64 = run1(random_graph("uniform", DType::f64, IntList{2, 3}, 0), {{"seed", seed_tensor(0)}});
  EXPECT_EQ(f64.load(0), from_words(0x6627e8d5u, 0xe169c58du));  // index 0, stream 0 (counter words 2s, 2s + 1)
  Tensor f32 = run1(random_graph("uniform", DType::f32, IntList{2, 3}, 0), {{"seed", seed_tensor(0)}});
  EXPECT_EQ(f32.load(0), std::floor(f64.load(0) * 0x1p24) * 0x1p-24);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(f64.load(i), philox_uniform(0, i, 0)) << i;  // row-major index
  // 16-bit values never round up to 1: the cut is exact.
  Tensor bf16 = run1(random_graph("uniform", DType::bf16, IntList{4096}, 3), {{"seed", seed_tensor(-12345)}});
  for (int64_t i = 0; i < bf16.numel(); ++i) {
    ASSERT_GE(bf16.load(i), 0.0);
    ASSERT_LT(bf16.load(i), 1.0);
  }
}

REF_TEST(PhiloxRandom, NormalValuesAreBoxMullerOfTwoStreams) {
  Tensor z = run1(random_graph("normal", DType::f64, IntList{5}, 2), {{"seed", seed_tensor(77)}});
  for (int64_t i = 0; i < 5; ++i) {
    const double u1 = philox_uniform(77, i, 4), u2 = philox_uniform(77, i, 5);
    EXPECT_EQ(z.load(i), std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2)) << i;
  }
  Tensor other = run1(random_graph("normal", DType::f64, IntList{5}, 3), {{"seed", seed_tensor(77)}});
  EXPECT_NE(z.load(0), other.load(0));  // another stream, other values
}

}  // namespace
}  // namespace coil::testing
