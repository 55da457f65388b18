// Sizes, strides and offsets from outside (graph text, --size, .pt2, safetensors) that overflow
// int64: every tensor boundary fails with a coil::Error for the user, never wraps into a small
// allocation that a kernel then runs past.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "coil/error.h"
#include "coil/tensor.h"
#include "support/checked.h"

namespace coil {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorBounds, CheckedArithmeticFailsInsteadOfWrapping) {
  EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_NE(error_of([] { checked_add(kMax, 1, "a size expression"); }).find("a size expression is too large"),
            std::string::npos);
  EXPECT_NE(error_of([] { checked_mul(int64_t{1} << 32, int64_t{1} << 32); }).find("overflows int64"), std::string::npos);
}

TEST(TensorBounds, SpanOfHugeStridesOrOffsetsIsAnError) {
  EXPECT_EQ(span_of({2, 3}, {3, 1}, 5), 11);
  EXPECT_NE(error_of([] { span_of({2, 2}, {kMax, 1}); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { span_of({2}, {1}, kMax - 1); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { span_of({3}, {int64_t{1} << 62}); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { span_of({2}, {1}, -4); }).find("negative"), std::string::npos);
  EXPECT_NE(error_of([] { span_of({2}, {-1}); }).find("negative strides"), std::string::npos);
}

TEST(TensorBounds, AllocationsWhoseByteCountOverflowsAreErrors) {
  // coil run --size B=72057594037927936 on f32[B, 64] (2^56 * 64 * 4 bytes) and B=2^62 on f32[B]:
  // malloc aborted and a wrapped size segfaulted.
  EXPECT_NE(error_of([] { Tensor::zeros(DType::f32, {int64_t{1} << 56, 64}); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor::zeros(DType::f32, {int64_t{1} << 62}); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor::zeros(DType::f32, {int64_t{1} << 40, int64_t{1} << 40}); }).find("too large"),
            std::string::npos);
  EXPECT_NE(error_of([] { contiguous_strides({int64_t{1} << 32, int64_t{1} << 32, 4}); }).find("too large"),
            std::string::npos);
}

TEST(TensorBounds, BorrowsAndViewsThatRunPastInt64AreErrors) {
  float data[4] = {1, 2, 3, 4};
  EXPECT_NE(error_of([&] { Tensor::borrow(data, DType::f32, {2}, {1}, kMax - 1); }).find("too large"),
            std::string::npos);
  Tensor t = Tensor::borrow(data, DType::f32, {4}, {1});
  EXPECT_FALSE(error_of([&] { t.view({2}, {1}, kMax - 1); }).empty());
  EXPECT_FALSE(error_of([&] { t.view({2}, {kMax}, 0); }).empty());
  EXPECT_EQ(t.view({2}, {2}, 1).numel(), 2);
}

}  // namespace
}  // namespace coil
