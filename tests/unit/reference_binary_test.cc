// Hand-computed cases for the reference interpreter's binary arithmetic ops (Tensor and
// Scalar forms): values, PyTorch's rounding and sign rules, type promotion, broadcasting.
// Comparisons, logical and bitwise ops are in reference_compare_test.cc.
#include "binary_check.h"

namespace coil::testing {
namespace {

REF_TEST(AddTensor, AlphaAndPromotion) {
  // a + 2 b.
  check_binary(OpKind::AddTensor, {DType::f32, {1, 2, -3, 0.5}}, {DType::f32, {10, 20, 30, 0.25}}, DType::f32,
               {21, 42, 57, 1}, {{"alpha", 2}});
  check_binary(OpKind::AddTensor, {DType::f32, {1, kInf, -kInf}}, {DType::f32, {-1, 1, kInf}}, DType::f32, {0, kInf, kNan});
  // i32 + i64 -> i64; u8 wraps: 250 + 10 = 260 - 256 = 4; bool + bool is logical or.
  check_binary(OpKind::AddTensor, {DType::i32, {1, -2}}, {DType::i64, {10, 20}}, DType::i64, {11, 18});
  check_binary(OpKind::AddTensor, {DType::u8, {250, 1}}, {DType::u8, {10, 2}}, DType::u8, {4, 3});
  check_binary(OpKind::AddTensor, {DType::b8, {1, 1, 0}}, {DType::b8, {1, 0, 0}}, DType::b8, {1, 1, 0});
  check_binary(OpKind::AddTensor, {DType::i32, {1, 2}}, {DType::f16, {0.5, 0.25}}, DType::f16, {1.5, 2.25});
  // f16 results round to nearest even: 2048 + 1 = 2049 -> 2048 (spacing 2 above 2048);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1. bf16: 256 + 1 -> 256 (spacing 2).
  check_binary(OpKind::AddTensor, {DType::f16, {2048, 1}}, {DType::f16, {1, 0.00048828125}}, DType::f16, {2048, 1}, {}, 0);
  check_binary(OpKind::AddTensor, {DType::bf16, {256, 3}}, {DType::bf16, {1, 0.5}}, DType::bf16, {256, 3.5}, {}, 0);
}

REF_TEST(AddTensor, OuterBroadcastAndZeroDimPromotion) {
  Graph g;
  auto col = g.add_input("col", DType::f32, {3, 1});
  auto row = g.add_input("row", DType::f32, {2});
  auto i = g.add_input("i", DType::i32, {2});
  auto s64 = g.add_input("s64", DType::f64, {});
  auto si = g.add_input("si", DType::i64, {});
  auto a = g.call1(OpKind::AddTensor, {col, row});  // [3,1] + [2] -> [3,2], out[r][c] = col[r] + row[c]
  auto b = g.call1(OpKind::AddTensor, {i, s64});    // a 0-d tensor of a higher category decides: f64
  auto c = g.call1(OpKind::AddTensor, {i, si});     // same category: the dimensioned i32 wins
  auto d = g.call1(OpKind::AddTensor, {row, s64});  // same category: f32 stays f32
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"col", f32({3, 1}, {0, 10, 20})},
                     {"row", f32({2}, {1, 2})},
                     {"i", make(DType::i32, {2}, {1, 2})},
                     {"s64", make(DType::f64, {}, {0.5})},
                     {"si", i64({}, {100})}});
  expect_tensor(out[0], DType::f32, {3, 2}, {1, 2, 11, 12, 21, 22});
  expect_tensor(out[1], DType::f64, {2}, {1.5, 2.5});
  expect_tensor(out[2], DType::i32, {2}, {101, 102});
  expect_tensor(out[3], DType::f32, {2}, {1.5, 2.5});
}

REF_TEST(AddScalar, AlphaAndPromotion) {
  check_scalar(OpKind::AddScalar, {DType::f32, {1, 2, -0.5}}, 0.5, DType::f32, {2, 3, 0.5}, {{"alpha", 2}});
  check_scalar(OpKind::AddScalar, {DType::i32, {1, 2}}, 3, DType::i32, {4, 5});
  check_scalar(OpKind::AddScalar, {DType::i32, {1, 2}}, 2.5, DType::f32, {3.5, 4.5});  // float scalar -> f32
  check_scalar(OpKind::AddScalar, {DType::u8, {255, 0}}, 1, DType::u8, {0, 1});        // a scalar does not widen u8
  // f64 keeps every bit of the scalar (also through print -> parse): 1 + 1/3 in double.
  check_scalar(OpKind::AddScalar, {DType::f64, {1}}, 1.0 / 3, DType::f64, {1 + 1.0 / 3}, {}, 0);
  check_scalar(OpKind::AddScalar, {DType::f64, {0}}, 1e-300, DType::f64, {1e-300}, {}, 0);
}

