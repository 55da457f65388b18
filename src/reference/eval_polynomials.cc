// Reference evaluation of torch.special's orthogonal polynomials: Chebyshev T, U, V, W (and
// shifted to [0, 1]), Hermite H and He, Laguerre L, Legendre P. Their definitions are PyTorch's
// own, which the generated code (codegen/special_polynomials.h) follows too: the degree is read
// as an int64 (NaN and values beyond int64 as a negative degree, as the CPU kernels read them),
// negative degrees give 0, the special values at x = +-1, and for the Chebyshev polynomials the
// trigonometric forms cos(n acos x) ... for |x| < 1 beyond a degree. Here in long double, by the
// three-term recurrences.
#include <cmath>
#include <limits>

#include "reference/eval_special.h"

namespace coil::ref {

namespace {

using ld = long double;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

int64_t degree(double n) {
  if (n >= -9223372036854775808.0 && n < 9223372036854775808.0) return static_cast<int64_t>(n);
  return std::numeric_limits<int64_t>::min();
}

// p_n of p_{k+1} = 2y p_k - p_{k-1}, from p_0 = 1 and p_1 = first.
ld chebyshev_recurrence(ld y, ld first, int64_t n) {
  ld p = 1, q = first;
  for (int64_t k = 2; k <= n && !std::isnan(q); ++k) {
    ld r = 2 * y * q - p;
    p = q;
    q = r;
  }
  return q;
}

enum class Kind { t, u, v, w };

// The four kinds at y (y = 2x - 1 for the shifted ones); `edge` is y = +-1 (x = 1 or 0 when
// shifted), `trig_from` the degree beyond which |y| < 1 takes the trigonometric form.
ld chebyshev(Kind kind, ld y, int64_t n, int64_t trig_from, bool shifted) {
  if (n < 0) return 0;
  const ld n1 = static_cast<ld>(n) + 1, odd = 2 * static_cast<ld>(n) + 1;
  const bool even = n % 2 == 0;
  if (std::fabs(y) == 1) {
    bool positive = y > 0;
    switch (kind) {
      case Kind::t: return positive || even ? 1 : -1;
      case Kind::u: return positive || even ? n1 : -n1;
      case Kind::v: return positive ? 1 : (even ? odd : -odd);
      case Kind::w: return positive ? odd : (even ? 1 : -1);
    }
  }
  if (n > trig_from && std::fabs(y) < 1) {
    ld theta = std::acos(y);
    switch (kind) {
      case Kind::t: return std::cos(n * theta);
      case Kind::u:
        if (std::sin(theta) != 0) return std::sin(n1 * theta) / std::sin(theta);
        return n1 * std::cos(n1 * theta) / y;
      case Kind::v:
        if (std::sin(theta / 2) != 1) return std::cos((n + 0.5L) * theta) / std::cos(theta / 2);
        return even ? odd : -odd;
      case Kind::w:
        if (std::cos(theta / 2) != 1) return std::sin((n + 0.5L) * theta) / std::sin(theta / 2);
        if (y > 0 && !shifted) return odd;
        return even ? 1 : -1;
    }
  }
  ld first = kind == Kind::t ? y : kind == Kind::u ? 2 * y : kind == Kind::v ? 2 * y - 1 : 2 * y + 1;
  if (n == 0) return 1;
  if (n == 1) return first;
  return chebyshev_recurrence(y, first, n);
}

// Hermite: NaN beyond degree 128 in f32, 512 in f64 (PyTorch's CPU kernels).
ld hermite(bool physicists, ld x, int64_t n, DType compute) {
  if (n < 0) return 0;
  if (n == 0) return 1;
  if (n == 1) return physicists ? 2 * x : x;
  if (n > (compute == DType::f32 ? 128 : 512)) return kNan;
  ld p = 1, q = physicists ? 2 * x : x;
  for (int64_t k = 1; k < n; ++k) {
    ld r = physicists ? 2 * x * q - 2 * k * p : x * q - k * p;
    p = q;
    q = r;
  }
  return q;
}

ld laguerre(ld x, int64_t n) {
  if (n < 0) return 0;
  if (x == 0 || n == 0) return 1;
  ld p = 1, q = 1 - x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    ld r = ((2 * k + 1 - x) * q - k * p) / (k + 1);
    p = q;
    q = r;
  }
  return q;
}

ld legendre(ld x, int64_t n) {
  if (n < 0) return 0;
  if (std::fabs(x) == 1) return x > 0 || n % 2 == 0 ? 1 : -1;
  if (n == 0) return 1;
  ld p = 1, q = x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    ld r = ((2 * k + 1) * x * q - k * p) / (k + 1);
    p = q;
    q = r;
  }
  return q;
}

// A shifted polynomial at x: x = 1 and x = 0 are its y = +-1 (tested on x itself, as PyTorch).
ld shifted(Kind kind, ld x, int64_t n, int64_t trig_from) {
  ld y = x == 1 ? 1 : x == 0 ? -1 : 2 * x - 1;
  return chebyshev(kind, y, n, trig_from, true);
}

}  // namespace

std::optional<double> polynomial(OpKind op, double x, double n, DType compute) {
  const ld X = x;
  const int64_t k = degree(n);
  auto is = [op](OpKind a, OpKind b, OpKind c) { return op == a || op == b || op == c; };
#define COIL_IS(name) is(OpKind::Special##name, OpKind::Special##name##XScalar, OpKind::Special##name##NScalar)
  ld r;
  if (COIL_IS(ChebyshevPolynomialT)) r = chebyshev(Kind::t, X, k, 6, false);
  else if (COIL_IS(ChebyshevPolynomialU)) r = chebyshev(Kind::u, X, k, 8, false);
  else if (COIL_IS(ChebyshevPolynomialV)) r = chebyshev(Kind::v, X, k, 8, false);
  else if (COIL_IS(ChebyshevPolynomialW)) r = chebyshev(Kind::w, X, k, 8, false);
  else if (COIL_IS(ShiftedChebyshevPolynomialT)) r = shifted(Kind::t, X, k, 6);
  else if (COIL_IS(ShiftedChebyshevPolynomialU)) r = shifted(Kind::u, X, k, 6);
  else if (COIL_IS(ShiftedChebyshevPolynomialV)) r = shifted(Kind::v, X, k, 6);
  else if (COIL_IS(ShiftedChebyshevPolynomialW)) r = shifted(Kind::w, X, k, 4);
  else if (COIL_IS(HermitePolynomialH)) r = hermite(true, X, k, compute);
  else if (COIL_IS(HermitePolynomialHe)) r = hermite(false, X, k, compute);
  else if (COIL_IS(LaguerrePolynomialL)) r = laguerre(X, k);
  else if (COIL_IS(LegendrePolynomialP)) r = legendre(X, k);
  else return std::nullopt;
#undef COIL_IS
  return static_cast<double>(r);
}

}  // namespace coil::ref
