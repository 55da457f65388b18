#include "codegen/kernel_shape.h"

#include <algorithm>

#include "coil/error.h"

namespace coil::codegen {

using loop::ExprRef;

void collect_loads(const ExprRef& e, std::vector<ExprRef>& out) {
  if (e->kind() == loop::Expr::Kind::load) {
    if (std::none_of(out.begin(), out.end(), [&](const ExprRef& o) { return loop::same(o, e); })) out.push_back(e);
    if (e->dynamic()) collect_loads(e->dynamic(), out);
    return;
  }
  for (const auto& o : e->operands()) collect_loads(o, out);
}

std::optional<int64_t> affine_stride(const SymInt& offset, const std::string& var) {
  try {
    SymInt rest = offset - substitute(offset, {{var, SymInt(0)}});
    if (rest == SymInt(0)) return 0;
    for (int64_t c : {int64_t{1}, int64_t{-1}})
      if (rest == SymInt(c) * SymInt::symbol(var)) return c;
    if (rest.kind() == SymInt::Kind::mul && rest.operands().size() == 2) {
      const auto& a = rest.operands()[0];
      const auto& b = rest.operands()[1];
      if (a.constant() && b == SymInt::symbol(var)) return *a.constant();
      if (b.constant() && a == SymInt::symbol(var)) return *b.constant();
    }
  } catch (const Error&) {  // `% 0` in a zero-size tensor's indices
  }
  return std::nullopt;
}

std::optional<SymInt> affine_coefficient(const SymInt& offset, const std::string& var) {
  try {
    const SymInt rest = offset - substitute(offset, {{var, SymInt(0)}});
    const SymInt c = substitute(rest, {{var, SymInt(1)}});
    std::vector<std::string> used;
    c.collect_symbols(used);
    if (std::find(used.begin(), used.end(), var) == used.end() && c * SymInt::symbol(var) == rest) return c;
  } catch (const Error&) {  // `% 0` in a zero-size tensor's indices
  }
  return std::nullopt;
}

bool multiple_of(const SymInt& e, int64_t n) {
  switch (e.kind()) {
    case SymInt::Kind::constant: return *e.constant() % n == 0;
    case SymInt::Kind::add:
      return std::all_of(e.operands().begin(), e.operands().end(), [&](const SymInt& o) { return multiple_of(o, n); });
    case SymInt::Kind::mul:
      return std::any_of(e.operands().begin(), e.operands().end(), [&](const SymInt& o) { return multiple_of(o, n); });
    default: return false;
  }
}

bool reads_row(const ExprRef& load) {
  std::vector<std::string> syms;
  load->offset().collect_symbols(syms);
  return std::any_of(syms.begin(), syms.end(), [](const std::string& s) { return s[0] == 'r'; });
}

bool is_column_reduction(const loop::LoopKernel& k) {
  if (k.reductions.empty() || loop::is_scan(k) || loop::has_dynamic_stores(k) || k.outer.empty() || k.inner.empty()) return false;
  for (const auto& s : k.stores)
    if (s.inner) return false;
  std::string x = loop::loop_var(static_cast<int>(k.outer.size()) - 1);
  std::string r = loop::reduce_var(static_cast<int>(k.inner.size()) - 1);
  std::vector<ExprRef> loads;
  for (const auto& step : k.reductions) collect_loads(step.value, loads);
  bool unit_along_x = false;
  for (const auto& l : loads) {
    if (l->dynamic()) return false;
    auto cx = affine_stride(l->offset(), x), cr = affine_stride(l->offset(), r);
    // The same for every column (a row's statistic of a normalization's weight gradient): each
    // block's rows of threads read it, whichever way the rows run.
    if (cx == 0) continue;
    // Not affine along the row (a window clamped at the borders, as a channels-last
    // convolution or pooling reads): a column when neighbouring outputs are neighbours in memory.
    if (!cx || (cr && *cr == 1) || (!cr && *cx != 1)) return false;
    unit_along_x = unit_along_x || *cx == 1;
  }
  return unit_along_x;
}

bool reads_window(const loop::LoopKernel& k) {
  if (k.inner.empty()) return false;
  std::string r = loop::reduce_var(static_cast<int>(k.inner.size()) - 1);
  std::vector<ExprRef> loads;
  for (const auto& step : k.reductions) collect_loads(step.value, loads);
  return std::any_of(loads.begin(), loads.end(), [&](const ExprRef& l) { return !l->dynamic() && !affine_stride(l->offset(), r); });
}

bool is_transposing(const loop::LoopKernel& k) {
  if (!k.reductions.empty() || !k.inner.empty() || loop::has_dynamic_stores(k) || k.outer.size() < 2) return false;
  std::string last = loop::loop_var(static_cast<int>(k.outer.size()) - 1);
  std::string second = loop::loop_var(static_cast<int>(k.outer.size()) - 2);
  std::vector<SymInt> offsets;
  std::vector<ExprRef> loads;
  for (const auto& s : k.stores) {
    offsets.push_back(s.offset);
    collect_loads(s.value, loads);
  }
  for (const auto& l : loads) {
    if (l->dynamic()) return false;
    offsets.push_back(l->offset());
  }
  for (const auto& o : offsets)
    if (!affine_stride(o, last) || !affine_stride(o, second)) return false;
  auto t = transposed_accesses(k);
  return !t.loads.empty() || !t.stores.empty();
}

TransposedAccesses transposed_accesses(const loop::LoopKernel& k) {
  TransposedAccesses t;
  if (k.outer.size() < 2) return t;
  std::string last = loop::loop_var(static_cast<int>(k.outer.size()) - 1);
  std::string second = loop::loop_var(static_cast<int>(k.outer.size()) - 2);
  auto transposed = [&](const SymInt& o) { return affine_stride(o, second) == 1 && affine_stride(o, last) != 1; };
  std::vector<ExprRef> loads;
  for (const auto& s : k.stores) collect_loads(s.value, loads);
  for (const auto& l : loads)
    if (!l->dynamic() && transposed(l->offset())) t.loads.push_back({l->buffer(), l->offset()});
  for (const auto& s : k.stores)
    if (transposed(s.offset)) t.stores.push_back({s.buffer, s.offset});
  return t;
}

}  // namespace coil::codegen
