// Hand-computed cases for the reference interpreter's unary pointwise ops. Inputs are chosen
// so results are exact or well-known constants (exp(ln 2) = 2, sin(pi/6) = 1/2, ...).
#include "test_util.h"

namespace coil::testing {
namespace {

// Runs `op` on `in` in five layouts and expects `want` from each:
//   1. contiguous [n];
//   2. size-1 dims around it: [1, n, 1];
//   3. a strided input buffer (offset 1, stride 2, the gaps hold 0);
//   4. a non-contiguous graph value: select column 1 of an [n, 2] input (stride 2), then
//      unsqueeze + expand to [2, n] (stride 0 on the new dim);
//   5. zero-size [0, 3].
void check_unary(OpKind op, const Values& in, const Values& want, const Kw& kw = {}, DType in_dt = DType::f32,
                 DType out_dt = DType::f32, double rtol = 2e-6) {
  const int64_t n = static_cast<int64_t>(in.size());
  const std::string name(op_schema(op).name);
  auto one = [&](const SymShape& shape, const Tensor& t, const Shape& out_shape, const Values& w) {
    Graph g;
    g.outputs = {g.call1(op, {g.add_input("x", in_dt, shape)}, kw)};
    expect_tensor(run1(g, {{"x", t}}), out_dt, out_shape, w, rtol);
  };
  {
    SCOPED_TRACE(name + " contiguous");
    one({n}, make(in_dt, {n}, in), {n}, want);
  }
  {
    SCOPED_TRACE(name + " size-1 dims");
    one({1, n, 1}, make(in_dt, {1, n, 1}, in), {1, n, 1}, want);
  }
  {
    SCOPED_TRACE(name + " strided input");
    Values buf(static_cast<size_t>(2 * n + 1), 0.0);
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(2 * i + 1)] = in[static_cast<size_t>(i)];
    one({n}, strided(in_dt, {n}, {2}, buf, 1), {n}, want);
  }
  {
    SCOPED_TRACE(name + " select + expand");
    Values buf(static_cast<size_t>(2 * n), 0.0);
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(2 * i + 1)] = in[static_cast<size_t>(i)];
    Graph g;
    auto x = g.add_input("x", in_dt, {n, 2});
    auto col = g.call1(OpKind::SelectInt, {x, 1, 1});
    auto e = g.call1(OpKind::Expand, {g.call1(OpKind::Unsqueeze, {col, 0}), IntList{2, n}});
    g.outputs = {g.call1(op, {e}, kw)};
    Values w2 = want;
    w2.insert(w2.end(), want.begin(), want.end());
    expect_tensor(run1(g, {{"x", make(in_dt, {n, 2}, buf)}}), out_dt, {2, n}, w2, rtol);
  }
  {
    SCOPED_TRACE(name + " zero-size");
    one({0, 3}, make(in_dt, {0, 3}, {}), {0, 3}, {});
  }
}

REF_TEST(Abs, Values) {
  check_unary(OpKind::Abs, {-2, -0.5, 0, 3, -kInf, kNan}, {2, 0.5, 0, 3, kInf, kNan});
  // Integers keep their dtype; |-128| wraps to -128 in i8 as in PyTorch.
  check_unary(OpKind::Abs, {-3, 4, -128}, {3, 4, -128}, {}, DType::i8, DType::i8);
}

REF_TEST(Neg, Values) {
  check_unary(OpKind::Neg, {-2, 0.5, 3, kInf}, {2, -0.5, -3, -kInf});
  check_unary(OpKind::Neg, {5, -7}, {-5, 7}, {}, DType::i64, DType::i64);
}

REF_TEST(Exp, Values) {
  // exp(0) = 1, exp(ln 2) = 2, exp(-ln 2) = 1/2, exp(1) = e, exp(-inf) = 0.
  check_unary(OpKind::Exp, {0, kLn2, -kLn2, 1, -kInf}, {1, 2, 0.5, kE, 0});
  // Integers and bools compute in the default float dtype.
  check_unary(OpKind::Exp, {0, 1, 2}, {1, kE, kE * kE}, {}, DType::i32, DType::f32);
  check_unary(OpKind::Exp, {0, 1}, {1, kE}, {}, DType::b8, DType::f32);
}

