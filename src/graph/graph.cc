#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "coil/graph.h"
#include "support/check.h"

namespace coil {

SymShape contiguous_strides(const SymShape& sizes) {
  SymShape strides(sizes.size());
  SymInt s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    // PyTorch treats size-0 dims as size 1 when computing contiguous strides.
    s = s * (sizes[i].is_constant() && *sizes[i].constant() == 0 ? SymInt(1) : sizes[i]);
  }
  return strides;
}

TensorMeta TensorMeta::contiguous(DType dtype, SymShape sizes, Device device) {
  TensorMeta m;
  m.dtype = dtype;
  m.strides = contiguous_strides(sizes);
  m.sizes = std::move(sizes);
  m.device = device;
  return m;
}

bool Graph::any_layout(size_t output) const {
  return std::binary_search(any_layout_outputs.begin(), any_layout_outputs.end(), output);
}

bool TensorMeta::is_contiguous() const { return strides == contiguous_strides(sizes) && offset == SymInt(0); }

std::string TensorMeta::str() const {
  std::string s = fmt::format("{}{}", dtype_name(dtype), shape_str(sizes));
  if (strides != contiguous_strides(sizes)) s += " strides=" + shape_str(strides);
  if (offset != SymInt(0)) s += " offset=" + offset.str();
  if (device != Device{}) s += " device=" + device_name(device);
  return s;
}

const Arg& Node::arg(std::string_view arg_name) const {
  int i = schema().arg_index(arg_name);
  COIL_CHECK(i >= 0) << schema().name << " has no argument " << arg_name;
  return args.at(static_cast<size_t>(i));
}

const TensorMeta& Graph::meta(ValueRef v) const { return node(v).outputs.at(static_cast<size_t>(v.output)).meta; }

const std::string& Graph::value_name(ValueRef v) const {
  return node(v).outputs.at(static_cast<size_t>(v.output)).name;
}

std::optional<ValueRef> Graph::find(std::string_view value_name) const {
  if (index_covers_all()) {
    auto it = names_.find(std::string(value_name));
    if (it == names_.end()) return std::nullopt;
    return it->second;
  }
  for (size_t n = 0; n < nodes.size(); ++n)
    for (size_t o = 0; o < nodes[n].outputs.size(); ++o)
      if (nodes[n].outputs[o].name == value_name) return ValueRef{static_cast<int32_t>(n), static_cast<int32_t>(o)};
  return std::nullopt;
}

namespace {
std::vector<int> nodes_of(const Graph& g, OpKind op) {
  std::vector<int> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == op) out.push_back(static_cast<int>(i));
  return out;
}
}  // namespace

std::vector<int> Graph::input_nodes() const { return nodes_of(*this, OpKind::Input); }
std::vector<int> Graph::weight_nodes() const { return nodes_of(*this, OpKind::Weight); }

