#include "graph_passes/decompose.h"

#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph_passes/decompose_attention.h"
#include "graph_passes/decompose_batch_norm.h"
#include "graph_passes/decompose_pooling.h"
#include "support/check.h"

namespace coil {

namespace {

// Fresh value names that collide neither with the source graph nor with the graph being built.
class Namer {
 public:
  explicit Namer(const Graph& source) {
    for (const auto& n : source.nodes)
      for (const auto& o : n.outputs) used_.insert(o.name);
  }
  std::string next(const std::string& stem) {
    std::string name = stem;
    // A stem named many times resumes where its last search ended (100,000 slices of one
    // pooling node searched from _1 each time).
    int& i = next_suffix_[stem];
    while (used_.count(name)) name = stem + "_" + std::to_string(++i);
    used_.insert(name);
    return name;
  }

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, int> next_suffix_;
};

// Grouped-query attention: each key/value head serves query_heads / kv_heads consecutive query
// heads, so the heads dim (third from last) repeats each head that many times.
ValueRef repeat_heads(Graph& g, ValueRef x, const SymInt& query_heads, const std::string& stem, Namer& names) {
  const TensorMeta m = g.meta(x);
  size_t h = m.sizes.size() - 3;
  auto kv = m.sizes[h].constant(), hq = query_heads.constant();
  if (!kv || !hq || *kv == 0 || *hq % *kv != 0)
    fail("scaled_dot_product_attention: grouped-query attention needs constant head counts, query's a multiple of key's");
  SymShape grouped = m.sizes;
  grouped.insert(grouped.begin() + static_cast<std::ptrdiff_t>(h) + 1, *hq / *kv);
  ValueRef u = g.call1(OpKind::Unsqueeze, {x, static_cast<int64_t>(h) + 1}, {}, names.next(stem + "_heads"));
  ValueRef e = g.call1(OpKind::Expand, {u, IntList(grouped)}, {}, names.next(stem + "_heads"));
  ValueRef dense = g.call1(OpKind::Clone, {e}, {{"memory_format", "contiguous_format"}}, names.next(stem + "_heads"));
  SymShape out = m.sizes;
  out[h] = query_heads;
  return g.call1(OpKind::View, {dense, IntList(out)}, {}, names.next(stem + "_heads"));
}

// q @ k^T * scale, masked, softmax, @ v — over the flattened batch dims, as bmm needs 3-D.
// f16/bf16 inputs compute in f32 (as PyTorch's CPU attention kernels accumulate), and rows a
// mask hides entirely give zeros, as PyTorch's safe softmax does.
ValueRef attention(Graph& g, const Node& n, const std::map<std::pair<int, int>, ValueRef>& remap, Namer& names) {
  auto ref = [&](std::string_view name) { return remap.at({std::get<ValueRef>(n.arg(name).value).node, std::get<ValueRef>(n.arg(name).value).output}); };
  ValueRef q = ref("query"), k = ref("key"), v = ref("value");
  DType dtype = g.meta(q).dtype;
  bool reduced = dtype == DType::f16 || dtype == DType::bf16;
  auto widen = [&](ValueRef x) {
    if (!reduced || g.meta(x).dtype != dtype) return x;
    return g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::f32}}, names.next(n.name() + "_f32"));
  };
  q = widen(q), k = widen(k), v = widen(v);
  size_t r = g.meta(q).sizes.size();
  if (std::get<bool>(n.arg("enable_gqa").value) && r >= 3 && g.meta(k).sizes[r - 3] != g.meta(q).sizes[r - 3]) {
    k = repeat_heads(g, k, g.meta(q).sizes[r - 3], n.name() + "_k", names);
    v = repeat_heads(g, v, g.meta(q).sizes[r - 3], n.name() + "_v", names);
  }
  const TensorMeta qm = g.meta(q), km = g.meta(k), vm = g.meta(v);
  SymInt batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) batch = batch * qm.sizes[i];
  SymInt L = qm.sizes[r - 2], E = qm.sizes[r - 1], S = km.sizes[r - 2], Ev = vm.sizes[r - 1];
  auto flat3 = [&](ValueRef x, const SymInt& rows, const SymInt& cols) {
    ValueRef dense = g.call1(OpKind::Clone, {x}, {{"memory_format", "contiguous_format"}}, names.next(n.name() + "_dense"));
    return g.call1(OpKind::View, {dense, IntList{batch, rows, cols}}, {}, names.next(n.name() + "_3d"));
  };
  ValueRef q3 = flat3(q, L, E), k3 = flat3(k, S, E), v3 = flat3(v, S, Ev);
  ValueRef kt = g.call1(OpKind::Permute, {k3, IntList{0, 2, 1}}, {}, names.next(n.name() + "_kt"));
  ValueRef scores = g.call1(OpKind::Bmm, {q3, kt}, {}, names.next(n.name() + "_qk"));
  double scale;
  if (const Arg& a = n.arg("scale"); !a.is_none()) {
    scale = std::get<double>(a.value);
  } else {
    auto e = E.constant();
    if (!e) fail("scaled_dot_product_attention: a symbolic head size needs an explicit scale");
    scale = 1.0 / std::sqrt(static_cast<double>(*e));
  }
  ValueRef scaled = g.call1(OpKind::MulScalar, {scores, scale}, {}, names.next(n.name() + "_scaled"));
  double neg_inf = -INFINITY;
  if (std::get<bool>(n.arg("is_causal").value)) {
    const Device device = n.outputs[0].meta.device;
    ValueRef row_ids = g.call1(OpKind::ArangeStartStep, {0, L}, {{"device", device}}, names.next(n.name() + "_rows"));
    ValueRef rows = g.call1(OpKind::Unsqueeze, {row_ids, 1}, {}, names.next(n.name() + "_rows"));
    ValueRef cols = g.call1(OpKind::ArangeStartStep, {0, S}, {{"device", device}}, names.next(n.name() + "_cols"));
    ValueRef keep = g.call1(OpKind::GeTensor, {rows, cols}, {}, names.next(n.name() + "_causal"));
    scaled = g.call1(OpKind::WhereScalarOther, {keep, scaled, neg_inf}, {}, names.next(n.name() + "_masked"));
  }
  if (!n.arg("attn_mask").is_none()) {
    ValueRef mask = widen(ref("attn_mask"));
    SymShape full(qm.sizes.begin(), qm.sizes.end() - 2);
    full.push_back(L);
    full.push_back(S);
    ValueRef m3 = flat3(g.call1(OpKind::Expand, {mask, IntList(full)}, {}, names.next(n.name() + "_mask")), L, S);
    scaled = g.meta(mask).dtype == DType::b8
                 ? g.call1(OpKind::WhereScalarOther, {m3, scaled, neg_inf}, {}, names.next(n.name() + "_masked"))
                 : g.call1(OpKind::AddTensor, {scaled, m3}, {}, names.next(n.name() + "_masked"));
  }
  ValueRef probs = g.call1(OpKind::Softmax, {scaled, -1, false}, {}, names.next(n.name() + "_probs"));
  if (!n.arg("attn_mask").is_none()) {
    ValueRef row_max = g.call1(OpKind::Amax, {scaled, IntList{-1}, true}, {}, names.next(n.name() + "_rowmax"));
    ValueRef hidden = g.call1(OpKind::EqScalar, {row_max, neg_inf}, {}, names.next(n.name() + "_hidden"));
    probs = g.call1(OpKind::WhereScalarSelf, {hidden, 0.0, probs}, {}, names.next(n.name() + "_probs"));
  }
  ValueRef out3 = g.call1(OpKind::Bmm, {probs, v3}, {}, names.next(n.name() + "_pv"));
  SymShape out_shape(qm.sizes.begin(), qm.sizes.end() - 1);
  out_shape.push_back(Ev);
  if (!reduced) return g.call1(OpKind::View, {out3, IntList(out_shape)}, {}, n.name());
  ValueRef out = g.call1(OpKind::View, {out3, IntList(out_shape)}, {}, names.next(n.name() + "_f32"));
  return g.call1(OpKind::ToCopy, {out}, {{"dtype", dtype}}, n.name());
}

}  // namespace

