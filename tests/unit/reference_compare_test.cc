// Hand-computed cases for comparisons, logical and bitwise ops, clamp and where.
// Comparisons and logical ops give bool; operands are compared in their promoted dtype.
#include "binary_check.h"

namespace coil::testing {
namespace {

// a = [1, 2, 3, nan] against b = [2, 2, 2, 0]; nan compares false except with !=.
const Operand kA{DType::f32, {1, 2, 3, kNan}};
const Operand kB{DType::f32, {2, 2, 2, 0}};

REF_TEST(EqTensor, Values) {
  check_binary(OpKind::EqTensor, kA, kB, DType::b8, {0, 1, 0, 0});
  check_binary(OpKind::EqTensor, {DType::f32, {kNan}}, {DType::f32, {kNan}}, DType::b8, {0});
  check_binary(OpKind::EqTensor, {DType::i32, {1, 2}}, {DType::f32, {1, 2.5}}, DType::b8, {1, 0});
  check_binary(OpKind::EqTensor, {DType::b8, {1, 0}}, {DType::b8, {1, 1}}, DType::b8, {1, 0});
}

// PyTorch compares in result_type(a, b), where a 0-d tensor of the same category does not
// widen a dimensioned one.
REF_TEST(EqTensor, ZeroDimOperandComparesInTheResultType) {
  // i32 [1] == i64 0-d (2^32 + 1) compares in i32, where 2^32 + 1 wraps to 1: true.
  Graph g;
  auto i = g.add_input("i", DType::i32, {1});
  auto l = g.add_input("l", DType::i64, {});
  g.outputs = {g.call1(OpKind::EqTensor, {i, l})};
  expect_tensor(run1(g, {{"i", make(DType::i32, {1}, {1})}, {"l", i64({}, {4294967297.0})}}), DType::b8, {1}, {1});
}

// f16 and bf16 tensors compare in their own dtype: the other operand is rounded to f16/bf16
// first (PyTorch: torch.tensor([0.1]).half() == 0.1 is true, < 0.1 is false).

REF_TEST(EqTensor, HalfAgainstZeroDimF64) {
  Graph g;
  g.outputs = {g.call1(OpKind::EqTensor, {g.add_input("h", DType::f16, {1}), g.add_input("d", DType::f64, {})})};
  expect_tensor(run1(g, {{"h", make(DType::f16, {1}, {0.1})}, {"d", make(DType::f64, {}, {0.1})}}), DType::b8, {1}, {1});
}

REF_TEST(EqScalar, HalfAndBFloat16) {
  check_scalar(OpKind::EqScalar, {DType::f16, {0.1}}, 0.1, DType::b8, {1});
  check_scalar(OpKind::EqScalar, {DType::bf16, {0.1}}, 0.1, DType::b8, {1});
}

REF_TEST(LtScalar, Half) {
  check_scalar(OpKind::LtScalar, {DType::f16, {0.1}}, 0.1, DType::b8, {0});
}

REF_TEST(EqScalar, Values) {
  check_scalar(OpKind::EqScalar, {DType::f32, {1, 2, 1}}, 1, DType::b8, {1, 0, 1});
  // The scalar is cast to the tensor's dtype first: f32(0.1) == f32(0.1).
  check_scalar(OpKind::EqScalar, {DType::f32, {0.1}}, 0.1, DType::b8, {1});
  // An int tensor against a float scalar compares as floats: 2 != 2.5.
  check_scalar(OpKind::EqScalar, {DType::i32, {2, 3}}, 2.5, DType::b8, {0, 0});
  // An int scalar does not promote a u8 tensor: 257 wraps to 1 in u8.
  check_scalar(OpKind::EqScalar, {DType::u8, {1, 200}}, 257, DType::b8, {1, 0});
}

REF_TEST(NeTensor, Values) {
  check_binary(OpKind::NeTensor, kA, kB, DType::b8, {1, 0, 1, 1});
  check_binary(OpKind::NeTensor, {DType::i64, {5, 6}}, {DType::u8, {5, 7}}, DType::b8, {0, 1});
}

REF_TEST(NeScalar, Values) { check_scalar(OpKind::NeScalar, {DType::f32, {1, kNan, 2}}, 2, DType::b8, {1, 1, 0}); }

REF_TEST(LtTensor, Values) {
  check_binary(OpKind::LtTensor, kA, kB, DType::b8, {1, 0, 0, 0});
  // u8 vs i8 promotes to i16, so 200 is not below -1.
  check_binary(OpKind::LtTensor, {DType::u8, {200, 1}}, {DType::i8, {-1, 2}}, DType::b8, {0, 1});
}

REF_TEST(LtScalar, Values) {
  check_scalar(OpKind::LtScalar, {DType::i32, {2, 3}}, 2.5, DType::b8, {1, 0});
  check_scalar(OpKind::LtScalar, {DType::f32, {-kInf, kNan}}, 0, DType::b8, {1, 0});
}

REF_TEST(LeTensor, Values) { check_binary(OpKind::LeTensor, kA, kB, DType::b8, {1, 1, 0, 0}); }

REF_TEST(LeScalar, Values) { check_scalar(OpKind::LeScalar, {DType::i64, {1, 2, 3}}, 2, DType::b8, {1, 1, 0}); }

REF_TEST(GtTensor, Values) {
  check_binary(OpKind::GtTensor, kA, kB, DType::b8, {0, 0, 1, 0});
  check_binary(OpKind::GtTensor, {DType::b8, {1, 0}}, {DType::b8, {0, 0}}, DType::b8, {1, 0});
}

REF_TEST(GtScalar, Values) {
  check_scalar(OpKind::GtScalar, {DType::f32, {1.5, 2, kInf}}, 2, DType::b8, {0, 0, 1});
  // u8 > -1 compares in u8, where -1 wraps to 255: false for every element (as in PyTorch).
  check_scalar(OpKind::GtScalar, {DType::u8, {1, 200}}, -1, DType::b8, {0, 0});
}

REF_TEST(GeTensor, Values) { check_binary(OpKind::GeTensor, kA, kB, DType::b8, {0, 1, 1, 0}); }

REF_TEST(GeScalar, Values) { check_scalar(OpKind::GeScalar, {DType::f32, {1.5, 2, kNan}}, 2, DType::b8, {0, 1, 0}); }

REF_TEST(LogicalAnd, Values) {
  // Nonzero (nan included) is true.
  check_binary(OpKind::LogicalAnd, {DType::f32, {0, 1, 2, kNan}}, {DType::f32, {1, 1, 0, 1}}, DType::b8, {0, 1, 0, 1});
  check_binary(OpKind::LogicalAnd, {DType::i32, {3, 0}}, {DType::i64, {-1, 5}}, DType::b8, {1, 0});
}

REF_TEST(LogicalOr, Values) {
  check_binary(OpKind::LogicalOr, {DType::f32, {0, 0, 2, kNan}}, {DType::f32, {0, 1, 0, 0}}, DType::b8, {0, 1, 1, 1});
  check_binary(OpKind::LogicalOr, {DType::b8, {0, 1}}, {DType::b8, {0, 0}}, DType::b8, {0, 1});
}

REF_TEST(LogicalXor, Values) {
  check_binary(OpKind::LogicalXor, {DType::f32, {0, 1, 2, 0}}, {DType::f32, {0, 1, 0, 3}}, DType::b8, {0, 0, 1, 1});
  check_binary(OpKind::LogicalXor, {DType::i64, {7}}, {DType::f32, {-0.5}}, DType::b8, {0});
}

REF_TEST(BitwiseAndTensor, Values) {
  // 12 & 10 = 0b1100 & 0b1010 = 0b1000 = 8; -1 & 7 = 7.
  check_binary(OpKind::BitwiseAndTensor, {DType::i32, {12, -1, 5}}, {DType::i32, {10, 7, 0}}, DType::i32, {8, 7, 0});
  check_binary(OpKind::BitwiseAndTensor, {DType::i32, {12}}, {DType::i64, {10}}, DType::i64, {8});
  check_binary(OpKind::BitwiseAndTensor, {DType::b8, {1, 1, 0}}, {DType::b8, {1, 0, 0}}, DType::b8, {1, 0, 0});
}

REF_TEST(BitwiseAndScalar, Values) {
  check_scalar(OpKind::BitwiseAndScalar, {DType::i64, {12, 5}}, 6, DType::i64, {4, 4});
  check_scalar(OpKind::BitwiseAndScalar, {DType::u8, {255, 15}}, 60, DType::u8, {60, 12});
}

REF_TEST(BitwiseOrTensor, Values) {
  // 12 | 10 = 14; -8 | 1 = -7 (two's complement ...11111000 | 1).
  check_binary(OpKind::BitwiseOrTensor, {DType::i64, {12, -8, 5}}, {DType::i64, {10, 1, 0}}, DType::i64, {14, -7, 5});
  check_binary(OpKind::BitwiseOrTensor, {DType::b8, {1, 0}}, {DType::b8, {0, 0}}, DType::b8, {1, 0});
}

REF_TEST(BitwiseOrScalar, Values) { check_scalar(OpKind::BitwiseOrScalar, {DType::i32, {1, 4}}, 2, DType::i32, {3, 6}); }

REF_TEST(BitwiseXorTensor, Values) {
  // 12 ^ 10 = 6; -1 ^ 1 = -2; 5 ^ 5 = 0.
  check_binary(OpKind::BitwiseXorTensor, {DType::i64, {12, -1, 5}}, {DType::i64, {10, 1, 5}}, DType::i64, {6, -2, 0});
  check_binary(OpKind::BitwiseXorTensor, {DType::b8, {1, 1}}, {DType::b8, {1, 0}}, DType::b8, {0, 1});
}

REF_TEST(BitwiseXorScalar, Values) { check_scalar(OpKind::BitwiseXorScalar, {DType::i8, {-1, 3}}, 1, DType::i8, {-2, 2}); }

// ---- ternary

REF_TEST(Clamp, BoundsAndNan) {
  check_scalar(OpKind::Clamp, {DType::f32, {-2, 0.5, 3, kNan}}, -1, DType::f32, {-1, 0.5, 1, kNan}, {{"max", 1}});
  auto clamp = [](DType dt, const Values& in, Arg lo, Arg hi) {
    Graph g;
    auto x = g.add_input("x", dt, {static_cast<int64_t>(in.size())});
    g.outputs = {g.call1(OpKind::Clamp, {x, lo, hi})};
    return run1(g, {{"x", make(dt, {static_cast<int64_t>(in.size())}, in)}});
  };
  expect_tensor(clamp(DType::f32, {-2, 0.5, 3}, 0, std::nullopt), DType::f32, {3}, {0, 0.5, 3});  // min only
  expect_tensor(clamp(DType::f32, {-2, 0.5, 3}, std::nullopt, 0), DType::f32, {3}, {-2, 0, 0});  // max only
  // min > max: every element becomes max (min is applied first, then max).
  expect_tensor(clamp(DType::f32, {1, 2, 3}, 2.5, 1.5), DType::f32, {3}, {1.5, 1.5, 1.5});
  // An int tensor with a float bound promotes to f32.
  expect_tensor(clamp(DType::i32, {1, 2, 3}, 0.5, std::nullopt), DType::f32, {3}, {1, 2, 3});
  expect_tensor(clamp(DType::i64, {-5, 2, 9}, 0, 4), DType::i64, {3}, {0, 2, 4});
}

// self + value * tensor1 * tensor2 (or / tensor2): value is cast to the tensors' dtype (an int
// result truncates 0.5 to 0), a 16-bit result rounds once.
REF_TEST(Addcmul, ValueAndRounding) {
  auto addc = [](OpKind op, DType dt, const Values& s, const Values& a, const Values& b, Arg value) {
    Graph g;
    auto n = static_cast<int64_t>(s.size());
    ValueRef x = g.add_input("s", dt, {n}), y = g.add_input("a", dt, {n}), z = g.add_input("b", dt, {n});
    g.outputs = {g.call1(op, {x, y, z}, {{"value", value}})};
    return run1(g, {{"s", make(dt, {n}, s)}, {"a", make(dt, {n}, a)}, {"b", make(dt, {n}, b)}});
  };
  expect_tensor(addc(OpKind::Addcmul, DType::f32, {1, 2}, {3, 4}, {5, -1}, 0.5), DType::f32, {2}, {8.5, 0});
  expect_tensor(addc(OpKind::Addcmul, DType::i64, {1, 2}, {3, 4}, {5, -1}, 0.5), DType::i64, {2}, {1, 2});
  expect_tensor(addc(OpKind::Addcmul, DType::i64, {1, 2}, {3, 4}, {5, -1}, true), DType::i64, {2}, {16, -2});
  expect_tensor(addc(OpKind::Addcdiv, DType::f32, {1, 2}, {3, 4}, {4, -8}, 2), DType::f32, {2}, {2.5, 1});
  // f16: 1 + 2^-11 * 3 / 2 is 1 + 0.75 ulp, which rounds to 1 + 1 ulp (2^-10).
  const double u = std::ldexp(1.0, -11);
  expect_tensor(addc(OpKind::Addcdiv, DType::f16, {1}, {3}, {2}, u), DType::f16, {1}, {1 + 2 * u}, 0, 0);
  Graph g;  // integer division is refused
  ValueRef i = g.add_input("i", DType::i64, {2});
  EXPECT_THROW(g.call1(OpKind::Addcdiv, {i, i, i}), Error);
}

REF_TEST(Addcdiv, Broadcast) {
  Graph g;
  auto s = g.add_input("s", DType::f32, {2, 1});
  auto a = g.add_input("a", DType::f32, {2});
  auto b = g.add_input("b", DType::f32, {});
  g.outputs = {g.call1(OpKind::Addcdiv, {s, a, b})};
  auto r = run1(g, {{"s", f32({2, 1}, {1, 2})}, {"a", f32({2}, {3, -3})}, {"b", f32({}, {2})}});
  expect_tensor(r, DType::f32, {2, 2}, {2.5, -0.5, 3.5, 0.5});
}

REF_TEST(ClampTensor, BroadcastBounds) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto lo = g.add_input("lo", DType::f32, {3});
  auto hi = g.add_input("hi", DType::f32, {2, 1});
  auto a = g.call1(OpKind::ClampTensor, {x, lo, hi});
  auto b = g.call1(OpKind::ClampTensor, {x, lo});  // max = None
  auto xt = g.call1(OpKind::Permute, {g.add_input("y", DType::f32, {3, 2}), IntList{1, 0}});
  auto c = g.call1(OpKind::ClampTensor, {xt, std::nullopt, hi});
  auto z = g.add_input("z", DType::f32, {0, 3});
  auto d = g.call1(OpKind::ClampTensor, {z, lo, std::nullopt});
  auto ilo = g.add_input("ilo", DType::i64, {3});
  auto e = g.call1(OpKind::ClampTensor, {x, ilo});
  g.outputs = {a, b, c, d, e};
  // x = [[-5, 0, 5], [-5, 0, 5]], lo = [-1, 1, 2] per column, hi = [[0], [3]] per row.
  auto out = run(g, {{"x", f32({2, 3}, {-5, 0, 5, -5, 0, 5})},
                     {"lo", f32({3}, {-1, 1, 2})},
                     {"hi", f32({2, 1}, {0, 3})},
                     {"y", f32({3, 2}, {-5, -5, 0, 0, 5, 5})},  // transposed: the same x
                     {"z", f32({0, 3}, {})},
                     {"ilo", i64({3}, {-1, 1, 2})}});
  // Row 0: max(x, lo) = [-1, 1, 5], then min(., 0) = [-1, 0, 0]; row 1: min(., 3) = [-1, 1, 3].
  expect_tensor(out[0], DType::f32, {2, 3}, {-1, 0, 0, -1, 1, 3});
  expect_tensor(out[1], DType::f32, {2, 3}, {-1, 1, 5, -1, 1, 5});
  expect_tensor(out[2], DType::f32, {2, 3}, {-5, 0, 0, -5, 0, 3});
  expect_tensor(out[3], DType::f32, {0, 3}, {});
  expect_tensor(out[4], DType::f32, {2, 3}, {-1, 1, 5, -1, 1, 5});  // f32 with i64 bounds stays f32
}

REF_TEST(WhereSelf, BroadcastAndPromotion) {
  Graph g;
  auto c = g.add_input("c", DType::b8, {2, 1});
  auto x = g.add_input("x", DType::i32, {3});
  auto y = g.add_input("y", DType::f32, {2, 3});
  auto a = g.call1(OpKind::WhereSelf, {c, x, y});
  auto ct = g.call1(OpKind::Permute, {g.add_input("ct", DType::b8, {2, 2}), IntList{1, 0}});
  auto x2 = g.add_input("x2", DType::i64, {2, 2});
  auto b = g.call1(OpKind::WhereSelf, {ct, x2, g.call1(OpKind::Neg, {x2})});
  auto e = g.call1(OpKind::WhereSelf, {g.add_input("z2", DType::b8, {0, 1}), x, x});  // [0, 1] with [3]
  g.outputs = {a, b, e};
  auto out = run(g, {{"c", b8({2, 1}, {1, 0})},
                     {"x", make(DType::i32, {3}, {1, 2, 3})},
                     {"y", f32({2, 3}, {10, 20, 30, 40, 50, 60})},
                     {"ct", b8({2, 2}, {1, 0, 0, 1})},  // transposed: [[1, 0], [0, 1]] stays the identity
                     {"x2", i64({2, 2}, {1, 2, 3, 4})},
                     {"z2", b8({0, 1}, {})}});
  // Row 0 takes x (cast to the promoted f32), row 1 takes y.
  expect_tensor(out[0], DType::f32, {2, 3}, {1, 2, 3, 40, 50, 60});
  expect_tensor(out[1], DType::i64, {2, 2}, {1, -2, -3, 4});
  expect_tensor(out[2], DType::i32, {0, 3}, {});
}

REF_TEST(WhereScalarSelf, Values) {
  Graph g;
  auto c = g.add_input("c", DType::b8, {3});
  auto y = g.add_input("y", DType::i64, {3});
  auto a = g.call1(OpKind::WhereScalarSelf, {c, 5, y});    // int scalar with i64: i64
  auto b = g.call1(OpKind::WhereScalarSelf, {c, 2.5, y});  // float scalar with i64: f32
  g.outputs = {a, b};
  auto out = run(g, {{"c", b8({3}, {1, 0, 1})}, {"y", i64({3}, {7, 8, 9})}});
  expect_tensor(out[0], DType::i64, {3}, {5, 8, 5});
  expect_tensor(out[1], DType::f32, {3}, {2.5, 8, 2.5});
}

REF_TEST(WhereScalarSelf, StridedAndZeroSize) {
  Graph g;
  // The transpose of [[1, 1], [0, 0]] is [[1, 0], [1, 0]].
  auto ct = g.call1(OpKind::Permute, {g.add_input("c", DType::b8, {2, 2}), IntList{1, 0}});
  auto y = g.call1(OpKind::SliceTensor, {g.add_input("y", DType::f32, {2, 4}), 1, 0, 4, 2});  // columns 0, 2
  auto a = g.call1(OpKind::WhereScalarSelf, {ct, -1, y});
  auto z = g.call1(OpKind::WhereScalarSelf, {g.add_input("z", DType::b8, {0, 1, 1}), 1.5, y});  // -> [0, 2, 2]
  g.outputs = {a, z};
  auto out = run(g, {{"c", b8({2, 2}, {1, 1, 0, 0})}, {"y", f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}, {"z", b8({0, 1, 1}, {})}});
  // y[:, ::2] = [[1, 3], [5, 7]]; cond = [[1, 0], [1, 0]].
  expect_tensor(out[0], DType::f32, {2, 2}, {-1, 3, -1, 7});
  expect_tensor(out[1], DType::f32, {0, 2, 2}, {});
}

REF_TEST(WhereScalarOther, Values) {
  Graph g;
  auto c = g.add_input("c", DType::b8, {2, 1});
  auto x = g.add_input("x", DType::f32, {2});
  g.outputs = {g.call1(OpKind::WhereScalarOther, {c, x, -1})};
  // cond [[1], [0]] broadcast against x [2]: row 0 = x, row 1 = -1.
  expect_tensor(run1(g, {{"c", b8({2, 1}, {1, 0})}, {"x", f32({2}, {0.5, 1.5})}}), DType::f32, {2, 2}, {0.5, 1.5, -1, -1});
}

REF_TEST(WhereScalarOther, ExpandedAndZeroSize) {
  Graph g;
  auto c = g.add_input("c", DType::b8, {2});
  auto x = g.call1(OpKind::Expand, {g.add_input("x", DType::i32, {1}), IntList{2}});  // stride 0
  auto a = g.call1(OpKind::WhereScalarOther, {c, x, 2.5});  // i32 with a float scalar: f32
  auto b = g.call1(OpKind::WhereScalarOther, {c, x, 7});    // int scalar: stays i32
  auto e = g.call1(OpKind::Expand, {x, IntList{0, 2}});
  auto z = g.call1(OpKind::WhereScalarOther, {c, e, 1});   // [2] with [0, 2]
  g.outputs = {a, b, z};
  auto out = run(g, {{"c", b8({2}, {0, 1})}, {"x", make(DType::i32, {1}, {4})}});
  expect_tensor(out[0], DType::f32, {2}, {2.5, 4});
  expect_tensor(out[1], DType::i32, {2}, {7, 4});
  expect_tensor(out[2], DType::i32, {0, 2}, {});
}

REF_TEST(WhereScalar, ScalarsDecideTheDtype) {
  Graph g;
  auto c = g.add_input("c", DType::b8, {3});
  auto a = g.call1(OpKind::WhereScalar, {c, 1, 0});       // int scalars: i64
  auto b = g.call1(OpKind::WhereScalar, {c, 1.5, 0});     // a float scalar: f32
  auto d = g.call1(OpKind::WhereScalar, {c, true, false});  // bools: bool
  g.outputs = {a, b, d};
  auto out = run(g, {{"c", b8({3}, {1, 0, 1})}});
  expect_tensor(out[0], DType::i64, {3}, {1, 0, 1});
  expect_tensor(out[1], DType::f32, {3}, {1.5, 0, 1.5});
  expect_tensor(out[2], DType::b8, {3}, {1, 0, 1});
}

REF_TEST(WhereScalar, StridedAndZeroSize) {
  Graph g;
  auto c = g.call1(OpKind::SelectInt, {g.add_input("c", DType::b8, {3, 2}), 1, 1});  // column 1: stride 2
  auto a = g.call1(OpKind::WhereScalar, {c, -2, 3});
  auto z = g.call1(OpKind::WhereScalar, {g.add_input("z", DType::b8, {2, 0}), 1.0, 2.0});
  g.outputs = {a, z};
  auto out = run(g, {{"c", b8({3, 2}, {0, 1, 1, 0, 0, 1})}, {"z", b8({2, 0}, {})}});
  expect_tensor(out[0], DType::i64, {3}, {-2, 3, -2});
  expect_tensor(out[1], DType::f32, {2, 0}, {});
}

}  // namespace
}  // namespace coil::testing