REF_TEST(SubTensor, AlphaAndPromotion) {
  check_binary(OpKind::SubTensor, {DType::f32, {5, 3, 0, -1}}, {DType::f32, {1, 2, 3, 4}}, DType::f32,
               {3, -1, -6, -9}, {{"alpha", 2}});
  check_binary(OpKind::SubTensor, {DType::i64, {5, 3}}, {DType::i32, {1, 2}}, DType::i64, {3, -1}, {{"alpha", 2}});
  check_binary(OpKind::SubTensor, {DType::u8, {0, 5}}, {DType::u8, {1, 2}}, DType::u8, {255, 3});
}

REF_TEST(SubScalar, Values) {
  check_scalar(OpKind::SubScalar, {DType::f32, {1, 2}}, 0.25, DType::f32, {0.75, 1.75});
  check_scalar(OpKind::SubScalar, {DType::i64, {1, 2}}, 3, DType::i64, {-5, -4}, {{"alpha", 2}});  // x - 2*3
}

REF_TEST(RsubScalar, Values) {
  check_scalar(OpKind::RsubScalar, {DType::f32, {1, 2}}, 0.25, DType::f32, {-0.75, -1.75});              // 0.25 - x
  check_scalar(OpKind::RsubScalar, {DType::i64, {1, 2}}, 3, DType::i64, {1, -1}, {{"alpha", 2}});         // 3 - 2*x
  check_scalar(OpKind::RsubScalar, {DType::u8, {1, 2}}, 0, DType::u8, {255, 254});                        // wraps
}

REF_TEST(MulTensor, Values) {
  check_binary(OpKind::MulTensor, {DType::f32, {2, -3, 0.5, kInf}}, {DType::f32, {4, 5, 8, 0}}, DType::f32, {8, -15, 4, kNan});
  check_binary(OpKind::MulTensor, {DType::b8, {1, 0}}, {DType::b8, {1, 1}}, DType::b8, {1, 0});  // logical and
  check_binary(OpKind::MulTensor, {DType::i32, {3, -4}}, {DType::f32, {0.5, 0.25}}, DType::f32, {1.5, -1});
  check_binary(OpKind::MulTensor, {DType::i8, {64, -3}}, {DType::i8, {2, 5}}, DType::i8, {-128, -15});  // 128 wraps
}

REF_TEST(MulScalar, Values) {
  check_scalar(OpKind::MulScalar, {DType::i64, {2, 3}}, 2.5, DType::f32, {5, 7.5});
  check_scalar(OpKind::MulScalar, {DType::i64, {2, -3}}, -2, DType::i64, {-4, 6});
  check_scalar(OpKind::MulScalar, {DType::f32, {1, kNan}}, 0.0, DType::f32, {0, kNan});
}

REF_TEST(DivTensor, TrueDivision) {
  check_binary(OpKind::DivTensor, {DType::f32, {1, -3, 1, 0, -1}}, {DType::f32, {4, 2, 0, 0, 0}}, DType::f32,
               {0.25, -1.5, kInf, kNan, -kInf});
  // Integer / integer is true division into the default float dtype.
  check_binary(OpKind::DivTensor, {DType::i32, {7, -7}}, {DType::i32, {2, 2}}, DType::f32, {3.5, -3.5});
  check_binary(OpKind::DivTensor, {DType::i64, {1, 0}}, {DType::i64, {0, 0}}, DType::f32, {kInf, kNan});
  // i64 / f16 -> f16; 1/3 rounds to the f16 0.333251953125.
  check_binary(OpKind::DivTensor, {DType::i64, {1, 3}}, {DType::f16, {3, 2}}, DType::f16, {0.333251953125, 1.5}, {}, 0);
}

REF_TEST(DivScalar, TrueDivision) {
  check_scalar(OpKind::DivScalar, {DType::i64, {3, -1}}, 2, DType::f32, {1.5, -0.5});
  check_scalar(OpKind::DivScalar, {DType::f32, {1, -1}}, 0.0, DType::f32, {kInf, -kInf});
}

