// Hand-computed cases for the reference interpreter's special functions and the pointwise ops
// around them (copysign, hypot, nextafter, ldexp, frexp, shifts, gcd, lcm, round with
// decimals). Expected values are the functions' known values (30 digits from mpmath, rounded),
// and PyTorch's special values at 0, +-inf, NaN and the poles.
#include "binary_check.h"

namespace coil::testing {
namespace {

// op(in) element-wise must equal `want`: contiguous, through a strided input (offset 1, stride
// 2), and zero-size.
void check_unary(OpKind op, DType in_dt, const Values& in, DType out_dt, const Values& want, const Kw& kw = {},
                 double rtol = 1e-14) {
  const int64_t n = static_cast<int64_t>(in.size());
  const std::string name(op_schema(op).name);
  auto one = [&](const std::string& what, const SymShape& shape, const Tensor& t, const Shape& out_shape, const Values& w) {
    SCOPED_TRACE(name + " " + what);
    Graph g;
    g.outputs = {g.call1(op, {g.add_input("x", in_dt, shape)}, kw)};
    expect_tensor(run1(g, {{"x", t}}), out_dt, out_shape, w, rtol, 0);
  };
  one("contiguous", {n}, make(in_dt, {n}, in), {n}, want);
  Values buf(static_cast<size_t>(2 * n + 1), 0.0);
  for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(2 * i + 1)] = in[static_cast<size_t>(i)];
  one("strided", {n}, strided(in_dt, {n}, {2}, buf, 1), {n}, want);
  one("zero-size", {0, 3}, make(in_dt, {0, 3}, {}), {0, 3}, {});
}

void check_f64(OpKind op, const Values& in, const Values& want) { check_unary(op, DType::f64, in, DType::f64, want); }

REF_TEST(Exp2, Values) {
  check_f64(OpKind::Exp2, {0, 1, -1, 10, 0.5, -kInf, kInf, kNan}, {1, 2, 0.5, 1024, std::numbers::sqrt2, 0, kInf, kNan});
  check_unary(OpKind::Exp2, DType::i32, {3, -2}, DType::f32, {8, 0.25});  // integers become f32
}

REF_TEST(Erfc, Values) {
  check_f64(OpKind::Erfc, {0, 1, kInf, -kInf, kNan}, {1, 0.15729920705028513, 0, 2, kNan});
}

REF_TEST(Erfinv, ValuesAndDomain) {
  check_f64(OpKind::Erfinv, {0, 0.5, -0.5, 0.999, 1, -1, 1.5, -kInf, kNan},
            {0, 0.47693627620446987, -0.47693627620446987, 2.3267537655135245, kInf, -kInf, kNan, kNan, kNan});
}

REF_TEST(SpecialErfcx, Values) {
  check_f64(OpKind::SpecialErfcx, {0, 1, -1, 30, kInf, -kInf, -30, kNan},
            {1, 0.427583576155807, 5.0089800807622835, 0.018795888861416751, 0, kInf, kInf, kNan});
  // f16 is refused, as PyTorch's kernel refuses it.
  Graph g;
  EXPECT_THROW(g.call1(OpKind::SpecialErfcx, {g.add_input("x", DType::f16, {2})}), Error);
}

REF_TEST(Lgamma, ValuesAndPoles) {
  check_f64(OpKind::Lgamma, {1, 2, 0.5, 100, -2.5, 0, -1, -kInf, kInf},
            {0, 0, 0.57236494292470009, 359.1342053695754, -0.056243716497674051, kInf, kInf, kInf, kInf});
}

REF_TEST(Digamma, ValuesAndPoles) {
  // psi(+0) = -inf and psi(-0) = +inf (PyTorch's signs); NaN at the negative integers.
  check_f64(OpKind::Digamma, {1, 0.5, -0.5, 10, 0.0, -0.0, -1, -kInf, kInf},
            {-0.57721566490153286, -1.9635100260214235, 0.036489973978576521, 2.2517525890667211, -kInf, kInf, kNan,
             kNan, kInf});
}

REF_TEST(I0, Values) {
  // NaN at +-inf, as PyTorch's e^|x| times its scaled form is there.
  check_f64(OpKind::I0, {0, 1, -1, 10, kInf, kNan}, {1, 1.2660658777520083, 1.2660658777520083, 2815.7166284662545, kNan, kNan});
}

REF_TEST(SpecialModifiedBesselI0, Values) {
  check_f64(OpKind::SpecialModifiedBesselI0, {0, -1, 10, -kInf}, {1, 1.2660658777520083, 2815.7166284662545, kNan});
}

REF_TEST(SpecialI0e, Values) {
  check_f64(OpKind::SpecialI0e, {0, 1, -10, kInf, 1000}, {1, 0.46575960759364044, 0.12783333716342861, 0, 0.012617240455891257});
}

REF_TEST(SpecialI1, Values) {
  check_f64(OpKind::SpecialI1, {0, 1, -1, 10, kInf}, {0, 0.56515910399248503, -0.56515910399248503, 2670.9883037012547, kNan});
}

REF_TEST(SpecialModifiedBesselI1, Values) {
  check_f64(OpKind::SpecialModifiedBesselI1, {0, -1, 10}, {0, -0.56515910399248503, 2670.9883037012547});
}

REF_TEST(SpecialI1e, Values) {
  check_f64(OpKind::SpecialI1e, {0, 1, -10, -kInf}, {0, 0.20791041534970845, -0.12126268138445552, -0.0});
}

REF_TEST(SpecialBesselJ0, Values) {
  check_f64(OpKind::SpecialBesselJ0, {0, 1, -1, 10, kInf}, {1, 0.76519768655796655, 0.76519768655796655, -0.24593576445134834, kNan});
}

REF_TEST(SpecialBesselJ1, Values) {
  check_f64(OpKind::SpecialBesselJ1, {0, 1, -1, 10, -kInf}, {0, 0.44005058574493352, -0.44005058574493352, 0.043472746168861437, kNan});
}

REF_TEST(SpecialBesselY0, ValuesAndDomain) {
  check_f64(OpKind::SpecialBesselY0, {1, 10, 0, -1, kInf}, {0.088256964215676958, 0.055671167283599391, -kInf, kNan, kNan});
}

REF_TEST(SpecialBesselY1, ValuesAndDomain) {
  check_f64(OpKind::SpecialBesselY1, {1, 10, 0, -1}, {-0.78121282130028872, 0.24901542420695388, -kInf, kNan});
}

REF_TEST(SpecialModifiedBesselK0, ValuesAndDomain) {
  check_f64(OpKind::SpecialModifiedBesselK0, {1, 0.5, 10, 0, -1, kInf},
            {0.42102443824070833, 0.92441907122766586, 1.7780062316167652e-5, kInf, kNan, 0});
}

REF_TEST(SpecialModifiedBesselK1, ValuesAndDomain) {
  check_f64(OpKind::SpecialModifiedBesselK1, {1, 0.5, 10, 0, -1, kInf},
            {0.60190723019723457, 1.6564411200033009, 1.8648773453825585e-5, kInf, kNan, 0});
}

REF_TEST(Signbit, FloatsIntsAndNanSigns) {
  check_unary(OpKind::Signbit, DType::f32, {-0.0, 0.0, -1, 1, -kInf, kNan, -kNan}, DType::b8, {1, 0, 1, 0, 1, 0, 1});
  check_unary(OpKind::Signbit, DType::f16, {-0.0, 2, -kInf}, DType::b8, {1, 0, 1});
  check_unary(OpKind::Signbit, DType::i32, {-3, 0, 5}, DType::b8, {1, 0, 0});
  check_unary(OpKind::Signbit, DType::u8, {0, 200}, DType::b8, {0, 0});
}

REF_TEST(RoundDecimals, PositiveAndNegative) {
  check_unary(OpKind::RoundDecimals, DType::f64, {1.2345, 125.0, -0.125, 2.5}, DType::f64, {1.23, 125, -0.12, 2.5},
              {{"decimals", 2}});
  check_unary(OpKind::RoundDecimals, DType::f32, {14, 15, 25, -35}, DType::f32, {10, 20, 20, -40}, {{"decimals", -1}});
  Graph g;  // integers are refused, as PyTorch refuses them
  EXPECT_THROW(g.call1(OpKind::RoundDecimals, {g.add_input("x", DType::i32, {2})}, {{"decimals", 1}}), Error);
}

REF_TEST(FrexpTensor, MantissaAndExponent) {
  Graph g;
  auto outs = g.call(OpKind::FrexpTensor, {g.add_input("x", DType::f32, {7})});
  g.outputs = {outs[0], outs[1]};
  auto r = run(g, {{"x", f32({7}, {8, 0.75, 0, -3, kInf, kNan, 1e-40})}});
  // 1e-40 (an f32 subnormal) = 0.5444... * 2^-132.
  double tiny = static_cast<float>(1e-40);
  expect_tensor(r[0], DType::f32, {7}, {0.5, 0.75, 0, -0.75, kInf, kNan, std::ldexp(tiny, 132)}, 0, 0);
  expect_tensor(r[1], DType::i32, {7}, {4, 0, 0, 2, 0, 0, -132});
}

REF_TEST(CopysignTensor, SignsOfZeroAndNan) {
  check_binary(OpKind::CopysignTensor, {DType::f32, {1, 2, 3, -4}}, {DType::f32, {-0.0, kNan, -1, 0}}, DType::f32, {-1, 2, -3, 4});
  check_binary(OpKind::CopysignTensor, {DType::i32, {1, -2}}, {DType::i64, {-1, 1}}, DType::f32, {-1, 2});  // ints -> f32
}

REF_TEST(CopysignScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::CopysignScalar, {g.add_input("x", DType::f16, {3}), -2.0})};
  expect_tensor(run1(g, {{"x", make(DType::f16, {3}, {1, -2, 0})}}), DType::f16, {3}, {-1, -2, -0.0});
}

