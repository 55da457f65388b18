#include "schedule/fuse_epilogues.h"

#include <algorithm>
#include <set>

#include "arith/simplify.h"
#include "codegen/kernel_shape.h"
#include "schedule/simplify_indices.h"
#include "support/check.h"

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopKernel;

std::set<int> reads(const LoopKernel& k) { return loop::access(k).reads; }

bool reads_buffer(const loop::Kernel& k, int b) { return loop::access(k).reads.count(b) > 0; }

// Rewrites an expression of the consumer: loop variables renamed into the producer's nest,
// loads of a per-row result (or, for a pointwise consumer, of a per-element result) replaced by
// its value, reduction slots shifted. Fails (ok = false) when such a result is read anywhere but
// where it was stored (another row, another element).
struct Rewriter {
  std::map<std::string, SymInt> vars;
  std::map<int, std::pair<SymInt, ExprRef>> produced;  // the producer's results it may read: buffer -> (store offset, value)
  int slot_shift = 0;
  bool ok = true;
  RangeEnv env;  // the producer's loop bounds, to simplify what a reshaped nest's variables give

  SymInt offset(const SymInt& o) const {
    SymInt at = coil::substitute(o, vars);
    return env.empty() ? at : simplify(at, env);
  }

  ExprRef operator()(const ExprRef& e) {
    switch (e->kind()) {
      case Expr::Kind::load: {
        SymInt at = offset(e->offset());
        auto it = produced.find(e->buffer());
        if (it == produced.end()) return Expr::load(e->buffer(), at, e->dtype(), e->dynamic() ? (*this)(e->dynamic()) : nullptr);
        if (at != (env.empty() ? it->second.first : simplify(it->second.first, env))) ok = false;
        return it->second.second;
      }
      case Expr::Kind::index: return Expr::index(offset(e->offset()));
      case Expr::Kind::reduced: return Expr::reduced(e->slot() + slot_shift, e->dtype());
      default: return loop::map_operands(e, [this](const ExprRef& o) { return (*this)(o); });
    }
  }
};

// A reduction that runs across memory (a column reduction: per-channel sums over a channels-last
// activation, a bias gradient) takes no per-element stores: a GPU then splits its few long
// columns between blocks that meet in scratch, which per-element stores of the column's result
// (or beside it) would forbid. On the H100, ResNet-50's channels-last batch norm with its
// normalization fused in ran one block a channel: 3.5 ms a layer, against 0.1 ms split.
// (A reduction that loads nothing along its rows, such as a loss gradient's sum of a computed
// one-hot, reads no memory across them.)
bool keeps_splitting(const LoopKernel& a, const LoopKernel& fused) {
  const auto inner = [](const LoopKernel& k) { return std::count_if(k.stores.begin(), k.stores.end(), [](const auto& s) { return s.inner; }); };
  if (inner(fused) == inner(a) || !codegen::is_column_reduction(a)) return true;
  std::vector<ExprRef> loads;
  for (const auto& r : a.reductions) codegen::collect_loads(r.value, loads);
  return std::none_of(loads.begin(), loads.end(), [](const ExprRef& l) { return codegen::reads_row(l); });
}

