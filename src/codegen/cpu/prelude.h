// The prelude of every generated CPU translation unit. Kept small: compile time of generated
// code is a product metric. Scalar helpers with PyTorch's semantics where C++ differs.
#include <cmath>
#include <cstdint>
#include <cstring>

// Vector variants of libm functions from glibc's libmvec (linked with -lmvec): with these
// declarations the compiler vectorizes loops that call them, as -ffast-math would allow, while
// every other operation keeps IEEE semantics. glibc >= 2.35 has all of these on x86-64.
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define COIL_VECTOR_MATH(name) \
  __attribute__((simd("notinbranch"))) float name##f(float) noexcept; \
  __attribute__((simd("notinbranch"))) double name(double) noexcept;
extern "C" {
COIL_VECTOR_MATH(exp)
COIL_VECTOR_MATH(expm1)
COIL_VECTOR_MATH(log)
COIL_VECTOR_MATH(log1p)
COIL_VECTOR_MATH(log2)
COIL_VECTOR_MATH(log10)
COIL_VECTOR_MATH(sin)
COIL_VECTOR_MATH(cos)
COIL_VECTOR_MATH(tan)
COIL_VECTOR_MATH(tanh)
COIL_VECTOR_MATH(erf)
__attribute__((simd("notinbranch"))) float atan2f(float, float) noexcept;
__attribute__((simd("notinbranch"))) double atan2(double, double) noexcept;
__attribute__((simd("notinbranch"))) float powf(float, float) noexcept;
__attribute__((simd("notinbranch"))) double pow(double, double) noexcept;
}
#undef COIL_VECTOR_MATH
#endif

namespace coil_rt {

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
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal half: round the value scaled by 2^24 to an integer
    float a;
    std::memcpy(&a, &abs, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

template <typename T> inline T maximum(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <typename T> inline T minimum(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <typename T> inline T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <typename T> inline T rsqrt(T x) { return T(1) / std::sqrt(x); }
template <typename T> inline T sign(T x) { return static_cast<T>((x > T(0)) - (x < T(0))); }

// Integer division and remainder never trap: a zero divisor gives 0 (PyTorch raises instead;
// the interpreter reports it).
template <typename T> inline T trunc_div(T a, T b) { return b == 0 ? T(0) : a / b; }
template <typename T> inline T floor_div_int(T a, T b) {
  if (b == 0) return T(0);
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> inline T remainder_int(T a, T b) {
  if (b == 0) return T(0);
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> inline T fmod_int(T a, T b) { return b == 0 ? T(0) : a % b; }
template <typename T> inline T floor_div_float(T a, T b) {
  if (b == 0) return a / b;
  T m = std::fmod(a, b);
  T d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return std::copysign(T(0), a / b);
  T f = std::floor(d);
  return d - f > T(0.5) ? f + 1 : f;
}
template <typename T> inline T remainder_float(T a, T b) {
  T r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> inline T pow_int(T base, T exp) {
  if (exp < 0) return base == 1 ? T(1) : (base == -1 ? (exp % 2 == 0 ? T(1) : T(-1)) : T(0));
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (auto e = static_cast<uint64_t>(exp); e; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}
// Python-style floor division and modulo of index expressions.
// An index out of [0, n) is recorded in E (flag, index, size) for the runtime to raise, and
// reads element 0 instead.
inline int64_t check_index(int64_t i, int64_t n, int64_t* E) {
  if (i >= 0 && i < n) return i;
  __atomic_store_n(&E[1], i, __ATOMIC_RELAXED);
  __atomic_store_n(&E[2], n, __ATOMIC_RELAXED);
  __atomic_store_n(&E[0], 1, __ATOMIC_RELAXED);
  return 0;
}
inline int64_t idx_floordiv(int64_t a, int64_t b) { return floor_div_int(a, b); }
inline int64_t idx_mod(int64_t a, int64_t b) { return remainder_int(a, b); }

}  // namespace coil_rt

// NaN-propagating max/min as OpenMP reductions, so `omp simd` can vectorize them.
#pragma omp declare reduction(coil_max_float : float : omp_out = coil_rt::maximum<float>(omp_out, omp_in)) initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(coil_min_float : float : omp_out = coil_rt::minimum<float>(omp_out, omp_in)) initializer(omp_priv = INFINITY)
#pragma omp declare reduction(coil_max_double : double : omp_out = coil_rt::maximum<double>(omp_out, omp_in)) initializer(omp_priv = -INFINITY)
#pragma omp declare reduction(coil_min_double : double : omp_out = coil_rt::minimum<double>(omp_out, omp_in)) initializer(omp_priv = INFINITY)