REF_TEST(Hypot, InfinityBeatsNan) {
  check_binary(OpKind::Hypot, {DType::f32, {3, kInf, kNan, 0, -5}}, {DType::f32, {4, kNan, -kInf, -0.0, 12}}, DType::f32,
               {5, kInf, kInf, 0, 13});
}

// Exactly (no tolerance): one step of `dt` from each a toward b.
void check_nextafter(DType dt, const Values& a, const Values& b, const Values& want) {
  const int64_t n = static_cast<int64_t>(a.size());
  Graph g;
  g.outputs = {g.call1(OpKind::Nextafter, {g.add_input("a", dt, {n}), g.add_input("b", dt, {n})})};
  expect_tensor(run1(g, {{"a", make(dt, {n}, a)}, {"b", make(dt, {n}, b)}}), dt, {n}, want, 0, 0);
}

REF_TEST(Nextafter, OneUlpOfTheDtype) {
  check_binary(OpKind::Nextafter, {DType::f32, {1, 1, kNan}}, {DType::f32, {2, 1, 0}}, DType::f32, {1, 1, kNan});  // layouts
  check_nextafter(DType::f32, {1, 1, 0, -0.0, 0}, {2, 1, -1, 1, -0.0},
                  {1 + std::ldexp(1.0, -23), 1, -std::ldexp(1.0, -149), std::ldexp(1.0, -149), -0.0});
  check_nextafter(DType::f64, {1, -1}, {0, -2}, {1 - std::ldexp(1.0, -53), -1 - std::ldexp(1.0, -52)});
  check_nextafter(DType::f16, {1, 0, 65504}, {2, -1, kInf}, {1 + std::ldexp(1.0, -10), -std::ldexp(1.0, -24), kInf});
  check_nextafter(DType::bf16, {1, -1}, {0, 0}, {1 - std::ldexp(1.0, -8), -1 + std::ldexp(1.0, -8)});
}

