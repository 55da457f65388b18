#include "frontend/export_nodes.h"

#include "frontend/export_decompose.h"
#include "frontend/export_layout.h"
#include "frontend/sympy_expr.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <limits>

#include "support/check.h"

namespace coil::frontend {

namespace {

using json = nlohmann::json;

constexpr auto field = json_field;

int64_t as_int(const json& j, const std::string& where) {
  if (j.is_object() && j.contains("as_int")) return json_int(j.at("as_int"), where);
  if (j.is_number_integer()) return json_int(j, where);
  fail("{}: a symbolic size ({}) is not supported yet: export with static shapes", where, j.dump().substr(0, 120));
}

// An expression tree of the adapter's symbolic sizes (python/coil/_symbols.py): an int,
// {"sym": name}, {"add"|"mul"|"min"|"max": [...]}, {"floordiv"|"mod": [a, b]}.
SymInt expression(const json& j, const std::string& where, int depth = 0) {
  if (depth > 64) fail("{}: a size expression nested too deeply", where);
  if (j.is_number_integer()) return json_int(j, where);
  if (!j.is_object() || j.size() != 1) fail("{}: malformed size expression {}", where, j.dump().substr(0, 120));
  const std::string& op = j.begin().key();
  const json& v = j.begin().value();
  if (op == "sym") {
    if (!v.is_string()) fail("{}: a size symbol's name must be a string", where);
    return SymInt::symbol(v.get<std::string>());
  }
  if (!v.is_array() || v.empty()) fail("{}: size expression '{}' takes a list of operands", where, op);
  std::vector<SymInt> args;
  for (const auto& a : v) args.push_back(expression(a, where, depth + 1));
  auto fold = [&](auto f) {
    SymInt r = args[0];
    for (size_t i = 1; i < args.size(); ++i) r = f(r, args[i]);
    return r;
  };
  if (op == "add") return fold([](const SymInt& a, const SymInt& b) { return a + b; });
  if (op == "mul") return fold([](const SymInt& a, const SymInt& b) { return a * b; });
  if (op == "min") return fold([](const SymInt& a, const SymInt& b) { return min(a, b); });
  if (op == "max") return fold([](const SymInt& a, const SymInt& b) { return max(a, b); });
  if (args.size() != 2) fail("{}: size expression '{}' takes two operands", where, op);
  if (op == "floordiv") return floordiv(args[0], args[1]);
  if (op == "mod") return mod(args[0], args[1]);
  fail("{}: unknown size expression '{}'", where, op);
}

}  // namespace

// A size: an int, {"as_int": n}, the adapter's {"as_sym": expression}, an archive's
// {"as_expr": {"expr_str": srepr}}, or {"as_name": n} of a value in `named` (an archive's
// sym_int_values).
SymInt sym_int(const json& j, const std::string& where, const std::map<std::string, SymInt>* named) {
  if (j.is_object() && j.contains("as_sym")) return expression(j.at("as_sym"), where);
  if (j.is_object() && j.contains("as_expr"))
    return parse_sympy_srepr(field(j.at("as_expr"), "expr_str", where).get<std::string>(), where);
  if (j.is_object() && j.contains("as_name")) {
    std::string name = j.at("as_name").get<std::string>();
    if (named)
      if (auto it = named->find(name); it != named->end()) return it->second;
    fail("{}: unknown symbolic value '{}'", where, name);
  }
  return as_int(j, where);
}

namespace {

SymShape int_list(const json& list, const std::string& where) {
  if (!list.is_array()) fail("{}: expected a list of sizes", where);
  SymShape out;
  for (const auto& e : list) out.push_back(sym_int(e, where, nullptr));
  return out;
}

std::string memory_format(int64_t code, const std::string& where) {
  switch (code) {
    case 1: return "contiguous_format";
    case 2: return "channels_last";
    case 3: return "channels_last_3d";
    case 4: return "preserve_format";
    default: fail("{}: unknown memory format code {}", where, code);
  }
}

// "torch.ops.aten.add.Tensor" -> "add.Tensor"; "...relu.default" -> "relu"; the ops of coil's
// own namespace (torch.ops.coil.philox_random.default) likewise; "" for any other.
std::string aten_op(const std::string& target) {
  for (std::string_view prefix : {"torch.ops.aten.", "torch.ops.coil."}) {
    if (!target.starts_with(prefix)) continue;
    std::string op = target.substr(prefix.size());
    if (op.ends_with(".default")) op.resize(op.size() - 8);
    return op;
  }
  return "";
}

// Backend-specific attention ops whose first output is scaled_dot_product_attention's.
bool is_attention_variant(const std::string& op) {
  return op == "_scaled_dot_product_flash_attention_for_cpu" || op == "_scaled_dot_product_flash_attention" ||
         op == "_scaled_dot_product_efficient_attention" || op == "_scaled_dot_product_cudnn_attention";
}

}  // namespace

const json& json_field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) fail("{}: missing field '{}'", where, key);
  return j.at(key);
}

