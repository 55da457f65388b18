// Scalar helpers with PyTorch's semantics where C++ differs, shared by the CPU and CUDA preludes:
// each prelude defines COIL_FN (inline, __forceinline__), zero_divisor and the math overloads,
// and the generator puts this text at its `// @scalar-helpers` line (with_scalar_helpers).
template <typename T> COIL_FN T maximum(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <typename T> COIL_FN T minimum(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <typename T> COIL_FN T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }
template <typename T> COIL_FN T rsqrt(T x) { return T(1) / sqrt(x); }
template <typename T> COIL_FN T sign(T x) { return static_cast<T>((x > T(0)) - (x < T(0))); }
template <typename T> COIL_FN T trunc_div(T a, T b, int64_t* E = nullptr) {
  if (b == 0) return zero_divisor(E), T(0);
  return a / b;
}
template <typename T> COIL_FN T floor_div_int(T a, T b, int64_t* E = nullptr) {
  if (b == 0) return zero_divisor(E), T(0);
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> COIL_FN T remainder_int(T a, T b, int64_t* E = nullptr) {
  if (b == 0) return zero_divisor(E), T(0);
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> COIL_FN T fmod_int(T a, T b, int64_t* E = nullptr) {
  if (b == 0) return zero_divisor(E), T(0);
  return a % b;
}
template <typename T> COIL_FN T floor_div_float(T a, T b) {
  if (b == 0) return a / b;
  T m = fmod(a, b);
  T d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return copysign(T(0), a / b);
  T f = floor(d);
  return d - f > T(0.5) ? f + 1 : f;
}
template <typename T> COIL_FN T remainder_float(T a, T b) {
  T r = fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> COIL_FN T pow_int(T base, T exp) {
  if (exp < 0) return base == 1 ? T(1) : (base == -1 ? (exp % 2 == 0 ? T(1) : T(-1)) : T(0));
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (auto e = static_cast<uint64_t>(exp); e; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}
