// The orthogonal polynomials of torch.special (Chebyshev T, U, V, W and their shifted forms,
// Hermite H and He, Laguerre L, Legendre P), shared by the CPU and CUDA special headers: put in
// after codegen/special_prelude.h at their `// @special-helpers` line. Each takes x in T and the
// degree n as the int64 PyTorch reads it (the backends' poly_degree: the CPU's and CUDA's
// conversions of a NaN or out-of-range degree differ, as PyTorch's kernels on them do). Every
// step is PyTorch's: the special values at x = +-1 (0 and 1 for the shifted forms), the
// trigonometric forms for |x| < 1 beyond a degree, the three-term recurrences in T (the CPU
// instantiates these in the operand's own type too, so float results match PyTorch's float
// kernels, whose recurrences round at every step). A recurrence stops at a NaN (PyTorch's CPU
// kernels stop there too; NaN stays NaN either way).

// int64 arithmetic that wraps (a degree read from +inf is INT64_MAX on CUDA).
COIL_FN int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
COIL_FN int64_t wrap_neg(int64_t a) { return static_cast<int64_t>(0ull - static_cast<uint64_t>(a)); }

// p_{k+1} = (x + x) p_k - p_{k-1} from p_0 = 1 and p_1 = q, up to degree n (the Chebyshev
// recurrence, in y for the shifted forms).
template <typename T> COIL_FN T chebyshev_recurrence(T y, T q, int64_t n) {
  T p = T(1), r = q;
  for (int64_t k = 2; k <= n && !isnan(q); ++k) {
    r = (y + y) * q - p;
    p = q;
    q = r;
  }
  return r;
}

template <typename T> COIL_FN T chebyshev_t_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  if (abs(x) == T(1)) return x > T(0) || n % 2 == 0 ? T(1) : T(-1);
  if (n > 6 && abs(x) < T(1)) return cos(T(n) * acos(x));
  if (n == 0) return T(1);
  if (n == 1) return x;
  return chebyshev_recurrence(x, x, n);
}

template <typename T> COIL_FN T chebyshev_u_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  const int64_t n1 = wrap_add(n, 1);
  if (abs(x) == T(1)) return x > T(0) || n % 2 == 0 ? T(n1) : T(wrap_neg(n1));
  if (n > 8 && abs(x) < T(1)) {
    if (sin(acos(x)) != T(0)) return sin(T(n1) * acos(x)) / sin(acos(x));
    return T(n1) * cos(T(n1) * acos(x)) / x;
  }
  if (n == 0) return T(1);
  if (n == 1) return x + x;
  return chebyshev_recurrence(x, x + x, n);
}

template <typename T> COIL_FN T chebyshev_v_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  const int64_t odd = wrap_add(wrap_add(n, n), 1);
  if (abs(x) == T(1)) {
    if (x > T(0)) return T(1);
    return n % 2 == 0 ? T(odd) : T(wrap_neg(odd));
  }
  if (n > 8 && abs(x) < T(1)) {
    if (sin(acos(x) / T(2)) != T(1)) return cos((T(n) + T(0.5)) * acos(x)) / cos(acos(x) / T(2));
    return n % 2 == 0 ? T(odd) : T(wrap_neg(odd));
  }
  if (n == 0) return T(1);
  if (n == 1) return x + x - T(1);
  return chebyshev_recurrence(x, x + x - T(1), n);
}

template <typename T> COIL_FN T chebyshev_w_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  const int64_t odd = wrap_add(wrap_add(n, n), 1);
  if (abs(x) == T(1)) {
    if (x > T(0)) return T(odd);
    return n % 2 == 0 ? T(1) : T(-1);
  }
  if (n > 8 && abs(x) < T(1)) {
    if (cos(acos(x) / T(2)) != T(1)) return sin((T(n) + T(0.5)) * acos(x)) / sin(acos(x) / T(2));
    if (x > T(0)) return T(odd);
    return n % 2 == 0 ? T(1) : T(-1);
  }
  if (n == 0) return T(1);
  if (n == 1) return x + x + T(1);
  return chebyshev_recurrence(x, x + x + T(1), n);
}