REF_TEST(LdexpTensor, ExactAndPowerForms) {
  // A float tensor and integer exponents: exact, even where 2^130 alone overflows f32.
  check_binary(OpKind::LdexpTensor, {DType::f32, {1, 3, 1e-30}}, {DType::i32, {2, -1, 130}}, DType::f32, {4, 1.5, 1361129467.683754});
  // Otherwise self * pow(2, other): integers become f32, fractional exponents work.
  check_binary(OpKind::LdexpTensor, {DType::i32, {3, 3}}, {DType::f32, {2, 0.5}}, DType::f32, {12, 3 * std::numbers::sqrt2});
  Graph g;  // bool exponents of a float tensor are refused, as ATen refuses them
  EXPECT_THROW(g.call1(OpKind::LdexpTensor, {g.add_input("x", DType::f32, {2}), g.add_input("n", DType::b8, {2})}), Error);
}

REF_TEST(RemainderScalarTensor, SignOfTheDivisor) {
  Graph g;
  g.outputs = {g.call1(OpKind::RemainderScalarTensor, {5, g.add_input("x", DType::i64, {3})})};
  expect_tensor(run1(g, {{"x", i64({3}, {3, -3, 2})}}), DType::i64, {3}, {2, -1, 1});
}

// The Scalar_Tensor overloads: scalar first.
void check_scalar_first(OpKind op, Arg s, DType dt, const Values& x, DType out, const Values& want) {
  Graph g;
  g.outputs = {g.call1(op, {s, g.add_input("x", dt, {static_cast<int64_t>(x.size())})})};
  expect_tensor(run1(g, {{"x", make(dt, {static_cast<int64_t>(x.size())}, x)}}), out, {static_cast<int64_t>(x.size())}, want);
}

