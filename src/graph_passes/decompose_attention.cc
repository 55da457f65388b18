#include "graph_passes/decompose_attention.h"

namespace coil {

namespace {

const TensorMeta& arg_meta(const Graph& g, const Node& n, std::string_view name) { return g.meta(std::get<ValueRef>(n.arg(name).value)); }

// What the kernel takes of a query, key and value of rank r >= 3, their batch dims aside. Sizes
// but the head size may be symbolic (the kernel takes them as arguments); a constant key
// length is at least 1.
bool kernel_takes_heads(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v, const Node& n, const std::optional<TensorMeta>& mask) {
  if (const Arg& p = n.arg("dropout_p"); !p.is_none() && std::get<double>(p.value) != 0) return false;
  if ((q.dtype != DType::f16 && q.dtype != DType::bf16) || q.dim() < 3 || k.dim() != q.dim() || v.dim() != q.dim()) return false;
  for (const TensorMeta* m : {&q, &k, &v}) {
    if (m->strides.back() != SymInt(1)) return false;
  }
  if (mask && mask->dtype != DType::b8 && mask->dtype != q.dtype) return false;
  size_t r = static_cast<size_t>(q.dim());
  auto e = q.sizes[r - 1].constant();
  auto s = k.sizes[r - 2].constant();
  return e && v.sizes[r - 1] == q.sizes[r - 1] && *e >= 16 && *e <= 128 && *e % 16 == 0 && s.value_or(1) > 0;
}

std::optional<TensorMeta> mask_meta(const Graph& g, const Node& n) {
  if (n.arg("attn_mask").is_none()) return std::nullopt;
  return arg_meta(g, n, "attn_mask");
}

// A key/value head tensor of `source` that repeats each of Hkv heads `rep` times: the value
// (rank r + 1, size 1 at the heads dim + 1) the expand repeats, and rep.
std::optional<std::pair<ValueRef, int64_t>> repeated_heads(const Graph& source, ValueRef x) {
  const TensorMeta& xm = source.meta(x);
  const Node& view = source.node(x);
  if (xm.dim() < 3 || (view.op != OpKind::View && view.op != OpKind::UnsafeView)) return std::nullopt;
  ValueRef y = std::get<ValueRef>(view.arg("self").value);
  if (source.node(y).op == OpKind::Clone) y = std::get<ValueRef>(source.node(y).arg("self").value);
  const Node& expand = source.node(y);
  if (expand.op != OpKind::Expand) return std::nullopt;
  ValueRef base = std::get<ValueRef>(expand.arg("self").value);
  const TensorMeta &em = source.meta(y), &bm = source.meta(base);
  const size_t h = static_cast<size_t>(xm.dim()) - 3;
  if (em.dim() != xm.dim() + 1 || bm.dim() != em.dim() || bm.sizes[h + 1] != SymInt(1)) return std::nullopt;
  auto rep = em.sizes[h + 1].constant(), kv = em.sizes[h].constant();
  if (!rep || !kv || *rep < 1) return std::nullopt;
  for (size_t d = 0; d < bm.sizes.size(); ++d)
    if (d != h + 1 && bm.sizes[d] != em.sizes[d]) return std::nullopt;  // only the inserted dim repeats
  for (size_t d = 0; d < xm.sizes.size(); ++d)
    if (xm.sizes[d] != (d < h ? em.sizes[d] : d == h ? SymInt(*kv * *rep) : em.sizes[d + 1])) return std::nullopt;
  return std::pair{base, *rep};
}

}  // namespace

bool fused_attention_applies(const Graph& g, const Node& n) {
  if (n.op != OpKind::ScaledDotProductAttention) return false;
  const TensorMeta &q = arg_meta(g, n, "query"), &k = arg_meta(g, n, "key"), &v = arg_meta(g, n, "value");
  if (!kernel_takes_heads(q, k, v, n, mask_meta(g, n))) return false;
  for (size_t i = 0; i + 2 < static_cast<size_t>(q.dim()); ++i)
    if (q.sizes[i] != k.sizes[i] || q.sizes[i] != v.sizes[i]) return false;
  return true;
}

std::optional<ValueRef> grouped_attention(Graph& g, const Graph& source, const Node& n, const std::function<ValueRef(ValueRef)>& mapped,
                                          const std::function<std::string(const std::string&)>& fresh) {
  if (n.op != OpKind::ScaledDotProductAttention) return std::nullopt;
  auto arg = [&](std::string_view name) { return std::get<ValueRef>(n.arg(name).value); };
  const TensorMeta &q = source.meta(arg("query")), &km = source.meta(arg("key")), &vm = source.meta(arg("value"));
  const size_t r = static_cast<size_t>(q.dim());
  if (r < 3 || km.dim() != q.dim() || vm.dim() != q.dim()) return std::nullopt;
  const size_t h = r - 3;
  // The unrepeated key and value ([..., Hkv, S, E]): in `source` (enable_gqa's own operands) or
  // the expand's inputs ([..., Hkv, 1, S, E]); rep.
  ValueRef kb, vb;
  int64_t rep;
  bool squeeze = false;
  if (std::get<bool>(n.arg("enable_gqa").value) && km.sizes[h] != q.sizes[h]) {
    auto hq = q.sizes[h].constant(), hk = km.sizes[h].constant();
    if (!hq || !hk || *hk < 1 || *hq % *hk != 0 || vm.sizes[h] != km.sizes[h]) return std::nullopt;
    kb = arg("key"), vb = arg("value"), rep = *hq / *hk;
  } else {
    auto kr = repeated_heads(source, arg("key")), vr = repeated_heads(source, arg("value"));
    if (!kr || !vr || kr->second != vr->second || kr->second < 2) return std::nullopt;
    kb = kr->first, vb = vr->first, rep = kr->second, squeeze = true;
  }
  TensorMeta ku = source.meta(kb), vu = source.meta(vb);
  if (squeeze) {
    for (TensorMeta* m : {&ku, &vu}) {
      m->sizes.erase(m->sizes.begin() + static_cast<std::ptrdiff_t>(h) + 1);
      m->strides.erase(m->strides.begin() + static_cast<std::ptrdiff_t>(h) + 1);
    }
  }
  for (size_t i = 0; i < h; ++i)
    if (ku.sizes[i] != q.sizes[i] || vu.sizes[i] != q.sizes[i]) return std::nullopt;
  if (ku.sizes[h] != vu.sizes[h] || ku.sizes[h] * SymInt(rep) != q.sizes[h]) return std::nullopt;
  std::optional<TensorMeta> mask = mask_meta(source, n);
  // A mask the same for every head (size 1 at the heads dim, or no such dim) broadcasts over the
  // split heads as it is, or with a dim inserted.
  if (mask && mask->dim() >= 3 && mask->sizes[static_cast<size_t>(mask->dim()) - 3] != SymInt(1)) return std::nullopt;
  if (!kernel_takes_heads(q, ku, vu, n, mask)) return std::nullopt;

  const SymInt kv = ku.sizes[h], L = q.sizes[r - 2], E = q.sizes[r - 1], S = ku.sizes[r - 2], Ev = vu.sizes[r - 1];
  const bool causal = std::get<bool>(n.arg("is_causal").value);
  SymShape prefix(q.sizes.begin(), q.sizes.begin() + static_cast<std::ptrdiff_t>(h));
  auto shape = [&](std::initializer_list<SymInt> tail) {
    SymShape s = prefix;
    s.insert(s.end(), tail);
    return s;
  };
  const std::string stem = n.name() + "_grouped";
  auto unrepeated = [&](ValueRef base, const TensorMeta& m) {
    if (!squeeze) return mapped(base);
    return g.call1(OpKind::View, {mapped(base), IntList(m.sizes)}, {}, fresh(stem));
  };
  ValueRef k = unrepeated(kb, ku), v = unrepeated(vb, vu), qg = mapped(arg("query"));
  std::optional<ValueRef> m;
  if (mask) m = mapped(arg("attn_mask"));
  std::vector<std::pair<std::string, Arg>> keywords = {{"is_causal", causal}};
  if (const Arg& s = n.arg("scale"); !s.is_none()) keywords.emplace_back("scale", s);
  ValueRef out;
  if (L == SymInt(1) && !causal) {
    // One query row: the rep query heads of a key/value head are the rows of its attention.
    ValueRef q2 = g.call1(OpKind::View, {qg, IntList(shape({kv, rep, E}))}, {}, fresh(stem));
    out = g.call1(OpKind::ScaledDotProductAttention, {q2, k, v, m ? Arg(*m) : Arg()}, keywords, fresh(stem));
  } else {
    auto repeated = [&](ValueRef x, const SymInt& len, const SymInt& width) {
      ValueRef u = g.call1(OpKind::Unsqueeze, {x, static_cast<int64_t>(h) + 1}, {}, fresh(stem));
      return g.call1(OpKind::Expand, {u, IntList(shape({kv, rep, len, width}))}, {}, fresh(stem));
    };
    ValueRef q2 = g.call1(OpKind::View, {qg, IntList(shape({kv, rep, L, E}))}, {}, fresh(stem));
    if (m && g.meta(*m).dim() >= 3) m = g.call1(OpKind::Unsqueeze, {*m, g.meta(*m).dim() - 3}, {}, fresh(stem));
    out = g.call1(OpKind::ScaledDotProductAttention, {q2, repeated(k, S, E), repeated(v, S, Ev), m ? Arg(*m) : Arg()}, keywords, fresh(stem));
  }
  return g.call1(OpKind::View, {out, IntList(shape({q.sizes[h], L, Ev}))}, {}, n.name());
}

}  // namespace coil