REF_TEST(DivTensorMode, TruncAndFloor) {
  // 7/2 = 3.5, -7/2 = -3.5, 7.5/-2 = -3.75, -7.5/2 = -3.75.
  check_binary(OpKind::DivTensorMode, {DType::f32, {7, -7, 7.5, -7.5}}, {DType::f32, {2, 2, -2, 2}}, DType::f32,
               {3, -3, -3, -3}, {{"rounding_mode", "trunc"}});
  check_binary(OpKind::DivTensorMode, {DType::f32, {7, -7, 7.5, -7.5}}, {DType::f32, {2, 2, -2, 2}}, DType::f32,
               {3, -4, -4, -4}, {{"rounding_mode", "floor"}});
  // Integers stay integers with a rounding mode: floor rounds toward -inf, trunc toward 0.
  check_binary(OpKind::DivTensorMode, {DType::i64, {7, -7, 7, -7}}, {DType::i64, {2, 2, -2, -2}}, DType::i64,
               {3, -4, -4, 3}, {{"rounding_mode", "floor"}});
  check_binary(OpKind::DivTensorMode, {DType::i64, {7, -7, 7, -7}}, {DType::i64, {2, 2, -2, -2}}, DType::i64,
               {3, -3, -3, 3}, {{"rounding_mode", "trunc"}});
  // No rounding mode: true division.
  check_binary(OpKind::DivTensorMode, {DType::i32, {7}}, {DType::i32, {2}}, DType::f32, {3.5}, {{"rounding_mode", std::nullopt}});
  // Float floor division by zero: +-inf, and nan for 0/0.
  check_binary(OpKind::DivTensorMode, {DType::f32, {1, -1, 0}}, {DType::f32, {0, 0, 0}}, DType::f32, {kInf, -kInf, kNan},
               {{"rounding_mode", "floor"}});
}

REF_TEST(DivScalarMode, TruncAndFloor) {
  check_scalar(OpKind::DivScalarMode, {DType::i64, {-7, 7}}, 2, DType::i64, {-4, 3}, {{"rounding_mode", "floor"}});
  check_scalar(OpKind::DivScalarMode, {DType::i32, {-7, 7}}, 2, DType::i32, {-3, 3}, {{"rounding_mode", "trunc"}});
  check_scalar(OpKind::DivScalarMode, {DType::i64, {1, 2}}, 0.5, DType::f32, {2, 4}, {{"rounding_mode", "floor"}});
}

REF_TEST(PowTensorTensor, Values) {
  check_binary(OpKind::PowTensorTensor, {DType::f32, {2, 4, -2, 0, 0}}, {DType::f32, {3, 0.5, 2, 0, -1}}, DType::f32,
               {8, 2, 4, 1, kInf});
  // Integer powers are exact integers: 2^10 = 1024, (-3)^3 = -27, 5^0 = 1.
  check_binary(OpKind::PowTensorTensor, {DType::i64, {2, -3, 5}}, {DType::i64, {10, 3, 0}}, DType::i64, {1024, -27, 1});
  check_binary(OpKind::PowTensorTensor, {DType::i32, {4}}, {DType::f32, {0.5}}, DType::f32, {2});
  check_binary(OpKind::PowTensorTensor, {DType::f32, {-8}}, {DType::f32, {1.0 / 3}}, DType::f32, {kNan});
}

REF_TEST(PowTensorScalar, Values) {
  check_scalar(OpKind::PowTensorScalar, {DType::f32, {4, 9, 0.25}}, 0.5, DType::f32, {2, 3, 0.5});
  check_scalar(OpKind::PowTensorScalar, {DType::i32, {3, -2}}, 2, DType::i32, {9, 4});
  check_scalar(OpKind::PowTensorScalar, {DType::i32, {4}}, 0.5, DType::f32, {2});
  check_scalar(OpKind::PowTensorScalar, {DType::f32, {2, 0}}, -1, DType::f32, {0.5, kInf});
}

REF_TEST(PowScalar, ScalarBase) {
  auto pow_scalar = [](Arg base, DType dt, const Shape& sizes, const Values& exps) {
    Graph g;
    g.outputs = {g.call1(OpKind::PowScalar, {base, g.add_input("e", dt, SymShape(sizes.begin(), sizes.end()))})};
    return run1(g, {{"e", make(dt, sizes, exps)}});
  };
  // 2^[0, 1, -1, 0.5] = [1, 2, 1/2, sqrt 2].
  expect_tensor(pow_scalar(2, DType::f32, {4}, {0, 1, -1, 0.5}), DType::f32, {4}, {1, 2, 0.5, std::numbers::sqrt2});
  // int base, int exponent tensor: integer result; float base with int exponent: f32.
  expect_tensor(pow_scalar(2, DType::i64, {2}, {3, 4}), DType::i64, {2}, {8, 16});
  expect_tensor(pow_scalar(2.5, DType::i64, {1, 2}, {2, 1}), DType::f32, {1, 2}, {6.25, 2.5});
  expect_tensor(pow_scalar(2, DType::f32, {0, 2}, {}), DType::f32, {0, 2}, {});
  // A non-contiguous exponent: the transpose of [[0, 1], [2, 3]] is [[0, 2], [1, 3]].
  Graph g;
  auto e = g.call1(OpKind::Permute, {g.add_input("e", DType::f32, {2, 2}), IntList{1, 0}});
  g.outputs = {g.call1(OpKind::PowScalar, {3, e})};
  expect_tensor(run1(g, {{"e", f32({2, 2}, {0, 1, 2, 3})}}), DType::f32, {2, 2}, {1, 9, 3, 27});
}

