// Reference evaluation of the special functions and the pointwise ops around them. Independent
// of the generated code's algorithms where it can be: the C++ library's Bessel functions
// (std::cyl_bessel_*), erfc and exp in long double, Newton's method on erf for erfinv. Special
// values follow PyTorch's (I0(inf) NaN, digamma(-0) = +inf, ...), which the generated code
// matches by construction and this file states case by case.
#include "reference/eval_special.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "graph/infer_util.h"
#include "support/check.h"
#include "support/half.h"

namespace coil::ref {

namespace {

using ld = long double;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double erfinv(double y) {
  double a = std::fabs(y);
  if (!(a <= 1)) return kNan;
  if (a == 1) return std::copysign(kInf, y);
  // Winitzki's closed-form approximation (about 2e-3 relative), then Newton in long double: on
  // erf near 0, on erfc in the tails where 1 - |y| is exact.
  ld l = std::log1p(-static_cast<ld>(y) * y), k = 2 / (std::numbers::pi_v<ld> * 0.147L) + l / 2;
  ld x = std::copysign(std::sqrt(std::sqrt(k * k - l / 0.147L) - k), static_cast<ld>(y));
  const ld slope = 2 / std::sqrt(std::numbers::pi_v<ld>);
  for (int i = 0; i < 6; ++i) {
    if (a <= 0.5) {
      x -= (std::erf(x) - y) / (slope * std::exp(-x * x));
    } else {
      ld t = std::fabs(x);
      t += (std::erfc(t) - (1 - static_cast<ld>(a))) / (slope * std::exp(-t * t));
      x = std::copysign(t, static_cast<ld>(y));
    }
  }
  return static_cast<double>(x);
}

// e^(x^2) erfc(x): long double's range holds both factors up to |x| ~ 100; from 30 the
// asymptotic series. Below -26.7 PyTorch gives inf (2 e^(x^2) overflows a double there anyway).
double erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < -26.7) return kInf;
  if (x < 30) return static_cast<double>(std::exp(static_cast<ld>(x) * x) * std::erfc(static_cast<ld>(x)));
  ld z = 1 / (2 * static_cast<ld>(x) * x), term = 1, sum = 1;
  for (int k = 1; k < 16; ++k) sum += (term *= -(2 * k - 1) * z);
  return static_cast<double>(sum / (x * std::sqrt(std::numbers::pi_v<ld>)));
}

// psi by reflection for x < 0, the recurrence up to 16, then the asymptotic series with the
// Bernoulli numbers B_2 .. B_16. PyTorch's signs at zero: psi(+0) = -inf, psi(-0) = +inf.
double digamma(double xd) {
  if (xd == 0) return std::copysign(kInf, -xd);
  if (std::isnan(xd)) return xd;
  ld x = xd, acc = 0;
  if (x < 0) {
    if (x == std::floor(x)) return kNan;
    acc = -std::numbers::pi_v<ld> / std::tan(std::numbers::pi_v<ld> * (x - std::trunc(x)));
    x = 1 - x;
  }
  for (; x < 16; x += 1) acc -= 1 / x;
  const ld b[] = {1.0L / 12, -1.0L / 120, 1.0L / 252, -1.0L / 240, 1.0L / 132, -691.0L / 32760, 1.0L / 12, -3617.0L / 8160};
  ld z = 1 / (x * x), zk = z, series = 0;
  for (ld c : b) series += c * zk, zk *= z;
  return static_cast<double>(acc + std::log(x) - 1 / (2 * x) - series);
}

// e^-|x| I_nu(|x|): the library's I_nu in long double up to 700, then the asymptotic series
// 1/sqrt(2 pi x) * sum_k (-1)^k a_k(nu) / x^k.
double scaled_bessel_i(int nu, double x) {
  ld a = std::fabs(static_cast<ld>(x));
  if (std::isnan(x)) return x;
  if (a <= 700) return static_cast<double>(std::cyl_bessel_i(static_cast<ld>(nu), a) * std::exp(-a));
  ld mu = 4.0L * nu * nu, term = 1, sum = 1;
  for (int k = 1; k < 8; ++k) {
    term *= -(mu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * a);
    sum += term;
  }
  return static_cast<double>(sum / std::sqrt(2 * std::numbers::pi_v<ld> * a));
}

