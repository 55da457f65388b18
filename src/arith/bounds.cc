#include "arith/bounds.h"

#include <algorithm>

namespace coil {

namespace {

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? Range::kMax : Range::kMin;
  return r;
}

int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? Range::kMin : Range::kMax;
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Range add(Range a, Range b) { return {sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)}; }

Range mul(Range a, Range b) {
  int64_t c[] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo), sat_mul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

}  // namespace

Range bounds(const SymInt& e, const RangeEnv& env) {
  switch (e.kind()) {
    case SymInt::Kind::constant: return {*e.constant(), *e.constant()};
    case SymInt::Kind::symbol: {
      auto it = env.find(e.symbol_name());
      return it == env.end() ? Range{0, Range::kMax} : it->second;
    }
    case SymInt::Kind::add: {
      Range r{0, 0};
      for (const auto& o : e.operands()) r = add(r, bounds(o, env));
      return r;
    }
    case SymInt::Kind::mul: {
      Range r{1, 1};
      for (const auto& o : e.operands()) r = mul(r, bounds(o, env));
      return r;
    }
    case SymInt::Kind::floordiv: {
      Range a = bounds(e.operands()[0], env), b = bounds(e.operands()[1], env);
      if (b.lo <= 0) return {};  // a divisor that may be zero or negative: no claim
      int64_t lo = a.lo == Range::kMin ? Range::kMin : std::min(floor_div(a.lo, b.lo), floor_div(a.lo, b.hi));
      int64_t hi = a.hi == Range::kMax ? Range::kMax : std::max(floor_div(a.hi, b.lo), floor_div(a.hi, b.hi));
      return {lo, hi};
    }
    case SymInt::Kind::mod: {
      Range a = bounds(e.operands()[0], env), b = bounds(e.operands()[1], env);
      if (b.lo <= 0) return {};
      if (a.lo >= 0 && a.hi < b.lo) return a;  // already reduced
      return {0, b.hi - 1};
    }
    case SymInt::Kind::min: {
      Range a = bounds(e.operands()[0], env), b = bounds(e.operands()[1], env);
      return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    }
    case SymInt::Kind::max: {
      Range a = bounds(e.operands()[0], env), b = bounds(e.operands()[1], env);
      return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
  }
  return {};
}

}  // namespace coil
