// The prelude of every generated CPU translation unit. Kept small: compile time of generated
// code is a product metric, and <cmath> alone would triple it, so libm is declared here and
// everything else uses compiler builtins. Scalar helpers with PyTorch's semantics where C++
// differs.
#include <cstdint>

// libm, with glibc's libmvec vector variants (linked with -lmvec) where it has them: with the
// simd declarations the compiler vectorizes loops that call these, as -ffast-math would allow,
// while every other operation keeps IEEE semantics. glibc >= 2.35 has all of them on x86-64;
// the op tests' special values (inf, -0, NaN) check each against PyTorch.
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define COIL_SIMD __attribute__((simd("notinbranch")))
#else
#define COIL_SIMD
#endif
#define COIL_LIBM1(name) \
  COIL_SIMD float name##f(float) noexcept; \
  COIL_SIMD double name(double) noexcept;
#define COIL_LIBM2(name) \
  COIL_SIMD float name##f(float, float) noexcept; \
  COIL_SIMD double name(double, double) noexcept;
extern "C" {
COIL_LIBM1(exp) COIL_LIBM1(expm1) COIL_LIBM1(log) COIL_LIBM1(log1p) COIL_LIBM1(log2) COIL_LIBM1(log10)
COIL_LIBM1(sin) COIL_LIBM1(cos) COIL_LIBM1(tan) COIL_LIBM1(tanh) COIL_LIBM1(erf)
COIL_LIBM1(asin) COIL_LIBM1(acos) COIL_LIBM1(atan) COIL_LIBM1(asinh) COIL_LIBM1(acosh) COIL_LIBM1(atanh) COIL_LIBM1(sinh) COIL_LIBM1(cosh)
COIL_LIBM2(atan2)
// Not libmvec's pow: its special cases differ from C's (powf(-inf, 0.5) gives NaN, not inf).
float powf(float, float) noexcept;
double pow(double, double) noexcept;
}
#undef COIL_LIBM1
#undef COIL_LIBM2
#undef COIL_SIMD

namespace coil_rt {

// Math by overload on float and double, as <cmath> would give it.
#define COIL_MATH1(name, f32, f64) \
  inline float name(float x) { return f32(x); } \
  inline double name(double x) { return f64(x); }
COIL_MATH1(exp, ::expf, ::exp) COIL_MATH1(expm1, ::expm1f, ::expm1) COIL_MATH1(log, ::logf, ::log)
COIL_MATH1(log1p, ::log1pf, ::log1p) COIL_MATH1(log2, ::log2f, ::log2) COIL_MATH1(log10, ::log10f, ::log10)
COIL_MATH1(sin, ::sinf, ::sin) COIL_MATH1(cos, ::cosf, ::cos) COIL_MATH1(tan, ::tanf, ::tan)
COIL_MATH1(tanh, ::tanhf, ::tanh) COIL_MATH1(erf, ::erff, ::erf)
COIL_MATH1(asin, ::asinf, ::asin) COIL_MATH1(acos, ::acosf, ::acos) COIL_MATH1(atan, ::atanf, ::atan)
COIL_MATH1(asinh, ::asinhf, ::asinh) COIL_MATH1(acosh, ::acoshf, ::acosh) COIL_MATH1(atanh, ::atanhf, ::atanh)
COIL_MATH1(sinh, ::sinhf, ::sinh) COIL_MATH1(cosh, ::coshf, ::cosh)
COIL_MATH1(sqrt, __builtin_sqrtf, __builtin_sqrt) COIL_MATH1(floor, __builtin_floorf, __builtin_floor)
COIL_MATH1(ceil, __builtin_ceilf, __builtin_ceil) COIL_MATH1(trunc, __builtin_truncf, __builtin_trunc)
COIL_MATH1(nearbyint, __builtin_nearbyintf, __builtin_nearbyint)
#undef COIL_MATH1
inline float atan2(float y, float x) { return ::atan2f(y, x); }
inline double atan2(double y, double x) { return ::atan2(y, x); }
inline float pow(float a, float b) { return ::powf(a, b); }
inline double pow(double a, double b) { return ::pow(a, b); }
inline float fmod(float a, float b) { return __builtin_fmodf(a, b); }
inline double fmod(double a, double b) { return __builtin_fmod(a, b); }
inline float copysign(float a, float b) { return __builtin_copysignf(a, b); }
inline double copysign(double a, double b) { return __builtin_copysign(a, b); }
inline float abs(float x) { return __builtin_fabsf(x); }
inline double abs(double x) { return __builtin_fabs(x); }
template <typename T> inline T abs(T x) { return x < 0 ? static_cast<T>(-x) : x; }
template <typename T> inline bool isnan(T x) { return x != x; }
template <typename T> inline bool isinf(T x) { return x == T(__builtin_inf()) || x == T(-__builtin_inf()); }
template <typename T> constexpr T inf() { return T(__builtin_inf()); }
template <typename T> constexpr T nan() { return T(__builtin_nan("")); }
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal half: round the value scaled by 2^24 to an integer
    float a;
    __builtin_memcpy(&a, &abs, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(__builtin_nearbyintf(a * 16777216.0f)));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Integer division and remainder never trap: a zero divisor gives 0 and, given a status word
// E, records code 2 there for the runtime to raise PyTorch's ZeroDivisionError.
inline void zero_divisor(int64_t* E) {
  if (E) __atomic_store_n(&E[0], 2, __ATOMIC_RELAXED);
}
#define COIL_FN inline
// @scalar-helpers (codegen/scalar_prelude.h goes here)
#undef COIL_FN
// An index out of [0, n) is recorded in E (flag, index, size) for the runtime to raise, and
// reads element 0 instead.
inline int64_t check_index(int64_t i, int64_t n, int64_t* E) {
  if (i >= 0 && i < n) return i;
  __atomic_store_n(&E[1], i, __ATOMIC_RELAXED);
  __atomic_store_n(&E[2], n, __ATOMIC_RELAXED);
  __atomic_store_n(&E[0], 1, __ATOMIC_RELAXED);
  return 0;
}
// Merges a block's count, mean and M2 into running ones (Chan, Golub and LeVeque).
template <typename T> inline void welford_merge(T& mean, T& m2, int64_t& n, T block_mean, T block_m2, int64_t block_n) {
  int64_t total = n + block_n;
  T delta = block_mean - mean;
  mean += delta * T(block_n) / T(total);
  m2 += block_m2 + delta * delta * T(n) * T(block_n) / T(total);
  n = total;
}
// Python-style floor division and modulo of index expressions.
inline int64_t idx_floordiv(int64_t a, int64_t b) { return floor_div_int(a, b); }
inline int64_t idx_mod(int64_t a, int64_t b) { return remainder_int(a, b); }

}  // namespace coil_rt

// NaN-propagating max/min as OpenMP reductions, so `omp simd` can vectorize them.
#pragma omp declare reduction(coil_max_float : float : omp_out = coil_rt::maximum<float>(omp_out, omp_in)) initializer(omp_priv = -__builtin_inf())
#pragma omp declare reduction(coil_min_float : float : omp_out = coil_rt::minimum<float>(omp_out, omp_in)) initializer(omp_priv = __builtin_inf())
#pragma omp declare reduction(coil_max_double : double : omp_out = coil_rt::maximum<double>(omp_out, omp_in)) initializer(omp_priv = -__builtin_inf())
#pragma omp declare reduction(coil_min_double : double : omp_out = coil_rt::minimum<double>(omp_out, omp_in)) initializer(omp_priv = __builtin_inf())
