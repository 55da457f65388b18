#include "arith/simplify.h"

namespace coil {

namespace {

// Splits `a` into (q, r) with a == q*k + r, moving every term whose coefficient k divides.
std::pair<SymInt, SymInt> split_multiple(const SymInt& a, int64_t k) {
  SymInt q = 0, r = 0;
  auto take = [&](const SymInt& term) {
    int64_t coeff = 1;
    if (auto c = term.constant()) coeff = *c;
    else if (term.kind() == SymInt::Kind::mul && term.operands()[0].is_constant()) coeff = *term.operands()[0].constant();
    if (coeff % k == 0) q = q + floordiv(term, k);  // exact: SymInt cancels the coefficient
    else r = r + term;
  };
  if (a.kind() == SymInt::Kind::add) {
    for (const auto& t : a.operands()) take(t);
  } else {
    take(a);
  }
  return {q, r};
}

SymInt simplify_floordiv(const SymInt& a, const SymInt& b, const RangeEnv& env) {
  auto k = b.constant();
  if (!k || *k <= 0) return floordiv(a, b);
  if (a.kind() == SymInt::Kind::floordiv && a.operands()[1].is_constant() && *a.operands()[1].constant() > 0)
    return simplify_floordiv(a.operands()[0], *a.operands()[1].constant() * *k, env);
  auto [q, r] = split_multiple(a, *k);
  Range rr = bounds(r, env);
  if (rr.within(0, *k - 1)) return q;
  if (rr.within(-*k, -1)) return q - 1;
  return q + floordiv(r, *k);
}

SymInt simplify_mod(const SymInt& a, const SymInt& b, const RangeEnv& env) {
  auto k = b.constant();
  if (!k || *k <= 0) return mod(a, b);
  SymInt r = split_multiple(a, *k).second;
  if (bounds(r, env).within(0, *k - 1)) return r;
  return mod(r, *k);
}

}  // namespace

SymInt simplify(const SymInt& e, const RangeEnv& env) {
  if (e.is_constant() || e.kind() == SymInt::Kind::symbol) return e;
  std::vector<SymInt> ops;
  for (const auto& o : e.operands()) ops.push_back(simplify(o, env));
  switch (e.kind()) {
    case SymInt::Kind::floordiv: return simplify_floordiv(ops[0], ops[1], env);
    case SymInt::Kind::mod: return simplify_mod(ops[0], ops[1], env);
    case SymInt::Kind::min:
    case SymInt::Kind::max: {
      Range x = bounds(ops[0], env), y = bounds(ops[1], env);
      bool is_min = e.kind() == SymInt::Kind::min;
      if (x.hi <= y.lo) return is_min ? ops[0] : ops[1];
      if (y.hi <= x.lo) return is_min ? ops[1] : ops[0];
      return is_min ? min(ops[0], ops[1]) : max(ops[0], ops[1]);
    }
    default: return with_operands(e, ops);
  }
}

}  // namespace coil
