// Special functions of the CPU prelude, appended to a translation unit only when one of its
// kernels calls one (codegen::uses_special_functions), so the common unit compiles no faster
// or slower for them. glibc has exp2, erfc and hypot (with libmvec's vector variants), lgamma_r,
// the Bessel functions j0, j1, y0, y1, nextafter, frexp and ldexp; the rest are the templates
// of codegen/special_prelude.h (put at the `@special-helpers` line), evaluated in double for
// float operands too, which is at least as accurate as PyTorch's float kernels, but for the
// orthogonal polynomials (codegen/special_polynomials.h), whose float recurrences PyTorch rounds
// at every step: those run in the operand's type.
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define COIL_SIMD __attribute__((simd("notinbranch")))
#else
#define COIL_SIMD
#endif
extern "C" {
COIL_SIMD float exp2f(float) noexcept;
COIL_SIMD double exp2(double) noexcept;
COIL_SIMD float erfcf(float) noexcept;
COIL_SIMD double erfc(double) noexcept;
COIL_SIMD float hypotf(float, float) noexcept;
COIL_SIMD double hypot(double, double) noexcept;
double lgamma_r(double, int*) noexcept;
double j0(double) noexcept;
double j1(double) noexcept;
double y0(double) noexcept;
double y1(double) noexcept;
float nextafterf(float, float) noexcept;
double nextafter(double, double) noexcept;
float frexpf(float, int*) noexcept;
double frexp(double, int*) noexcept;
float ldexpf(float, int) noexcept;
double ldexp(double, int) noexcept;
double fma(double, double, double) noexcept;
}
#undef COIL_SIMD