int64_t json_int(const json& j, const std::string& where) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > kMax))
    fail("{}: expected an integer (int64), got {}", where, j.dump().substr(0, 80));
  return j.get<int64_t>();
}

DType export_dtype(int64_t code, const std::string& where) {
  switch (code) {
    case 1: return DType::u8;
    case 2: return DType::i8;
    case 3: return DType::i16;
    case 4: return DType::i32;
    case 5: return DType::i64;
    case 6: return DType::f16;
    case 7: return DType::f32;
    case 8: return DType::f64;
    case 12: return DType::b8;
    case 13: return DType::bf16;
    default: fail("{}: dtype code {} is not supported (complex, float8 and unsigned 16-bit types are not)", where, code);
  }
}

ExportMeta export_meta(const json& m, const std::string& where) {
  ExportMeta t;
  t.dtype = export_dtype(json_int(field(m, "dtype", where), where), where);
  t.sizes = int_list(field(m, "sizes", where), where);
  t.strides = int_list(field(m, "strides", where), where);
  if (m.contains("storage_offset")) t.offset = as_int(m.at("storage_offset"), where);
  if (t.sizes.size() != t.strides.size()) fail("{}: {} sizes but {} strides", where, t.sizes.size(), t.strides.size());
  return t;
}

namespace {

// A Python number where a .Tensor overload takes a tensor (`x * 2` exported without
// run_decompositions): the .Scalar overload of the same op, as the Core ATen decompositions use.
std::string scalar_overload(const std::string& target, const std::vector<std::pair<std::string, Arg>>& keywords) {
  auto number = [&](const char* key) {
    for (const auto& [k, a] : keywords)
      if (k == key) return !std::holds_alternative<ValueRef>(a.value) && !a.is_none();
    return false;
  };
  auto swap_suffix = [&](std::string_view from, std::string_view to) {
    return target.ends_with(from) ? target.substr(0, target.size() - from.size()) + std::string(to) : target;
  };
  if (target.ends_with(".Tensor") && number("other")) {
    std::string scalar = swap_suffix(".Tensor", ".Scalar");
    if (op_from_name(scalar)) return scalar;
  }
  if (target.ends_with(".Tensor_Tensor") && number("exponent")) return swap_suffix(".Tensor_Tensor", ".Tensor_Scalar");
  return target;
}

}  // namespace

bool export_target_supported(const std::string& target) {
  std::string op = aten_op(target);
  if (op.empty()) return false;
  return export_decomposes(op) || is_attention_variant(op) || op_from_name(target).has_value();
}

ValueRef ExportNodes::value(const std::string& name, const std::string& where) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail("{}: unknown value '{}'", where, name);
  return it->second;
}

