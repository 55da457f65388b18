#include "schedule/inline_pointwise.h"

#include <functional>
#include <optional>

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopKernel;

bool single_store_pointwise(const LoopKernel& k) {
  return k.inner.empty() && k.reductions.empty() && k.stores.size() == 1 && !k.stores[0].dynamic;
}

// `e` with every load of `buffer` (all at `offset`) replaced by `value`; nothing when a load is
// at another offset or data-dependent.
std::optional<ExprRef> replace_loads(const ExprRef& e, int buffer, const SymInt& offset, const ExprRef& value) {
  bool ok = true;
  std::function<ExprRef(const ExprRef&)> rw = [&](const ExprRef& x) -> ExprRef {
    if (x->kind() == Expr::Kind::load && x->buffer() == buffer) {
      if (x->dynamic() || x->offset() != offset) ok = false;
      return value;
    }
    return loop::map_operands(x, rw);
  };
  ExprRef out = rw(e);
  if (!ok) return std::nullopt;
  return out;
}

// The reader with the producer substituted, when the fusion is legal.
std::optional<LoopKernel> fuse_into(const loop::Program& p, size_t at, size_t reader) {
  const auto& prod = std::get<LoopKernel>(p.kernels[at]);
  const auto* cons = std::get_if<LoopKernel>(&p.kernels[reader]);
  if (!cons || !cons->inner.empty() || cons->outer != prod.outer || loop::has_dynamic_stores(*cons)) return std::nullopt;
  const loop::StoreStep& st = prod.stores[0];
  auto prod_reads = loop::access(p.kernels[at]).reads;
  // The producer's inputs must be unchanged up to the reader, which must not write them either.
  for (size_t i = at + 1; i <= reader; ++i)
    for (int w : loop::access(p.kernels[i]).writes)
      if (prod_reads.count(w) || w == st.buffer) return std::nullopt;
  LoopKernel fused = *cons;
  for (auto& s : fused.stores) {
    auto v = replace_loads(s.value, st.buffer, st.offset, st.value);
    if (!v || (*v)->depth() > loop::kMaxExprDepth) return std::nullopt;
    s.value = *v;
  }
  // A graph output keeps its store, now the reader's first.
  if (p.buffers[static_cast<size_t>(st.buffer)].role == loop::Buffer::Role::output) fused.stores.insert(fused.stores.begin(), st);
  fused.origins.insert(fused.origins.begin(), prod.origins.begin(), prod.origins.end());
  return fused;
}

}  // namespace

loop::Program inline_pointwise(const loop::Program& program) {
  loop::Program p = program;
  for (size_t i = 0; i < p.kernels.size();) {
    const auto* k = std::get_if<LoopKernel>(&p.kernels[i]);
    bool fused = false;
    if (k && single_store_pointwise(*k)) {
      int buffer = k->stores[0].buffer;
      std::vector<size_t> readers;
      for (size_t j = i + 1; j < p.kernels.size(); ++j)
        if (loop::access(p.kernels[j]).reads.count(buffer)) readers.push_back(j);
      const auto role = p.buffers[static_cast<size_t>(buffer)].role;
      if ((role == loop::Buffer::Role::temporary || role == loop::Buffer::Role::output) && readers.size() == 1) {
        if (auto f = fuse_into(p, i, readers[0])) {
          p.kernels[readers[0]] = std::move(*f);
          p.kernels.erase(p.kernels.begin() + static_cast<std::ptrdiff_t>(i));
          fused = true;
        }
      }
    }
    if (!fused) ++i;
  }
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
