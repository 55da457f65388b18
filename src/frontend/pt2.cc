#include "frontend/pt2.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

#include "support/check.h"
#include "coil/reference.h"
#include "frontend/zip_reader.h"

namespace coil {

namespace {

using json = nlohmann::json;

constexpr int kSchemaMajor = 8;

// The export schema's ScalarType numbers (torch/_export/serde/schema.py).
DType scalar_type(int64_t code, const std::string& where) {
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

std::string memory_format(int64_t code, const std::string& where) {
  switch (code) {
    case 1: return "contiguous_format";
    case 2: return "channels_last";
    case 3: return "channels_last_3d";
    case 4: return "preserve_format";
    default: fail("{}: unknown memory format code {}", where, code);
  }
}

// A JSON field, or an error naming what was expected.
const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) fail("{}: missing field '{}'", where, key);
  return j.at(key);
}

int64_t as_int(const json& j, const std::string& where) {
  if (j.is_object() && j.contains("as_int")) return j.at("as_int").get<int64_t>();
  if (j.is_number_integer()) return j.get<int64_t>();
  fail("{}: a symbolic size ({}) is not supported yet: export with static shapes", where, j.dump().substr(0, 120));
}

SymShape int_list(const json& list, const std::string& where) {
  if (!list.is_array()) fail("{}: expected a list of sizes", where);
  SymShape out;
  for (const auto& e : list) out.push_back(as_int(e, where));
  return out;
}

struct Meta {
  DType dtype;
  SymShape sizes, strides;
  int64_t offset = 0;
};

Meta tensor_meta(const json& m, const std::string& where) {
  Meta t;
  t.dtype = scalar_type(field(m, "dtype", where).get<int64_t>(), where);
  t.sizes = int_list(field(m, "sizes", where), where);
  t.strides = int_list(field(m, "strides", where), where);
  if (m.contains("storage_offset")) t.offset = as_int(m.at("storage_offset"), where);
  if (t.sizes.size() != t.strides.size()) fail("{}: {} sizes but {} strides", where, t.sizes.size(), t.strides.size());
  return t;
}

class Reader {
 public:
  Reader(std::string path, frontend::ZipReader zip) : path_(std::move(path)), zip_(std::move(zip)) {}

  Pt2Program load(const std::string& model);

 private:
  std::string entry(const std::string& rel) const { return root_ + rel; }
  json read_json(const std::string& rel) const;
  void read_tensors(const std::string& config_rel, const std::string& dir_rel, TensorMap& out);
  void add_node(const json& node);
  Arg argument(const json& a, const std::string& where);
  ValueRef value(const std::string& name, const std::string& where) const;
  ValueRef linear(const std::map<std::string, Arg>& args, const std::string& name);

  std::string path_;
  frontend::ZipReader zip_;
  std::string root_;
  Pt2Program out_;
  std::map<std::string, ValueRef> values_;
};

json Reader::read_json(const std::string& rel) const {
  std::string text = zip_.read(entry(rel), size_t{1} << 30);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) fail("{}: {} is not valid JSON", path_, rel);
  return j;
}

// Raw little-endian tensors: entries that share a file share its bytes (views of one storage).
void Reader::read_tensors(const std::string& config_rel, const std::string& dir_rel, TensorMap& out) {
  if (!zip_.contains(entry(config_rel))) return;
  json config = field(read_json(config_rel), "config", path_ + ": " + config_rel);
  std::map<std::string, std::shared_ptr<std::string>> files;
  for (const auto& [name, spec] : config.items()) {
    std::string where = fmt::format("{}: {} '{}'", path_, config_rel, name);
    if (spec.value("use_pickle", false)) fail("{}: a pickled tensor is not supported: save without pickling", where);
    std::string file = field(spec, "path_name", where).get<std::string>();
    Meta m = tensor_meta(field(spec, "tensor_meta", where), where);
    auto& bytes = files[file];
    if (!bytes) bytes = std::make_shared<std::string>(zip_.read(entry(dir_rel + file)));
    Shape sizes, strides;
    int64_t last = m.offset;
    bool empty = false;
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      sizes.push_back(*m.sizes[d].constant());
      strides.push_back(*m.strides[d].constant());
      if (sizes.back() < 0 || strides.back() < 0) fail("{}: negative size or stride", where);
      if (sizes.back() == 0) empty = true;
      last += (sizes.back() - 1) * strides.back();
    }
    int64_t elements = static_cast<int64_t>(bytes->size()) / dtype_size(m.dtype);
    if (m.offset < 0 || (!empty && last >= elements))
      fail("{}: the tensor reaches element {} of a {}-element file '{}'", where, last, elements, file);
    auto keep = bytes;
    out[name] = Tensor::borrow(bytes->data(), m.dtype, sizes, strides, m.offset, {}, [keep](void*) {});
  }
}

ValueRef Reader::value(const std::string& name, const std::string& where) const {
  auto it = values_.find(name);
  if (it == values_.end()) fail("{}: unknown value '{}'", where, name);
  return it->second;
}