Arg ExportNodes::argument(const json& a, const std::string& where) const {
  if (!a.is_object() || a.size() != 1) fail("{}: an argument must be an object with one key, got {}", where, a.dump().substr(0, 120));
  const std::string kind = a.begin().key();
  const json& v = a.begin().value();
  if (kind == "as_none") return std::nullopt;
  if (kind == "as_tensor") return value(field(v, "name", where).get<std::string>(), where);
  if (kind == "as_tensors") {
    std::vector<ValueRef> list;
    for (const auto& t : v) list.push_back(value(field(t, "name", where).get<std::string>(), where));
    return Arg(list);
  }
  if (kind == "as_optional_tensors") {
    TensorList list;
    for (const auto& t : v) {
      if (t.contains("as_none")) list.push_back(std::nullopt);
      else list.push_back(value(field(field(t, "as_tensor", where), "name", where).get<std::string>(), where));
    }
    return Arg(list);
  }
  if (kind == "as_optional_tensor") return v.contains("as_none") ? Arg(std::nullopt) : argument(v, where);
  if (kind == "as_int") return json_int(v, where);
  if (kind == "as_sym_int") return sym_int(v, where, &sizes_);
  if (kind == "as_ints" || kind == "as_sym_ints") {
    IntList list;
    for (const auto& e : v) list.push_back(kind == "as_ints" ? SymInt(json_int(e, where)) : sym_int(e, where, &sizes_));
    return Arg(list);
  }
  if (kind == "as_float") {
    if (v.is_string()) {  // inf, -inf, nan are written as strings
      std::string s = v.get<std::string>();
      if (s == "inf" || s == "Infinity") return std::numeric_limits<double>::infinity();
      if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
      if (s == "nan" || s == "NaN") return std::numeric_limits<double>::quiet_NaN();
      fail("{}: float '{}'", where, s);
    }
    return v.get<double>();
  }
  if (kind == "as_floats") return Arg(v.get<FloatList>());
  if (kind == "as_bool") return v.get<bool>();
  if (kind == "as_string") return v.get<std::string>();
  if (kind == "as_scalar_type") return export_dtype(json_int(v, where), where);
  if (kind == "as_memory_format") return memory_format(json_int(v, where), where);
  if (kind == "as_layout") {
    if (json_int(v, where) != 7) fail("{}: only the strided layout is supported", where);
    return std::string("strided");
  }
  if (kind == "as_device") {
    std::string type = field(v, "type", where).get<std::string>();
    Device d;
    if (type == "cuda") d.kind = Device::Kind::cuda;
    else if (type != "cpu") fail("{}: device '{}' is not supported", where, type);
    if (v.contains("index") && v.at("index").is_number_integer()) d.index = v.at("index").get<int>();
    return d;
  }
  fail("{}: argument kind '{}' is not supported", where, kind);
}

// The flash/efficient/cudnn/cpu attention variants: their first output, without dropout.
ValueRef ExportNodes::attention(const std::string& op, const std::map<std::string, Arg>& args, const std::string& name) {
  auto get = [&](const char* key) { return args.count(key) ? args.at(key) : Arg(std::nullopt); };
  Arg dropout = get("dropout_p");
  if (auto* p = std::get_if<double>(&dropout.value); p && *p != 0) fail("{} with dropout is not supported", op);
  Arg mask = args.count("attn_mask") ? args.at("attn_mask") : get("attn_bias");
  Arg causal = args.count("is_causal") ? args.at("is_causal") : Arg(false);
  // These kernels take grouped-query attention by its shapes alone (fewer key/value heads than
  // query heads), which scaled_dot_product_attention is told with enable_gqa.
  auto tensor = [&](const char* key) {
    auto it = args.find(key);
    const ValueRef* v = it == args.end() ? nullptr : std::get_if<ValueRef>(&it->second.value);
    if (!v) fail("{}: argument '{}' must be a tensor", op, key);
    return *v;
  };
  auto heads = [&](const char* key) {
    const TensorMeta& m = graph_.meta(tensor(key));
    return m.dim() >= 3 ? m.sizes[static_cast<size_t>(m.dim() - 3)] : SymInt(1);
  };
  bool grouped = heads("key") != heads("query") || heads("value") != heads("query");
  ValueRef out = graph_.call1(OpKind::ScaledDotProductAttention, {tensor("query"), tensor("key"), tensor("value"), mask},
                              {{"is_causal", causal}, {"scale", get("scale")}, {"enable_gqa", grouped}}, graph_.fresh_name(name + "_bhtd"));
  // These ops return [B, H, T, hd] over [B, T, H, hd] memory, and the graph's views after them
  // rely on that layout.
  ValueRef bthd = graph_.call1(OpKind::Permute, {out, IntList{0, 2, 1, 3}}, {}, graph_.fresh_name(name + "_bthd"));
  ValueRef dense = graph_.call1(OpKind::Clone, {bthd}, {{"memory_format", std::string("contiguous_format")}}, graph_.fresh_name(name + "_dense"));
  return graph_.call1(OpKind::Permute, {dense, IntList{0, 2, 1, 3}}, {}, name);
}