// Tries to fuse `b` into reduction kernel `a`; returns the fused kernel.
std::optional<LoopKernel> try_fuse(const LoopKernel& a, const LoopKernel& b) {
  if (a.inner.empty() || a.reductions.empty() || loop::is_scan(a) || loop::is_scan(b)) return std::nullopt;
  if (loop::has_dynamic_stores(a) || loop::has_dynamic_stores(b)) return std::nullopt;
  size_t m = a.outer.size();
  bool pointwise = b.inner.empty();
  // A pointwise consumer whose leading dims are the producer's one outer dim reshaped (a loss's
  // gradient over [8, 1024, 50257] after a reduction over [8192] rows): its variables become
  // the producer's row split back, x0 // 1024 and x0 % 1024.
  std::vector<SymInt> split;
  if (pointwise) {
    SymShape nest = a.outer;
    nest.insert(nest.end(), a.inner.begin(), a.inner.end());
    if (b.outer != nest) {
      const size_t lead = b.outer.size() >= a.inner.size() ? b.outer.size() - a.inner.size() : 0;
      SymShape rows(b.outer.begin(), b.outer.begin() + static_cast<std::ptrdiff_t>(lead));
      SymShape tail(b.outer.begin() + static_cast<std::ptrdiff_t>(lead), b.outer.end());
      if (m != 1 || lead < 2 || !(tail == a.inner) || !(product(rows) == a.outer[0])) return std::nullopt;
      SymInt x = SymInt::symbol(loop::loop_var(0)), step = 1;
      split.assign(lead, SymInt(0));
      for (size_t j = lead; j-- > 0;) {
        split[j] = j == 0 ? floordiv(x, step) : mod(floordiv(x, step), rows[j]);
        step = step * rows[j];
      }
    }
  } else if (b.outer != a.outer || b.inner != a.inner) {
    return std::nullopt;
  }
  // A reduction consumer must not read what the producer writes per element (it would read it
  // before the producer's last phase wrote it); a pointwise consumer reads it in that phase.
  std::set<int> b_reads = reads(b);
  for (const auto& s : a.stores)
    if (s.inner && b_reads.count(s.buffer) && !pointwise) return std::nullopt;
  Rewriter rw;
  const size_t lead = split.empty() ? m : split.size();
  for (size_t k = 0; k < b.outer.size(); ++k) {
    std::string from = loop::loop_var(static_cast<int>(k));
    rw.vars[from] = k < lead ? (split.empty() ? SymInt::symbol(from) : split[k])
                             : SymInt::symbol(loop::reduce_var(static_cast<int>(k - lead)));
  }
  if (!split.empty()) rw.env = kernel_ranges(a);
  for (const auto& s : a.stores)
    if (!s.inner || pointwise) rw.produced[s.buffer] = {s.offset, s.value};
  bool reads_produced = false;
  for (int buf : b_reads) reads_produced = reads_produced || rw.produced.count(buf);
  if (!reads_produced) return std::nullopt;
  rw.slot_shift = static_cast<int>(a.reductions.size());
  LoopKernel fused = a;
  for (const auto& r : b.reductions) fused.reductions.push_back({r.kind, rw(r.value), r.acc, r.scan});
  for (const auto& s : b.stores) {
    SymInt offset = rw.offset(s.offset);
    fused.stores.push_back({s.buffer, offset, rw(s.value), pointwise || s.inner});
  }
  if (!rw.ok || !keeps_splitting(a, fused)) return std::nullopt;
  fused.name = a.name;
  fused.origins.insert(fused.origins.end(), b.origins.begin(), b.origins.end());
  return fused;
}

// Pointwise kernel `b` (a later step) over row kernel `a`'s elements, its stores made inner
// stores of `a`; nothing when the nests differ. The caller checks that the move is legal.
std::optional<LoopKernel> absorb(const LoopKernel& a, const LoopKernel& b) {
  if (a.inner.empty() || a.reductions.empty() || loop::is_scan(a) || loop::is_scan(b) || !b.inner.empty() || !b.reductions.empty())
    return std::nullopt;
  if (loop::has_dynamic_stores(a) || loop::has_dynamic_stores(b)) return std::nullopt;
  SymShape nest = a.outer;
  nest.insert(nest.end(), a.inner.begin(), a.inner.end());
  if (b.outer != nest) return std::nullopt;
  Rewriter rw;
  for (size_t k = 0; k < b.outer.size(); ++k) {
    std::string from = loop::loop_var(static_cast<int>(k));
    rw.vars[from] = k < a.outer.size() ? SymInt::symbol(from) : SymInt::symbol(loop::reduce_var(static_cast<int>(k - a.outer.size())));
  }
  LoopKernel fused = a;
  for (const auto& s : b.stores) fused.stores.push_back({s.buffer, rw.offset(s.offset), rw(s.value), true});
  if (!rw.ok || !keeps_splitting(a, fused)) return std::nullopt;
  fused.origins.insert(fused.origins.end(), b.origins.begin(), b.origins.end());
  return fused;
}