double bessel_i(int nu, double x, bool scaled) {
  if (std::isinf(x) && !scaled) return kNan;  // PyTorch: e^|x| times its scaled form, inf * 0
  double r = scaled ? scaled_bessel_i(nu, x)
                    : static_cast<double>(std::cyl_bessel_i(static_cast<ld>(nu), std::fabs(static_cast<ld>(x))));
  return nu == 1 && x < 0 ? -r : r;
}

double bessel_k(int nu, double x) {
  if (std::isnan(x) || x < 0) return kNan;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0;
  return static_cast<double>(std::cyl_bessel_k(static_cast<ld>(nu), static_cast<ld>(x)));
}

// J is even (nu = 0) or odd (nu = 1); Y is -inf at 0 and NaN below; both NaN at +-inf.
double bessel_j(int nu, double x) {
  if (std::isnan(x) || std::isinf(x)) return kNan;
  double r = static_cast<double>(std::cyl_bessel_j(static_cast<ld>(nu), std::fabs(static_cast<ld>(x))));
  return nu == 1 && x < 0 ? -r : r;
}

double bessel_y(int nu, double x) {
  if (std::isnan(x) || std::isinf(x) || x < 0) return kNan;
  if (x == 0) return -kInf;
  return static_cast<double>(std::cyl_neumann(static_cast<ld>(nu), static_cast<ld>(x)));
}

// e^x K_nu(x) (PyTorch's scaled_modified_bessel_k0/k1): the library's K_nu in long double up to
// 700, then the asymptotic series sqrt(pi / (2x)) * sum_k a_k(nu) / x^k.
double scaled_bessel_k(int nu, double x) {
  if (std::isnan(x) || x < 0) return kNan;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0;
  ld a = x;
  if (a <= 700) return static_cast<double>(std::cyl_bessel_k(static_cast<ld>(nu), a) * std::exp(a));
  ld mu = 4.0L * nu * nu, term = 1, sum = 1;
  for (int k = 1; k < 8; ++k) {
    term *= (mu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * a);
    sum += term;
  }
  return static_cast<double>(sum * std::sqrt(std::numbers::pi_v<ld> / (2 * a)));
}

// sin(x) / x; 1 at 0 and 0 at +-inf, as PyTorch gives.
double spherical_bessel_j0(double x) {
  if (std::isinf(x)) return 0;
  if (x == 0) return 1;
  return static_cast<double>(std::sin(static_cast<ld>(x)) / x);
}

// Ai through the Bessel functions of order 1/3 (DLMF 9.6): sqrt(x/3) K_1/3(z) / pi for x > 0,
// sqrt(-x) / 2 (J_1/3(z) - Y_1/3(z) / sqrt(3)) below, z = 2/3 |x|^1.5. PyTorch's special values:
// NaN at +-inf, 0 beyond 103.892.
double airy_ai(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return kNan;
  if (x > 103.892) return 0;
  if (x == 0) return 0.355028053887817239260;
  const ld third = 1.0L / 3, a = std::fabs(static_cast<ld>(x)), z = 2 * a * std::sqrt(a) / 3;
  if (x > 0) return static_cast<double>(std::sqrt(a / 3) * std::cyl_bessel_k(third, z) / std::numbers::pi_v<ld>);
  return static_cast<double>(std::sqrt(a) / 2 * (std::cyl_bessel_j(third, z) - std::cyl_neumann(third, z) / std::sqrt(3.0L)));
}