REF_TEST(BitwiseAndScalarTensor, Values) { check_scalar_first(OpKind::BitwiseAndScalarTensor, 6, DType::i32, {3, 5}, DType::i32, {2, 4}); }
REF_TEST(BitwiseOrScalarTensor, Values) { check_scalar_first(OpKind::BitwiseOrScalarTensor, true, DType::b8, {0, 1}, DType::b8, {1, 1}); }
REF_TEST(BitwiseXorScalarTensor, Values) { check_scalar_first(OpKind::BitwiseXorScalarTensor, 6, DType::u8, {3, 255}, DType::u8, {5, 249}); }

// PyTorch's shifts: amounts outside [0, bits) give 0 (left) or the sign fill (right).
REF_TEST(BitwiseLeftShiftTensor, AmountsOutOfRange) {
  check_binary(OpKind::BitwiseLeftShiftTensor, {DType::i8, {-5, 5, -128, 7, 1, -1}}, {DType::i8, {1, 8, 7, 100, -1, 64}}, DType::i8,
               {-10, 0, 0, 0, 0, 0});
  check_binary(OpKind::BitwiseLeftShiftTensor, {DType::u8, {250, 1}}, {DType::u8, {1, 255}}, DType::u8, {244, 0});
}

REF_TEST(BitwiseRightShiftTensor, AmountsOutOfRange) {
  check_binary(OpKind::BitwiseRightShiftTensor, {DType::i8, {-5, 5, -128, 7, 1, -1}}, {DType::i8, {1, 8, 7, 100, -1, 64}}, DType::i8,
               {-3, 0, -1, 0, 0, -1});
  check_binary(OpKind::BitwiseRightShiftTensor, {DType::u8, {250, 200, 255}}, {DType::u8, {1, 7, 64}}, DType::u8, {125, 1, 0});
}

REF_TEST(BitwiseLeftShiftTensorScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::BitwiseLeftShiftTensorScalar, {g.add_input("x", DType::i16, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::i16, {2}, {1, -2})}}), DType::i16, {2}, {8, -16});
}

REF_TEST(BitwiseRightShiftTensorScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::BitwiseRightShiftTensorScalar, {g.add_input("x", DType::i64, {2}), 70})};
  expect_tensor(run1(g, {{"x", i64({2}, {100, -100})}}), DType::i64, {2}, {0, -1});
}

REF_TEST(BitwiseLeftShiftScalarTensor, Values) { check_scalar_first(OpKind::BitwiseLeftShiftScalarTensor, 5, DType::i64, {1, 2, 64}, DType::i64, {10, 20, 0}); }
REF_TEST(BitwiseRightShiftScalarTensor, Values) { check_scalar_first(OpKind::BitwiseRightShiftScalarTensor, -64, DType::i32, {1, 2, 40}, DType::i32, {-32, -16, -1}); }

// Python's x << y and x >> y: the same shifts.
REF_TEST(LshiftTensor, Values) {
  check_binary(OpKind::LshiftTensor, {DType::i32, {3, -1, 1}}, {DType::i32, {2, 31, 32}}, DType::i32, {12, -2147483648.0, 0});
}

REF_TEST(RshiftTensor, Values) {
  check_binary(OpKind::RshiftTensor, {DType::i16, {-64, 64, -1}}, {DType::i16, {3, 16, -2}}, DType::i16, {-8, 0, -1});
}

REF_TEST(LshiftScalar, BoolBecomesInt64) {
  Graph g;  // result_type(bool tensor, int scalar) is i64
  g.outputs = {g.call1(OpKind::LshiftScalar, {g.add_input("x", DType::b8, {2}), 1})};
  expect_tensor(run1(g, {{"x", b8({2}, {1, 0})}}), DType::i64, {2}, {2, 0});
}

