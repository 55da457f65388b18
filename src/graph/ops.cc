// The op table (from ops.def), name lookup and argument binding.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "coil/graph.h"
#include "graph/schema.h"
#include "support/check.h"

namespace coil {

const std::vector<OpSchema>& all_op_schemas() {
  static const std::vector<OpSchema> schemas = [] {
    std::vector<OpSchema> v;
#define COIL_OP(id, family, schema) v.push_back(parse_op_schema(schema, OpKind::id, OpFamily::family));
#include "coil/ops.def"
#undef COIL_OP
    return v;
  }();
  return schemas;
}

const OpSchema& op_schema(OpKind kind) { return all_op_schemas()[static_cast<size_t>(kind)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  static const std::map<std::string, OpKind, std::less<>> by_name = [] {
    std::map<std::string, OpKind, std::less<>> m;
    std::map<std::string, std::vector<const OpSchema*>> by_base;
    for (const auto& s : all_op_schemas()) {
      m.emplace(s.name, s.kind);
      by_base[s.base].push_back(&s);
    }
    // A bare base name means the default overload, or the only one.
    for (const auto& [base, list] : by_base) {
      if (m.count(base)) continue;
      if (list.size() == 1) m.emplace(base, list[0]->kind);
    }
    return m;
  }();
  for (std::string_view prefix : {"aten::", "aten.", "torch.ops.aten.", "coil::", "torch.ops.coil."})
    if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  // An explicit ".default" names the default overload itself: torch.ops.aten.max.default is
  // max(Tensor), never max.dim.
  const bool explicit_default = name.size() > 8 && name.substr(name.size() - 8) == ".default";
  if (explicit_default) name.remove_suffix(8);
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  if (explicit_default && !op_schema(it->second).overload.empty()) return std::nullopt;
  return it->second;
}

Arg::Arg(const std::vector<ValueRef>& v) {
  TensorList list;
  for (const auto& r : v) list.emplace_back(r);
  value = std::move(list);
}

namespace {

std::string_view type_name(ArgType t) {
  switch (t) {
    case ArgType::Tensor: return "Tensor";
    case ArgType::Tensors: return "Tensor[]";
    case ArgType::Int: return "int";
    case ArgType::Ints: return "int[]";
    case ArgType::Float: return "float";
    case ArgType::Floats: return "float[]";
    case ArgType::Bool: return "bool";
    case ArgType::Str: return "str";
    case ArgType::Scalar: return "Scalar";
    case ArgType::ScalarType: return "ScalarType";
    case ArgType::Layout: return "Layout";
    case ArgType::Device: return "Device";
    case ArgType::MemoryFormat: return "MemoryFormat";
  }
  return "?";
}

std::string_view value_kind(const Arg& a) {
  static constexpr std::string_view names[] = {"none",     "a bool",    "an int",     "a float",
                                               "a string", "an int list", "a float list", "a dtype",
                                               "a device", "a tensor",  "a tensor list"};
  return names[a.value.index()];
}

// Checks `a` against the argument's type, converting where PyTorch would (an int where a
// float is expected, a bare int for `int[1]`). Returns the converted value or an error text.
std::optional<std::string> coerce(const ArgSchema& s, Arg& a) {
  auto bad = [&] {
    return fmt::format("argument '{}' expects {}{}, got {}", s.name, type_name(s.type), s.optional ? "?" : "",
                       value_kind(a));
  };
  if (a.is_none()) return s.optional ? std::nullopt : std::optional(bad());
  auto& v = a.value;
  switch (s.type) {
    case ArgType::Tensor:
      return std::holds_alternative<ValueRef>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Tensors:
      if (!std::holds_alternative<TensorList>(v)) return bad();
      for (const auto& e : std::get<TensorList>(v))
        if (!e && !s.list_elems_optional) return fmt::format("argument '{}' (Tensor[]) may not hold none", s.name);
      return std::nullopt;
    case ArgType::Int:
      return std::holds_alternative<SymInt>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Ints:
      if (std::holds_alternative<SymInt>(v) && s.fixed_size > 0) v = IntList{std::get<SymInt>(v)};
      if (std::holds_alternative<TensorList>(v) && std::get<TensorList>(v).empty()) v = IntList{};
      if (std::holds_alternative<FloatList>(v) && std::get<FloatList>(v).empty()) v = IntList{};
      return std::holds_alternative<IntList>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Float:
      if (std::holds_alternative<SymInt>(v) && std::get<SymInt>(v).is_constant())
        v = static_cast<double>(*std::get<SymInt>(v).constant());
      return std::holds_alternative<double>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Floats:
      if (std::holds_alternative<IntList>(v)) {
        FloatList f;
        for (const auto& e : std::get<IntList>(v)) {
          if (!e.is_constant()) return bad();
          f.push_back(static_cast<double>(*e.constant()));
        }
        v = std::move(f);
      }
      return std::holds_alternative<FloatList>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Bool:
      return std::holds_alternative<bool>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Str:
      return std::holds_alternative<std::string>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Scalar:
      return std::holds_alternative<bool>(v) || std::holds_alternative<SymInt>(v) || std::holds_alternative<double>(v)
                 ? std::nullopt
                 : std::optional(bad());
    case ArgType::ScalarType:
      return std::holds_alternative<DType>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Device:
      return std::holds_alternative<Device>(v) ? std::nullopt : std::optional(bad());
    case ArgType::Layout:
      if (!std::holds_alternative<std::string>(v)) return bad();
      return std::get<std::string>(v) == "strided"
                 ? std::nullopt
                 : std::optional(fmt::format("argument '{}': only the strided layout is supported, got '{}'", s.name,
                                             std::get<std::string>(v)));
    case ArgType::MemoryFormat: {
      if (!std::holds_alternative<std::string>(v)) return bad();
      const auto& f = std::get<std::string>(v);
      if (f == "contiguous_format" || f == "preserve_format" || f == "channels_last" || f == "channels_last_3d")
        return std::nullopt;
      return fmt::format("argument '{}': unknown memory format '{}'", s.name, f);
    }
  }
  return bad();
}

}  // namespace

std::vector<Arg> bind_arguments(const OpSchema& schema, std::vector<Arg> positional,
                                std::vector<std::pair<std::string, Arg>> keywords) {
  std::vector<std::optional<Arg>> bound(schema.args.size());
  size_t max_positional = 0;
  while (max_positional < schema.args.size() && !schema.args[max_positional].kwarg_only) ++max_positional;
  if (positional.size() > max_positional)
    fail("{} takes at most {} positional argument{}, got {}", schema.name, max_positional,
         max_positional == 1 ? "" : "s", positional.size());
  for (size_t i = 0; i < positional.size(); ++i) bound[i] = std::move(positional[i]);
  for (auto& [name, value] : keywords) {
    int index = schema.arg_index(name);
    if (index < 0) {
      std::string names;
      for (const auto& a : schema.args) names += (names.empty() ? "" : ", ") + a.name;
      fail("{} has no argument '{}' (its arguments: {})", schema.name, name, names);
    }
    if (bound[static_cast<size_t>(index)]) fail("{} got argument '{}' twice", schema.name, name);
    bound[static_cast<size_t>(index)] = std::move(value);
  }
  std::vector<Arg> args;
  args.reserve(schema.args.size());
  for (size_t i = 0; i < schema.args.size(); ++i) {
    const ArgSchema& s = schema.args[i];
    if (!bound[i]) {
      if (s.default_value) {
        bound[i] = *s.default_value;
      } else if (s.optional) {  // ATen has `Tensor? weight` with no default; None is meant
        bound[i] = Arg();
      } else {
        fail("{} is missing its argument '{}' ({})", schema.name, s.name, type_name(s.type));
      }
    }
    if (auto problem = coerce(s, *bound[i])) fail("{}: {}", schema.name, *problem);
    args.push_back(std::move(*bound[i]));
  }
  return args;
}

}  // namespace coil
