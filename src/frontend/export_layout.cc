#include "frontend/export_layout.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "arith/simplify.h"
#include "graph/symbol_ranges.h"
#include "support/check.h"

namespace coil::frontend {

namespace {

// The strides that decide a layout: those of dims longer than 1; none for an empty tensor.
std::vector<int64_t> significant(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<int64_t> out;
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return out;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) out.push_back(strides[d]);
  return out;
}

// The dims from outermost to innermost in memory, when the layout is dense (every element at
// one offset, no gaps); empty otherwise.
std::vector<int64_t> dense_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<int64_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  // Size-1 dims sit where they are: their stride means nothing.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (sizes[static_cast<size_t>(a)] == 1 || sizes[static_cast<size_t>(b)] == 1) return false;
    return strides[static_cast<size_t>(a)] > strides[static_cast<size_t>(b)];
  });
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    auto d = static_cast<size_t>(order[k]);
    if (sizes[d] == 1) continue;
    if (strides[d] != step) return {};
    step *= sizes[d];
  }
  return order;
}

// `v` laid out densely in the memory order `order` (outermost dim first): a permute into that
// order, a dense clone, the inverse permute.
ValueRef in_memory_order(Graph& g, ValueRef v, const std::vector<int64_t>& order, const std::string& name) {
  std::vector<int64_t> inverse(order.size());
  for (size_t k = 0; k < order.size(); ++k) inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  auto dims = [](const std::vector<int64_t>& d) { return IntList(d.begin(), d.end()); };
  ValueRef in_order = g.call1(OpKind::Permute, {v, dims(order)}, {}, g.fresh_name(name + "_in_order"));
  ValueRef dense = g.call1(OpKind::Clone, {in_order}, {{"memory_format", std::string("contiguous_format")}},
                           g.fresh_name(name + "_dense"));
  return g.call1(OpKind::Permute, {dense, dims(inverse)}, {}, g.fresh_name(name + "_laid_out"));
}

}  // namespace

ValueRef with_layout(Graph& g, ValueRef v, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                     const std::string& name) {
  const TensorMeta& m = g.meta(v);
  auto have_sizes = constant_shape(m.sizes);
  auto have_strides = constant_shape(m.strides);
  if (!have_sizes || !have_strides || *have_sizes != sizes || strides.size() != sizes.size()) return v;
  if (significant(sizes, *have_strides) == significant(sizes, strides)) return v;
  std::vector<int64_t> order = dense_order(sizes, strides);
  if (order.empty() && !sizes.empty()) return v;
  return in_memory_order(g, v, order, name);
}

ValueRef with_layout(Graph& g, ValueRef v, const SymShape& given_sizes, const SymShape& given_strides, const std::string& name) {
  auto static_sizes = constant_shape(given_sizes), static_strides = constant_shape(given_strides);
  if (static_sizes && static_strides) return with_layout(g, v, *static_sizes, *static_strides, name);
  // Symbolic sizes: the memory order is decided at the symbols' hints (Dynamo's guards keep it for
  // every size it lets in), and the laid-out value must then have PyTorch's strides exactly,
  // both simplified by the symbols' ranges (PyTorch's contiguous strides hold max(1, S - 2)).
  const RangeEnv env = symbol_ranges(g.symbols);
  SymShape sizes, strides;
  for (const auto& s : given_sizes) sizes.push_back(simplify(s, env));
  for (const auto& s : given_strides) strides.push_back(simplify(s, env));
  const TensorMeta& m = g.meta(v);
  if (m.sizes != sizes || strides.size() != sizes.size()) return v;
  auto significant_equal = [&](const SymShape& a) {
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] != SymInt(1) && a[d] != strides[d]) return false;
    return true;
  };
  if (significant_equal(m.strides)) return v;
  std::map<std::string, int64_t> hints;
  for (const auto& s : g.symbols) {
    if (!s.hint) fail("{}: size symbol {} has no hint to lay the value out by", name, s.name);
    hints[s.name] = *s.hint;
  }
  std::vector<int64_t> at_sizes, at_strides;
  for (size_t d = 0; d < sizes.size(); ++d) at_sizes.push_back(sizes[d].eval(hints)), at_strides.push_back(strides[d].eval(hints));
  std::vector<int64_t> order = dense_order(at_sizes, at_strides);
  if (order.empty() && !sizes.empty()) return v;  // not dense: a view's layout, which follows its input's
  ValueRef out = in_memory_order(g, v, order, name);
  if (!significant_equal(g.meta(out).strides))
    fail("{}: cannot lay the value out with PyTorch's strides {} for every size (coil's are {})", name, shape_str(strides),
         shape_str(g.meta(out).strides));
  return out;
}

std::vector<ValueRef> view_or_copy(Graph& g, std::vector<std::pair<std::string, Arg>> keywords,
                                   std::vector<std::string> names) {
  try {
    return g.call(OpKind::View, {}, keywords, names);
  } catch (const Error&) {
    auto self = std::find_if(keywords.begin(), keywords.end(), [](const auto& k) { return k.first == "self"; });
    if (self == keywords.end() || !std::holds_alternative<ValueRef>(self->second.value)) throw;
    ValueRef x = std::get<ValueRef>(self->second.value);
    if (g.meta(x).is_contiguous()) throw;  // not a layout question
    self->second = g.call1(OpKind::Clone, {x}, {{"memory_format", std::string("contiguous_format")}},
                           g.fresh_name(g.value_name(x) + "_dense"));
    return g.call(OpKind::View, {}, std::move(keywords), std::move(names));
  }
}

}  // namespace coil::frontend