REF_TEST(RshiftScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::RshiftScalar, {g.add_input("x", DType::u8, {2}), 9})};
  expect_tensor(run1(g, {{"x", make(DType::u8, {2}, {255, 3})}}), DType::u8, {2}, {0, 0});
  Graph f;  // floats are refused, as PyTorch refuses them
  EXPECT_THROW(f.call1(OpKind::RshiftScalar, {f.add_input("x", DType::f32, {2}), 1}), Error);
}

REF_TEST(Gcd, AbsoluteValuesInTheDtype) {
  // |-128| is -128 in i8, as PyTorch computes it.
  check_binary(OpKind::Gcd, {DType::i8, {-128, 0, -6, 12}}, {DType::i8, {0, 0, 4, 18}}, DType::i8, {-128, 0, 2, 6});
  Graph g;  // floats are refused
  EXPECT_THROW(g.call1(OpKind::Gcd, {g.add_input("a", DType::f32, {2}), g.add_input("b", DType::f32, {2})}), Error);
}

REF_TEST(Lcm, WrapsInTheDtype) {
  check_binary(OpKind::Lcm, {DType::i8, {-128, 0, -6, 100}}, {DType::i8, {3, 0, 4, 3}}, DType::i8, {-128, 0, 12, 44});
  check_binary(OpKind::Lcm, {DType::i64, {4, -6}}, {DType::i64, {6, 4}}, DType::i64, {12, 12});
}

// ---- torch.special's later functions: ndtri, Airy's Ai, the scaled K0/K1, the spherical J0,
// polygamma, Hurwitz zeta and the orthogonal polynomials (values from mpmath).

// polygamma(order, x) element-wise (the order is the first, positional argument).
void check_polygamma(int64_t order, DType in_dt, const Values& in, DType out_dt, const Values& want,
                     double rtol = 1e-14) {
  const int64_t n = static_cast<int64_t>(in.size());
  Graph g;
  g.outputs = {g.call1(OpKind::Polygamma, {order, g.add_input("x", in_dt, {n})})};
  expect_tensor(run1(g, {{"x", make(in_dt, {n}, in)}}), out_dt, {n}, want, rtol, 0);
}

// A polynomial of x (f64) and degree n (f64), as PyTorch reads the degree (an int64).
void check_polynomial(OpKind op, const Values& x, const Values& n, const Values& want) {
  check_binary(op, {DType::f64, x}, {DType::f64, n}, DType::f64, want, {}, 1e-13);
}

REF_TEST(SpecialNdtri, ValuesAndDomain) {
  check_f64(OpKind::SpecialNdtri, {0.25, 0.975, 1e-10, 0.5, 0, 1, -0.5, 1.5, kNan},
            {-0.67448975019608174, 1.9599639845400542, -6.3613409024040562, 0, -kInf, kInf, kNan, kNan, kNan});
  Graph g;  // f16 is refused, as PyTorch's kernel refuses it
  EXPECT_THROW(g.call1(OpKind::SpecialNdtri, {g.add_input("x", DType::f16, {2})}), Error);
}

REF_TEST(SpecialAiryAi, ValuesAndInfinities) {
  // NaN at +-inf, 0 beyond 103.892 (PyTorch's special values).
  check_f64(OpKind::SpecialAiryAi, {-10, -2.5, -1, 0, 1, 2.5, 10, kInf, -kInf, 200},
            {0.040241238486443191, -0.11232506769296609, 0.53556088329235212, 0.35502805388781724, 0.13529241631288142,
             0.01572592338047049, 1.1047532552898686e-10, kNan, kNan, 0});
}

REF_TEST(SpecialScaledModifiedBesselK0, ValuesAndDomain) {
  check_f64(OpKind::SpecialScaledModifiedBesselK0, {0.5, 1, 2, 10, 1000, 0, -1, kInf},
            {1.5241093857739095, 1.144463079806895, 0.84156821507077142, 0.39163193443659867, 0.039628321600754217,
             kInf, kNan, 0});
  check_unary(OpKind::SpecialScaledModifiedBesselK0, DType::i32, {1, 2}, DType::f32,
              {1.144463079806895, 0.84156821507077142}, {}, 1e-7);  // integers become f32
}

REF_TEST(SpecialScaledModifiedBesselK1, ValuesAndDomain) {
  check_f64(OpKind::SpecialScaledModifiedBesselK1, {0.5, 1, 2, 10, 1000, 0, -1, kInf},
            {2.7310097082117857, 1.6361534862632582, 1.0334768470686886, 0.41076657059578875, 0.03964813081296021,
             kInf, kNan, 0});
  check_unary(OpKind::SpecialScaledModifiedBesselK1, DType::i32, {1, 2}, DType::f32,
              {1.6361534862632582, 1.0334768470686886}, {}, 1e-7);  // integers become f32
}