Graph decompose(const Graph& graph, bool fused_attention) {
  Graph g;
  g.name = graph.name;
  g.symbols = graph.symbols;
  g.weights_file = graph.weights_file;
  std::map<std::pair<int, int>, ValueRef> remap;
  Namer names(graph);
  auto map_arg = [&](const Arg& a) {
    if (auto* r = std::get_if<ValueRef>(&a.value)) return Arg(remap.at({r->node, r->output}));
    if (auto* l = std::get_if<TensorList>(&a.value)) {
      TensorList out;
      for (const auto& e : *l) out.push_back(e ? std::optional<ValueRef>(remap.at({e->node, e->output})) : std::nullopt);
      return Arg(std::move(out));
    }
    return a;
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.op == OpKind::ScaledDotProductAttention && fused_attention) {  // grouped: before the repeat is materialized
      auto grouped = grouped_attention(
          g, graph, n, [&](ValueRef r) { return remap.at({r.node, r.output}); }, [&](const std::string& stem) { return names.next(stem); });
      if (grouped) {
        remap[{static_cast<int>(i), 0}] = *grouped;
        continue;
      }
    }
    if (n.op == OpKind::ScaledDotProductAttention && !(fused_attention && fused_attention_applies(graph, n))) {
      remap[{static_cast<int>(i), 0}] = attention(g, n, remap, names);
      continue;
    }
    if (is_pooling(n.op)) {
      auto outs = decompose_pooling(g, n, std::get<ValueRef>(map_arg(n.arg("self")).value),
                                    [&](const std::string& stem) { return names.next(stem); });
      for (size_t o = 0; o < outs.size(); ++o) remap[{static_cast<int>(i), static_cast<int>(o)}] = outs[o];
      continue;
    }
    if (is_batch_norm(n.op)) {
      auto tensor = [&](std::string_view name) -> std::optional<ValueRef> {
        const Arg a = map_arg(n.arg(name));
        if (a.is_none()) return std::nullopt;
        return std::get<ValueRef>(a.value);
      };
      auto outs = decompose_batch_norm(g, n, tensor, [&](const std::string& stem) { return names.next(stem); });
      for (size_t o = 0; o < outs.size(); ++o) remap[{static_cast<int>(i), static_cast<int>(o)}] = outs[o];
      continue;
    }
    Node copy = n;
    for (auto& a : copy.args) a = map_arg(a);
    ValueRef first = g.append(std::move(copy));
    for (size_t o = 0; o < n.outputs.size(); ++o) remap[{static_cast<int>(i), static_cast<int>(o)}] = {first.node, static_cast<int32_t>(o)};
  }
  for (const auto& r : graph.outputs) g.outputs.push_back(remap.at({r.node, r.output}));
  g.any_layout_outputs = graph.any_layout_outputs;
  verify(g);
  return g;
}

}  // namespace coil
