// The range-aware simplifier: targeted rewrites, and a property test that random expressions
// evaluated at random in-range points agree before and after simplifying.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "arith/simplify.h"

namespace coil {
namespace {

TEST(Simplify, DivisionAndModuloByBounds) {
  SymInt i = SymInt::symbol("i"), j = SymInt::symbol("j"), n = SymInt::symbol("N");
  RangeEnv env = {{"i", {0, 3}}, {"j", {0, 7}}};
  EXPECT_EQ(simplify(floordiv(j * 4 + i, 4), env), j);
  EXPECT_EQ(simplify(mod(j * 4 + i, 4), env), i);
  EXPECT_EQ(simplify(floordiv(i, 4), env), SymInt(0));
  EXPECT_EQ(simplify(mod(n * 8 + i, 1), env), SymInt(0));
  EXPECT_EQ(simplify(floordiv(floordiv(n, 2), 3), env), floordiv(n, 6));
  EXPECT_EQ(simplify(floordiv(j * 4 + i - 4, 4), env), j - 1);
  EXPECT_EQ(simplify(min(i, j + 3), env), i);
  EXPECT_EQ(simplify(max(i, SymInt(10)), env), SymInt(10));
  // Overlapping ranges, a difference of known sign (HF's causal mask: min(T, T + 1) is T).
  EXPECT_EQ(simplify(min(n, n + 1), env), n);
  EXPECT_EQ(simplify(max(n + 1, n), env), n + 1);
  EXPECT_EQ(simplify(min(n * 2, n), env), n);
  EXPECT_EQ(simplify(min(n, j), env), min(n, j));
  // Not provable: stays.
  EXPECT_EQ(simplify(floordiv(j + i, 4), env), floordiv(j + i, 4));
}

// A divisor of k shared with the large terms, the small ones below it: heads h = x0 % 12 of a
// [B*12, T, 64] view (x2 + 64*x1 < 8192), as a reshape of attention heads composes.
TEST(Simplify, DivisionByAMultipleOfTheStride) {
  SymInt x0 = SymInt::symbol("x0"), x1 = SymInt::symbol("x1"), x2 = SymInt::symbol("x2");
  RangeEnv env = {{"x0", {0, 23}}, {"x1", {0, 127}}, {"x2", {0, 63}}};
  SymInt lin = x2 + x1 * 64 + x0 * 8192;
  EXPECT_EQ(simplify(floordiv(lin, 98304), env), floordiv(x0, 12));
  EXPECT_EQ(simplify(mod(lin, 98304), env), mod(x0, 12) * 8192 + x2 + x1 * 64);
  // x2 + 64*x1 reaching past 8192: only the divisor 64 applies.
  RangeEnv wide = {{"x0", {0, 23}}, {"x1", {0, 128}}, {"x2", {0, 63}}};
  EXPECT_EQ(simplify(floordiv(lin, 98304), wide), floordiv(x1 + x0 * 128, 1536));
}

// A split variable merged back: a copy through a view of [B, T, C] as [B*T, C] reads
// x1 + C*(x0 % T) + T*C*(x0 // T), which is x1 + C*x0 (the GPT-2 block's gelu output, a copy
// kernel before this rule); nested splits recombine too, unmatched parts stay.
TEST(Simplify, SplitVariablesRecombine) {
  SymInt x0 = SymInt::symbol("x0"), x1 = SymInt::symbol("x1");
  RangeEnv env = {{"x0", {0, 8191}}, {"x1", {0, 3071}}};
  EXPECT_EQ(simplify(x1 + mod(x0, 1024) * 3072 + floordiv(x0, 1024) * 3145728, env), x1 + x0 * 3072);
  EXPECT_EQ(simplify(mod(x0, 8) + floordiv(x0, 8) * 8, env), x0);
  EXPECT_EQ(simplify(mod(mod(x0, 64), 8) + floordiv(mod(x0, 64), 8) * 8 + floordiv(x0, 64) * 64, env), x0);
  EXPECT_EQ(simplify(mod(x0, 8) + floordiv(x0, 8) * 16, env), mod(x0, 8) + floordiv(x0, 8) * 16);
  // Three dims merged back, the outer quotient as one division (ConvNeXt's gelu input, a view of
  // [B*H*W, 4C] as [B, H, W, 4C]: it kept the CPU kernel from vectorizing its erf)
  RangeEnv big = {{"x0", {0, 6271}}, {"x1", {0, 383}}};
  EXPECT_EQ(simplify(x1 + mod(x0, 56) * 384 + mod(floordiv(x0, 56), 56) * 21504 + floordiv(x0, 3136) * 1204224, big), x1 + x0 * 384);
  // A zero-size tensor's `% 0` stays as it is (no division by zero)
  EXPECT_EQ(simplify(mod(floordiv(x0, 4), 0) * 3 + x1, big), mod(floordiv(x0, 4), 0) * 3 + x1);
}

TEST(Simplify, RandomExpressionsKeepTheirValue) {
  std::mt19937_64 rng(42);
  const std::vector<std::string> names = {"i", "j", "k"};
  for (int trial = 0; trial < 3000; ++trial) {
    RangeEnv env;
    std::map<std::string, int64_t> point;
    for (const auto& n : names) {
      int64_t lo = static_cast<int64_t>(rng() % 3) - 1, hi = lo + static_cast<int64_t>(rng() % 9);
      env[n] = {lo, hi};
      point[n] = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    }
    std::function<SymInt(int)> gen = [&](int depth) -> SymInt {
      if (depth == 0 || rng() % 4 == 0) {
        if (rng() % 2) return SymInt::symbol(names[rng() % names.size()]);
        return SymInt(static_cast<int64_t>(rng() % 9) - 2);
      }
      SymInt a = gen(depth - 1), b = gen(depth - 1);
      int64_t k = static_cast<int64_t>(rng() % 5) + 1;
      switch (rng() % 7) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * SymInt(k);
        case 3: return floordiv(a, k);
        case 4: return mod(a, k);
        case 5: return min(a, b);
        default: return max(a, b) + a * b;
      }
    };
    SymInt e = gen(4);
    SymInt s = simplify(e, env);
    ASSERT_EQ(s.eval(point), e.eval(point)) << e.str() << "  simplified to  " << s.str();
  }
}

}  // namespace
}  // namespace coil
