#include "schedule/simplify_indices.h"

#include <algorithm>

#include "arith/simplify.h"

namespace coil::schedule {

RangeEnv kernel_ranges(const loop::LoopKernel& k) {
  RangeEnv env;
  auto add = [&](const std::string& var, const SymInt& extent) {
    if (auto e = extent.constant()) env[var] = Range{0, std::max<int64_t>(*e - 1, 0)};
    else env[var] = Range{0, Range::kMax};
  };
  for (size_t i = 0; i < k.outer.size(); ++i) add(loop::loop_var(static_cast<int>(i)), k.outer[i]);
  for (size_t i = 0; i < k.inner.size(); ++i) add(loop::reduce_var(static_cast<int>(i)), k.inner[i]);
  return env;
}

loop::Program simplify_indices(const loop::Program& program) {
  loop::Program p = program;
  for (auto& kernel : p.kernels) {
    auto* k = std::get_if<loop::LoopKernel>(&kernel);
    if (!k) continue;
    RangeEnv env = kernel_ranges(*k);
    auto fn = [&](const SymInt& e) { return simplify(e, env); };
    for (auto& r : k->reductions) r.value = loop::map_indices(r.value, fn);
    for (auto& s : k->stores) {
      s.offset = simplify(s.offset, env);
      s.value = loop::map_indices(s.value, fn);
      if (s.dynamic) s.dynamic = loop::map_indices(s.dynamic, fn);
    }
  }
  return p;
}

}  // namespace coil::schedule