// The normal quantile by Newton's method on log Phi(x) = log y (concave, so it converges from
// the tails' first guess), Phi by long double erfc; the upper half by symmetry (1 - y is exact).
double ndtri(double y) {
  if (std::isnan(y)) return y;
  if (y == 0) return -kInf;
  if (y == 1) return kInf;
  if (y < 0 || y > 1) return kNan;
  if (y > 0.5) return -ndtri(1 - y);
  const ld sqrt2 = std::numbers::sqrt2_v<ld>, sqrt2pi = std::sqrt(2 * std::numbers::pi_v<ld>);
  const ld target = std::log(static_cast<ld>(y));
  ld x = y > 0.1 ? (y - 0.5L) * sqrt2pi : -std::sqrt(-2 * target);
  for (int i = 0; i < 200; ++i) {
    ld cdf = std::erfc(-x / sqrt2) / 2, pdf = std::exp(-x * x / 2) / sqrt2pi;
    ld step = (std::log(cdf) - target) * cdf / pdf;
    x -= step;
    if (std::fabs(step) <= 1e-19L * std::fabs(x)) break;
  }
  return static_cast<double>(x);
}

}  // namespace

// Hurwitz zeta by Euler-Maclaurin in long double: the first terms summed directly (past -q when
// q < 0), the integral and the Bernoulli corrections of the tail. PyTorch's special values: +inf
// at s = 1 and at q a non-positive integer, NaN for s < 1, for q < 0 with s not an integer and
// for q = +inf (its sum meets 0 * inf there).
double hurwitz_zeta(double s, double q) {
  if (std::isnan(s) || std::isnan(q)) return kNan;
  if (s == 1) return kInf;
  if (s < 1) return kNan;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (s != std::floor(s)) return kNan;
  }
  if (std::isinf(q)) return kNan;
  if (std::isinf(s)) return q == 1 ? 1 : (q < 1 ? kInf : kNan);
  const ld S = s, Q = q;
  const int64_t direct = 24 + (q < 0 ? static_cast<int64_t>(-q) : 0);
  ld sum = 0;
  for (int64_t k = 0; k < direct; ++k) sum += std::pow(Q + k, -S);
  const ld a = Q + direct;
  sum += std::pow(a, 1 - S) / (S - 1) + std::pow(a, -S) / 2;
  // B_2j / (2j)!, j = 1..8
  const ld b[] = {1.0L / 12, -1.0L / 720, 1.0L / 30240, -1.0L / 1209600, 1.0L / 47900160, -691.0L / 1307674368000,
                  1.0L / 74724249600, -3617.0L / 10670622842880000};
  ld rising = S, power = std::pow(a, -S - 1);
  for (int j = 0; j < 8; ++j) {
    sum += b[j] * rising * power;
    rising *= (S + 2 * j + 1) * (S + 2 * j + 2);
    power /= a * a;
  }
  return static_cast<double>(sum);
}

namespace {

// polygamma: digamma (n = 0); trigamma as zeta(2, x), reflected below 1/2 (pi^2 / sin^2(pi x),
// sin of pi times x's distance to the nearest integer); (-1)^(n+1) n! zeta(n + 1, x) beyond.
double polygamma(int64_t n, double x) {
  if (n == 0) return digamma(x);
  if (std::isnan(x)) return x;
  if (n == 1) {
    if (std::isinf(x)) return x > 0 ? 0 : kNan;
    if (x >= 0.5) return hurwitz_zeta(2, x);
    ld s = std::sin(std::numbers::pi_v<ld> * (static_cast<ld>(x) - std::nearbyint(static_cast<ld>(x))));
    return static_cast<double>(std::numbers::pi_v<ld> * std::numbers::pi_v<ld> / (s * s) - hurwitz_zeta(2, 1 - x));
  }
  ld factorial = std::tgamma(static_cast<ld>(n) + 1);
  return static_cast<double>((n % 2 ? 1 : -1) * factorial * hurwitz_zeta(static_cast<double>(n + 1), x));
}

// round(x, decimals) as ATen computes it in the op's compute type: x * 10^d rounded to an
// integer, divided by 10^d (for d < 0: x / 10^-d rounded, times 10^-d), each step rounded.
double round_decimals(double x, int64_t decimals, DType t) {
  auto r = [t](double v) { return opmath_round(v, t); };
  double p = r(std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals)));
  if (decimals < 0) return r(std::nearbyint(r(x / p)) * p);
  return r(std::nearbyint(r(x * p)) / p);
}