REF_TEST(SpecialSphericalBesselJ0, Values) {
  check_f64(OpKind::SpecialSphericalBesselJ0, {0.25, 1, 10, -3, 0, kInf, -kInf},
            {0.98961583701809172, 0.84147098480789651, -0.054402111088936981, 0.047040002686622407, 1, 0, 0});
}

REF_TEST(Polygamma, OrdersPolesAndNegativeN) {
  // n = 0 is digamma, 1 trigamma, beyond (-1)^(n+1) n! zeta(n + 1, x): infinite at 0 and the
  // negative integers, NaN at +inf.
  check_polygamma(0, DType::f64, {1, 0.5, 10, -0.5}, DType::f64,
                  {-0.57721566490153286, -1.9635100260214235, 2.2517525890667211, 0.036489973978576521});
  check_polygamma(1, DType::f64, {1, 0.5, 10, -0.5, -1.5, 0, kInf}, DType::f64,
                  {1.6449340668482264, 4.9348022005446793, 0.10516633568168575, 8.9348022005446793,
                  9.3792466449891238, kInf, 0}, 1e-13);
  check_polygamma(2, DType::f64, {1, 0.5, 10, -1.5, 0, -2, kInf}, DType::f64,
                  {-2.4041138063191886, -16.82879664423432, -0.011049834970802067, -0.2362040516417274, -kInf,
                  -kInf, kNan}, 1e-13);
  check_polygamma(3, DType::f64, {1, 2.5, 0}, DType::f64, {6.4939394022668291, 0.22390584881725205, kInf}, 1e-13);
  check_polygamma(4, DType::i64, {1, 2}, DType::f32, {-24.886266123440878, -0.88626612344087823}, 1e-7);
  Graph g;  // a negative order is refused, as PyTorch refuses it
  EXPECT_THROW(g.call1(OpKind::Polygamma, {-1, g.add_input("x", DType::f32, {2})}), Error);
}

// Hurwitz zeta(x, q): +inf at x = 1 and at q a non-positive integer, NaN for x < 1, for q < 0
// with x not an integer and at q = +inf (PyTorch's values).
REF_TEST(SpecialZeta, ValuesAndDomain) {
  check_binary(OpKind::SpecialZeta, {DType::f64, {2, 3, 2, 4, 2.5, 1, 0.5, 2, 2, 2.5, 2}},
               {DType::f64, {1, 2, 0.5, -1.5, 10, 3, 3, 0, -1, -1.5, kInf}}, DType::f64,
               {1.6449340668482264, 0.20205690315959429, 4.9348022005446793, 32.432379369864604, 0.022728699194534541,
                kInf, kNan, kInf, kInf, kNan, kNan}, {}, 1e-13);
  check_binary(OpKind::SpecialZeta, {DType::i64, {2}}, {DType::i32, {1}}, DType::f32,
               {1.6449340668482264});  // integers become f32
  Graph g;  // f16 is refused
  EXPECT_THROW(g.call1(OpKind::SpecialZeta, {g.add_input("a", DType::f16, {2}), g.add_input("b", DType::f16, {2})}),
               Error);
}

REF_TEST(SpecialZetaSelfScalar, Values) {
  check_scalar_first(OpKind::SpecialZetaSelfScalar, 2.0, DType::f64, {1, 0.5}, DType::f64,
                     {1.6449340668482264, 4.9348022005446793});
}

REF_TEST(SpecialZetaOtherScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialZetaOtherScalar, {g.add_input("x", DType::f64, {2}), 2.0})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {3, 2})}}), DType::f64, {2},
                {0.20205690315959429, 0.64493406684822644}, 1e-14);
}

REF_TEST(SpecialChebyshevPolynomialT, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialChebyshevPolynomialT, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-0.792, 0.67088, 23.5, 0.388827648, -0.748302036992, 1.0, 0.0});
}

REF_TEST(SpecialChebyshevPolynomialTXScalar, Values) {
  check_scalar_first(OpKind::SpecialChebyshevPolynomialTXScalar, 0.5, DType::i64, {2, 7}, DType::f32, {-0.5, 0.5});
}

REF_TEST(SpecialChebyshevPolynomialTNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialChebyshevPolynomialTNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-0.6875, -9.0}, 1e-14);
}

REF_TEST(SpecialChebyshevPolynomialU, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialChebyshevPolynomialU, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-0.984, 1.39776, 55.0, 0.099088896, -0.883709456384, 1.0, 0.0});
}

REF_TEST(SpecialChebyshevPolynomialUXScalar, Values) {
  check_scalar_first(OpKind::SpecialChebyshevPolynomialUXScalar, 0.5, DType::i64, {2, 7}, DType::f32, {0.0, 1.0});
}

REF_TEST(SpecialChebyshevPolynomialUNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialChebyshevPolynomialUNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-0.875, -21.0}, 1e-14);
}

REF_TEST(SpecialChebyshevPolynomialV, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialChebyshevPolynomialV, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-0.344, 2.43616, 34.0, 1.064884736, -1.560746553344, 1.0, 0.0});
}

REF_TEST(SpecialChebyshevPolynomialVXScalar, Values) {
  check_scalar_first(OpKind::SpecialChebyshevPolynomialVXScalar, 0.5, DType::i64, {2, 7}, DType::f32, {-1.0, 0.0});
}

REF_TEST(SpecialChebyshevPolynomialVNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialChebyshevPolynomialVNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-0.125, -29.0}, 1e-14);
}

REF_TEST(SpecialChebyshevPolynomialW, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialChebyshevPolynomialW, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-1.624, 0.35936, 76.0, -0.866706944, -0.206672359424, 1.0, 0.0});
}

REF_TEST(SpecialChebyshevPolynomialWXScalar, Values) {
  check_scalar_first(OpKind::SpecialChebyshevPolynomialWXScalar, 0.5, DType::i64, {2, 7}, DType::f32, {1.0, 2.0});
}

REF_TEST(SpecialChebyshevPolynomialWNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialChebyshevPolynomialWNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-1.625, -13.0}, 1e-14);
}

REF_TEST(SpecialShiftedChebyshevPolynomialT, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialShiftedChebyshevPolynomialT, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9},
                   {3, 5, 4, 9, 12, 0, -1},
                   {0.944, -1009.53984, 97.0, 0.532929536, 16498.579054071808, 1.0, 0.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialTXScalar, Values) {
  check_scalar_first(OpKind::SpecialShiftedChebyshevPolynomialTXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {-1.0, 0.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialTNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialShiftedChebyshevPolynomialTNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {1.0, -244.0}, 1e-14);
}

REF_TEST(SpecialShiftedChebyshevPolynomialU, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialShiftedChebyshevPolynomialU, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9},
                   {3, 5, 4, 9, 12, 0, -1},
                   {1.088, -2120.07168, 209.0, 0.902223872, 40072.887439446016, 1.0, 0.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialUXScalar, Values) {
  check_scalar_first(OpKind::SpecialShiftedChebyshevPolynomialUXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {-1.0, 0.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialUNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialShiftedChebyshevPolynomialUNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {1.0, -496.0}, 1e-14);
}

REF_TEST(SpecialShiftedChebyshevPolynomialV, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialShiftedChebyshevPolynomialV, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9},
                   {3, 5, 4, 9, 12, 0, -1},
                   {1.448, -2582.79328, 153.0, 1.825459712, 56911.679143284736, 1.0, 0.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialVXScalar, Values) {
  check_scalar_first(OpKind::SpecialShiftedChebyshevPolynomialVXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {-1.0, 1.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialVNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialShiftedChebyshevPolynomialVNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {1.0, -559.0}, 1e-14);
}

REF_TEST(SpecialShiftedChebyshevPolynomialW, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialShiftedChebyshevPolynomialW, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9},
                   {3, 5, 4, 9, 12, 0, -1},
                   {0.728, -1657.35008, 265.0, -0.021011968, 23234.095735607296, 1.0, 0.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialWXScalar, Values) {
  check_scalar_first(OpKind::SpecialShiftedChebyshevPolynomialWXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {-1.0, -1.0});
}

REF_TEST(SpecialShiftedChebyshevPolynomialWNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialShiftedChebyshevPolynomialWNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {1.0, -433.0}, 1e-14);
}

REF_TEST(SpecialHermitePolynomialH, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialHermitePolynomialH, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-3.384, -34.49824, -15.0, 7010.287658496, 366784.27453397402, 1.0, 0.0});
}

