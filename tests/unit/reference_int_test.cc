// Integer exactness and wrap-around: PyTorch computes integer ops in the integer type, so
// i64 values beyond 2^53 (not representable in a double) must survive exactly, and overflow
// wraps modulo 2^bits. Values: 2^53 + 1 = 9007199254740993; 2^40 * 2^40 = 2^80 = 0 mod 2^64.
#include "binary_check.h"

namespace coil::testing {
namespace {

constexpr int64_t kBig = (int64_t{1} << 53) + 1;

// One root cause (src/reference): values are read with Tensor::load() / NodeEval::real() as
// double, computed in double and stored back, so i64 values above 2^53 lose their low bits and
// i64 overflow saturates (to INT64_MAX) instead of wrapping. PyTorch computes integer ops in
// int64. copy_into (clone, cat, slice_scatter) is exact; everything else is affected.

Tensor big_i64(const std::vector<int64_t>& v) {
  Tensor t = Tensor::zeros(DType::i64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.store_int(static_cast<int64_t>(i), v[i]);
  return t;
}

int64_t first(const Tensor& t) { return t.load_int(t.element_index(Shape(static_cast<size_t>(t.dim()), 0))); }

// op(x) or op(x, y) on one-element i64 tensors; returns the single result element.
int64_t unary_i64(OpKind op, int64_t x) {
  Graph g;
  g.outputs = {g.call1(op, {g.add_input("x", DType::i64, {1})})};
  return first(run1(g, {{"x", big_i64({x})}}));
}
int64_t binary_i64(OpKind op, int64_t x, int64_t y) {
  Graph g;
  g.outputs = {g.call1(op, {g.add_input("x", DType::i64, {1}), g.add_input("y", DType::i64, {1})})};
  return first(run1(g, {{"x", big_i64({x})}, {"y", big_i64({y})}}));
}

REF_TEST(AddTensor, Int64BeyondDoublePrecision) {
  EXPECT_EQ(binary_i64(OpKind::AddTensor, kBig, 0), kBig);
  EXPECT_EQ(binary_i64(OpKind::AddTensor, kBig, 2), kBig + 2);
  // i64 max + 1 wraps to i64 min.
  EXPECT_EQ(binary_i64(OpKind::AddTensor, INT64_MAX, 1), INT64_MIN);
}

REF_TEST(AddTensor, Int32Wraps) {
  check_binary(OpKind::AddTensor, {DType::i32, {2147483647}}, {DType::i32, {1}}, DType::i32, {-2147483648.0});
}

REF_TEST(MulTensor, Int64Wraps) {
  EXPECT_EQ(binary_i64(OpKind::MulTensor, int64_t{1} << 40, int64_t{1} << 40), 0);  // 2^80 mod 2^64
  EXPECT_EQ(binary_i64(OpKind::MulTensor, kBig, 1), kBig);
}

REF_TEST(MulTensor, SmallIntsWrap) {
  check_binary(OpKind::MulTensor, {DType::u8, {16, 3}}, {DType::u8, {16, 100}}, DType::u8, {0, 44});  // 256, 300
  check_binary(OpKind::MulTensor, {DType::i16, {256}}, {DType::i16, {128}}, DType::i16, {-32768});   // 2^15
}

REF_TEST(Maximum, Int64BeyondDoublePrecision) {
  EXPECT_EQ(binary_i64(OpKind::Maximum, kBig, kBig - 1), kBig);
}

REF_TEST(EqTensor, Int64BeyondDoublePrecision) {
  // 2^53 + 1 and 2^53 are equal as doubles but not as integers.
  EXPECT_EQ(binary_i64(OpKind::EqTensor, kBig, kBig - 1), 0);
}

REF_TEST(BitwiseAndTensor, Int64FullWidth) {
  EXPECT_EQ(binary_i64(OpKind::BitwiseAndTensor, -1, (int64_t{1} << 62) + 1), (int64_t{1} << 62) + 1);
  EXPECT_EQ(binary_i64(OpKind::BitwiseAndTensor, INT64_MIN, -1), INT64_MIN);
}

REF_TEST(Neg, Int64BeyondDoublePrecision) {
  EXPECT_EQ(unary_i64(OpKind::Neg, kBig), -kBig);
}

REF_TEST(Sum, Int64BeyondDoublePrecision) {
  Graph g;
  g.outputs = {g.call1(OpKind::Sum, {g.add_input("x", DType::i64, {2})})};
  EXPECT_EQ(first(run1(g, {{"x", big_i64({kBig, 2})}})), kBig + 2);
}

REF_TEST(Prod, Int64Wraps) {
  Graph g;
  g.outputs = {g.call1(OpKind::Prod, {g.add_input("x", DType::i64, {2})})};
  EXPECT_EQ(first(run1(g, {{"x", big_i64({int64_t{1} << 40, int64_t{1} << 40})}})), 0);
}

REF_TEST(Gather, Int64ValuesExact) {
  Graph g;
  auto x = g.add_input("x", DType::i64, {2});
  g.outputs = {g.call1(OpKind::Gather, {x, 0, g.add_input("i", DType::i64, {1})})};
  EXPECT_EQ(first(run1(g, {{"x", big_i64({1, kBig})}, {"i", big_i64({1})}})), kBig);
}

REF_TEST(Full, Int64FillBeyondDoublePrecision) {
  Graph g;
  g.outputs = {g.call1(OpKind::Full, {IntList{1}, kBig})};
  EXPECT_EQ(first(run1(g)), kBig);
}

REF_TEST(Clone, Int64Exact) { EXPECT_EQ(unary_i64(OpKind::Clone, kBig), kBig); }

}  // namespace
}  // namespace coil::testing