REF_TEST(Exp, F64StaysF64) {
  check_unary(OpKind::Exp, {kLn2}, {2}, {}, DType::f64, DType::f64, 1e-15);
}

REF_TEST(Expm1, Values) {
  // expm1(ln 2) = 1, expm1(-ln 2) = -1/2, expm1(x) ~ x for tiny x.
  check_unary(OpKind::Expm1, {0, kLn2, -kLn2, 1e-10}, {0, 1, -0.5, 1e-10}, {}, DType::f32, DType::f32, 1e-6);
  check_unary(OpKind::Expm1, {0, 1}, {0, kE - 1}, {}, DType::i64, DType::f32);
}

REF_TEST(Log, Values) {
  // log(e) = 1, log(1/2) = -ln 2, log(0) = -inf, log(-1) = nan.
  check_unary(OpKind::Log, {1, kE, 0.5, 0, -1}, {0, 1, -kLn2, -kInf, kNan});
  check_unary(OpKind::Log, {1, 4}, {0, 2 * kLn2}, {}, DType::i32, DType::f32);
}

REF_TEST(Log1p, Values) {
  // log1p(e - 1) = 1, log1p(-1/2) = -ln 2, log1p(-1) = -inf.
  check_unary(OpKind::Log1p, {0, kE - 1, -0.5, -1}, {0, 1, -kLn2, -kInf});
  check_unary(OpKind::Log1p, {0, 1}, {0, kLn2}, {}, DType::u8, DType::f32);
}

REF_TEST(Log2, Values) {
  check_unary(OpKind::Log2, {1, 8, 0.5, 0}, {0, 3, -1, -kInf});
  check_unary(OpKind::Log2, {1024}, {10}, {}, DType::i64, DType::f32);
}

REF_TEST(Log10, Values) {
  check_unary(OpKind::Log10, {1, 1000, 0.1, 0}, {0, 3, -1, -kInf});
  check_unary(OpKind::Log10, {100}, {2}, {}, DType::i32, DType::f32);
}

REF_TEST(Sqrt, Values) {
  check_unary(OpKind::Sqrt, {0, 4, 2.25, -1, kInf}, {0, 2, 1.5, kNan, kInf});
  check_unary(OpKind::Sqrt, {9, 2}, {3, std::numbers::sqrt2}, {}, DType::i64, DType::f32);
}

REF_TEST(Rsqrt, Values) {
  // 1/sqrt(4) = 1/2, 1/sqrt(1/4) = 2, 1/sqrt(0) = inf, 1/sqrt(-0) = -inf, 1/sqrt(-1) = nan.
  check_unary(OpKind::Rsqrt, {4, 0.25, 0, -0.0, -1}, {0.5, 2, kInf, -kInf, kNan});
  check_unary(OpKind::Rsqrt, {16}, {0.25}, {}, DType::i32, DType::f32);
}

REF_TEST(Reciprocal, Values) {
  check_unary(OpKind::Reciprocal, {2, -4, 0, -0.0, 0.5}, {0.5, -0.25, kInf, -kInf, 2});
  check_unary(OpKind::Reciprocal, {2, 0}, {0.5, kInf}, {}, DType::i32, DType::f32);  // no integer division
}

REF_TEST(Sin, Values) {
  check_unary(OpKind::Sin, {0, kPi / 2, kPi / 6, -kPi / 2}, {0, 1, 0.5, -1});
  check_unary(OpKind::Sin, {0}, {0}, {}, DType::i64, DType::f32);
}

