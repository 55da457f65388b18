// The prelude of every generated CUDA translation unit, compiled by NVRTC with no includes at
// all: compile time of generated code is a product metric, and cuda_fp16.h / cuda_bf16.h alone
// cost more than a kernel. Math comes from NVRTC's built-in device functions, half and bfloat16
// conversions are one PTX instruction each, and the helpers mirror the CPU prelude's names
// (coil_rt::...) so both backends print expressions the same way. Warp-level helpers take the
// warp size and member mask from the generated code, which reads them from DeviceInfo.
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

namespace coil_rt {

template <typename T> __forceinline__ T inf();
template <> __forceinline__ float inf<float>() { return __int_as_float(0x7f800000); }
template <> __forceinline__ double inf<double>() { return __longlong_as_double(0x7ff0000000000000LL); }
template <typename T> __forceinline__ T nan();
template <> __forceinline__ float nan<float>() { return __int_as_float(0x7fc00000); }
template <> __forceinline__ double nan<double>() { return __longlong_as_double(0x7ff8000000000000LL); }

#define COIL_MATH1(name, f32, f64) \
  __forceinline__ float name(float x) { return f32(x); } \
  __forceinline__ double name(double x) { return f64(x); }
COIL_MATH1(exp, ::expf, ::exp) COIL_MATH1(expm1, ::expm1f, ::expm1) COIL_MATH1(log, ::logf, ::log)
COIL_MATH1(log1p, ::log1pf, ::log1p) COIL_MATH1(log2, ::log2f, ::log2) COIL_MATH1(log10, ::log10f, ::log10)
COIL_MATH1(sin, ::sinf, ::sin) COIL_MATH1(cos, ::cosf, ::cos) COIL_MATH1(tan, ::tanf, ::tan)
COIL_MATH1(tanh, ::tanhf, ::tanh) COIL_MATH1(erf, ::erff, ::erf) COIL_MATH1(sqrt, ::sqrtf, ::sqrt)
COIL_MATH1(asin, ::asinf, ::asin) COIL_MATH1(acos, ::acosf, ::acos) COIL_MATH1(atan, ::atanf, ::atan)
COIL_MATH1(asinh, ::asinhf, ::asinh) COIL_MATH1(acosh, ::acoshf, ::acosh) COIL_MATH1(atanh, ::atanhf, ::atanh)
COIL_MATH1(sinh, ::sinhf, ::sinh) COIL_MATH1(cosh, ::coshf, ::cosh)
COIL_MATH1(floor, ::floorf, ::floor) COIL_MATH1(ceil, ::ceilf, ::ceil) COIL_MATH1(trunc, ::truncf, ::trunc)
COIL_MATH1(nearbyint, ::rintf, ::rint) COIL_MATH1(abs, ::fabsf, ::fabs)
#undef COIL_MATH1
__forceinline__ float atan2(float y, float x) { return ::atan2f(y, x); }
__forceinline__ double atan2(double y, double x) { return ::atan2(y, x); }
__forceinline__ float pow(float a, float b) { return ::powf(a, b); }
__forceinline__ double pow(double a, double b) { return ::pow(a, b); }
__forceinline__ float fmod(float a, float b) { return ::fmodf(a, b); }
__forceinline__ double fmod(double a, double b) { return ::fmod(a, b); }
__forceinline__ float copysign(float a, float b) { return ::copysignf(a, b); }
__forceinline__ double copysign(double a, double b) { return ::copysign(a, b); }
template <typename T> __forceinline__ T abs(T x) { return x < 0 ? static_cast<T>(-x) : x; }
template <typename T> __forceinline__ bool isnan(T x) { return x != x; }
template <typename T> __forceinline__ bool isinf(T x) { return x == inf<T>() || x == -inf<T>(); }
template <typename A, typename B> __forceinline__ A imin(A a, B b) { return a < A(b) ? a : A(b); }
template <typename A, typename B> __forceinline__ A imax(A a, B b) { return a > A(b) ? a : A(b); }

__forceinline__ float f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__forceinline__ uint16_t f32_to_f16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__forceinline__ float bf16_to_f32(uint16_t h) { return __int_as_float(static_cast<int>(h) << 16); }
__forceinline__ uint16_t f32_to_bf16(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// Integer division never traps: a zero divisor gives 0 and records code 2 in the status word.
__forceinline__ void zero_divisor(int64_t* E) {
  if (E) atomicExch(reinterpret_cast<unsigned long long*>(E), 2ull);
}
#define COIL_FN __forceinline__
// @scalar-helpers (codegen/scalar_prelude.h goes here)
#undef COIL_FN
// An index out of [0, n) is recorded in the status word (index, size, then the flag) and reads
// element 0 instead.
__forceinline__ int64_t check_index(int64_t i, int64_t n, int64_t* E) {
  if (i >= 0 && i < n) return i;
  auto* e = reinterpret_cast<unsigned long long*>(E);
  atomicExch(e + 1, static_cast<unsigned long long>(i));
  atomicExch(e + 2, static_cast<unsigned long long>(n));
  atomicExch(e, 1ull);
  return 0;
}
template <typename A, typename B> __forceinline__ A idx_floordiv(A a, B b) { return floor_div_int(a, A(b)); }
template <typename A, typename B> __forceinline__ A idx_mod(A a, B b) { return remainder_int(a, A(b)); }

// Reductions: a thread folds its share of a row into a partial; partials then combine across
// the threads of a row (warp shuffles, then shared memory between warps).
struct Sum { template <typename T> __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a + b); } };
struct Prod { template <typename T> __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a * b); } };
struct Max {
  template <typename T> __forceinline__ T operator()(T a, T b) const { return maximum(a, b); }
  __forceinline__ bool operator()(bool a, bool b) const { return a || b; }
};
struct Min {
  template <typename T> __forceinline__ T operator()(T a, T b) const { return minimum(a, b); }
  __forceinline__ bool operator()(bool a, bool b) const { return a && b; }
};