void ExportNodes::add_node(const json& node) {
  std::string target = field(node, "target", where_).get<std::string>();
  std::string name = node.value("name", std::string("?"));
  std::string where = fmt::format("{}: node '{}' ({})", where_, name, target);
  if (node.contains("metadata") && node.at("metadata").contains("stack_trace") && node.at("metadata").at("stack_trace").is_string())
    where += "\n  stack trace:\n" + node.at("metadata").at("stack_trace").get<std::string>() + "\n ";
  // Nodes that compute sizes (sym_size, arithmetic on sizes: an archive's sym_int_values holds
  // each result as an expression) and checks of sizes: the sizes are read where they are used.
  const json& outputs = field(node, "outputs", where);
  bool sizes_only = !outputs.empty();
  for (const auto& o : outputs) sizes_only = sizes_only && (o.contains("as_sym_int") || o.contains("as_sym_bool"));
  if (sizes_only || target.starts_with("torch.ops.aten._assert_scalar") || target.starts_with("torch.ops.aten.sym_constrain_range"))
    return;
  std::string op = aten_op(target);
  if (op.empty()) fail("{}: only ATen ops are supported", where);
  // Checks of metadata that torch.export inserts (for `.float()`, `.to(...)`) and that has no
  // output: the reader has checked every value's dtype, sizes and strides already.
  if (op == "_assert_tensor_metadata") return;
  try {
    std::vector<std::pair<std::string, Arg>> keywords;
    for (const auto& in : field(node, "inputs", where))
      keywords.emplace_back(field(in, "name", where).get<std::string>(), argument(field(in, "arg", where), where));
    std::vector<std::string> names;
    std::map<std::string, json> layouts;  // PyTorch's sizes and strides of outputs, where the program gives them
    for (const auto& o : field(node, "outputs", where)) {
      if (o.contains("as_tensor")) {
        names.push_back(o.at("as_tensor").at("name").get<std::string>());
        if (o.contains("layout")) layouts[names.back()] = o.at("layout");
      } else if (o.contains("as_tensors"))
        for (const auto& t : o.at("as_tensors")) names.push_back(t.at("name").get<std::string>());
      else if (o.contains("as_none") || is_attention_variant(op)) names.push_back("");
      else fail("output {} is not a tensor", o.dump().substr(0, 80));
    }
    std::vector<std::string> given;
    for (const auto& n : names) given.push_back(n.empty() ? graph_.fresh_name(name) : n);
    std::vector<ValueRef> outs;
    if (is_attention_variant(op)) {  // non-core ops, decomposed here
      if (names.empty() || names[0].empty()) fail("expected a tensor output");
      outs = {attention(op, std::map<std::string, Arg>(keywords.begin(), keywords.end()), names[0])};
    } else if (export_decomposes(op)) {
      outs = decompose_export_op(graph_, op, std::map<std::string, Arg>(keywords.begin(), keywords.end()), given);
    } else {
      auto kind = op_from_name(scalar_overload(target, keywords));
      if (!kind) fail("op '{}' is not supported", op);
      outs = *kind == OpKind::View ? view_or_copy(graph_, std::move(keywords), given)
                                   : graph_.call(*kind, {}, std::move(keywords), given);
    }
    for (size_t i = 0; i < outs.size() && i < names.size(); ++i)
      if (!names[i].empty()) values_[names[i]] = outs[i];
    for (const auto& [out, layout] : layouts)
      if (values_.count(out))
        values_[out] = with_layout(graph_, values_[out], int_list(layout.at("sizes"), where), int_list(layout.at("strides"), where), out);
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(where_, 0) == 0) throw;
    fail("{}: {}", where, e.what());
  }
}

}  // namespace coil::frontend
