#include "graph_passes/cse.h"

#include <map>
#include <set>
#include <unordered_map>

#include "support/check.h"

namespace coil {

namespace {

// A node's op and arguments as text, to find candidates (equality is then checked exactly).
std::string key_of(const Node& n) {
  std::string key = std::to_string(static_cast<int>(n.op));
  for (const Arg& a : n.args) {
    key += '|';
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) key += '-';
          else if constexpr (std::is_same_v<T, bool>) key += v ? 'T' : 'F';
          else if constexpr (std::is_same_v<T, SymInt>) key += v.str();
          else if constexpr (std::is_same_v<T, double>) key += std::to_string(v);
          else if constexpr (std::is_same_v<T, std::string>) key += v;
          else if constexpr (std::is_same_v<T, IntList>) {
            for (const auto& s : v) key += s.str() + ',';
          } else if constexpr (std::is_same_v<T, FloatList>) {
            for (double d : v) key += std::to_string(d) + ',';
          } else if constexpr (std::is_same_v<T, DType>) key += std::to_string(static_cast<int>(v));
          else if constexpr (std::is_same_v<T, Device>) key += 'd';
          else if constexpr (std::is_same_v<T, ValueRef>) key += std::to_string(v.node) + ':' + std::to_string(v.output);
          else {
            for (const auto& r : v) key += r ? std::to_string(r->node) + ':' + std::to_string(r->output) + ',' : std::string("-,");
          }
        },
        a.value);
  }
  return key;
}

bool mergeable(const Node& n) { return n.schema().family != OpFamily::source && n.op != OpKind::TorchCall; }

bool same_outputs(const Node& a, const Node& b) {
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (!(a.outputs[i].meta == b.outputs[i].meta)) return false;
  return true;
}

}  // namespace

Graph eliminate_common_subexpressions(const Graph& graph) {
  Graph g;
  g.name = graph.name;
  g.symbols = graph.symbols;
  g.weights_file = graph.weights_file;
  std::set<std::pair<int, int>> returned;
  for (const auto& r : graph.outputs) returned.insert({r.node, r.output});
  std::map<std::pair<int, int>, ValueRef> remap;
  auto map_ref = [&](const ValueRef& r) { return remap.at({r.node, r.output}); };
  std::unordered_multimap<std::string, int> seen;  // key -> node of g
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    Node copy = n;
    for (auto& a : copy.args) {
      if (auto* r = std::get_if<ValueRef>(&a.value)) {
        a = Arg(map_ref(*r));
      } else if (auto* l = std::get_if<TensorList>(&a.value)) {
        TensorList out;
        for (const auto& e : *l) out.push_back(e ? std::optional<ValueRef>(map_ref(*e)) : std::nullopt);
        a = Arg(std::move(out));
      }
    }
    bool is_returned = false;
    for (size_t o = 0; o < n.outputs.size(); ++o) is_returned = is_returned || returned.count({static_cast<int>(i), static_cast<int>(o)});
    std::string key;
    if (mergeable(n)) {
      key = key_of(copy);
      if (!is_returned) {
        auto [from, to] = seen.equal_range(key);
        const Node* earlier = nullptr;
        int at = -1;
        for (auto it = from; it != to && !earlier; ++it) {
          const Node& m = g.nodes[static_cast<size_t>(it->second)];
          if (m.op == copy.op && m.args == copy.args && same_outputs(m, copy)) earlier = &m, at = it->second;
        }
        if (earlier) {
          for (size_t o = 0; o < n.outputs.size(); ++o) remap[{static_cast<int>(i), static_cast<int>(o)}] = {at, static_cast<int32_t>(o)};
          continue;
        }
      }
    }
    ValueRef first = g.append(std::move(copy));
    if (!key.empty()) seen.emplace(std::move(key), first.node);
    for (size_t o = 0; o < n.outputs.size(); ++o) remap[{static_cast<int>(i), static_cast<int>(o)}] = {first.node, static_cast<int32_t>(o)};
  }
  for (const auto& r : graph.outputs) g.outputs.push_back(map_ref(r));
  g.any_layout_outputs = graph.any_layout_outputs;
  verify(g);
  return g;
}

}  // namespace coil
