// Nodes in torch.export's serialized form (schema major version 8) onto a coil Graph, shared by
// the .pt2 reader and the torch.compile adapter (which writes FX nodes in the same form).
// A node is {"target": "torch.ops.aten.<op>.<overload>", "name", "inputs": [{"name", "arg"}],
// "outputs": [...]} with arguments in the schema's one-key union encoding ({"as_tensor": ..},
// {"as_int": ..}, ...). Arguments bind by name, so defaults the file omits come from coil's
// schemas. Common non-core ops are decomposed on reading (export_decompose.h), and the
// backend-specific attention ops (_scaled_dot_product_{flash,efficient}_attention...) become
// scaled_dot_product_attention when only their first output is read.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "coil/graph.h"

namespace coil::frontend {

// A JSON object's field, or an error naming what was expected.
const nlohmann::json& json_field(const nlohmann::json& j, const char* key, const std::string& where);
// A JSON integer that fits int64, or an error naming `where`: nlohmann's get<int64_t>() would
// truncate a float (2.5 -> 2), and converting one past int64's range is undefined behaviour.
int64_t json_int(const nlohmann::json& j, const std::string& where);

// The export schema's ScalarType numbers (torch/_export/serde/schema.py).
DType export_dtype(int64_t code, const std::string& where);

struct ExportMeta {
  DType dtype = DType::f32;
  SymShape sizes, strides;
  int64_t offset = 0;
};
// A TensorMeta entry ({"dtype", "sizes", "strides", "storage_offset"}); sizes and strides may be
// symbolic (sym_int's forms), the storage offset static.
ExportMeta export_meta(const nlohmann::json& m, const std::string& where);
// A size: an int, {"as_int": n}, the adapter's {"as_sym": tree} (python/coil/_symbols.py), an
// archive's {"as_expr": {"expr_str": sympy srepr}}, or {"as_name": n} of a value in `named`.
SymInt sym_int(const nlohmann::json& j, const std::string& where, const std::map<std::string, SymInt>* named);

// Whether add_node takes nodes of this target ("torch.ops.aten.add.Tensor").
bool export_target_supported(const std::string& target);

class ExportNodes {
 public:
  explicit ExportNodes(Graph& graph, std::string where) : graph_(graph), where_(std::move(where)) {}
  // Appends the node's ops; errors name the node (and its stack trace when the file has one).
  void add_node(const nlohmann::json& node);
  void bind(const std::string& name, ValueRef v) { values_[name] = v; }
  // A named symbolic size (an archive's sym_int_values entry) that arguments refer to by name.
  void bind_size(const std::string& name, SymInt value) { sizes_[name] = std::move(value); }
  ValueRef value(const std::string& name, const std::string& where) const;

 private:
  Arg argument(const nlohmann::json& a, const std::string& where) const;
  ValueRef attention(const std::string& op, const std::map<std::string, Arg>& args, const std::string& name);

  Graph& graph_;
  std::string where_;  // the file, for messages
  std::map<std::string, ValueRef> values_;
  std::map<std::string, SymInt> sizes_;
};

}  // namespace coil::frontend
