#include "arith/simplify.h"

#include <algorithm>
#include <vector>

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

int64_t coefficient(const SymInt& term) {
  if (auto c = term.constant()) return *c;
  if (term.kind() == SymInt::Kind::mul && term.operands()[0].is_constant()) return *term.operands()[0].constant();
  return 1;
}

int64_t gcd(int64_t a, int64_t b) {
  a = a < 0 ? -a : a;
  while (b) a %= b, std::swap(a, b);
  return a;
}

// A divisor g of k (1 < g < k) with a == q*g + r and 0 <= r < g, the largest such among the
// gcds of k with a's coefficients, or 0: then a // k == q // (k/g) and a % k == (q % (k/g))*g + r.
int64_t exact_divisor(const SymInt& a, int64_t k, const RangeEnv& env) {
  std::vector<int64_t> candidates;
  auto add = [&](const SymInt& term) {
    int64_t g = gcd(coefficient(term), k);
    if (g > 1 && g < k) candidates.push_back(g);
  };
  if (a.kind() == SymInt::Kind::add) {
    for (const auto& t : a.operands()) add(t);
  } else {
    add(a);
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (int64_t g : candidates)
    if (bounds(split_multiple(a, g).second, env).within(0, g - 1)) return g;
  return 0;
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
  if (int64_t g = exact_divisor(a, *k, env)) return simplify_floordiv(split_multiple(a, g).first, *k / g, env);
  return q + floordiv(r, *k);
}

SymInt simplify_mod(const SymInt& a, const SymInt& b, const RangeEnv& env) {
  auto k = b.constant();
  if (!k || *k <= 0) return mod(a, b);
  SymInt r = split_multiple(a, *k).second;
  if (bounds(r, env).within(0, *k - 1)) return r;
  if (int64_t g = exact_divisor(r, *k, env)) {
    auto [q, rest] = split_multiple(r, g);
    return simplify_mod(q, *k / g, env) * g + rest;
  }
  return mod(r, *k);
}

// A term as (coefficient, the rest): c*x -> (c, x), x -> (1, x).
std::pair<int64_t, SymInt> scaled(const SymInt& term) {
  if (term.kind() == SymInt::Kind::mul && term.operands().size() == 2 && term.operands()[0].is_constant())
    return {*term.operands()[0].constant(), term.operands()[1]};
  return {1, term};
}

// Undoes a split variable in a sum: c*(x % n) + c*n*(x // n) -> c*x (x == n*(x // n) + x % n),
// which a reshape's index map leaves behind when its dims merge back (a copy through a view of
// [B, T, C] as [B*T, C] reads x1 + C*(x0 % T) + T*C*(x0 // T), that is x1 + C*x0).
SymInt recombine(const SymInt& sum) {
  std::vector<SymInt> terms = sum.operands();
  bool changed = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto [c, m] = scaled(terms[i]);
    if (m.kind() != SymInt::Kind::mod || !m.operands()[1].is_constant() || *m.operands()[1].constant() <= 0) continue;  // `% 0`: a zero-size tensor's
    const SymInt& x = m.operands()[0];
    const int64_t n = *m.operands()[1].constant();
    // x // n, also as simplify writes it where x is itself a quotient: (y // k) // n -> y // (k*n)
    // (a view merging three dims back reads 384*(x0 % 56) + 21504*((x0 // 56) % 56) + 1204224*(x0 // 3136)).
    const SymInt quotient = x.kind() == SymInt::Kind::floordiv && x.operands()[1].is_constant() && *x.operands()[1].constant() > 0
                                ? floordiv(x.operands()[0], SymInt(*x.operands()[1].constant() * n))
                                : floordiv(x, n);
    for (size_t j = 0; j < terms.size(); ++j) {
      auto [cj, d] = scaled(terms[j]);
      if (j == i || cj != c * n || (d != floordiv(x, n) && d != quotient)) continue;
      terms[i] = x * c;
      terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
      changed = true;
      break;
    }
  }
  if (!changed) return sum;
  SymInt out = 0;
  for (const auto& t : terms) out = out + t;
  return out.kind() == SymInt::Kind::add ? recombine(out) : out;
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
      // Operands of overlapping ranges that differ by a known sign: min(S, S + 1) is S.
      Range d = bounds(ops[1] - ops[0], env);
      if (d.lo >= 0) return is_min ? ops[0] : ops[1];
      if (d.hi <= 0) return is_min ? ops[1] : ops[0];
      return is_min ? min(ops[0], ops[1]) : max(ops[0], ops[1]);
    }
    case SymInt::Kind::add: {
      SymInt sum = with_operands(e, ops);
      return sum.kind() == SymInt::Kind::add ? recombine(sum) : sum;
    }
    default: return with_operands(e, ops);
  }
}

}  // namespace coil
