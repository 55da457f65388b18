#include "frontend/pt2.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "support/check.h"
#include "support/checked.h"
#include "support/json_depth.h"
#include "arith/bounds.h"
#include "coil/reference.h"
#include "frontend/export_nodes.h"
#include "frontend/zip_reader.h"

namespace coil {

namespace {

using json = nlohmann::json;

constexpr int kSchemaMajor = 8;

using frontend::ExportMeta;
constexpr auto field = frontend::json_field;

class Reader {
 public:
  Reader(std::string path, frontend::ZipReader zip) : path_(std::move(path)), zip_(std::move(zip)) {}

  Pt2Program load(const std::string& model);

 private:
  std::string entry(const std::string& rel) const { return root_ + rel; }
  json read_json(const std::string& rel) const;
  void declare_symbols(const json& ep, const json& graph, const std::string& where, frontend::ExportNodes& nodes);
  void read_tensors(const std::string& config_rel, const std::string& dir_rel, TensorMap& out);

  std::string path_;
  frontend::ZipReader zip_;
  std::string root_;
  Pt2Program out_;
};

json Reader::read_json(const std::string& rel) const {
  std::string text = zip_.read(entry(rel), size_t{1} << 30);
  check_json_depth(text, fmt::format("{}: {}", path_, rel));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) fail("{}: {} is not valid JSON", path_, rel);
  return j;
}

// Raw little-endian tensors: entries that share a file share its bytes (views of one storage).
// torch.export stores these files uncompressed, so their size is their bytes on disk; a
// compressed one (a re-zipped archive) is read only up to the bytes its tensors reach, so a
// small archive cannot inflate to gigabytes.
void Reader::read_tensors(const std::string& config_rel, const std::string& dir_rel, TensorMap& out) {
  if (!zip_.contains(entry(config_rel))) return;
  json config = field(read_json(config_rel), "config", path_ + ": " + config_rel);
  struct Spec {
    std::string name, file, where;
    ExportMeta meta;
    Shape sizes, strides;
    int64_t span = 0;  // elements reached, from the storage's start
  };
  std::vector<Spec> specs;
  std::map<std::string, size_t> reached;  // bytes of each file its tensors reach
  for (const auto& [name, spec] : config.items()) {
    Spec s{.name = name, .where = fmt::format("{}: {} '{}'", path_, config_rel, name)};
    if (spec.value("use_pickle", false)) fail("{}: a pickled tensor is not supported: save without pickling", s.where);
    s.file = field(spec, "path_name", s.where).get<std::string>();
    s.meta = frontend::export_meta(field(spec, "tensor_meta", s.where), s.where);
    for (size_t d = 0; d < s.meta.sizes.size(); ++d) {
      s.sizes.push_back(*s.meta.sizes[d].constant());
      s.strides.push_back(*s.meta.strides[d].constant());
      if (s.sizes.back() < 0 || s.strides.back() < 0) fail("{}: negative size or stride", s.where);
    }
    if (s.meta.offset < 0) fail("{}: negative storage offset {}", s.where, s.meta.offset);
    try {
      s.span = span_of(s.sizes, s.strides, s.meta.offset);
      size_t bytes = static_cast<size_t>(checked_mul(s.span, dtype_size(s.meta.dtype), "a weight's bytes"));
      reached[s.file] = std::max(reached[s.file], bytes);
    } catch (const Error& e) {
      fail("{}: {}", s.where, e.what());
    }
    specs.push_back(std::move(s));
  }
  std::map<std::string, std::shared_ptr<std::string>> files;
  for (const auto& [file, bytes] : reached) {
    std::string name = entry(dir_rel + file);
    files[file] = std::make_shared<std::string>(zip_.read(name, zip_.is_stored(name) ? size_t{1} << 40 : bytes));
  }
  for (const Spec& s : specs) {
    const auto& bytes = files.at(s.file);
    int64_t elements = static_cast<int64_t>(bytes->size()) / dtype_size(s.meta.dtype);
    if (s.span > elements)
      fail("{}: the tensor reaches element {} of a {}-element file '{}'", s.where, s.span - 1, elements, s.file);
    auto keep = bytes;
    out[s.name] = Tensor::borrow(bytes->data(), s.meta.dtype, s.sizes, s.strides, s.meta.offset, {}, [keep](void*) {});
  }
}

// An export with dynamic dims (torch.export.Dim): its range_constraints declare the symbols
// with their ranges (a run outside them is an error), the hints are the sizes it was traced
// with, and sym_int_values name the sizes its nodes compute (read where arguments use them).
void Reader::declare_symbols(const json& ep, const json& graph, const std::string& where, frontend::ExportNodes& nodes) {
  Graph& g = out_.graph;
  if (ep.contains("range_constraints") && ep.at("range_constraints").is_object())
    for (const auto& [symbol, range] : ep.at("range_constraints").items()) {
      const std::string at = where + " range_constraints " + symbol;
      g.add_symbol(symbol);
      SymbolDecl& decl = g.symbols.back();
      if (range.contains("min_val") && range.at("min_val").is_number_integer())
        decl.min = std::max<int64_t>(0, frontend::json_int(range.at("min_val"), at));
      if (range.contains("max_val") && range.at("max_val").is_number_integer()) {
        const json& high = range.at("max_val");
        if (!high.is_number_unsigned() || high.get<uint64_t>() < static_cast<uint64_t>(Range::kMax)) decl.max = frontend::json_int(high, at);
      }
      if (decl.max && *decl.max < decl.min) fail("{}: an empty range [{}, {}]", at, decl.min, *decl.max);
    }
  // Hints: a symbol's size where an input or weight holds it whole.
  if (graph.contains("tensor_values") && graph.at("tensor_values").is_object())
    for (const auto& [value, meta] : graph.at("tensor_values").items()) {
      if (!meta.contains("sizes") || !meta.at("sizes").is_array()) continue;
      for (const auto& size : meta.at("sizes")) {
        if (!size.contains("as_expr") || !size.at("as_expr").contains("hint")) continue;
        SymInt s = frontend::sym_int(size, where + " tensor " + value, nullptr);
        const json& hint = size.at("as_expr").at("hint");
        if (s.kind() != SymInt::Kind::symbol || !hint.contains("as_int")) continue;
        for (SymbolDecl& decl : g.symbols)
          if (decl.name == s.symbol_name() && !decl.hint) decl.hint = frontend::json_int(hint.at("as_int"), where);
      }
    }
  if (graph.contains("sym_int_values") && graph.at("sym_int_values").is_object())
    for (const auto& [name, value] : graph.at("sym_int_values").items())
      nodes.bind_size(name, frontend::sym_int(value, where + " sym_int_values " + name, nullptr));
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
  int64_t major = frontend::json_int(field(version, "major", where), where + " schema_version");
  if (major != kSchemaMajor)
    fail("{}: export schema version {}.{} is not supported (coil reads major version {})", where, major,
         version.contains("minor") ? version.at("minor").dump() : "0", kSchemaMajor);
  const json& gm = field(ep, "graph_module", where);
  const json& graph = field(gm, "graph", where);
  const json& tensor_values = field(graph, "tensor_values", where);

  read_tensors("data/weights/" + name + "_weights_config.json", "data/weights/", out_.weights);
  read_tensors("data/constants/" + name + "_constants_config.json", "data/constants/", out_.weights);

  Graph& g = out_.graph;
  g.name = name;
  frontend::ExportNodes nodes(g, path_);
  declare_symbols(ep, graph, where, nodes);
  // An input's or weight's type (the nodes' outputs are inferred).
  auto meta_of = [&](const std::string& v) {
    if (!tensor_values.contains(v)) fail("{}: no tensor_values entry for '{}'", where, v);
    return frontend::export_meta(tensor_values.at(v), where + " tensor " + v);
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
      ExportMeta m = meta_of(v);
      nodes.bind(v, g.add_input(v, m.dtype, m.sizes));
      continue;
    }
    const char* key_field = kind == "parameter" ? "parameter_name" : kind == "buffer" ? "buffer_name" : kind == "tensor_constant" ? "tensor_constant_name" : nullptr;
    if (!key_field) fail("{}: input kind '{}' is not supported", where, kind);
    std::string v = field(field(s, "arg", where), "name", where).get<std::string>();
    std::string key = field(s, key_field, where).get<std::string>();
    if (!out_.weights.count(key)) fail("{}: {} '{}' has no stored tensor", where, kind, key);
    ExportMeta m = meta_of(v);
    nodes.bind(v, g.add_weight(v, key, m.dtype, m.sizes));
  }
  for (const auto& node : field(graph, "nodes", where)) nodes.add_node(node);
  for (const auto& spec : field(signature, "output_specs", where)) {
    if (!spec.is_object() || spec.size() != 1) fail("{}: an output spec must have one key", where);
    const std::string kind = spec.begin().key();
    const json& s = spec.begin().value();
    if (kind != "user_output") fail("{}: output kind '{}' (a mutated buffer or input) is not supported", where, kind);
    const json& arg = field(s, "arg", where);
    if (!arg.contains("as_tensor")) fail("{}: a non-tensor output is not supported", where);
    g.outputs.push_back(nodes.value(arg.at("as_tensor").at("name").get<std::string>(), where));
  }
  verify(g);
  return std::move(out_);
}

// Errors other than coil::Error become one: the JSON library's (a missing key, a value of the
// wrong kind where the schema wants another) name the archive like every other.
Pt2Program load_reporting(const std::string& path, const std::function<Pt2Program()>& load) {
  try {
    return load();
  } catch (const Error&) {
    throw;
  } catch (const json::exception& e) {
    fail("{}: malformed export JSON: {}", path, e.what());
  } catch (const std::exception& e) {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    throw;  // the fuzz targets (tests/fuzz) report the code that leaned on a library's own check
#else
    fail("{}: malformed export program: {}", path, e.what());
#endif
  }
}

}  // namespace

Pt2Program load_pt2(const std::string& path, const std::string& model) {
  return load_reporting(path, [&] { return Reader(path, frontend::ZipReader::open(path)).load(model); });
}

Pt2Program load_pt2_bytes(std::string bytes, const std::string& name, const std::string& model) {
  return load_reporting(name, [&] { return Reader(name, frontend::ZipReader::from_bytes(std::move(bytes), name)).load(model); });
}

}  // namespace coil
