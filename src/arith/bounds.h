// Interval bounds of symbolic integer expressions, to prove the side conditions of
// simplifications (0 <= b < k, a <= b). Unbounded ends saturate at the int64 limits.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "coil/sym.h"

namespace coil {

struct Range {
  static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t lo = kMin;
  int64_t hi = kMax;
  bool within(int64_t a, int64_t b) const { return lo >= a && hi <= b; }
};

// Ranges of named symbols. A symbol with no entry is a size: [0, +inf).
using RangeEnv = std::map<std::string, Range>;

Range bounds(const SymInt& e, const RangeEnv& env);

}  // namespace coil