// One step toward `to` in the format of `t` (f16 and bf16 by their own bits).
double nextafter_in(double from, double to, DType t) {
  if (std::isnan(from) || std::isnan(to)) return kNan;
  if (from == to) return to;
  if (t == DType::f64) return std::nextafter(from, to);
  if (t == DType::f32) return std::nextafter(static_cast<float>(from), static_cast<float>(to));
  bool half = t == DType::f16;
  uint16_t bits = half ? f16_bits_from_double(from) : bf16_bits_from_double(from);
  if ((bits & 0x7fff) == 0) bits = to > from ? 0x0001 : 0x8001;
  else bits = static_cast<uint16_t>((from < to) == (from > 0) ? bits + 1 : bits - 1);
  return half ? f16_bits_to_double(bits) : bf16_bits_to_double(bits);
}

// PyTorch's gcd and lcm on the values of integer dtype `t`: absolute values taken in `t` (|-128|
// is -128 in i8), lcm = |a / g * b| in C++'s promoted type (int for the narrow dtypes), wrapped.
int64_t abs_in(int64_t v, DType t) { return wrap_int(v < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v)) : v, t); }

int64_t gcd_in(int64_t a, int64_t b, DType t) {
  int64_t x = abs_in(a, t), y = abs_in(b, t);
  while (x != 0) {
    int64_t c = x;
    x = wrap_int(y % x, t);
    y = c;
  }
  return y;
}

int64_t lcm_in(int64_t a, int64_t b, DType t) {
  int64_t g = gcd_in(a, b, t);
  if (g == 0) return 0;
  DType promoted = dtype_size(t) < 4 ? DType::i32 : t;
  int64_t m = wrap_int(static_cast<int64_t>(static_cast<uint64_t>(a / g) * static_cast<uint64_t>(b)), promoted);
  return wrap_int(abs_in(m, promoted), t);
}

}  // namespace

std::optional<double> special_unary(const NodeEval& e, double x) {
  switch (e.op()) {
    case OpKind::Exp2: return std::exp2(x);
    case OpKind::Erfc: return std::erfc(x);
    case OpKind::Erfinv: return erfinv(x);
    case OpKind::SpecialErfcx: return erfcx(x);
    case OpKind::Lgamma: {
      int sign;
      return ::lgamma_r(x, &sign);  // lgamma writes the global signgam
    }
    case OpKind::Digamma: return digamma(x);
    case OpKind::I0: case OpKind::SpecialModifiedBesselI0: return bessel_i(0, x, false);
    case OpKind::SpecialI0e: return bessel_i(0, x, true);
    case OpKind::SpecialI1: case OpKind::SpecialModifiedBesselI1: return bessel_i(1, x, false);
    case OpKind::SpecialI1e: return bessel_i(1, x, true);
    case OpKind::SpecialModifiedBesselK0: return bessel_k(0, x);
    case OpKind::SpecialModifiedBesselK1: return bessel_k(1, x);
    case OpKind::SpecialBesselJ0: return bessel_j(0, x);
    case OpKind::SpecialBesselJ1: return bessel_j(1, x);
    case OpKind::SpecialBesselY0: return bessel_y(0, x);
    case OpKind::SpecialBesselY1: return bessel_y(1, x);
    case OpKind::SpecialScaledModifiedBesselK0: return scaled_bessel_k(0, x);
    case OpKind::SpecialScaledModifiedBesselK1: return scaled_bessel_k(1, x);
    case OpKind::SpecialSphericalBesselJ0: return spherical_bessel_j0(x);
    case OpKind::SpecialAiryAi: return airy_ai(x);
    case OpKind::SpecialNdtri: return ndtri(x);
    case OpKind::Polygamma: return polygamma(e.integer("n"), x);
    case OpKind::Signbit: return std::signbit(x) ? 1.0 : 0.0;
    case OpKind::RoundDecimals: return round_decimals(x, e.integer("decimals"), e.out_dtype());
    default: return std::nullopt;
  }
}

