#include "schedule/flatten_dense_pointwise.h"

#include <algorithm>
#include <map>

#include "arith/simplify.h"
#include "schedule/simplify_indices.h"
#include "coil/dtype.h"

namespace coil::schedule {

namespace {

constexpr int64_t kVectorBytes = 16;

// The flat index of the nest's point in row-major order, and the dense stride of each dim.
SymInt flat_index(const std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  strides.assign(sizes.size(), 1);
  for (size_t i = sizes.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * sizes[i + 1];
  SymInt at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) at = at + SymInt::symbol(loop::loop_var(static_cast<int>(i))) * SymInt(strides[i]);
  return at;
}

bool flattens(const loop::Program& p, const loop::LoopKernel& k, int64_t min_elements) {
  if (k.outer.size() < 2 || !k.inner.empty() || !k.reductions.empty() || loop::has_dynamic_stores(k) || k.stores.empty()) return false;
  std::vector<int64_t> sizes;
  for (const auto& s : k.outer) {
    auto v = s.constant();
    if (!v || *v <= 0) return false;
    sizes.push_back(*v);
  }
  int64_t widest = 1, points = 1;
  for (int64_t n : sizes) points *= n;
  for (const auto& s : k.stores) widest = std::max<int64_t>(widest, static_cast<int64_t>(dtype_size(p.buffers[static_cast<size_t>(s.buffer)].dtype)));
  const int64_t lanes = kVectorBytes / widest;
  if (points < min_elements || lanes <= 1 || points % lanes != 0 || sizes.back() % lanes == 0) return false;
  std::vector<int64_t> strides;
  const SymInt dense = flat_index(sizes, strides);
  for (const auto& s : k.stores) {
    if (s.inner || s.offset != dense) return false;
    const loop::Buffer& b = p.buffers[static_cast<size_t>(s.buffer)];
    if (b.offset != SymInt(0)) return false;
  }
  return true;
}

}  // namespace

loop::Program flatten_dense_pointwise(const loop::Program& program, int64_t min_elements) {
  loop::Program p = program;
  for (auto& kernel : p.kernels) {
    auto* k = std::get_if<loop::LoopKernel>(&kernel);
    if (!k || !flattens(p, *k, min_elements)) continue;
    std::vector<int64_t> sizes, strides;
    int64_t points = 1;
    for (const auto& s : k->outer) sizes.push_back(*s.constant()), points *= sizes.back();
    flat_index(sizes, strides);
    const SymInt flat = SymInt::symbol(loop::loop_var(0));
    std::map<std::string, SymInt> old;  // each old loop variable from the flat one
    for (size_t i = 0; i < sizes.size(); ++i) {
      SymInt x = floordiv(flat, SymInt(strides[i]));
      old[loop::loop_var(static_cast<int>(i))] = i == 0 ? x : mod(x, SymInt(sizes[i]));
    }
    k->outer = {SymInt(points)};
    RangeEnv env = kernel_ranges(*k);
    for (auto& s : k->stores) {
      s.offset = flat;
      s.value = loop::map_indices(s.value, [&](const SymInt& e) { return simplify(substitute(e, old), env); });
    }
  }
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
