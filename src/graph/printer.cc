// The text printer. See docs/text-format.md; parse_graph reads back exactly what this writes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "coil/graph.h"
#include "graph/text_util.h"
#include "support/check.h"

namespace coil {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

namespace {

std::string ref_str(const Graph& g, const ValueRef& r) { return "%" + g.value_name(r); }

std::string arg_str(const Graph& g, const ArgSchema& s, const Arg& a) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "none";
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, SymInt>) return v.str();
        else if constexpr (std::is_same_v<T, double>) return format_double(v);
        else if constexpr (std::is_same_v<T, std::string>)
          return s.type == ArgType::Layout || s.type == ArgType::MemoryFormat ? v : quote_string(v);
        else if constexpr (std::is_same_v<T, IntList>) return shape_str(v);
        else if constexpr (std::is_same_v<T, FloatList>) {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + format_double(v[i]);
          return out + "]";
        } else if constexpr (std::is_same_v<T, DType>) return std::string(dtype_name(v));
        else if constexpr (std::is_same_v<T, Device>) return device_name(v);
        else if constexpr (std::is_same_v<T, ValueRef>) return ref_str(g, v);
        else {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + (v[i] ? ref_str(g, *v[i]) : "none");
          return out + "]";
        }
      },
      a.value);
}

bool is_default(const ArgSchema& s, const Arg& a) {
  if (s.default_value) return *s.default_value == a;
  return s.optional && a.is_none();
}

}  // namespace

std::string print_node(const Graph& g, const Node& node) {
  const OpSchema& schema = node.schema();
  std::string names;
  for (const auto& o : node.outputs) names += (names.empty() ? "%" : ", %") + o.name;
  std::vector<std::string> parts;
  size_t i = 0;
  // Leading tensor arguments are positional; everything else is by name, when not default.
  for (; i < schema.args.size(); ++i) {
    const ArgSchema& s = schema.args[i];
    bool tensor = s.type == ArgType::Tensor || s.type == ArgType::Tensors;
    if (!tensor || s.kwarg_only || node.args[i].is_none()) break;
    parts.push_back(arg_str(g, s, node.args[i]));
  }
  for (; i < schema.args.size(); ++i) {
    const ArgSchema& s = schema.args[i];
    if (is_default(s, node.args[i])) continue;
    parts.push_back(s.name + "=" + arg_str(g, s, node.args[i]));
  }
  std::string types;
  for (const auto& o : node.outputs) types += (types.empty() ? "" : ", ") + o.meta.str();
  return fmt::format("{} = {}({}) : {}", names, schema.name, fmt::join(parts, ", "), types);
}

std::string print_graph(const Graph& g) {
  std::string out = fmt::format("graph {} {{\n", g.name);
  for (const auto& s : g.symbols) {
    out += fmt::format("  sym {}", s.name);
    if (s.min != 0 || s.max) out += fmt::format(" in [{}, {}]", s.min, s.max ? std::to_string(*s.max) : "inf");
    out += s.hint ? fmt::format(" = {}\n", *s.hint) : "\n";
  }
  if (!g.weights_file.empty()) out += fmt::format("  weights {}\n", quote_string(g.weights_file));
  for (const auto& node : g.nodes) out += "  " + print_node(g, node) + "\n";
  std::vector<std::string> outs;
  for (size_t i = 0; i < g.outputs.size(); ++i) outs.push_back((g.any_layout(i) ? "any_layout " : "") + ref_str(g, g.outputs[i]));
  out += fmt::format("  return {}\n}}\n", fmt::join(outs, ", "));
  return out;
}

}  // namespace coil