// argmax/argmin partials: the value and its index (-1: none yet). NaN is the extreme and the
// lowest index wins ties, whichever thread saw it.
template <typename T> struct Arg { T v; int64_t i; };
template <bool kMax> struct ArgBest {
  template <typename T> __forceinline__ Arg<T> operator()(Arg<T> a, Arg<T> b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) return an && bn ? (a.i < b.i ? a : b) : (an ? a : b);
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (kMax ? a.v > b.v : a.v < b.v) ? a : b;
  }
};

// Welford partials: count, mean and M2, merged by Chan et al.'s formula.
template <typename T> struct Welford { T mean; T m2; int64_t n; };
template <typename T> __forceinline__ void welford_add(Welford<T>& w, T x) {
  w.n += 1;
  T d = x - w.mean;
  w.mean += d / T(w.n);
  w.m2 += d * (x - w.mean);
}
struct WelfordMerge {
  template <typename T> __forceinline__ Welford<T> operator()(Welford<T> a, Welford<T> b) const {
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    int64_t n = a.n + b.n;
    T d = b.mean - a.mean;
    return {a.mean + d * T(b.n) / T(n), a.m2 + b.m2 + d * d * T(a.n) * T(b.n) / T(n), n};
  }
};

template <typename T> __forceinline__ T shfl_xor(T v, int lane_mask, int width, unsigned mask) {
  if constexpr (sizeof(T) < 4) {
    return static_cast<T>(__shfl_xor_sync(mask, static_cast<int>(v), lane_mask, width));
  } else {
    return __shfl_xor_sync(mask, v, lane_mask, width);
  }
}
template <typename T> __forceinline__ Arg<T> shfl_xor(Arg<T> a, int lane_mask, int width, unsigned mask) {
  return {shfl_xor(a.v, lane_mask, width, mask), shfl_xor(a.i, lane_mask, width, mask)};
}
template <typename T> __forceinline__ Welford<T> shfl_xor(Welford<T> w, int lane_mask, int width, unsigned mask) {
  return {shfl_xor(w.mean, lane_mask, width, mask), shfl_xor(w.m2, lane_mask, width, mask), shfl_xor(w.n, lane_mask, width, mask)};
}

// Combines the partials of `width` consecutive threads (a power of two) so that each of them
// holds the result. Above a warp, warps meet in `scratch` (a warp's worth of T per warp in the
// block); every thread of the block must call it.
template <typename T, typename F>
__forceinline__ T group_allreduce(T v, F f, int width, int warp, unsigned mask, void* scratch) {
  int w = width < warp ? width : warp;
  for (int o = w / 2; o > 0; o >>= 1) v = f(v, shfl_xor(v, o, w, mask));
  if (width <= warp) return v;
  T* s = static_cast<T*>(scratch);
  int per_group = width / warp, first = static_cast<int>(threadIdx.x) / width * per_group;
  __syncthreads();
  if (static_cast<int>(threadIdx.x) % warp == 0) s[threadIdx.x / warp] = v;
  __syncthreads();
  T r = s[first];
  for (int i = 1; i < per_group; ++i) r = f(r, s[first + i]);
  return r;
}

