#include "frontend/fx.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

#include "coil/tensor.h"
#include "frontend/export_nodes.h"
#include "support/check.h"
#include "support/json_depth.h"

namespace coil {

namespace {

using json = nlohmann::json;
using frontend::json_field;

TensorMeta meta_of(const json& entry, const std::string& where) {
  frontend::ExportMeta m = frontend::export_meta(json_field(entry, "meta", where), where);
  if (m.offset != 0) fail("{}: a storage offset is not expected (the adapter passes data pointers)", where);
  TensorMeta t = TensorMeta::contiguous(m.dtype, m.sizes);
  t.strides = m.strides;
  return t;
}

// The device the graph runs on ({"type": "cpu"|"cuda", "index": n}); its inputs and weights
// live there. Device arguments of nodes are written as this device by the adapter.
Device device_of(const json& program, const std::string& where) {
  Device d;
  if (!program.contains("device")) return d;
  const json& j = program.at("device");
  std::string type = json_field(j, "type", where).get<std::string>();
  if (type == "cuda") d.kind = Device::Kind::cuda;
  else if (type != "cpu") fail("{}: device '{}' is not supported", where, type);
  if (j.contains("index") && j.at("index").is_number_integer()) d.index = j.at("index").get<int>();
  return d;
}

Graph read(const json& program) {
  const std::string where = "torch.compile graph";
  Graph g;
  g.name = program.value("name", std::string("fx"));
  const Device device = device_of(program, where);
  if (program.contains("symbols"))  // a graph of symbolic sizes: each symbol bound from an input's size per call
    for (const auto& s : program.at("symbols")) {
      std::optional<int64_t> hint;
      if (s.contains("hint") && !s.at("hint").is_null()) hint = frontend::json_int(s.at("hint"), where);
      g.add_symbol(json_field(s, "name", where).get<std::string>(), hint);
      if (s.contains("min")) g.symbols.back().min = frontend::json_int(s.at("min"), where);
      if (s.contains("max") && !s.at("max").is_null()) g.symbols.back().max = frontend::json_int(s.at("max"), where);
    }
  frontend::ExportNodes nodes(g, where);
  for (const auto& in : json_field(program, "inputs", where)) {
    std::string name = json_field(in, "name", where).get<std::string>();
    TensorMeta m = meta_of(in, where + " input " + name);
    if (m.is_contiguous()) {
      nodes.bind(name, g.add_input(name, m.dtype, m.sizes, device));
      continue;
    }
    // A strided input is read in place: its memory is a flat input, viewed with as_strided.
    for (const auto& st : m.strides)
      if (auto c = st.constant(); c && *c < 0) fail("{} input {}: negative strides are not supported", where, name);
    SymInt span = 0;  // the elements its memory spans (symbolic sizes: Dynamo's are at least 2)
    auto sizes = constant_shape(m.sizes), strides = constant_shape(m.strides);
    if (sizes && strides) {
      span = span_of(*sizes, *strides);
    } else if (std::none_of(m.sizes.begin(), m.sizes.end(), [](const SymInt& n) { return n == SymInt(0); })) {
      span = 1;
      for (size_t d = 0; d < m.sizes.size(); ++d) span = span + (m.sizes[d] - 1) * m.strides[d];
    }
    ValueRef flat = g.add_input(g.fresh_name(name + "_memory"), m.dtype, {span}, device);
    nodes.bind(name, g.call1(OpKind::AsStrided, {flat, IntList(m.sizes), IntList(m.strides)}, {}, name));
  }
  if (program.contains("weights"))
    for (const auto& w : program.at("weights")) {
      std::string name = json_field(w, "name", where).get<std::string>();
      TensorMeta m = meta_of(w, where + " weight " + name);
      if (!m.is_contiguous()) fail("{}: weight {} must be contiguous", where, name);
      nodes.bind(name, g.add_weight(name, json_field(w, "key", where).get<std::string>(), m.dtype, m.sizes, device));
    }
  for (const auto& node : json_field(program, "nodes", where)) nodes.add_node(node);
  for (const auto& out : json_field(program, "outputs", where)) g.outputs.push_back(nodes.value(out.get<std::string>(), where));
  if (program.contains("any_layout_outputs"))
    for (const auto& i : program.at("any_layout_outputs")) {
      if (!i.is_number_unsigned()) fail("{}: any_layout_outputs holds output positions", where);
      g.any_layout_outputs.push_back(i.get<size_t>());
    }
  verify(g);
  return g;
}

}  // namespace

Graph graph_from_fx(const std::string& json_text) {
  check_json_depth(json_text, "torch.compile graph");
  json program = json::parse(json_text, nullptr, false);
  if (program.is_discarded()) fail("torch.compile graph: not valid JSON");
  try {
    return read(program);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("torch.compile graph: malformed program: {}", e.what());
  }
}

}  // namespace coil