Arg Reader::argument(const json& a, const std::string& where) {
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
  if (kind == "as_int") return v.get<int64_t>();
  if (kind == "as_sym_int") return SymInt(as_int(v, where));
  if (kind == "as_ints" || kind == "as_sym_ints") {
    IntList list;
    for (const auto& e : v) list.push_back(kind == "as_ints" ? SymInt(e.get<int64_t>()) : SymInt(as_int(e, where)));
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
  if (kind == "as_scalar_type") return scalar_type(v.get<int64_t>(), where);
  if (kind == "as_memory_format") return memory_format(v.get<int64_t>(), where);
  if (kind == "as_layout") {
    if (v.get<int64_t>() != 7) fail("{}: only the strided layout is supported", where);
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

// aten.linear(x, w, b) = x @ w^T + b, as run_decompositions() writes it: addmm on 2-D inputs,
// a flattening view around it otherwise.
ValueRef Reader::linear(const std::map<std::string, Arg>& args, const std::string& name) {
  Graph& g = out_.graph;
  ValueRef x = std::get<ValueRef>(args.at("input").value), w = std::get<ValueRef>(args.at("weight").value);
  ValueRef wt = g.call1(OpKind::Permute, {w, IntList{1, 0}}, {}, g.fresh_name(name + "_wt"));
  SymShape xs = g.meta(x).sizes;
  SymInt rows = 1;
  for (size_t d = 0; d + 1 < xs.size(); ++d) rows = rows * xs[d];
  ValueRef x2 = xs.size() == 2 ? x : g.call1(OpKind::View, {x, IntList{rows, xs.back()}}, {}, g.fresh_name(name + "_2d"));
  bool bias = args.count("bias") && !args.at("bias").is_none();
  std::string out2 = xs.size() == 2 ? name : g.fresh_name(name + "_2d");
  ValueRef y = bias ? g.call1(OpKind::Addmm, {args.at("bias"), x2, wt}, {}, out2) : g.call1(OpKind::Mm, {x2, wt}, {}, out2);
  if (xs.size() == 2) return y;
  IntList shape(xs.begin(), xs.end() - 1);
  shape.push_back(g.meta(w).sizes[0]);
  return g.call1(OpKind::View, {y, shape}, {}, name);
}

void Reader::add_node(const json& node) {
  std::string target = field(node, "target", path_).get<std::string>();
  std::string name = node.value("name", std::string("?"));
  std::string where = fmt::format("{}: node '{}' ({})", path_, name, target);
  if (node.contains("metadata") && node.at("metadata").contains("stack_trace") && node.at("metadata").at("stack_trace").is_string())
    where += "\n  stack trace:\n" + node.at("metadata").at("stack_trace").get<std::string>() + "\n ";
  const std::string prefix = "torch.ops.aten.";
  if (target.rfind(prefix, 0) != 0) fail("{}: only ATen ops are supported", where);
  std::string op = target.substr(prefix.size());
  if (op.ends_with(".default")) op.resize(op.size() - 8);
  try {
    std::vector<std::pair<std::string, Arg>> keywords;
    for (const auto& in : field(node, "inputs", where))
      keywords.emplace_back(field(in, "name", where).get<std::string>(), argument(field(in, "arg", where), where));
    std::vector<std::string> names;
    for (const auto& o : field(node, "outputs", where)) {
      if (o.contains("as_tensor")) names.push_back(o.at("as_tensor").at("name").get<std::string>());
      else if (o.contains("as_tensors"))
        for (const auto& t : o.at("as_tensors")) names.push_back(t.at("name").get<std::string>());
      else if (o.contains("as_none")) names.push_back("");
      else fail("output {} is not a tensor", o.dump().substr(0, 80));
    }
    // Non-core ops, decomposed here.
    if (op == "linear" || op == "t") {
      if (names.size() != 1 || names[0].empty()) fail("expected one tensor output");
      std::map<std::string, Arg> args(keywords.begin(), keywords.end());
      values_[names[0]] = op == "linear" ? linear(args, names[0])
                                         : out_.graph.call1(OpKind::Permute, {args.at("self"), IntList{1, 0}}, {}, names[0]);
      return;
    }
    auto kind = op_from_name(op);
    if (!kind) fail("op '{}' is not supported", op);
    std::vector<std::string> given;
    for (const auto& n : names) given.push_back(n.empty() ? out_.graph.fresh_name(name) : n);
    auto outs = out_.graph.call(*kind, {}, std::move(keywords), given);
    for (size_t i = 0; i < outs.size() && i < names.size(); ++i)
      if (!names[i].empty()) values_[names[i]] = outs[i];
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(path_, 0) == 0) throw;
    fail("{}: {}", where, e.what());
  }
}

Pt2Program Reader::load(const std::string& model) {
  // One root folder holds every entry.
  if (zip_.names().empty()) fail("{}: an empty archive", path_);
  std::string first = zip_.names().front();
  root_ = first.substr(0, first.find('/') + 1);
  if (root_.empty() || root_ == first) fail("{}: entries must sit under one root folder", path_);
  for (const auto& n : zip_.names())
    if (n.rfind(root_, 0) != 0) fail("{}: entry '{}' is outside the root folder '{}'", path_, n, root_);
  if (!zip_.contains(entry("archive_format"))) fail("{}: no archive_format entry: not a torch.export archive", path_);
  std::string format = zip_.read(entry("archive_format"), 64);
  if (format != "pt2") fail("{}: archive_format is '{}', expected 'pt2'", path_, format);
  if (zip_.contains(entry("byteorder")) && zip_.read(entry("byteorder"), 64) != "little")
    fail("{}: only little-endian archives are supported", path_);
  std::string name = model;
  if (name.empty()) {
    std::vector<std::string> models;
    for (const auto& n : zip_.names())
      if (n.rfind(entry("models/"), 0) == 0 && n.ends_with(".json")) models.push_back(n.substr(entry("models/").size(), n.size() - entry("models/").size() - 5));
    if (models.empty()) fail("{}: no models/<name>.json", path_);
    name = std::find(models.begin(), models.end(), "model") != models.end() ? "model" : models.front();
    if (models.size() > 1 && name != "model") fail("{}: several models ({}); name one", path_, fmt::join(models, ", "));
  }
  json ep = read_json("models/" + name + ".json");
  std::string where = path_ + ": models/" + name + ".json";
  const json& version = field(ep, "schema_version", where);
  int major = field(version, "major", where).get<int>();
  if (major != kSchemaMajor)
    fail("{}: export schema version {}.{} is not supported (coil reads major version {})", where, major, version.value("minor", 0), kSchemaMajor);
  const json& gm = field(ep, "graph_module", where);
  const json& graph = field(gm, "graph", where);
  const json& tensor_values = field(graph, "tensor_values", where);

  read_tensors("data/weights/" + name + "_weights_config.json", "data/weights/", out_.weights);
  read_tensors("data/constants/" + name + "_constants_config.json", "data/constants/", out_.weights);

  Graph& g = out_.graph;
  g.name = name;
  // An input's or weight's type (the nodes' outputs are inferred).
  auto meta_of = [&](const std::string& v) {
    if (!tensor_values.contains(v)) fail("{}: no tensor_values entry for '{}'", where, v);
    return tensor_meta(tensor_values.at(v), where + " tensor " + v);
  };
  const json& signature = field(gm, "signature", where);
  for (const auto& spec : field(signature, "input_specs", where)) {
    if (!spec.is_object() || spec.size() != 1) fail("{}: an input spec must have one key", where);
    const std::string kind = spec.begin().key();
    const json& s = spec.begin().value();
    if (kind == "user_input") {
      const json& arg = field(s, "arg", where);
      if (!arg.contains("as_tensor")) fail("{}: a non-tensor user input ({}) is not supported", where, arg.dump().substr(0, 80));
      std::string v = arg.at("as_tensor").at("name").get<std::string>();
      Meta m = meta_of(v);
      values_[v] = g.add_input(v, m.dtype, m.sizes);
      continue;
    }
    const char* key_field = kind == "parameter" ? "parameter_name" : kind == "buffer" ? "buffer_name" : kind == "tensor_constant" ? "tensor_constant_name" : nullptr;
    if (!key_field) fail("{}: input kind '{}' is not supported", where, kind);
    std::string v = field(field(s, "arg", where), "name", where).get<std::string>();
    std::string key = field(s, key_field, where).get<std::string>();
    if (!out_.weights.count(key)) fail("{}: {} '{}' has no stored tensor", where, kind, key);
    Meta m = meta_of(v);
    values_[v] = g.add_weight(v, key, m.dtype, m.sizes);
  }
  for (const auto& node : field(graph, "nodes", where)) add_node(node);
  for (const auto& spec : field(signature, "output_specs", where)) {
    if (!spec.is_object() || spec.size() != 1) fail("{}: an output spec must have one key", where);
    const std::string kind = spec.begin().key();
    const json& s = spec.begin().value();
    if (kind != "user_output") fail("{}: output kind '{}' (a mutated buffer or input) is not supported", where, kind);
    const json& arg = field(s, "arg", where);
    if (!arg.contains("as_tensor")) fail("{}: a non-tensor output is not supported", where);
    g.outputs.push_back(value(arg.at("as_tensor").at("name").get<std::string>(), where));
  }
  verify(g);
  return std::move(out_);
}

}  // namespace

Pt2Program load_pt2(const std::string& path, const std::string& model) {
  try {
    return Reader(path, frontend::ZipReader::open(path)).load(model);
  } catch (const Error&) {
    throw;
  } catch (const json::exception& e) {
    fail("{}: malformed export JSON: {}", path, e.what());
  } catch (const std::exception& e) {  // a value of the wrong kind where the schema wants another
    fail("{}: malformed export program: {}", path, e.what());
  }
}

}  // namespace coil
