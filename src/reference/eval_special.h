// The interpreter's special functions (erfinv, lgamma, the Bessel functions, ...) and the
// pointwise ops around them (copysign, nextafter, shifts, gcd, frexp, ldexp). Private to
// src/reference; eval_elementwise.cc asks these first-or-last for the ops it does not know.
#pragma once
#include <optional>

#include "reference/eval.h"

namespace coil::ref {

// A unary op in a floating computation type (the node's output dtype); nullopt when `e`'s op
// is not one of these.
std::optional<double> special_unary(const NodeEval& e, double x);
// A unary op of an integer or bool operand whose result is computed exactly (signbit).
std::optional<int64_t> special_unary_int(OpKind op, int64_t x, DType t);
// A binary op computed in floating `compute` (nextafter steps by that dtype's ulp).
std::optional<double> special_binary(OpKind op, double a, double b, DType compute);
// A binary op on integers of dtype `t` (shifts, gcd, lcm), wrapping as `t` does.
std::optional<int64_t> special_binary_int(OpKind op, int64_t a, int64_t b, DType t);
// Hurwitz zeta(s, q) in long double, with PyTorch's special values (eval_special.cc).
double hurwitz_zeta(double s, double q);
// An orthogonal polynomial (special_chebyshev_polynomial_t, ..., legendre_polynomial_p, any
// overload) of x and degree n in floating `compute`, as PyTorch's CPU kernels define it; nullopt
// for other ops (eval_polynomials.cc).
std::optional<double> polynomial(OpKind op, double x, double n, DType compute);
// frexp (mantissa and int32 exponent) and ldexp (an integer exponent read exactly), whole.
std::vector<Tensor> eval_frexp(const NodeEval& e);
std::vector<Tensor> eval_ldexp(const NodeEval& e);

}  // namespace coil::ref
