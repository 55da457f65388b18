#include "schedule/extern_copies.h"

#include <map>
#include <optional>
#include <set>

#include "arith/simplify.h"
#include "codegen/kernel_shape.h"
#include "coil/graph.h"

namespace coil::schedule {

namespace {

using loop::Expr;

// Constant divisors k of floor divisions and modulos of loop variable `var` in `e`.
void divisors(const SymInt& e, const std::string& var, std::set<int64_t>& out) {
  if ((e.kind() == SymInt::Kind::floordiv || e.kind() == SymInt::Kind::mod) && e.operands()[0].kind() == SymInt::Kind::symbol &&
      e.operands()[0].symbol_name() == var)
    if (auto k = e.operands()[1].constant()) out.insert(*k);
  for (const auto& o : e.operands()) divisors(o, var, out);
}

// A copy's loop nest with every variable a merged view reads by digits (x // k, x % k, where k
// divides the extent) split into those digits: u<n> variables, most significant first, so that
// both offsets become affine in them. Returns the variables with their extents and the two
// offsets, simplified with the digits' ranges. A variable of symbolic extent is its own digit
// (none is read by digits).
struct Digits {
  std::vector<std::pair<std::string, SymInt>> vars;
  SymInt from, to;
};

std::optional<Digits> split_digits(const loop::LoopKernel& copy, const SymInt& from, const SymInt& to) {
  Digits d;
  std::map<std::string, SymInt> subst;
  RangeEnv env;
  for (size_t i = 0; i < copy.outer.size(); ++i) {
    auto extent = copy.outer[i].constant();
    std::string var = loop::loop_var(static_cast<int>(i));
    std::set<int64_t> ks;
    divisors(from, var, ks);
    divisors(to, var, ks);
    if (!extent) {
      if (!ks.empty()) return std::nullopt;
      std::string u = "u" + std::to_string(d.vars.size());
      subst[var] = SymInt::symbol(u);
      d.vars.emplace_back(u, copy.outer[i]);
      continue;
    }
    // Radices from the least significant digit: each divisor a multiple of the last.
    std::vector<int64_t> radix;
    int64_t prev = 1;
    for (int64_t k : ks) {
      if (k <= prev || k >= *extent || k % prev != 0 || *extent % k != 0) return std::nullopt;
      radix.push_back(k / prev);
      prev = k;
    }
    radix.push_back(*extent / prev);
    SymInt value = 0, weight = 1;
    std::vector<std::pair<std::string, SymInt>> digits;
    for (int64_t r : radix) {
      std::string u = "u" + std::to_string(d.vars.size() + digits.size());
      digits.emplace_back(u, SymInt(r));
      env[u] = Range{0, r - 1};
      value = value + SymInt::symbol(u) * weight;
      weight = weight * SymInt(r);
    }
    subst[var] = value;
    d.vars.insert(d.vars.end(), digits.rbegin(), digits.rend());
  }
  d.from = simplify(substitute(from, subst), env);
  d.to = simplify(substitute(to, subst), env);
  return d;
}

// The view of `copy`'s destination that holds element (i0, i1, ...) of `source` (`sizes`,
// contiguous `strides`), when `copy` moves every element of the source, unchanged, through a permutation of
// its dims; else nullopt.
std::optional<loop::View> destination_view(const loop::LoopKernel& copy, int source, const SymShape& sizes, const SymShape& strides) {
  if (!copy.reductions.empty() || !copy.inner.empty() || copy.stores.size() != 1) return std::nullopt;
  const loop::StoreStep& st = copy.stores[0];
  const loop::ExprRef& v = st.value;
  if (st.dynamic || v->kind() != Expr::Kind::load || v->buffer() != source || v->dynamic()) return std::nullopt;
  auto digits = split_digits(copy, v->offset(), st.offset);
  if (!digits) return std::nullopt;
  std::map<std::string, SymInt> zero;
  for (const auto& [u, extent] : digits->vars) zero[u] = SymInt(0);
  if (substitute(digits->from, zero) != SymInt(0)) return std::nullopt;
  loop::View out{st.buffer, sizes, SymShape(sizes.size(), SymInt(0)), substitute(digits->to, zero)};
  std::vector<bool> matched(sizes.size(), false);
  for (const auto& [u, extent] : digits->vars) {
    if (extent == SymInt(1)) continue;
    auto from = codegen::affine_coefficient(digits->from, u), to = codegen::affine_coefficient(digits->to, u);
    if (!from || !to) return std::nullopt;
    bool found = false;
    for (size_t d = 0; d < sizes.size() && !found; ++d) {
      if (matched[d] || strides[d] != *from || sizes[d] != extent) continue;
      matched[d] = found = true;
      out.strides[d] = *to;
    }
    if (!found) return std::nullopt;
  }
  for (size_t d = 0; d < sizes.size(); ++d)
    if (!matched[d] && sizes[d] != SymInt(1)) return std::nullopt;
  return out;
}

// Whether `copy` moves the dense result `source` (laid out as `t`) into a dense buffer of as
// many elements, each to the place it had: a view of other dims over the same memory
// (attention's grouped heads [B, Hkv, rep, E] read back as [B, H, 1, E]).
bool same_places(const loop::LoopKernel& copy, int source, const loop::Buffer& t, const loop::Program& p) {
  if (!copy.reductions.empty() || !copy.inner.empty() || copy.stores.size() != 1) return false;
  const loop::StoreStep& st = copy.stores[0];
  const loop::ExprRef& v = st.value;
  if (st.dynamic || v->kind() != Expr::Kind::load || v->buffer() != source || v->dynamic()) return false;
  std::map<std::string, SymInt> ones;  // a loop of one iteration: its variable is 0
  for (size_t i = 0; i < copy.outer.size(); ++i)
    if (copy.outer[i] == SymInt(1)) ones[loop::loop_var(static_cast<int>(i))] = SymInt(0);
  if (!(simplify(substitute(v->offset(), ones), RangeEnv{}) == simplify(substitute(st.offset, ones), RangeEnv{}))) return false;
  const loop::Buffer& d = p.buffers[static_cast<size_t>(st.buffer)];
  return d.offset == SymInt(0) && d.strides == contiguous_strides(d.sizes) && product(d.sizes) == product(t.sizes) &&
         product(copy.outer) == product(t.sizes);
}

}  // namespace

loop::Program externs_write_copies(const loop::Program& program) {
  loop::Program p = program;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    auto* call = std::get_if<loop::ExternCall>(&p.kernels[i]);
    if (!call || call->output_view) continue;
    const bool attention = call->kind == loop::ExternKind::attention;
    if (!attention && call->kind != loop::ExternKind::convolution) continue;
    const int result = call->output;
    const loop::Buffer& t = p.buffers[static_cast<size_t>(result)];
    if (t.role != loop::Buffer::Role::temporary || t.offset != SymInt(0)) continue;
    if (attention && t.strides != contiguous_strides(t.sizes)) continue;
    // Its one reader, after it; the copy's destination written by nothing else and read by
    // nothing before the copy.
    std::vector<size_t> readers;
    for (size_t j = i + 1; j < p.kernels.size(); ++j)
      if (loop::access(p.kernels[j]).reads.count(result)) readers.push_back(j);
    if (readers.size() != 1) continue;
    const auto* copy = std::get_if<loop::LoopKernel>(&p.kernels[readers[0]]);
    if (!copy) continue;
    auto view = same_places(*copy, result, t, p) ? std::optional<loop::View>(loop::View{copy->stores[0].buffer, t.sizes, t.strides, SymInt(0)})
                                                 : destination_view(*copy, result, t.sizes, t.strides);
    if (!view || p.buffers[static_cast<size_t>(view->buffer)].dtype != t.dtype) continue;
    // A convolution keeps the layout its library plan was chosen for: only a copy into the
    // same strides goes.
    if (!attention && (view->strides != t.strides || view->offset != SymInt(0))) continue;
    bool alone = true;
    for (size_t j = 0; j < p.kernels.size() && alone; ++j) {
      if (j == readers[0]) continue;
      auto a = loop::access(p.kernels[j]);
      alone = !a.writes.count(view->buffer) && !(j < readers[0] && a.reads.count(view->buffer));
    }
    if (!alone) continue;
    call->output = view->buffer;
    call->output_view = *view;
    p.kernels.erase(p.kernels.begin() + static_cast<std::ptrdiff_t>(readers[0]));
  }
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