// A load through L2 only (ld.global.cg): partials other blocks wrote during this launch.
template <typename T> __forceinline__ T load_l2(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "a scalar partial");
  union {
    unsigned long long w8;
    unsigned int w4;
    unsigned short w2;
    unsigned char w1;
    T t;
  } u;
  if constexpr (sizeof(T) == 8) u.w8 = __ldcg(reinterpret_cast<const unsigned long long*>(p));
  else if constexpr (sizeof(T) == 4) u.w4 = __ldcg(reinterpret_cast<const unsigned int*>(p));
  else if constexpr (sizeof(T) == 2) u.w2 = __ldcg(reinterpret_cast<const unsigned short*>(p));
  else u.w1 = __ldcg(reinterpret_cast<const unsigned char*>(p));
  return u.t;
}
template <typename T> __forceinline__ Arg<T> load_l2(const Arg<T>* p) { return {load_l2(&p->v), load_l2(&p->i)}; }
template <typename T> __forceinline__ Welford<T> load_l2(const Welford<T>* p) {
  return {load_l2(&p->mean), load_l2(&p->m2), load_l2(&p->n)};
}

// `n` elements of T as one aligned access (16 bytes at most).
template <typename T, int n> struct alignas(sizeof(T) * n) Vec { T v[n]; };

// One aligned access of V (4, 8 or 16 bytes; others plainly) by `ld`, an ld.global with an L2
// cache_hint operand taking `policy`.
#define COIL_HINTED_LOAD(ld)                                                                            \
  V r;                                                                                                  \
  auto* w = reinterpret_cast<uint32_t*>(&r);                                                            \
  if constexpr (sizeof(V) == 16)                                                                        \
    asm volatile(ld ".v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) \
                 : "l"(p), "l"(policy));                                                                \
  else if constexpr (sizeof(V) == 8)                                                                    \
    asm volatile(ld ".v2.u32 {%0,%1}, [%2], %3;" : "=r"(w[0]), "=r"(w[1]) : "l"(p), "l"(policy));        \
  else if constexpr (sizeof(V) == 4)                                                                    \
    asm volatile(ld ".u32 %0, [%1], %2;" : "=r"(w[0]) : "l"(p), "l"(policy));                            \
  else                                                                                                  \
    (void)w, (void)policy, r = *p;                                                                      \
  return r;

// Programmatic dependent launch (sm_90 on), every kernel's first statement: waits for the
// kernel before it on the stream to end and its writes to show (at once when the launch was not
// programmatic), then lets the next kernel's blocks start on the SMs this one leaves free, so
// that the next launch and its prologue overlap this kernel's tail (cuda::Context::launch).
__forceinline__ void after_previous() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks L2 to fetch `bytes` (a multiple of 16) from p (16-byte aligned) and returns at once. L2 is
// where every SM's reads and writes meet, so a prefetch reads no stale data whenever it runs: a
// kernel issues it before after_previous(), and the previous kernel's time then streams it.
__forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p, (void)bytes;
#endif
}

// A whole-vector load that asks L2 to evict the line after others (evict_last), as Inductor's
// loads of inputs do: in a streaming kernel the output's lines then leave L2 first (measured on
// an H100: bf16 layer_norm 16384x8192 0.1834 -> 0.1822 ms, x + yT 0.2741 -> 0.2715 ms; the
// evict_first hint made both slower).
template <typename V> __forceinline__ V load_keep(const V* p) {
#if __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  COIL_HINTED_LOAD("ld.global.L2::cache_hint")
#else
  return *p;
#endif
}

// A whole-vector load of data read once (column reductions' rows): evict-first in L1 and L2.
template <typename V> __forceinline__ V load_once(const V* p) {
#if __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  COIL_HINTED_LOAD("ld.global.L1::evict_first.L2::cache_hint")
#else
  return *p;
#endif
}
#undef COIL_HINTED_LOAD

}  // namespace coil_rt
