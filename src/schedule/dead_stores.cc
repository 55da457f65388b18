#include "schedule/dead_stores.h"

#include <set>

namespace coil::schedule {


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
    for (int b : loop::access(k).reads) live.insert(b);
    kept.push_back(std::move(k));
  }
  p.kernels.assign(kept.rbegin(), kept.rend());
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