std::optional<int64_t> special_unary_int(OpKind op, int64_t x, DType) {
  if (op == OpKind::Signbit) return x < 0;
  return std::nullopt;
}

std::optional<double> special_binary(OpKind op, double a, double b, DType compute) {
  switch (op) {
    case OpKind::CopysignTensor: case OpKind::CopysignScalar: return std::copysign(a, b);
    case OpKind::Hypot: return std::hypot(a, b);
    case OpKind::Nextafter: return nextafter_in(a, b, compute);
    case OpKind::SpecialZeta: case OpKind::SpecialZetaSelfScalar: case OpKind::SpecialZetaOtherScalar:
      return hurwitz_zeta(a, b);
    default: return polynomial(op, a, b, compute);
  }
}

std::optional<int64_t> special_binary_int(OpKind op, int64_t a, int64_t b, DType t) {
  const int64_t bits = dtype_size(t) * 8;
  bool outside = b < 0 || b >= bits;
  switch (op) {
    case OpKind::BitwiseLeftShiftTensor: case OpKind::BitwiseLeftShiftTensorScalar: case OpKind::BitwiseLeftShiftScalarTensor:
    case OpKind::LshiftTensor: case OpKind::LshiftScalar:
      return outside ? 0 : wrap_int(static_cast<int64_t>(static_cast<uint64_t>(a) << b), t);
    case OpKind::BitwiseRightShiftTensor: case OpKind::BitwiseRightShiftTensorScalar: case OpKind::BitwiseRightShiftScalarTensor:
    case OpKind::RshiftTensor: case OpKind::RshiftScalar:
      return outside ? (a < 0 ? -1 : 0) : a >> b;
    case OpKind::Gcd: return gcd_in(a, b, t);
    case OpKind::Lcm: return lcm_in(a, b, t);
    default: return std::nullopt;
  }
}

std::vector<Tensor> eval_frexp(const NodeEval& e) {
  Tensor mantissa = e.new_output(0), exponent = e.new_output(1);
  Tensor x = broadcast_to(e.tensor("self"), mantissa.sizes());
  for_each_index(mantissa.sizes(), [&](const Shape& idx) {
    double v = at(x, idx);
    int ex = 0;
    double m = std::frexp(v, &ex);
    set(mantissa, idx, m);
    exponent.store_int(exponent.element_index(idx), std::isfinite(v) ? ex : 0);
  });
  return {mantissa, exponent};
}

std::vector<Tensor> eval_ldexp(const NodeEval& e) {
  Tensor out = e.new_output();
  const Tensor& self = e.tensor("self");
  const Tensor& other = e.tensor("other");
  DType t = out.dtype();
  Tensor x = broadcast_to(self, out.sizes()), n = broadcast_to(other, out.sizes());
  const bool exact = ldexp_is_exact(self.dtype(), other.dtype());
  const DType power = ldexp_power_dtype(self.dtype(), other.dtype(), other.dim() == 0, t);
  for_each_index(out.sizes(), [&](const Shape& idx) {
    double v = opmath_round(at(x, idx), t);
    if (exact) {
      // ATen's ldexp takes the exponent as a C int.
      auto k = static_cast<int32_t>(n.load_int(n.element_index(idx)));
      set(out, idx, std::ldexp(v, k));
      return;
    }
    double p = round_to_dtype(std::pow(2.0, opmath_round(round_to_dtype(at(n, idx), power), power)), power);
    set(out, idx, v * opmath_round(round_to_dtype(p, t), t));  // the power in self's dtype, as the product reads it
  });
  return {out};
}

}  // namespace coil::ref
