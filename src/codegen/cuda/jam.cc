#include "codegen/cuda/jam.h"

#include <algorithm>

#include "codegen/kernel_shape.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

using loop::Expr;
using loop::ExprRef;


}  // namespace

int window_dim(const loop::LoopKernel& k) {
  if (k.outer.size() < 2 || k.inner.empty() || k.reductions.empty()) return -1;
  for (const auto& step : k.reductions)
    if (loop::reads_slots(step.value, 0)) return -1;  // passes: not jammed
  const int dim = static_cast<int>(k.outer.size()) - 2;
  const std::string x = loop::loop_var(dim), r = loop::reduce_var(static_cast<int>(k.inner.size()) - 1);
  std::vector<ExprRef> loads;
  for (const auto& step : k.reductions) collect_loads(step.value, loads);
  bool sliding = false;
  for (const auto& l : loads) {
    if (l->dynamic()) return -1;
    std::vector<std::string> syms;
    l->offset().collect_symbols(syms);
    const bool has_x = std::find(syms.begin(), syms.end(), x) != syms.end();
    const bool has_r = std::find(syms.begin(), syms.end(), r) != syms.end();
    if (!has_x || !has_r) continue;
    // Read through x + r alone: one step of x is one step of r.
    if (substitute(l->offset(), {{x, SymInt::symbol(x) + SymInt(1)}}) != substitute(l->offset(), {{r, SymInt::symbol(r) + SymInt(1)}}))
      return -1;
    sliding = true;
  }
  return sliding ? dim : -1;
}

loop::LoopKernel jammed(const loop::LoopKernel& k, int dim, int factor) {
  const auto extent = k.outer[static_cast<size_t>(dim)].constant();
  COIL_CHECK(extent && *extent % factor == 0) << "jam by " << factor << " of a dim of " << k.outer[static_cast<size_t>(dim)].str();
  for (const auto& r : k.reductions) COIL_CHECK(!loop::reads_slots(r.value, 0)) << "jam of a reduction in passes";
  loop::LoopKernel out = k;
  out.outer[static_cast<size_t>(dim)] = SymInt(*extent / factor);
  out.reductions.clear();
  out.stores.clear();
  const std::string x = loop::loop_var(dim);
  const int steps = static_cast<int>(k.reductions.size());
  for (int u = 0; u < factor; ++u) {
    const std::map<std::string, SymInt> at{{x, SymInt::symbol(x) * SymInt(factor) + SymInt(u)}};
    for (const auto& r : k.reductions) {
      loop::ReduceStep step = r;
      step.value = loop::substitute(r.value, at);
      out.reductions.push_back(std::move(step));
    }
    for (const auto& s : k.stores) {
      loop::StoreStep moved = s;
      moved.offset = substitute(s.offset, at);
      moved.value = loop::shift_slots(loop::substitute(s.value, at), u * steps);
      out.stores.push_back(std::move(moved));
    }
  }
  return out;
}

}  // namespace coil::codegen
