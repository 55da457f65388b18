// f16 / bf16 semantics that depend on where PyTorch rounds: operands are converted to the
// op's dtype, except that add/sub/mul/div (and div's rounding modes) keep a CPU scalar in the
// f32 "opmath" type. f16(0.1) = 0.0999755859375, f32(0.1) = 0.100000001490116...
// Each expectation was derived by hand from those two values and confirmed with torch 2.11.
#include "binary_check.h"

namespace coil::testing {
namespace {

REF_TEST(MulScalar, HalfKeepsTheScalarInF32) {
  // 3 * f32(0.1) = 0.3000000045 -> f16 (spacing 2^-12 in [0.25, 0.5)): 1228.8 -> 1229 * 2^-12.
  // (With f16(0.1) it would be 0.2999267578125 = 1228.5 steps -> 1228 * 2^-12 = 0.2998046875.)
  check_scalar(OpKind::MulScalar, {DType::f16, {3}}, 0.1, DType::f16, {0.300048828125}, {}, 0);
}

REF_TEST(AddScalar, Half) {
  // 1.1 -> f16 (spacing 2^-10 in [1, 2)): 102.4 steps above 1 -> 102: 1.099609375.
  check_scalar(OpKind::AddScalar, {DType::f16, {1}}, 0.1, DType::f16, {1.099609375}, {}, 0);
}

REF_TEST(DivScalarMode, HalfFloorUsesF32Scalar) {
  // fmod(1, f32(0.1)) = 0.0999999940 (ten times 0.100000001 exceeds 1), so the floor is 9.
  check_scalar(OpKind::DivScalarMode, {DType::f16, {1}}, 0.1, DType::f16, {9}, {{"rounding_mode", "floor"}}, 0);
}


REF_TEST(RemainderScalar, HalfRoundsTheScalarToHalf) {
  // 1 - 10 * 0.0999755859375 = 0.000244140625 (= 2^-12, exact in f16).
  check_scalar(OpKind::RemainderScalar, {DType::f16, {1}}, 0.1, DType::f16, {0.000244140625}, {}, 0);
}

REF_TEST(FmodScalar, HalfRoundsTheScalarToHalf) {
  check_scalar(OpKind::FmodScalar, {DType::f16, {1}}, 0.1, DType::f16, {0.000244140625}, {}, 0);
}

REF_TEST(RemainderTensor, HalfWithZeroDimF32) {
  Graph g;
  g.outputs = {g.call1(OpKind::RemainderTensor, {g.add_input("h", DType::f16, {1}), g.add_input("s", DType::f32, {})})};
  expect_tensor(run1(g, {{"h", make(DType::f16, {1}, {1})}, {"s", f32({}, {0.1})}}), DType::f16, {1}, {0.000244140625}, 0, 0);
}

// Reductions with dtype=f16 convert the input to f16 first, then accumulate in f32:
// f32 [2049, 1] -> f16 [2048, 1]; 2048 + 1 = 2049 -> f16 ties to even: 2048.

REF_TEST(Sum, DtypeHalfCastsTheInputFirst) {
  Graph g;
  g.outputs = {g.call1(OpKind::Sum, {g.add_input("x", DType::f32, {2})}, {{"dtype", DType::f16}})};
  expect_tensor(run1(g, {{"x", f32({2}, {2049, 1})}}), DType::f16, {}, {2048}, 0, 0);
}

REF_TEST(Cumsum, DtypeHalfCastsTheInputFirst) {
  Graph g;
  g.outputs = {g.call1(OpKind::Cumsum, {g.add_input("x", DType::f32, {2}), 0}, {{"dtype", DType::f16}})};
  expect_tensor(run1(g, {{"x", f32({2}, {2049, 1})}}), DType::f16, {2}, {2048, 2048}, 0, 0);
}

REF_TEST(Mean, DtypeHalfComputesInTheInputDtype) {
  // Unlike sum, PyTorch's mean(dtype=f16) of an f32 input averages in f32 and converts the
  // result: (2049 + 2) / 2 = 1025.5 -> f16 (spacing 1 in [1024, 2048)) ties to even: 1026.
  // (Converting the input first would give (2048 + 2) / 2 = 1025.)
  Graph g;
  auto x = g.add_input("x", DType::f32, {2});
  g.outputs = {g.call1(OpKind::Mean, {x}, {{"dtype", DType::f16}}),
               g.call1(OpKind::MeanDim, {x, IntList{0}}, {{"dtype", DType::f16}})};
  auto out = run(g, {{"x", f32({2}, {2049, 2})}});
  expect_tensor(out[0], DType::f16, {}, {1026}, 0, 0);
  expect_tensor(out[1], DType::f16, {}, {1026}, 0, 0);
}

}  // namespace
}  // namespace coil::testing
