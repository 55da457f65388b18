// The ranges a graph's size symbols declare (`sym S in [2, inf]`), as the simplifier takes them.
#pragma once
#include <vector>

#include "arith/bounds.h"
#include "coil/graph.h"

namespace coil {

inline RangeEnv symbol_ranges(const std::vector<SymbolDecl>& symbols) {
  RangeEnv env;
  for (const auto& s : symbols) env[s.name] = Range{s.min, s.max.value_or(Range::kMax)};
  return env;
}

}  // namespace coil