REF_TEST(SpecialHermitePolynomialHXScalar, Values) {
  check_scalar_first(OpKind::SpecialHermitePolynomialHXScalar, 0.5, DType::i64, {2, 7}, DType::f32, {-1.0, -461.0});
}

REF_TEST(SpecialHermitePolynomialHNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialHermitePolynomialHNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-2.875, -9.0}, 1e-14);
}

REF_TEST(SpecialHermitePolynomialHe, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialHermitePolynomialHe, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-0.873, -7.23807, -5.4375, 250.390686483, 7982.476754845696, 1.0, 0.0});
}

REF_TEST(SpecialHermitePolynomialHeXScalar, Values) {
  check_scalar_first(OpKind::SpecialHermitePolynomialHeXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {-0.75, -40.0234375});
}

REF_TEST(SpecialHermitePolynomialHeNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialHermitePolynomialHeNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-0.734375, 1.125}, 1e-14);
}

REF_TEST(SpecialLaguerrePolynomialL, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialLaguerrePolynomialL, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {0.2305, 7.5730880833333333, -0.2890625, -0.41794299755200893, 5.0485295098360838, 1.0, 0.0});
}

REF_TEST(SpecialLaguerrePolynomialLXScalar, Values) {
  check_scalar_first(OpKind::SpecialLaguerrePolynomialLXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {0.125, -0.51833922371031746});
}

REF_TEST(SpecialLaguerrePolynomialLNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialLaguerrePolynomialLNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2},
                {0.34114583333333333, 9.4375}, 1e-14);
}

REF_TEST(SpecialLegendrePolynomialP, ValuesAndDegrees) {
  check_polynomial(OpKind::SpecialLegendrePolynomialP, {0.3, -0.7, 1.5, 0.3, -0.2, 2, 0.9}, {3, 5, 4, 9, 12, 0, -1},
                   {-0.3825, 0.36519875, 14.0859375, 0.0637003817578125, -0.185136902144, 1.0, 0.0});
}

REF_TEST(SpecialLegendrePolynomialPXScalar, Values) {
  check_scalar_first(OpKind::SpecialLegendrePolynomialPXScalar, 0.5, DType::i64, {2, 7}, DType::f32,
                     {-0.125, 0.22314453125});
}

REF_TEST(SpecialLegendrePolynomialPNScalar, Values) {
  Graph g;
  g.outputs = {g.call1(OpKind::SpecialLegendrePolynomialPNScalar, {g.add_input("x", DType::f64, {2}), 3})};
  expect_tensor(run1(g, {{"x", make(DType::f64, {2}, {0.25, -1.5})}}), DType::f64, {2}, {-0.3359375, -6.1875}, 1e-14);
}


REF_TEST(SpecialChebyshevPolynomialT, SpecialValuesAndTrigonometricForm) {
  // x = +-1 exactly, cos(n acos x) past degree 6, negative and fractional degrees (truncated),
  // NaN and out-of-range degrees read as a negative one; integer operands compute in f32.
  check_polynomial(OpKind::SpecialChebyshevPolynomialT, {1, -1, -1, 0.5, 0.5, 0.5, 0.5, 0.5},
                   {7, 7, 8, 9, 2.9, -3, kNan, 1e30}, {1, -1, 1, std::cos(9 * std::acos(0.5)), -0.5, 0, 0, 0});
  check_binary(OpKind::SpecialChebyshevPolynomialT, {DType::i64, {2, 3}}, {DType::b8, {1, 0}}, DType::f32, {2, 1});
  Graph g;  // f16 is refused, as PyTorch's kernels refuse it
  EXPECT_THROW(g.call1(OpKind::SpecialChebyshevPolynomialT, {g.add_input("x", DType::f16,
               {2}), g.add_input("n", DType::i64, {2})}),
               Error);
}

REF_TEST(SpecialHermitePolynomialH, DegreeLimitOfTheDtype) {
  // PyTorch's CPU kernels: NaN past degree 128 in f32 and 512 in f64.
  check_binary(OpKind::SpecialHermitePolynomialH, {DType::f32, {0, 0.5}}, {DType::f32, {129, 513}}, DType::f32,
               {kNan, kNan});
  check_polynomial(OpKind::SpecialHermitePolynomialH, {0, 0}, {129, 513}, {0, kNan});
}

}  // namespace
}  // namespace coil::testing
