// SymInt canonicalization: structurally equal expressions compare equal, constants fold, and
// evaluation agrees with the expression it came from.
#include <gtest/gtest.h>

#include <random>

#include "coil/sym.h"
#include "coil/error.h"

namespace coil {
namespace {

TEST(SymInt, Canonicalizes) {
  SymInt b = SymInt::symbol("B"), s = SymInt::symbol("S");
  EXPECT_EQ(b * s, s * b);
  EXPECT_EQ(b + b, 2 * b);
  EXPECT_EQ(floordiv(b * 784, 1), b * 784);
  EXPECT_EQ(floordiv(b * 784, 784), b);
  EXPECT_EQ(floordiv(b * s * 768, s * 768), b);
  EXPECT_EQ(floordiv(b * 6 + 4, 2), b * 3 + 2);
  EXPECT_EQ(mod(b * 4, 2), SymInt(0));
  EXPECT_EQ(b - b, SymInt(0));
  EXPECT_EQ(2 * (b + 1), 2 * b + 2);
  // A sum among several factors gives up its terms' common factor: Dynamo's contiguous stride
  // (8*B + 8)*S and the product of sizes 8*((B + 1)*S) are one expression.
  EXPECT_EQ((8 * b + 8) * s, 8 * ((b + 1) * s));
  EXPECT_EQ((6 * b - 4) * (b + 1), 2 * ((3 * b - 2) * (b + 1)));
  EXPECT_EQ((2 * b + 3) * s, s * (2 * b + 3));  // nothing in common: as it was
  EXPECT_EQ(min(b, b), b);
  EXPECT_EQ(SymInt(7) + 5, SymInt(12));
  EXPECT_EQ(floordiv(SymInt(-7), 2), SymInt(-4));
  EXPECT_EQ(mod(SymInt(-7), 2), SymInt(1));
  EXPECT_NE(b, s);
  EXPECT_EQ((b * 4 + 1).str(), "4*B + 1");
  EXPECT_EQ((s - b).str(), "S - B");
  EXPECT_EQ(floordiv(s + 1, 2).str(), "(S + 1)//2");
  EXPECT_EQ(mod(s, 3).str(), "S % 3");
  EXPECT_THROW(floordiv(b, 0), Error);
}

// Random expressions evaluated at random points agree with a direct evaluation.
TEST(SymInt, EvaluationMatchesConstruction) {
  std::mt19937_64 rng(7);
  std::vector<std::string> names = {"A", "B", "C"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::map<std::string, int64_t> env;
    for (const auto& n : names) env[n] = static_cast<int64_t>(rng() % 9) + 1;
    // Build the expression and its value side by side.
    std::function<std::pair<SymInt, int64_t>(int)> gen = [&](int depth) -> std::pair<SymInt, int64_t> {
      if (depth == 0 || rng() % 3 == 0) {
        if (rng() % 2) {
          auto& n = names[rng() % names.size()];
          return {SymInt::symbol(n), env[n]};
        }
        int64_t c = static_cast<int64_t>(rng() % 7) - 2;
        return {SymInt(c), c};
      }
      auto [a, va] = gen(depth - 1);
      auto [b, vb] = gen(depth - 1);
      switch (rng() % 6) {
        case 0: return {a + b, va + vb};
        case 1: return {a - b, va - vb};
        case 2: return {a * b, va * vb};
        case 3: return {min(a, b), std::min(va, vb)};
        case 4: return {max(a, b), std::max(va, vb)};
        default: {
          int64_t k = static_cast<int64_t>(rng() % 4) + 1;  // positive constant divisor
          int64_t q = va / k - ((va % k != 0) && (va < 0) ? 1 : 0);
          return {floordiv(a, SymInt(k)), q};
        }
      }
    };
    auto [e, v] = gen(4);
    EXPECT_EQ(e.eval(env), v) << e.str();
  }
}

}  // namespace
}  // namespace coil