// The shifted forms: the same polynomials of y = 2x - 1 (x = 1 and x = 0 map to y = +-1).
template <typename T> COIL_FN T shifted_chebyshev_t_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  if (x == T(1)) return T(1);
  if (x == T(0)) return n % 2 == 0 ? T(1) : T(-1);
  const T y = x + x - T(1);
  if (n > 6 && abs(y) < T(1)) return cos(T(n) * acos(y));
  if (n == 0) return T(1);
  if (n == 1) return y;
  return chebyshev_recurrence(y, y, n);
}

template <typename T> COIL_FN T shifted_chebyshev_u_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  const int64_t n1 = wrap_add(n, 1);
  if (x == T(1)) return T(n1);
  if (x == T(0)) return n % 2 == 0 ? T(n1) : T(wrap_neg(n1));
  const T y = x + x - T(1);
  if (n > 6 && abs(y) < T(1)) {
    if (sin(acos(y)) != T(0)) return sin(T(n1) * acos(y)) / sin(acos(y));
    return T(n1) * cos(T(n1) * acos(y)) / y;
  }
  if (n == 0) return T(1);
  if (n == 1) return y + y;
  return chebyshev_recurrence(y, y + y, n);
}

template <typename T> COIL_FN T shifted_chebyshev_v_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  const int64_t odd = wrap_add(wrap_add(n, n), 1);
  if (x == T(1)) return T(1);
  if (x == T(0)) return n % 2 == 0 ? T(odd) : T(wrap_neg(odd));
  const T y = x + x - T(1);
  if (n > 6 && abs(y) < T(1)) {
    if (sin(acos(y) / T(2)) != T(1)) return cos((T(n) + T(0.5)) * acos(y)) / cos(acos(y) / T(2));
    return n % 2 == 0 ? T(odd) : T(wrap_neg(odd));
  }
  if (n == 0) return T(1);
  if (n == 1) return y + y - T(1);
  return chebyshev_recurrence(y, y + y - T(1), n);
}

template <typename T> COIL_FN T shifted_chebyshev_w_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  if (x == T(1)) return T(wrap_add(wrap_add(n, n), 1));
  if (x == T(0)) return n % 2 == 0 ? T(1) : T(-1);
  const T y = x + x - T(1);
  if (n > 4 && abs(y) < T(1)) {
    if (cos(acos(y) / T(2)) != T(1)) return sin((T(n) + T(0.5)) * acos(y)) / sin(acos(y) / T(2));
    return n % 2 == 0 ? T(1) : T(-1);
  }
  if (n == 0) return T(1);
  if (n == 1) return y + y + T(1);
  return chebyshev_recurrence(y, y + y + T(1), n);
}

// Hermite's H (physicists') and He (probabilists'): PyTorch's CPU kernels give NaN beyond degree
// `limit` (128 in float, 512 in double), its CUDA kernels have no limit.
template <typename T> COIL_FN T hermite_h_impl(T x, int64_t n, int64_t limit) {
  if (n < 0) return T(0);
  if (n == 0) return T(1);
  if (n == 1) return x + x;
  if (n > limit) return nan<T>();
  T p = T(1), q = x + x, r = T(0);
  const int64_t end = wrap_add(n, n);
  for (int64_t k = 2; k < end; k += 2) {
    r = (x + x) * q - T(k) * p;
    p = q;
    q = r;
  }
  return r;
}

template <typename T> COIL_FN T hermite_he_impl(T x, int64_t n, int64_t limit) {
  if (n < 0) return T(0);
  if (n == 0) return T(1);
  if (n == 1) return x;
  if (n > limit) return nan<T>();
  T p = T(1), q = x, r = x;
  for (int64_t k = 1; k < n; ++k) {
    r = x * q - T(k) * p;
    p = q;
    q = r;
  }
  return r;
}

template <typename T> COIL_FN T laguerre_l_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  if (abs(x) == T(0)) return T(1);
  if (n == 0) return T(1);
  if (n == 1) return T(1) - x;
  T p = T(1), q = T(1) - x, r = q;
  for (int64_t k = 1; k < n && !isnan(q); ++k) {
    r = ((T(k + k) + (T(1) - x)) * q - T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}

template <typename T> COIL_FN T legendre_p_impl(T x, int64_t n) {
  if (n < 0) return T(0);
  if (abs(x) == T(1)) return x > T(0) || n % 2 == 0 ? T(1) : T(-1);
  if (n == 0) return T(1);
  if (n == 1) return x;
  T p = T(1), q = x, r = x;
  for (int64_t k = 1; k < n && !isnan(q); ++k) {
    r = (T(k + k + 1) * x * q - T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}