std::string Graph::fresh_name(std::string_view stem) const {
  std::string base(stem.empty() ? "v" : stem);
  if (!find(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = fmt::format("{}_{}", base, i);
    if (!find(candidate)) return candidate;
  }
}

std::string Graph::fresh_call_name(const std::string& stem) {
  index_new_nodes();
  if (!names_.count(stem)) return stem;
  int& next = next_suffix_[stem];
  for (next = std::max(next, 1);; ++next) {
    std::string candidate = fmt::format("{}_{}", stem, next);
    if (!names_.count(candidate)) return candidate;
  }
}

void Graph::index_new_nodes() {
  if (named_nodes_ > nodes.size()) {  // nodes were removed: start over
    names_.clear();
    named_nodes_ = 0;
  }
  for (; named_nodes_ < nodes.size(); ++named_nodes_)
    for (size_t o = 0; o < nodes[named_nodes_].outputs.size(); ++o)
      names_.emplace(nodes[named_nodes_].outputs[o].name,
                     ValueRef{static_cast<int32_t>(named_nodes_), static_cast<int32_t>(o)});
}

bool is_reserved_symbol_name(std::string_view name) {
  if (name.size() < 2 || std::string_view("xrit").find(name[0]) == std::string_view::npos) return false;
  return std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

SymInt Graph::add_symbol(std::string symbol_name, std::optional<int64_t> hint) {
  if (is_reserved_symbol_name(symbol_name))
    fail("size symbol name '{}' is reserved for loop variables; choose another name", symbol_name);
  for (const auto& s : symbols)
    if (s.name == symbol_name) fail("size symbol '{}' is declared twice", symbol_name);
  symbols.push_back({symbol_name, hint});
  return SymInt::symbol(std::move(symbol_name));
}

ValueRef Graph::append(Node node) {
  index_new_nodes();
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const std::string& out_name = node.outputs[i].name;
    if (names_.count(out_name)) fail("value name '%{}' is defined twice", out_name);
    for (size_t j = 0; j < i; ++j)
      if (node.outputs[j].name == out_name) fail("value name '%{}' is defined twice", out_name);
  }
  nodes.push_back(std::move(node));
  index_new_nodes();
  return ValueRef{static_cast<int32_t>(nodes.size() - 1), 0};
}

namespace {
ValueRef add_source(Graph& g, OpKind op, std::vector<std::pair<std::string, Arg>> keywords, std::string name,
                    TensorMeta meta) {
  Node node;
  node.op = op;
  node.args = bind_arguments(op_schema(op), {}, std::move(keywords));
  node.outputs.push_back({name.empty() ? g.fresh_name(op_schema(op).base) : std::move(name), std::move(meta)});
  return g.append(std::move(node));
}
}  // namespace

ValueRef Graph::add_input(std::string value_name, DType dtype, SymShape sizes, Device device) {
  return add_source(*this, OpKind::Input, {}, std::move(value_name), TensorMeta::contiguous(dtype, std::move(sizes), device));
}

ValueRef Graph::add_weight(std::string value_name, std::string key, DType dtype, SymShape sizes, Device device) {
  return add_source(*this, OpKind::Weight, {{"key", std::move(key)}}, std::move(value_name),
                    TensorMeta::contiguous(dtype, std::move(sizes), device));
}

ValueRef Graph::add_constant(std::string value_name, FloatList values, DType dtype, SymShape sizes) {
  return add_source(*this, OpKind::Constant, {{"value", std::move(values)}}, std::move(value_name),
                    TensorMeta::contiguous(dtype, std::move(sizes)));
}

std::vector<ValueRef> Graph::call(OpKind op, std::vector<Arg> positional,
                                  std::vector<std::pair<std::string, Arg>> keywords,
                                  std::vector<std::string> output_names) {
  const OpSchema& schema = op_schema(op);
  COIL_CHECK(schema.family != OpFamily::source) << "use add_input/add_weight/add_constant for " << schema.name;
  Node node;
  node.op = op;
  node.args = bind_arguments(schema, std::move(positional), std::move(keywords));
  for (const auto& a : node.args) {
    auto check_ref = [&](const ValueRef& r) {
      if (r.node < 0 || static_cast<size_t>(r.node) >= nodes.size() || r.output < 0 ||
          static_cast<size_t>(r.output) >= nodes[static_cast<size_t>(r.node)].outputs.size())
        fail("{}: argument refers to a value that is not in the graph", schema.name);
    };
    if (auto* r = std::get_if<ValueRef>(&a.value)) check_ref(*r);
    if (auto* l = std::get_if<TensorList>(&a.value))
      for (const auto& e : *l)
        if (e) check_ref(*e);
  }
  std::vector<TensorMeta> metas = infer_outputs(*this, node);
  if (!output_names.empty() && output_names.size() != metas.size())
    fail("{} has {} output{}, but {} name{} given", schema.name, metas.size(), metas.size() == 1 ? "" : "s",
         output_names.size(), output_names.size() == 1 ? " was" : "s were");
  std::vector<ValueRef> refs;
  int32_t index = static_cast<int32_t>(nodes.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    std::string out_name = output_names.empty() ? "" : output_names[i];
    if (out_name.empty()) {
      // A fresh name that neither the graph nor this node's earlier outputs use.
      std::string stem = schema.base.front() == '_' ? schema.base.substr(1) : schema.base;
      out_name = fresh_call_name(stem);
      for (int k = 1; std::any_of(node.outputs.begin(), node.outputs.end(), [&](const Output& o) { return o.name == out_name; }); ++k)
        out_name = fresh_call_name(stem + "_" + std::to_string(k));
    }
    node.outputs.push_back({std::move(out_name), std::move(metas[i])});
    refs.push_back({index, static_cast<int32_t>(i)});
  }
  append(std::move(node));
  return refs;
}

ValueRef Graph::call1(OpKind op, std::vector<Arg> positional, std::vector<std::pair<std::string, Arg>> keywords,
                      std::string output_name) {
  auto refs = call(op, std::move(positional), std::move(keywords),
                   output_name.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::move(output_name)});
  return refs.at(0);
}

}  // namespace coil