REF_TEST(RemainderTensor, SignFollowsDivisor) {
  // Python's %: the result has the sign of the divisor.
  check_binary(OpKind::RemainderTensor, {DType::f32, {5, -5, 5, -5, 5.5}}, {DType::f32, {3, 3, -3, -3, 2}}, DType::f32,
               {2, 1, -1, -2, 1.5});
  check_binary(OpKind::RemainderTensor, {DType::i64, {5, -5, 5, -5}}, {DType::i64, {3, 3, -3, -3}}, DType::i64, {2, 1, -1, -2});
  check_binary(OpKind::RemainderTensor, {DType::f32, {1, -1}}, {DType::f32, {0, 0}}, DType::f32, {kNan, kNan});
}

REF_TEST(RemainderScalar, Values) {
  check_scalar(OpKind::RemainderScalar, {DType::i64, {-1, 7}}, 4, DType::i64, {3, 3});
  check_scalar(OpKind::RemainderScalar, {DType::f32, {-1, 7.5}}, 4, DType::f32, {3, 3.5});
  check_scalar(OpKind::RemainderScalar, {DType::i32, {-1, 7}}, 1.5, DType::f32, {0.5, 1});
}

REF_TEST(FmodTensor, SignFollowsDividend) {
  // C's fmod: the result has the sign of the dividend.
  check_binary(OpKind::FmodTensor, {DType::f32, {5, -5, 5, -5, 5.5}}, {DType::f32, {3, 3, -3, -3, 2}}, DType::f32,
               {2, -2, 2, -2, 1.5});
  check_binary(OpKind::FmodTensor, {DType::i32, {5, -5, 5, -5}}, {DType::i32, {3, 3, -3, -3}}, DType::i32, {2, -2, 2, -2});
  check_binary(OpKind::FmodTensor, {DType::f32, {1}}, {DType::f32, {0}}, DType::f32, {kNan});
}

REF_TEST(FmodScalar, Values) {
  check_scalar(OpKind::FmodScalar, {DType::f32, {-7, 7.5}}, 2, DType::f32, {-1, 1.5});
  check_scalar(OpKind::FmodScalar, {DType::i64, {-7, 7}}, 2, DType::i64, {-1, 1});
}

REF_TEST(Maximum, NanPropagates) {
  check_binary(OpKind::Maximum, {DType::f32, {1, 5, kNan, -0.5}}, {DType::f32, {3, 2, 0, -0.25}}, DType::f32, {3, 5, kNan, -0.25});
  check_binary(OpKind::Maximum, {DType::f32, {1}}, {DType::f32, {kNan}}, DType::f32, {kNan});
  check_binary(OpKind::Maximum, {DType::i32, {1, -7}}, {DType::i64, {0, -8}}, DType::i64, {1, -7});
  check_binary(OpKind::Maximum, {DType::b8, {1, 0}}, {DType::b8, {0, 0}}, DType::b8, {1, 0});
}

REF_TEST(Minimum, NanPropagates) {
  check_binary(OpKind::Minimum, {DType::f32, {1, 5, kNan, -0.5}}, {DType::f32, {3, 2, 0, -0.25}}, DType::f32, {1, 2, kNan, -0.5});
  check_binary(OpKind::Minimum, {DType::i32, {1, -7}}, {DType::f32, {0.5, -8}}, DType::f32, {0.5, -8});
}

REF_TEST(Atan2, Quadrants) {
  // atan2(y, x): (1, 1) -> pi/4, (1, -1) -> 3pi/4, (-1, 0) -> -pi/2, (0, 1) -> 0, (0, -1) -> pi.
  check_binary(OpKind::Atan2, {DType::f32, {1, 1, -1, 0, 0}}, {DType::f32, {1, -1, 0, 1, -1}}, DType::f32,
               {kPi / 4, 3 * kPi / 4, -kPi / 2, 0, kPi});
  check_binary(OpKind::Atan2, {DType::i32, {1}}, {DType::i64, {1}}, DType::f32, {kPi / 4});  // ints -> f32
}

}  // namespace
}  // namespace coil::testing