REF_TEST(Cos, Values) {
  // cos(pi/2) is 0 up to the f32 rounding of pi/2 (about 4e-8).
  check_unary(OpKind::Cos, {0, kPi / 3, kPi, kPi / 2}, {1, 0.5, -1, 0});
  check_unary(OpKind::Cos, {0}, {1}, {}, DType::i16, DType::f32);
}

REF_TEST(Tan, Values) {
  check_unary(OpKind::Tan, {0, kPi / 4, -kPi / 4, kPi / 3}, {0, 1, -1, std::numbers::sqrt3});
  check_unary(OpKind::Tan, {0}, {0}, {}, DType::i8, DType::f32);
}

REF_TEST(Asin, Values) {
  check_unary(OpKind::Asin, {0, 0.5, -1, 1, 2}, {0, kPi / 6, -kPi / 2, kPi / 2, kNan});  // outside [-1, 1]: nan
  check_unary(OpKind::Asin, {1}, {kPi / 2}, {}, DType::i32, DType::f32);
}

REF_TEST(Acos, Values) {
  check_unary(OpKind::Acos, {1, 0.5, -1, 0, -2}, {0, kPi / 3, kPi, kPi / 2, kNan});
  check_unary(OpKind::Acos, {1}, {0}, {}, DType::i64, DType::f32);
}

REF_TEST(Atan, Values) {
  check_unary(OpKind::Atan, {0, 1, -1, kInf, -kInf}, {0, kPi / 4, -kPi / 4, kPi / 2, -kPi / 2});
  check_unary(OpKind::Atan, {1}, {kPi / 4}, {}, DType::i8, DType::f32);
}

REF_TEST(Asinh, Values) {
  // asinh(x) = ln(x + sqrt(x^2 + 1)): asinh(3/4) = ln 2.
  check_unary(OpKind::Asinh, {0, 0.75, -0.75, kInf, -kInf}, {0, std::log(2.0), -std::log(2.0), kInf, -kInf});
  check_unary(OpKind::Asinh, {0}, {0}, {}, DType::i16, DType::f32);
}

REF_TEST(Acosh, Values) {
  // acosh(x) = ln(x + sqrt(x^2 - 1)): acosh(5/4) = ln 2; below 1: nan.
  check_unary(OpKind::Acosh, {1, 1.25, kInf, 0.5}, {0, std::log(2.0), kInf, kNan});
  check_unary(OpKind::Acosh, {1}, {0}, {}, DType::i32, DType::f32);
}

REF_TEST(Atanh, Values) {
  // atanh(x) = ln((1 + x) / (1 - x)) / 2: atanh(1/3) = ln(2) / 2; +-1 are +-inf; beyond: nan.
  check_unary(OpKind::Atanh, {0, 1.0 / 3, -1.0 / 3, 1, -1, 2}, {0, std::log(2.0) / 2, -std::log(2.0) / 2, kInf, -kInf, kNan});
  check_unary(OpKind::Atanh, {0}, {0}, {}, DType::u8, DType::f32);
}

REF_TEST(Sinh, Values) {
  // sinh(x) = (e^x - e^-x) / 2: sinh(ln 2) = (2 - 1/2) / 2 = 3/4.
  check_unary(OpKind::Sinh, {0, std::log(2.0), -std::log(2.0), kInf, -kInf}, {0, 0.75, -0.75, kInf, -kInf});
  check_unary(OpKind::Sinh, {0}, {0}, {}, DType::i32, DType::f32);
}

REF_TEST(Cosh, Values) {
  // cosh(x) = (e^x + e^-x) / 2: cosh(ln 2) = (2 + 1/2) / 2 = 5/4.
  check_unary(OpKind::Cosh, {0, std::log(2.0), -std::log(2.0), kInf, -kInf}, {1, 1.25, 1.25, kInf, kInf});
  check_unary(OpKind::Cosh, {0}, {1}, {}, DType::u8, DType::f32);
}

