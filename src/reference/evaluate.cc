// The interpreter's driver: binds symbols, walks the nodes in order, dispatches by family.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "coil/reference.h"
#include "reference/eval.h"
#include "support/check.h"

namespace coil {

namespace ref {

const Tensor& NodeEval::tensor(std::string_view name) const {
  const auto& r = std::get<ValueRef>(node_.arg(name).value);
  return values_.at(static_cast<size_t>(r.node)).at(static_cast<size_t>(r.output));
}

std::optional<Tensor> NodeEval::opt_tensor(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return tensor(name);
}

std::vector<std::optional<Tensor>> NodeEval::tensor_list(std::string_view name) const {
  std::vector<std::optional<Tensor>> out;
  for (const auto& e : std::get<TensorList>(node_.arg(name).value)) {
    if (e) out.emplace_back(values_.at(static_cast<size_t>(e->node)).at(static_cast<size_t>(e->output)));
    else out.emplace_back(std::nullopt);
  }
  return out;
}

int64_t NodeEval::integer(std::string_view name) const { return eval(std::get<SymInt>(node_.arg(name).value)); }

std::optional<int64_t> NodeEval::opt_integer(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return integer(name);
}

std::vector<int64_t> NodeEval::ints(std::string_view name) const {
  std::vector<int64_t> out;
  for (const auto& s : std::get<IntList>(node_.arg(name).value)) out.push_back(eval(s));
  return out;
}

std::optional<std::vector<int64_t>> NodeEval::opt_ints(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return ints(name);
}

double NodeEval::real(std::string_view name) const {
  const Arg& a = node_.arg(name);
  if (auto* d = std::get_if<double>(&a.value)) return *d;
  if (auto* s = std::get_if<SymInt>(&a.value)) return static_cast<double>(eval(*s));
  if (auto* b = std::get_if<bool>(&a.value)) return *b ? 1.0 : 0.0;
  COIL_CHECK(false) << op_name() << ": argument " << name << " is not a number";
}

std::optional<double> NodeEval::opt_real(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return real(name);
}

bool NodeEval::flag(std::string_view name) const { return std::get<bool>(node_.arg(name).value); }

std::optional<std::string> NodeEval::opt_str(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return std::get<std::string>(node_.arg(name).value);
}

Shape NodeEval::out_sizes(size_t i) const {
  Shape s;
  for (const auto& d : node_.outputs.at(i).meta.sizes) s.push_back(eval(d));
  return s;
}

Tensor NodeEval::new_output(size_t i) const {
  const TensorMeta& m = node_.outputs.at(i).meta;
  Shape strides;
  for (const auto& d : m.strides) strides.push_back(eval(d));
  return Tensor::zeros_strided(m.dtype, out_sizes(i), strides);
}

Tensor broadcast_to(const Tensor& t, const Shape& sizes) {
  COIL_CHECK(static_cast<size_t>(t.dim()) <= sizes.size()) << "broadcast to a lower rank";
  Shape strides(sizes.size(), 0);
  size_t lead = sizes.size() - static_cast<size_t>(t.dim());
  for (size_t i = 0; i < static_cast<size_t>(t.dim()); ++i) {
    int64_t have = t.sizes()[i];
    COIL_CHECK(have == sizes[i + lead] || have == 1)
        << "cannot broadcast " << shape_to_string(t.sizes()) << " to " << shape_to_string(sizes);
    strides[i + lead] = have == sizes[i + lead] && have != 1 ? t.strides()[i] : 0;
  }
  return t.view(sizes, strides, t.offset());
}

void for_each_index(const Shape& sizes, const std::function<void(const Shape&)>& fn) {
  for (int64_t s : sizes)
    if (s == 0) return;
  Shape idx(sizes.size(), 0);
  while (true) {
    fn(idx);
    size_t d = idx.size();
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

void copy_into(const Tensor& dst, const Tensor& src) {
  Tensor s = broadcast_to(src, dst.sizes());
  bool exact_int = is_integral(dst.dtype(), true) && is_integral(src.dtype(), true);
  for_each_index(dst.sizes(), [&](const Shape& idx) {
    if (exact_int) dst.store_int(dst.element_index(idx), s.load_int(s.element_index(idx)));
    else dst.store(dst.element_index(idx), s.load(s.element_index(idx)));
  });
}

int64_t wrap(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  COIL_CHECK(dim >= -r && dim < r) << "dim " << dim << " out of range for rank " << rank;
  return dim < 0 ? dim + r : dim;
}

int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::i32: return static_cast<int32_t>(v);
    case DType::i16: return static_cast<int16_t>(v);
    case DType::i8: return static_cast<int8_t>(v);
    case DType::u8: return static_cast<uint8_t>(v);
    case DType::b8: return v != 0;
    default: return v;
  }
}

double opmath_round(double v, DType dtype) {
  if (dtype == DType::f16 || dtype == DType::bf16) return round_to_dtype(v, DType::f32);
  return round_to_dtype(v, dtype);
}

namespace {

Tensor source(const Graph& g, const Node& node, const TensorMap& inputs, const TensorMap& weights,
              const std::map<std::string, int64_t>& symbols) {
  const TensorMeta& m = node.outputs[0].meta;
  Shape sizes;
  for (const auto& d : m.sizes) sizes.push_back(d.eval(symbols));
  auto check = [&](const Tensor& t, const std::string& what) {
    if (t.dtype() != m.dtype || t.sizes() != sizes)
      fail("{}: expected {}{}, got {}{}", what, dtype_name(m.dtype), shape_to_string(sizes), dtype_name(t.dtype()),
           shape_to_string(t.sizes()));
    return t;
  };
  switch (node.op) {
    case OpKind::Input: {
      auto it = inputs.find(node.name());
      if (it == inputs.end()) fail("graph {}: missing input %{}", g.name, node.name());
      return check(it->second, "input %" + node.name());
    }
    case OpKind::Weight: {
      const auto& key = std::get<std::string>(node.arg("key").value);
      auto it = weights.find(key);
      if (it == weights.end())
        fail("graph {}: weight '{}' (for %{}) was not found{}", g.name, key, node.name(),
             g.weights_file.empty() ? "" : " in " + g.weights_file);
      return check(it->second, "weight '" + key + "'");
    }
    default: {
      Tensor t = Tensor::zeros(m.dtype, sizes);
      const auto& values = std::get<FloatList>(node.arg("value").value);
      for (size_t i = 0; i < values.size(); ++i) t.store(static_cast<int64_t>(i), values[i]);
      return t;
    }
  }
}

}  // namespace
}  // namespace ref

std::map<std::string, int64_t> bind_symbols(const Graph& graph, const TensorMap& inputs, const std::map<std::string, int64_t>& given) {
  std::map<std::string, int64_t> bound = given;
  // Bare symbols bind first (after those the caller gives).
  for (int n : graph.input_nodes()) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    auto it = inputs.find(node.name());
    if (it == inputs.end()) fail("graph {}: missing input %{}", graph.name, node.name());
    const TensorMeta& m = node.outputs[0].meta;
    const Tensor& t = it->second;
    if (t.dim() != m.dim())
      fail("input %{}: expected {} dims ({}), got {} dims {}", node.name(), m.dim(), m.str(), t.dim(), shape_to_string(t.sizes()));
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      if (m.sizes[d].kind() != SymInt::Kind::symbol) continue;
      auto [pos, inserted] = bound.emplace(m.sizes[d].symbol_name(), t.sizes()[d]);
      if (!inserted && pos->second != t.sizes()[d])
        fail("input %{}: size symbol {} is {} here but {} in an earlier input", node.name(), pos->first, t.sizes()[d], pos->second);
    }
    // A stride that is a symbol of its own (a strided input of the torch.compile adapter) binds
    // from a dim longer than 1.
    for (size_t d = 0; d < m.strides.size() && d < m.sizes.size(); ++d)
      if (m.strides[d].kind() == SymInt::Kind::symbol && t.sizes()[d] != 1) bound.emplace(m.strides[d].symbol_name(), t.strides()[d]);
  }
  // A symbol no input's shape carries takes its declared hint; one that an input's size or stride
  // holds inside an expression (the adapter's flat memory of a strided input) must be given.
  std::optional<std::vector<std::string>> held;  // (found where a symbol is left unbound)
  for (const auto& s : graph.symbols) {
    if (bound.count(s.name)) continue;
    if (!held) {
      held.emplace();
      for (int n : graph.input_nodes()) {
        const TensorMeta& m = graph.nodes[static_cast<size_t>(n)].outputs[0].meta;
        for (const auto& e : m.sizes) e.collect_symbols(*held);
        for (const auto& e : m.strides) e.collect_symbols(*held);
      }
    }
    if (std::find(held->begin(), held->end(), s.name) != held->end())
      fail("graph {}: size symbol {} is part of an input's layout but no input's size or stride is it: give its value", graph.name, s.name);
    if (!s.hint) fail("graph {}: size symbol {} appears in no input's shape and has no value", graph.name, s.name);
    bound.emplace(s.name, *s.hint);
  }
  for (const auto& s : graph.symbols)
    if (int64_t v = bound.at(s.name); v < s.min || (s.max && v > *s.max))
      fail("graph {}: size symbol {} is {}, outside the range [{}, {}] it was compiled for", graph.name, s.name, v, s.min,
           s.max ? std::to_string(*s.max) : "inf");
  // Every declared size and symbolic stride against the actual one.
  for (int n : graph.input_nodes()) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    const TensorMeta& m = node.outputs[0].meta;
    const Tensor& t = inputs.at(node.name());
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      int64_t want = m.sizes[d].eval(bound);
      if (want == t.sizes()[d]) continue;
      if (m.sizes[d].is_constant())
        fail("input %{}: dimension {} should be {}, got {}", node.name(), d, want, t.sizes()[d]);
      fail("input %{}: dimension {} should be {} = {}, got {}", node.name(), d, m.sizes[d].str(), want, t.sizes()[d]);
    }
    for (size_t d = 0; d < m.strides.size() && d < t.strides().size(); ++d) {
      if (m.strides[d].is_constant() || t.sizes()[d] == 1) continue;  // (constant strides: the callers check layouts)
      if (auto want = m.strides[d].eval(bound); want != t.strides()[d])
        fail("input %{}: the stride of dimension {} should be {} = {}, got {}", node.name(), d, m.strides[d].str(), want, t.strides()[d]);
    }
  }
  return bound;
}

