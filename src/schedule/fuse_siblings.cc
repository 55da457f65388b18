#include "schedule/fuse_siblings.h"

#include <algorithm>
#include <set>

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopKernel;

bool intersects(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (b.count(x)) return true;
  return false;
}

bool same_nest(const LoopKernel& a, const LoopKernel& b) {
  if (a.outer != b.outer || a.inner != b.inner) return false;
  if (loop::is_scan(a) || loop::is_scan(b) || loop::has_dynamic_stores(a) || loop::has_dynamic_stores(b)) return false;
  // A reduction kernel's inner stores run after all its steps; keep pointwise with pointwise.
  return a.reductions.empty() == b.reductions.empty();
}

LoopKernel merge(const LoopKernel& a, const LoopKernel& b) {
  LoopKernel m = a;
  int shift = static_cast<int>(a.reductions.size());
  for (const auto& r : b.reductions) m.reductions.push_back({r.kind, loop::shift_slots(r.value, shift), r.acc, r.scan});
  for (const auto& s : b.stores) {
    loop::StoreStep t = s;
    t.value = loop::shift_slots(s.value, shift);
    m.stores.push_back(t);
  }
  m.origins.insert(m.origins.end(), b.origins.begin(), b.origins.end());
  return m;
}

// `reduced` slot `from` read as `value`, slots above it one lower (step `from` removed).
ExprRef replace_slot(const ExprRef& e, int from, const ExprRef& value) {
  if (e->kind() == Expr::Kind::reduced) {
    if (e->slot() == from) return value;
    return e->slot() > from ? Expr::reduced(e->slot() - 1, e->dtype()) : e;
  }
  return loop::map_operands(e, [&](const ExprRef& o) { return replace_slot(o, from, value); });
}

// A sum over the rows beside a Welford mean of the same values (a batch norm's mean and
// variance, two reductions of one input merged here) is that mean times the row's length: the
// sum goes, so the steps form one pass over the row, which a GPU splits between blocks (on the
// H100, ResNet-50's channels-last batch norms ran one block a channel for two passes: 3.5 ms
// a layer). Only where asked (the CUDA target): the CPU has nothing to split, and its vectorized
// sum is the more accurate mean (the zoo's small ResNet-50, whose last batch norms see two
// values a channel, lost its gradients' accuracy to a sequential Welford mean).
void share_welford_sums(LoopKernel& k) {
  for (size_t i = 0; i < k.reductions.size(); ++i) {
    const loop::ReduceStep& sum = k.reductions[i];
    if (sum.kind != loop::ReduceKind::sum || sum.scan) continue;
    size_t w = 0;
    while (w < k.reductions.size() && !(k.reductions[w].kind == loop::ReduceKind::welford_mean && k.reductions[w].acc == sum.acc &&
                                         loop::same(k.reductions[w].value, sum.value)))
      ++w;
    if (w == k.reductions.size()) continue;
    // A step reading the sum before the mean is computed (a two-pass variance before it) keeps it.
    bool read_early = false;
    for (size_t j = i + 1; j < w; ++j) read_early = read_early || loop::reads_slots(k.reductions[j].value, static_cast<int>(i), static_cast<int>(i) + 1);
    if (read_early) continue;
    const int mean_slot = static_cast<int>(w > i ? w - 1 : w);
    const ExprRef total = Expr::apply(loop::LoopOp::Mul, {Expr::reduced(mean_slot, sum.acc), Expr::cast(Expr::index(product(k.inner)), sum.acc)});
    k.reductions.erase(k.reductions.begin() + static_cast<std::ptrdiff_t>(i));
    for (auto& r : k.reductions) r.value = replace_slot(r.value, static_cast<int>(i), total);
    for (auto& st : k.stores) st.value = replace_slot(st.value, static_cast<int>(i), total);
    --i;
  }
}

// Pointwise kernels this small are bound by their launch, not by memory: independent ones of a
// nest merge even without a common input (an optimizer step's per-parameter updates of layers of
// one shape, its 0-d step counters: ViT-S's step launched 1262 kernels to Inductor's 661).
constexpr size_t kMaxMergedBuffers = 96;  // a kernel's parameters stay well under CUDA's 4 KiB

bool launch_bound(const LoopKernel& a, const LoopKernel& b, int64_t independent_points) {
  if (!a.reductions.empty() || !b.reductions.empty()) return false;
  auto n = product(a.outer).constant();
  return n && *n <= independent_points;
}

// Whether kernel j can run right after kernel i (everything between stays in order).
bool can_hoist(const std::vector<loop::Access>& acc, size_t i, size_t j) {
  for (size_t m = i; m < j; ++m) {
    if (intersects(acc[j].reads, acc[m].writes)) return false;   // j needs m's result
    if (intersects(acc[j].writes, acc[m].reads)) return false;   // m needs the old contents
    if (intersects(acc[j].writes, acc[m].writes)) return false;  // write order
  }
  return true;
}

size_t buffers_of(const loop::Access& a, const loop::Access& b) {
  std::set<int> all = a.reads;
  for (const std::set<int>* s : {&a.writes, &b.reads, &b.writes}) all.insert(s->begin(), s->end());
  return all.size();
}

}  // namespace

loop::Program fuse_siblings(const loop::Program& program, bool one_pass_statistics, int64_t independent_points) {
  loop::Program p = program;
  std::vector<loop::Access> acc;
  for (const auto& k : p.kernels) acc.push_back(loop::access(k));
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if (!std::holds_alternative<LoopKernel>(p.kernels[i])) continue;
    for (size_t j = i + 1; j < p.kernels.size();) {
      const auto* a = std::get_if<LoopKernel>(&p.kernels[i]);
      const auto* b = std::get_if<LoopKernel>(&p.kernels[j]);
      bool fuse = b && same_nest(*a, *b) && (intersects(acc[i].reads, acc[j].reads) || launch_bound(*a, *b, independent_points)) &&
                  buffers_of(acc[i], acc[j]) <= kMaxMergedBuffers && can_hoist(acc, i, j);
      if (!fuse) {
        ++j;
        continue;
      }
      p.kernels[i] = merge(*a, *b);
      if (one_pass_statistics) share_welford_sums(std::get<LoopKernel>(p.kernels[i]));
      acc[i].reads.insert(acc[j].reads.begin(), acc[j].reads.end());
      acc[i].writes.insert(acc[j].writes.begin(), acc[j].writes.end());
      p.kernels.erase(p.kernels.begin() + static_cast<std::ptrdiff_t>(j));
      acc.erase(acc.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