// Whether pointwise kernel `b` may be an update computed over its input's memory (an output of
// an input's dtype and layout: runtime/memory_plan.h's outputs_over_inputs), which a row kernel
// reading that input in its reductions could not be.
bool may_update_an_input(const loop::Program& p, const loop::Kernel& b) {
  const auto acc = loop::access(b);
  for (int w : acc.writes) {
    const loop::Buffer& o = p.buffers[static_cast<size_t>(w)];
    if (o.role != loop::Buffer::Role::output) continue;
    for (int r : acc.reads) {
      const loop::Buffer& i = p.buffers[static_cast<size_t>(r)];
      if (i.role == loop::Buffer::Role::input && i.dtype == o.dtype && i.sizes == o.sizes && i.strides == o.strides) return true;
    }
  }
  return false;
}

// Pointwise kernels over a row kernel's elements that read what it reads, moved into it as inner
// stores: the value a normalization's row kernel recomputes and a kernel of its own stores as
// well (GPT-2's residual sum, an output beside its layer norm: 12 kernels of 0.056 ms a step).
// Legal when nothing between them writes what the pointwise kernel reads or reads or writes
// what it writes, and the row kernel touches neither; left alone where the pointwise kernel may
// be an optimizer's update, done in place only by a kernel without reductions.
void absorb_pointwise(loop::Program& p) {
  std::vector<loop::Access> acc;
  for (const auto& k : p.kernels) acc.push_back(loop::access(k));
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const auto* row = std::get_if<LoopKernel>(&p.kernels[i]);
    if (!row || row->inner.empty() || row->reductions.empty()) continue;
    std::set<int> read = acc[i].reads, written = acc[i].writes;  // by steps i .. j - 1
    for (size_t j = i + 1; j < p.kernels.size(); ++j) {
      const loop::Access b = acc[j];
      const auto* pointwise = std::get_if<LoopKernel>(&p.kernels[j]);
      auto any_in = [](const std::set<int>& these, const std::set<int>& those) {
        return std::any_of(these.begin(), these.end(), [&](int x) { return those.count(x) > 0; });
      };
      const bool legal = any_in(b.reads, acc[i].reads) && !any_in(b.reads, written) && !any_in(b.writes, written) &&
                         !any_in(b.writes, read) && !may_update_an_input(p, p.kernels[j]);
      std::optional<LoopKernel> fused;
      if (pointwise && legal) fused = absorb(std::get<LoopKernel>(p.kernels[i]), *pointwise);
      if (fused) {
        p.kernels[i] = std::move(*fused);
        acc[i].reads.insert(b.reads.begin(), b.reads.end());
        acc[i].writes.insert(b.writes.begin(), b.writes.end());
        p.kernels.erase(p.kernels.begin() + static_cast<std::ptrdiff_t>(j));
        acc.erase(acc.begin() + static_cast<std::ptrdiff_t>(j));
        --j;
      }
      // Between the row kernel and the next candidate either way (or a part of the row kernel).
      read.insert(b.reads.begin(), b.reads.end());
      written.insert(b.writes.begin(), b.writes.end());
    }
  }
}

}  // namespace

loop::Program fuse_epilogues(const loop::Program& program) {
  loop::Program p = program;
  for (size_t i = 0; i + 1 < p.kernels.size();) {
    auto* a = std::get_if<LoopKernel>(&p.kernels[i]);
    auto* b = std::get_if<LoopKernel>(&p.kernels[i + 1]);
    std::optional<LoopKernel> fused;
    if (a && b) fused = try_fuse(*a, *b);
    if (!fused) {
      ++i;
      continue;
    }
    // The producer's results nobody else needs are no longer stored.
    std::vector<loop::StoreStep> kept;
    for (const auto& s : fused->stores) {
      bool producer_result = std::any_of(a->stores.begin(), a->stores.end(), [&](const loop::StoreStep& t) { return t.buffer == s.buffer; });
      bool needed = p.buffers[static_cast<size_t>(s.buffer)].role != loop::Buffer::Role::temporary;
      for (size_t j = i + 2; j < p.kernels.size() && !needed; ++j) needed = reads_buffer(p.kernels[j], s.buffer);
      if (producer_result && !needed) continue;
      kept.push_back(s);
    }
    fused->stores = std::move(kept);
    p.kernels[i] = std::move(*fused);
    p.kernels.erase(p.kernels.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  absorb_pointwise(p);
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
