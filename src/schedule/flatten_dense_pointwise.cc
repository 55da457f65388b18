#include "schedule/flatten_dense_pointwise.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "arith/simplify.h"
#include "schedule/simplify_indices.h"
#include "coil/dtype.h"

namespace coil::schedule {

namespace {

constexpr int64_t kVectorBytes = 16;

// The dense row-major strides of a nest of `sizes` (the first is the point count over sizes[0]).
std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t i = sizes.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * sizes[i + 1];
  return strides;
}

// The static sizes of kernel `k`'s nest where it runs flat, else nothing.
std::optional<std::vector<int64_t>> flat_nest(const loop::Program& p, const loop::LoopKernel& k, int64_t min_elements) {
  if (k.outer.size() < 2 || !k.inner.empty() || !k.reductions.empty() || loop::has_dynamic_stores(k) || k.stores.empty())
    return std::nullopt;
  std::vector<int64_t> sizes;
  for (const auto& s : k.outer) {
    auto v = s.constant();
    if (!v || *v <= 0) return std::nullopt;
    sizes.push_back(*v);
  }
  const std::vector<int64_t> strides = dense_strides(sizes);
  const int64_t points = strides[0] * sizes[0];
  int64_t widest = 1;
  for (const auto& s : k.stores) widest = std::max<int64_t>(widest, static_cast<int64_t>(dtype_size(p.buffers[static_cast<size_t>(s.buffer)].dtype)));
  const int64_t lanes = kVectorBytes / widest;
  if (points < min_elements || lanes <= 1 || points % lanes != 0 || sizes.back() % lanes == 0) return std::nullopt;
  SymInt dense = 0;  // the point's flat index
  for (size_t i = 0; i < sizes.size(); ++i) dense = dense + SymInt::symbol(loop::loop_var(static_cast<int>(i))) * SymInt(strides[i]);
  for (const auto& s : k.stores)
    if (s.inner || s.offset != dense || p.buffers[static_cast<size_t>(s.buffer)].offset != SymInt(0)) return std::nullopt;
  return sizes;
}

}  // namespace

loop::Program flatten_dense_pointwise(const loop::Program& program, int64_t min_elements) {
  loop::Program p = program;
  for (auto& kernel : p.kernels) {
    auto* k = std::get_if<loop::LoopKernel>(&kernel);
    const auto sizes = k ? flat_nest(p, *k, min_elements) : std::nullopt;
    if (!sizes) continue;
    const std::vector<int64_t> strides = dense_strides(*sizes);
    const SymInt flat = SymInt::symbol(loop::loop_var(0));
    std::map<std::string, SymInt> old;  // each old loop variable from the flat one
    for (size_t i = 0; i < sizes->size(); ++i) {
      SymInt x = floordiv(flat, SymInt(strides[i]));
      old[loop::loop_var(static_cast<int>(i))] = i == 0 ? x : mod(x, SymInt((*sizes)[i]));
    }
    k->outer = {SymInt(strides[0] * (*sizes)[0])};
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