namespace coil_rt {

inline float exp2(float x) { return ::exp2f(x); }
inline double exp2(double x) { return ::exp2(x); }
inline float erfc(float x) { return ::erfcf(x); }
inline double erfc(double x) { return ::erfc(x); }
inline float hypot(float a, float b) { return ::hypotf(a, b); }
inline double hypot(double a, double b) { return ::hypot(a, b); }
inline double fma(double a, double b, double c) { return ::fma(a, b, c); }
inline float nextafter(float a, float b) { return ::nextafterf(a, b); }
inline double nextafter(double a, double b) { return ::nextafter(a, b); }
// As a float comparison: g++ 12 fails (an internal compiler error) vectorizing __builtin_signbit
// of a value widened from bf16, an integer shift of the float's bits either way.
inline bool signbit(float x) { return __builtin_copysignf(1.0f, x) < 0.0f; }
inline bool signbit(double x) { return __builtin_copysign(1.0, x) < 0.0; }
// lgamma_r: lgamma writes the global signgam, a race between threads.
inline double lgamma(double x) {
  int sign;
  return ::lgamma_r(x, &sign);
}
inline float lgamma(float x) { return static_cast<float>(lgamma(static_cast<double>(x))); }
// frexp's exponent as a value of the operand's type (cast to int32 by the kernel); 0 for inf
// and NaN, as PyTorch gives.
inline float frexp_mantissa(float x) {
  int e;
  return ::frexpf(x, &e);
}
inline double frexp_mantissa(double x) {
  int e;
  return ::frexp(x, &e);
}
inline float frexp_exponent(float x) {
  int e = 0;
  ::frexpf(x, &e);
  return x - x == 0.0f ? static_cast<float>(e) : 0.0f;
}
inline double frexp_exponent(double x) {
  int e = 0;
  ::frexp(x, &e);
  return x - x == 0.0 ? static_cast<double>(e) : 0.0;
}
// x * 2^n for an integer n held in the operand's type (an int32 exponent tensor's value);
// beyond +-2200 every finite x has over- or underflowed already.
inline float ldexp(float x, float n) { return ::ldexpf(x, static_cast<int>(n < -2200.0f ? -2200.0f : (n > 2200.0f ? 2200.0f : n))); }
inline double ldexp(double x, double n) { return ::ldexp(x, static_cast<int>(n < -2200.0 ? -2200.0 : (n > 2200.0 ? 2200.0 : n))); }

// An orthogonal polynomial's degree as PyTorch's CPU kernels read it (static_cast<int64_t> on
// x86-64): NaN and values outside int64's range become INT64_MIN, a negative degree.
inline int64_t poly_degree(double n) {
  if (n >= -9223372036854775808.0 && n < 9223372036854775808.0) return static_cast<int64_t>(n);
  return -9223372036854775807LL - 1;
}
inline int64_t poly_degree(float n) { return poly_degree(static_cast<double>(n)); }

// The shared templates contract a * b + c into FMAs where the machine has them, as g++ compiles
// PyTorch's CPU kernels (its AVX2 and AVX-512 builds), while the unit's own code keeps
// -ffp-contract=off: the orthogonal polynomials, Ai and trigamma then give PyTorch's float and
// double results to the bit.
#if defined(__GNUC__) && !defined(__clang__)
#define COIL_FN inline __attribute__((optimize("fp-contract=fast")))
#else
#define COIL_FN inline
#endif
// @special-helpers (codegen/special_prelude.h and codegen/special_polynomials.h go here)
#undef COIL_FN

// PyTorch's Bessel functions of the first and second kind are NaN at +-inf (glibc's are 0) and
// those of the second kind NaN below 0.
inline double bessel_j0(double x) { return isinf(x) ? nan<double>() : ::j0(x); }
inline double bessel_j1(double x) { return isinf(x) ? nan<double>() : ::j1(x); }
inline double bessel_y0(double x) { return isinf(x) || x < 0 ? nan<double>() : ::y0(x); }
inline double bessel_y1(double x) { return isinf(x) || x < 0 ? nan<double>() : ::y1(x); }
inline double erfinv(double x) { return erfinv_impl(x); }
inline double erfcx(double x) { return erfcx_impl(x); }
inline double digamma(double x) { return digamma_impl(x); }
inline double i0(double x) { return bessel_i0_impl(x); }
inline double i0e(double x) { return bessel_i0e_impl(x); }
inline double i1(double x) { return bessel_i1_impl(x); }
inline double i1e(double x) { return bessel_i1e_impl(x); }
inline double bessel_k0(double x) { return bessel_k0_impl(x); }
inline double bessel_k1(double x) { return bessel_k1_impl(x); }
inline double scaled_bessel_k0(double x) { return scaled_bessel_k0_impl(x); }
inline double scaled_bessel_k1(double x) { return scaled_bessel_k1_impl(x); }
inline double ndtri(double x) { return ndtri_impl(x); }
inline double spherical_bessel_j0(double x) { return spherical_bessel_j0_impl(x); }
#define COIL_VIA_DOUBLE(name) \
  inline float name(float x) { return static_cast<float>(name(static_cast<double>(x))); }
COIL_VIA_DOUBLE(bessel_j0) COIL_VIA_DOUBLE(bessel_j1) COIL_VIA_DOUBLE(bessel_y0) COIL_VIA_DOUBLE(bessel_y1)
COIL_VIA_DOUBLE(erfinv) COIL_VIA_DOUBLE(erfcx) COIL_VIA_DOUBLE(digamma) COIL_VIA_DOUBLE(i0) COIL_VIA_DOUBLE(i0e)
COIL_VIA_DOUBLE(i1) COIL_VIA_DOUBLE(i1e) COIL_VIA_DOUBLE(bessel_k0) COIL_VIA_DOUBLE(bessel_k1)
COIL_VIA_DOUBLE(scaled_bessel_k0) COIL_VIA_DOUBLE(scaled_bessel_k1) COIL_VIA_DOUBLE(ndtri)
COIL_VIA_DOUBLE(spherical_bessel_j0)
#undef COIL_VIA_DOUBLE
// Trigamma and Airy's Ai in the operand's type, as PyTorch's CPU kernels: near trigamma's poles
// (sin(pi x) rounded in float) and in Ai's oscillating range (the phase 2/3 |x|^1.5 rounded in
// float) double would be more accurate than PyTorch, and differ from it by far more than an ulp.
inline float trigamma(float x) { return trigamma_impl(x); }
inline double trigamma(double x) { return trigamma_impl(x); }
inline float airy_ai(float x) { return airy_ai_impl(x); }
inline double airy_ai(double x) { return airy_ai_impl(x); }

// Hurwitz zeta in double, float operands too (PyTorch's CPU kernel sums it in double); polygamma
// of order n >= 2 with n! in the operand's type and zeta in double, as PyTorch's CPU kernel.
inline double zeta(double x, double q) { return zeta_impl(x, q); }
inline float zeta(float x, float q) { return static_cast<float>(zeta_impl(static_cast<double>(x), static_cast<double>(q))); }
inline double polygamma(double n, double x) { return polygamma_impl<double, double>(n, x); }
inline float polygamma(float n, float x) { return polygamma_impl<float, double>(n, x); }

// The orthogonal polynomials in the operand's own type, as PyTorch's CPU kernels (Hermite: NaN
// beyond degree 128 in float, 512 in double).
#define COIL_POLYNOMIAL(name)                                                                         \
  inline float name(float x, float n) { return name##_impl(x, poly_degree(n)); }                    \
  inline double name(double x, double n) { return name##_impl(x, poly_degree(n)); }
COIL_POLYNOMIAL(chebyshev_t) COIL_POLYNOMIAL(chebyshev_u) COIL_POLYNOMIAL(chebyshev_v) COIL_POLYNOMIAL(chebyshev_w)
COIL_POLYNOMIAL(shifted_chebyshev_t) COIL_POLYNOMIAL(shifted_chebyshev_u) COIL_POLYNOMIAL(shifted_chebyshev_v)
COIL_POLYNOMIAL(shifted_chebyshev_w) COIL_POLYNOMIAL(laguerre_l) COIL_POLYNOMIAL(legendre_p)
#undef COIL_POLYNOMIAL
inline float hermite_h(float x, float n) { return hermite_h_impl(x, poly_degree(n), 128); }
inline double hermite_h(double x, double n) { return hermite_h_impl(x, poly_degree(n), 512); }
inline float hermite_he(float x, float n) { return hermite_he_impl(x, poly_degree(n), 128); }
inline double hermite_he(double x, double n) { return hermite_he_impl(x, poly_degree(n), 512); }

}  // namespace coil_rt