REF_TEST(Tanh, Values) {
  // tanh(x) = (e^2x - 1)/(e^2x + 1); at x = ln(3)/2 that is (3 - 1)/(3 + 1) = 1/2.
  const double h = std::log(3.0) / 2;
  check_unary(OpKind::Tanh, {0, h, -h, kInf, -kInf}, {0, 0.5, -0.5, 1, -1});
  check_unary(OpKind::Tanh, {0}, {0}, {}, DType::i32, DType::f32);
}

REF_TEST(Sigmoid, Values) {
  // sigmoid(ln 3) = 1/(1 + 1/3) = 3/4; sigmoid(-ln 3) = 1/4; the tails go to 1 and 0.
  const double l3 = std::log(3.0);
  check_unary(OpKind::Sigmoid, {0, l3, -l3, kInf, -kInf, 100}, {0.5, 0.75, 0.25, 1, 0, 1});
  check_unary(OpKind::Sigmoid, {0}, {0.5}, {}, DType::b8, DType::f32);
}

REF_TEST(Erf, Values) {
  // erf(0.5) = 0.5204998778130465 (tables); erf(-x) = -erf(x); erf(+-inf) = +-1.
  check_unary(OpKind::Erf, {0, 0.5, -0.5, kInf, -kInf}, {0, 0.5204998778130465, -0.5204998778130465, 1, -1});
  check_unary(OpKind::Erf, {0}, {0}, {}, DType::i64, DType::f32);
}

REF_TEST(Relu, Values) {
  check_unary(OpKind::Relu, {-1, -0.0, 2.5, kNan, kInf}, {0, 0, 2.5, kNan, kInf});
  check_unary(OpKind::Relu, {-3, 4}, {0, 4}, {}, DType::i32, DType::i32);
}

REF_TEST(Gelu, ExactAndTanh) {
  // x * Phi(x): Phi(1) = 0.8413447460685429, so gelu(1) = 0.8413447..., gelu(-1) = -(1 - Phi(1)),
  // gelu(2) = 2 * Phi(2) = 2 * 0.9772498680518208.
  check_unary(OpKind::Gelu, {0, 1, -1, 2}, {0, 0.841344746068543, -0.15865525393145702, 1.9544997361036416});
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): at x = 1, tanh(0.7978845608 * 1.044715).
  check_unary(OpKind::Gelu, {0, 1, -1, 2}, {0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775},
              {{"approximate", "tanh"}});
  check_unary(OpKind::Gelu, {1}, {0.841344746068543}, {}, DType::f64, DType::f64, 1e-14);
}

REF_TEST(Silu, Values) {
  // x * sigmoid(x): silu(ln 3) = (3/4) ln 3, silu(-ln 3) = -(1/4) ln 3.
  const double l3 = std::log(3.0);
  check_unary(OpKind::Silu, {0, l3, -l3, kInf}, {0, 0.75 * l3, -0.25 * l3, kInf});
}

REF_TEST(LeakyRelu, DefaultAndCustomSlope) {
  check_unary(OpKind::LeakyRelu, {-2, 0, 3, -100, kNan}, {-0.02, 0, 3, -1, kNan});
  check_unary(OpKind::LeakyRelu, {-2, 0, 3, -100}, {-1, 0, 3, -50}, {{"negative_slope", 0.5}});
}

REF_TEST(Elu, DefaultAndScaled) {
  // alpha * (exp(x) - 1) below 0: at -ln 2 that is -1/2; exp(-inf) - 1 = -1.
  check_unary(OpKind::Elu, {0, 1, -kLn2, -kInf}, {0, 1, -0.5, -1});
  // scale * alpha * expm1(input_scale * x) = 3 * 2 * (exp(0.5 * -2 ln 2) - 1) = 6 * (-1/2) = -3;
  // positive x: scale * x = 3.
  check_unary(OpKind::Elu, {-2 * kLn2, 1}, {-3, 3}, {{"alpha", 2}, {"scale", 3}, {"input_scale", 0.5}});
}

