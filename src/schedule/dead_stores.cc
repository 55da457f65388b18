#include "schedule/dead_stores.h"

#include <set>

namespace coil::schedule {

namespace {

void loads_of(const loop::ExprRef& e, std::set<int>& out) {
  if (e->kind() == loop::Expr::Kind::load) out.insert(e->buffer());
  for (const auto& o : e->operands()) loads_of(o, out);
}

std::set<int> reads(const loop::Kernel& k) {
  std::set<int> out;
  if (const auto* e = std::get_if<loop::ExternCall>(&k)) {
    for (const auto& v : e->inputs) out.insert(v.buffer);
    return out;
  }
  const auto& lk = std::get<loop::LoopKernel>(k);
  for (const auto& r : lk.reductions) loads_of(r.value, out);
  for (const auto& s : lk.stores) {
    loads_of(s.value, out);
    if (s.dynamic) loads_of(s.dynamic, out);
  }
  return out;
}

}  // namespace

loop::Program drop_dead_stores(const loop::Program& program) {
  loop::Program p = program;
  // Backwards: a buffer is live before a step if a later step reads it.
  std::set<int> live;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].role != loop::Buffer::Role::temporary) live.insert(static_cast<int>(b));
  std::vector<loop::Kernel> kept;
  for (size_t i = p.kernels.size(); i-- > 0;) {
    loop::Kernel k = p.kernels[i];
    if (auto* lk = std::get_if<loop::LoopKernel>(&k)) {
      std::vector<loop::StoreStep> stores;
      for (const auto& s : lk->stores)
        if (live.count(s.buffer)) stores.push_back(s);
      if (stores.empty()) continue;
      lk->stores = std::move(stores);
    }
    for (int b : reads(k)) live.insert(b);
    kept.push_back(std::move(k));
  }
  p.kernels.assign(kept.rbegin(), kept.rend());
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
