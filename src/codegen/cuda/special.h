// Special functions of the CUDA prelude, appended to a translation unit only when one of its
// kernels calls one (codegen::uses_special_functions). CUDA's math library has most of them in
// float and double (exp2, erfc, erfinv, erfcx, lgamma, hypot, nextafter, frexp, ldexp, j0, j1,
// y0, y1, cyl_bessel_i0, cyl_bessel_i1); digamma (step for step PyTorch's CUDA kernel), the
// scaled I0/I1, K0/K1, zeta, polygamma, ndtri, Airy's Ai, the orthogonal polynomials and the
// 16-bit nextafter are the templates of codegen/special_prelude.h and special_polynomials.h, in
// the operand's own type.
namespace coil_rt {

#define COIL_MATH1(name, f32, f64) \
  __forceinline__ float name(float x) { return f32(x); } \
  __forceinline__ double name(double x) { return f64(x); }
COIL_MATH1(exp2, ::exp2f, ::exp2) COIL_MATH1(erfc, ::erfcf, ::erfc) COIL_MATH1(erfinv, ::erfinvf, ::erfinv)
COIL_MATH1(erfcx, ::erfcxf, ::erfcx) COIL_MATH1(lgamma, ::lgammaf, ::lgamma)
#undef COIL_MATH1
__forceinline__ float hypot(float a, float b) { return ::hypotf(a, b); }
__forceinline__ double hypot(double a, double b) { return ::hypot(a, b); }
__forceinline__ double fma(double a, double b, double c) { return ::fma(a, b, c); }
__forceinline__ float nextafter(float a, float b) { return ::nextafterf(a, b); }
__forceinline__ double nextafter(double a, double b) { return ::nextafter(a, b); }
__forceinline__ bool signbit(float x) { return __float_as_int(x) < 0; }
__forceinline__ bool signbit(double x) { return __double_as_longlong(x) < 0; }
// frexp's exponent as a value of the operand's type (cast to int32 by the kernel); 0 for inf
// and NaN, as PyTorch gives.
__forceinline__ float frexp_mantissa(float x) {
  int e;
  return ::frexpf(x, &e);
}
__forceinline__ double frexp_mantissa(double x) {
  int e;
  return ::frexp(x, &e);
}
__forceinline__ float frexp_exponent(float x) {
  int e = 0;
  ::frexpf(x, &e);
  return x - x == 0.0f ? static_cast<float>(e) : 0.0f;
}
__forceinline__ double frexp_exponent(double x) {
  int e = 0;
  ::frexp(x, &e);
  return x - x == 0.0 ? static_cast<double>(e) : 0.0;
}
// x * 2^n for an integer n held in the operand's type; beyond +-2200 every finite x has over-
// or underflowed already.
__forceinline__ float ldexp(float x, float n) { return ::ldexpf(x, static_cast<int>(n < -2200.0f ? -2200.0f : (n > 2200.0f ? 2200.0f : n))); }
__forceinline__ double ldexp(double x, double n) { return ::ldexp(x, static_cast<int>(n < -2200.0 ? -2200.0 : (n > 2200.0 ? 2200.0 : n))); }
// PyTorch's I0 and I1 are NaN at +-inf (e^|x| times a scaled form that is 0 there), its Bessel
// functions of the first and second kind too, and those of the second kind below 0.
__forceinline__ float i0(float x) { return isinf(x) ? nan<float>() : ::cyl_bessel_i0f(x); }
__forceinline__ double i0(double x) { return isinf(x) ? nan<double>() : ::cyl_bessel_i0(x); }
__forceinline__ float i1(float x) { return isinf(x) ? nan<float>() : ::cyl_bessel_i1f(x); }
__forceinline__ double i1(double x) { return isinf(x) ? nan<double>() : ::cyl_bessel_i1(x); }
__forceinline__ float bessel_j0(float x) { return isinf(x) ? nan<float>() : ::j0f(x); }
__forceinline__ double bessel_j0(double x) { return isinf(x) ? nan<double>() : ::j0(x); }
__forceinline__ float bessel_j1(float x) { return isinf(x) ? nan<float>() : ::j1f(x); }
__forceinline__ double bessel_j1(double x) { return isinf(x) ? nan<double>() : ::j1(x); }
__forceinline__ float bessel_y0(float x) { return isinf(x) || x < 0.0f ? nan<float>() : ::y0f(x); }
__forceinline__ double bessel_y0(double x) { return isinf(x) || x < 0.0 ? nan<double>() : ::y0(x); }
__forceinline__ float bessel_y1(float x) { return isinf(x) || x < 0.0f ? nan<float>() : ::y1f(x); }
__forceinline__ double bessel_y1(double x) { return isinf(x) || x < 0.0 ? nan<double>() : ::y1(x); }

// An orthogonal polynomial's degree as PyTorch's CUDA kernels read it: the conversion saturates
// and takes NaN to 0.
__forceinline__ int64_t poly_degree(float n) { return static_cast<int64_t>(n); }
__forceinline__ int64_t poly_degree(double n) { return static_cast<int64_t>(n); }

#define COIL_FN __forceinline__
// @special-helpers (codegen/special_prelude.h and codegen/special_polynomials.h go here)
#undef COIL_FN

#define COIL_TEMPLATE1(name, impl) \
  __forceinline__ float name(float x) { return impl(x); } \
  __forceinline__ double name(double x) { return impl(x); }
COIL_TEMPLATE1(digamma, digamma_impl) COIL_TEMPLATE1(i0e, bessel_i0e_impl) COIL_TEMPLATE1(i1e, bessel_i1e_impl)
COIL_TEMPLATE1(bessel_k0, bessel_k0_impl) COIL_TEMPLATE1(bessel_k1, bessel_k1_impl)
COIL_TEMPLATE1(scaled_bessel_k0, scaled_bessel_k0_impl) COIL_TEMPLATE1(scaled_bessel_k1, scaled_bessel_k1_impl)
COIL_TEMPLATE1(trigamma, trigamma_impl) COIL_TEMPLATE1(ndtri, ndtri_impl) COIL_TEMPLATE1(airy_ai, airy_ai_impl)
COIL_TEMPLATE1(spherical_bessel_j0, spherical_bessel_j0_impl)
#undef COIL_TEMPLATE1

// Zeta and polygamma in the operand's type, as PyTorch's CUDA kernels.
__forceinline__ float zeta(float x, float q) { return zeta_impl(x, q); }
__forceinline__ double zeta(double x, double q) { return zeta_impl(x, q); }
__forceinline__ float polygamma(float n, float x) { return polygamma_impl<float, float>(n, x); }
__forceinline__ double polygamma(double n, double x) { return polygamma_impl<double, double>(n, x); }

// The orthogonal polynomials; PyTorch's CUDA Hermite kernels have no degree limit.
#define COIL_POLYNOMIAL(name)                                                                            \
  __forceinline__ float name(float x, float n) { return name##_impl(x, poly_degree(n)); }              \
  __forceinline__ double name(double x, double n) { return name##_impl(x, poly_degree(n)); }
COIL_POLYNOMIAL(chebyshev_t) COIL_POLYNOMIAL(chebyshev_u) COIL_POLYNOMIAL(chebyshev_v) COIL_POLYNOMIAL(chebyshev_w)
COIL_POLYNOMIAL(shifted_chebyshev_t) COIL_POLYNOMIAL(shifted_chebyshev_u) COIL_POLYNOMIAL(shifted_chebyshev_v)
COIL_POLYNOMIAL(shifted_chebyshev_w) COIL_POLYNOMIAL(laguerre_l) COIL_POLYNOMIAL(legendre_p)
#undef COIL_POLYNOMIAL
#define COIL_HERMITE(name)                                                                               \
  __forceinline__ float name(float x, float n) { return name##_impl(x, poly_degree(n), 9223372036854775807LL); }   \
  __forceinline__ double name(double x, double n) { return name##_impl(x, poly_degree(n), 9223372036854775807LL); }
COIL_HERMITE(hermite_h) COIL_HERMITE(hermite_he)
#undef COIL_HERMITE

}  // namespace coil_rt