REF_TEST(Hardtanh, DefaultAndRelu6) {
  check_unary(OpKind::Hardtanh, {-2, -0.5, 0.5, 2, kNan}, {-1, -0.5, 0.5, 1, kNan});
  check_unary(OpKind::Hardtanh, {-1, 3, 7}, {0, 3, 6}, {{"min_val", 0}, {"max_val", 6}});
  check_unary(OpKind::Hardtanh, {-5, 0, 5}, {-1, 0, 1}, {}, DType::i64, DType::i64);
}

REF_TEST(Floor, Values) {
  check_unary(OpKind::Floor, {-1.5, -0.5, 0.5, 2, kInf}, {-2, -1, 0, 2, kInf});
  check_unary(OpKind::Floor, {3, -3}, {3, -3}, {}, DType::i32, DType::i32);
}

REF_TEST(Ceil, Values) {
  check_unary(OpKind::Ceil, {-1.5, -0.5, 0.5, 2}, {-1, -0.0, 1, 2});
  check_unary(OpKind::Ceil, {3, -3}, {3, -3}, {}, DType::i64, DType::i64);
}

REF_TEST(Round, HalfToEven) {
  check_unary(OpKind::Round, {-2.5, -0.5, 0.5, 1.5, 2.5, 2.6}, {-2, -0.0, 0, 2, 2, 3});
  check_unary(OpKind::Round, {7}, {7}, {}, DType::i32, DType::i32);
}

REF_TEST(Trunc, Values) {
  check_unary(OpKind::Trunc, {-1.7, -0.5, 0.5, 2.9}, {-1, -0.0, 0, 2});
  check_unary(OpKind::Trunc, {-9}, {-9}, {}, DType::i8, DType::i8);
}

REF_TEST(Sign, Values) {
  // sign(nan) is 0 in PyTorch (it computes (0 < x) - (x < 0)).
  check_unary(OpKind::Sign, {-3, 0, 2.5, -kInf, kNan}, {-1, 0, 1, -1, 0});
  check_unary(OpKind::Sign, {-4, 0, 7}, {-1, 0, 1}, {}, DType::i32, DType::i32);
  check_unary(OpKind::Sign, {1, 0}, {1, 0}, {}, DType::b8, DType::b8);
}

REF_TEST(Isnan, Values) {
  check_unary(OpKind::Isnan, {kNan, kInf, 0, -1}, {1, 0, 0, 0}, {}, DType::f32, DType::b8);
  check_unary(OpKind::Isnan, {1, 2}, {0, 0}, {}, DType::i64, DType::b8);
}

REF_TEST(Isinf, Values) {
  check_unary(OpKind::Isinf, {kNan, kInf, -kInf, 1}, {0, 1, 1, 0}, {}, DType::f32, DType::b8);
  check_unary(OpKind::Isinf, {1}, {0}, {}, DType::i32, DType::b8);
}

REF_TEST(LogicalNot, Values) {
  // Only 0 is false; nan is nonzero, so true, so `not` gives false.
  check_unary(OpKind::LogicalNot, {0, 1, -2, kNan}, {1, 0, 0, 0}, {}, DType::f32, DType::b8);
  check_unary(OpKind::LogicalNot, {0, 3}, {1, 0}, {}, DType::i32, DType::b8);
  check_unary(OpKind::LogicalNot, {1, 0}, {0, 1}, {}, DType::b8, DType::b8);
}

REF_TEST(BitwiseNot, IntegersAndBools) {
  // Two's complement: ~x = -x - 1.
  check_unary(OpKind::BitwiseNot, {0, 5, -1}, {-1, -6, 0}, {}, DType::i32, DType::i32);
  check_unary(OpKind::BitwiseNot, {0, 255}, {255, 0}, {}, DType::u8, DType::u8);
  check_unary(OpKind::BitwiseNot, {1, 0}, {0, 1}, {}, DType::b8, DType::b8);
}

}  // namespace
}  // namespace coil::testing
