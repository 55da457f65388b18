// The range-aware simplifier for index expressions: with the bounds of the symbols (loop
// variables, sizes) it removes floor-divisions and modulos that bounds make trivial:
//   (a*k + b) // k -> a + b // k,   b // k -> 0 when 0 <= b < k,
//   (a*k + b) % k  -> b % k,        b % k  -> b when 0 <= b < k,
//   (a // j) // k  -> a // (j*k),   min/max decided by bounds (of the operands, or of
//   their difference: min(S, S + 1) -> S),
//   c*(x % n) + c*n*(x // n) -> c*x.
// SymInt's constructors already canonicalize sums and products.
#pragma once
#include "arith/bounds.h"

namespace coil {

SymInt simplify(const SymInt& e, const RangeEnv& env);

}  // namespace coil
