// The verifier: a graph is well formed when every node's arguments fit its schema, refer to
// earlier values, use declared symbols, and every declared output type is the inferred one.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "coil/graph.h"
#include "graph/infer_util.h"
#include "graph/text_util.h"
#include "support/check.h"

namespace coil {

namespace {

void collect_arg_symbols(const Arg& a, std::vector<std::string>& out) {
  if (auto* s = std::get_if<SymInt>(&a.value)) s->collect_symbols(out);
  if (auto* l = std::get_if<IntList>(&a.value))
    for (const auto& s : *l) s.collect_symbols(out);
}

void collect_meta_symbols(const TensorMeta& m, std::vector<std::string>& out) {
  for (const auto& s : m.sizes) s.collect_symbols(out);
  for (const auto& s : m.strides) s.collect_symbols(out);
  m.offset.collect_symbols(out);
}

// A computed (non-view) result may use any dense, non-overlapping layout.
bool is_dense_layout(const TensorMeta& m) {
  return m.offset == SymInt(0) && dense_strides(m.sizes, m.strides).has_value();
}

void check_ref(const Graph& g, const ValueRef& r, size_t before) {
  if (r.node < 0 || static_cast<size_t>(r.node) >= before)
    fail("refers to a value defined later or not at all (node #{})", r.node);
  if (r.output < 0 || static_cast<size_t>(r.output) >= g.nodes[static_cast<size_t>(r.node)].outputs.size())
    fail("refers to output {} of %{}, which has {}", r.output, g.nodes[static_cast<size_t>(r.node)].name(),
         g.nodes[static_cast<size_t>(r.node)].outputs.size());
}

// Every value must fit in memory: constant sizes are non-negative and the byte count of the
// value fits int64 (a larger one would wrap in any size computation downstream).
void check_size(const TensorMeta& m) {
  int64_t bytes = static_cast<int64_t>(dtype_size(m.dtype));
  for (const auto& d : m.sizes) {
    auto c = d.constant();
    if (!c) continue;
    if (*c < 0) fail("negative dimension {} in {}", *c, shape_str(m.sizes));
    if (__builtin_mul_overflow(bytes, *c, &bytes))
      fail("{} is too large: its byte size overflows int64", m.str());
  }
}

// A constant's value must be one its integer dtype holds once truncated (a float literal
// truncates, as a cast does; bool is `!= 0`): [300, -1] as u8 became [44, 255] without a word,
// where torch.tensor refuses it.
void check_constant_values(const FloatList& values, DType dtype) {
  double lo = 0, hi = 0;
  switch (dtype) {
    case DType::i8: lo = -128, hi = 127; break;
    case DType::u8: lo = 0, hi = 255; break;
    case DType::i16: lo = -32768, hi = 32767; break;
    case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
    case DType::i64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
    default: return;  // floats and bool
  }
  for (double v : values) {
    double t = std::trunc(v);
    bool inside = std::isfinite(v) && t >= lo && (dtype == DType::i64 ? t < hi : t <= hi);
    if (!inside) fail("constant value {} does not fit {} (from {} to {})", v, dtype_name(dtype), lo, hi);
  }
}

}  // namespace

void verify_node(const Graph& g, size_t index, const std::set<std::string>& symbols) {
  const Node& node = g.nodes[index];
  const OpSchema& schema = node.schema();
  if (node.outputs.empty()) fail("has no outputs");
  if (node.args.size() != schema.args.size())
    fail("has {} arguments, its schema {} has {}", node.args.size(), schema.text, schema.args.size());
  std::vector<std::pair<std::string, Arg>> by_name;
  for (size_t i = 0; i < schema.args.size(); ++i) by_name.emplace_back(schema.args[i].name, node.args[i]);
  bind_arguments(schema, {}, std::move(by_name));  // type-checks every argument
  std::vector<std::string> used;
  for (const auto& a : node.args) {
    if (auto* r = std::get_if<ValueRef>(&a.value)) check_ref(g, *r, index);
    if (auto* l = std::get_if<TensorList>(&a.value))
      for (const auto& e : *l)
        if (e) check_ref(g, *e, index);
    collect_arg_symbols(a, used);
  }
  for (const auto& o : node.outputs) {
    collect_meta_symbols(o.meta, used);
    check_size(o.meta);
  }
  for (const auto& s : used)
    if (!symbols.count(s)) fail("uses size symbol '{}', which is not declared (add `sym {}`)", s, s);

  if (schema.family == OpFamily::source) {
    if (node.outputs.size() != 1) fail("must have exactly one output");
    const TensorMeta& m = node.outputs[0].meta;
    if (!m.is_contiguous()) fail("{} values must be contiguous, got {}", schema.base, m.str());
    if (node.op == OpKind::Weight && std::get<std::string>(node.arg("key").value).empty())
      fail("weight key must not be empty");
    if (node.op == OpKind::Constant) {
      auto shape = constant_shape(m.sizes);
      if (!shape) fail("constant must have a constant shape, got {}", shape_str(m.sizes));
      int64_t numel = 1;
      for (int64_t s : *shape) numel *= s;
      size_t have = std::get<FloatList>(node.arg("value").value).size();
      if (static_cast<int64_t>(have) != numel)
        fail("constant of shape {} needs {} value{}, got {}", shape_str(m.sizes), numel, numel == 1 ? "" : "s", have);
      check_constant_values(std::get<FloatList>(node.arg("value").value), m.dtype);
    }
    return;
  }
  std::vector<TensorMeta> inferred = infer_outputs(g, node);
  if (inferred.size() != node.outputs.size())
    fail("{} produces {} output{} here, but {} {} declared", schema.name, inferred.size(), inferred.size() == 1 ? "" : "s",
         node.outputs.size(), node.outputs.size() == 1 ? "is" : "are");
  for (size_t i = 0; i < inferred.size(); ++i) {
    const TensorMeta& want = inferred[i];
    const TensorMeta& have = node.outputs[i].meta;
    // empty_strided's strides are its argument: any layout it asks for (gaps, overlap) is its own.
    bool exact_layout = schema.is_view || node.op == OpKind::EmptyStrided;
    bool layout_ok = exact_layout ? (have.strides == want.strides && have.offset == want.offset) : is_dense_layout(have);
    if (have.dtype != want.dtype || have.sizes != want.sizes || have.device != want.device || !layout_ok)
      fail("output %{} is declared {} but {} gives {}", node.outputs[i].name, have.str(), schema.name, want.str());
  }
}

void verify(const Graph& g) {
  std::set<std::string> symbols;
  for (const auto& s : g.symbols) {
    if (s.name.empty()) fail("graph {}: a size symbol has an empty name", g.name);
    if (!symbols.insert(s.name).second) fail("graph {}: size symbol '{}' is declared twice", g.name, s.name);
    if (is_reserved_symbol_name(s.name))
      fail("graph {}: size symbol name '{}' is reserved for loop variables; choose another name", g.name, s.name);
    if (s.hint && *s.hint < 0) fail("graph {}: size symbol '{}' has a negative hint {}", g.name, s.name, *s.hint);
    if (s.min < 0 || (s.max && *s.max < s.min)) fail("graph {}: size symbol '{}' has an empty or negative range", g.name, s.name);
  }
  std::set<std::string> names;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    std::string label = node.outputs.empty() ? fmt::format("#{}", i) : "%" + node.name();
    try {
      for (const auto& o : node.outputs) {
        if (o.name.empty()) fail("has an output with an empty name");
        if (!names.insert(o.name).second) fail("defines %{} a second time", o.name);
      }
      verify_node(g, i, symbols);
    } catch (const Error& e) {
      fail("graph {}: node {} ({}): {}", g.name, label, node.schema().name, e.what());
    }
  }
  if (g.outputs.empty()) fail("graph {}: has no outputs (add a `return`)", g.name);
  for (const auto& r : g.outputs) {
    try {
      check_ref(g, r, g.nodes.size());
    } catch (const Error& e) {
      fail("graph {}: return: {}", g.name, e.what());
    }
  }
  for (size_t i = 0; i < g.any_layout_outputs.size(); ++i)
    if (g.any_layout_outputs[i] >= g.outputs.size() || (i > 0 && g.any_layout_outputs[i] <= g.any_layout_outputs[i - 1]))
      fail("graph {}: any_layout outputs must be ascending positions among its {} outputs", g.name, g.outputs.size());
}

}  // namespace coil
