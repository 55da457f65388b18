#include "schedule/call_results.h"

#include <set>

#include "coil/graph.h"

namespace coil::schedule {

namespace {

bool same_layout(const loop::Buffer& a, const loop::Buffer& b) {
  return a.dtype == b.dtype && a.sizes == b.sizes && a.strides == b.strides && a.offset == b.offset;
}

bool row_major(const loop::Buffer& b) { return b.strides == contiguous_strides(b.sizes); }

}  // namespace

bool reads(const loop::Kernel& k, int buffer) { return loop::access(k).reads.count(buffer) > 0; }

bool same_elements(const loop::Buffer& product, const loop::Buffer& other) {
  if (same_layout(product, other)) return true;
  return product.dtype == other.dtype && product.offset == other.offset && other.sizes.size() >= product.sizes.size() &&
         row_major(product) && row_major(other) && coil::product(product.sizes) == coil::product(other.sizes);
}

void elide_copy(loop::Program& p, loop::ExternCall& call, std::vector<loop::Kernel>& later) {
  int product = call.output;
  for (size_t i = 0; i < later.size(); ++i) {
    auto* lk = std::get_if<loop::LoopKernel>(&later[i]);
    if (!lk || !reads(later[i], product)) continue;
    // The only reader: one store of exactly load(product, same offset), nothing else reading it.
    for (size_t j = i + 1; j < later.size(); ++j)
      if (reads(later[j], product)) return;
    if (!lk->inner.empty()) return;
    int hits = 0;
    size_t found = 0;
    for (size_t s = 0; s < lk->stores.size(); ++s) {
      const auto& st = lk->stores[s];
      std::set<int> loads;
      loop::collect_loads(st.value, loads);
      if (!loads.count(product)) continue;
      ++hits;
      found = s;
    }
    const loop::StoreStep& st = lk->stores[found];
    bool copy = hits == 1 && !st.dynamic && st.value->kind() == loop::Expr::Kind::load && !st.value->dynamic() && st.value->offset() == st.offset;
    int target = st.buffer;
    const loop::Buffer& tb = p.buffers[static_cast<size_t>(target)];
    bool writable = tb.role == loop::Buffer::Role::temporary || tb.role == loop::Buffer::Role::output;
    if (!copy || !writable || !same_elements(p.buffers[static_cast<size_t>(product)], tb)) return;
    // Nothing between the call and the copy may touch the target, and the call must not read it.
    for (size_t j = 0; j < i; ++j) {
      auto a = loop::access(later[j]);
      if (a.reads.count(target) || a.writes.count(target)) return;
    }
    if (loop::access(loop::Kernel(call)).reads.count(target)) return;
    call.output = target;
    lk->stores.erase(lk->stores.begin() + static_cast<std::ptrdiff_t>(found));
    if (lk->stores.empty()) later.erase(later.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

void replace_from(loop::Program& p, size_t at, loop::ExternCall fused, std::vector<loop::Kernel> later) {
  p.kernels.resize(at);
  p.kernels.push_back(std::move(fused));
  for (auto& k : later) p.kernels.push_back(std::move(k));
}

}  // namespace coil::schedule