std::vector<Tensor> evaluate_reference(const Graph& graph, const TensorMap& inputs, const TensorMap& weights) {
  auto symbols = bind_symbols(graph, inputs);
  std::vector<std::vector<Tensor>> values(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    try {
      ref::NodeEval e(graph, node, values, symbols);
      switch (node.schema().family) {
        case OpFamily::source: values[i] = {ref::source(graph, node, inputs, weights, symbols)}; break;
        case OpFamily::creation:
        case OpFamily::copy: values[i] = ref::eval_creation(e); break;
        case OpFamily::unary:
        case OpFamily::binary:
        case OpFamily::ternary: values[i] = ref::eval_pointwise(e); break;
        case OpFamily::reduction: values[i] = ref::eval_reduction(e); break;
        case OpFamily::normalization: values[i] = ref::eval_normalization(e); break;
        case OpFamily::view: values[i] = ref::eval_view(e); break;
        case OpFamily::shape: values[i] = ref::eval_shape(e); break;
        case OpFamily::indexing: values[i] = ref::eval_indexing(e); break;
        case OpFamily::linalg: values[i] = ref::eval_linalg(e); break;
      }
    } catch (const Error& err) {
      fail("evaluating %{} ({}): {}", node.name(), node.schema().name, err.what());
    }
    COIL_CHECK(values[i].size() == node.outputs.size()) << node.schema().name << " produced the wrong number of outputs";
  }
  std::vector<Tensor> out;
  for (const auto& r : graph.outputs) out.push_back(values[static_cast<size_t>(r.node)][static_cast<size_t>(r.output)]);
  return out;
}

}  // namespace coil
