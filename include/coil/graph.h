// The graph IR: one node type over the op set of ops.def. Every node argument is bound to its
// ATen schema argument (defaults filled in), and every node output carries a TensorMeta.
// Nodes are stored in topological order; a value is (node, output).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "coil/dtype.h"
#include "coil/sym.h"

namespace coil {

enum class OpKind : uint16_t {
#define COIL_OP(id, family, schema) id,
#include "coil/ops.def"
#undef COIL_OP
};

enum class OpFamily : uint8_t { source, creation, copy, unary, binary, ternary, reduction, normalization, view, shape, indexing, linalg };

// A value: output `output` of node `node`.
struct ValueRef {
  int32_t node = -1;
  int32_t output = 0;
  bool operator==(const ValueRef&) const = default;
};

using TensorList = std::vector<std::optional<ValueRef>>;  // Tensor[] and Tensor?[]
using IntList = std::vector<SymInt>;
using FloatList = std::vector<double>;

// One argument value. Ints (and SymInts) are SymInt; Scalars are bool, SymInt or double;
// str, Layout and MemoryFormat are strings; std::monostate is None.
using ArgValue = std::variant<std::monostate, bool, SymInt, double, std::string, IntList, FloatList, DType, Device,
                              ValueRef, TensorList>;

struct Arg {
  ArgValue value;
  Arg() = default;
  Arg(std::nullopt_t) {}                           // NOLINT
  Arg(bool v) : value(v) {}                        // NOLINT
  Arg(int v) : value(SymInt(v)) {}                 // NOLINT
  Arg(int64_t v) : value(SymInt(v)) {}             // NOLINT
  Arg(SymInt v) : value(std::move(v)) {}           // NOLINT
  Arg(double v) : value(v) {}                      // NOLINT
  Arg(const char* v) : value(std::string(v)) {}    // NOLINT
  Arg(std::string v) : value(std::move(v)) {}      // NOLINT
  Arg(IntList v) : value(std::move(v)) {}          // NOLINT
  Arg(FloatList v) : value(std::move(v)) {}        // NOLINT
  Arg(DType v) : value(v) {}                       // NOLINT
  Arg(Device v) : value(v) {}                      // NOLINT
  Arg(ValueRef v) : value(v) {}                    // NOLINT
  Arg(TensorList v) : value(std::move(v)) {}       // NOLINT
  Arg(const std::vector<ValueRef>& v);             // NOLINT: a Tensor[] with no None entries

  bool is_none() const { return std::holds_alternative<std::monostate>(value); }
  bool operator==(const Arg& other) const { return value == other.value; }
};

// ---- schemas (parsed from ops.def)
enum class ArgType : uint8_t { Tensor, Tensors, Int, Ints, Float, Floats, Bool, Str, Scalar, ScalarType, Layout, Device, MemoryFormat };

struct ArgSchema {
  std::string name;
  ArgType type;
  bool optional = false;    // `T?`: None is allowed
  bool kwarg_only = false;  // after `*`
  bool list_elems_optional = false;  // Tensor?[]
  int fixed_size = 0;       // int[1]: a bare int is accepted as a one-element list
  std::optional<Arg> default_value;
};

struct OpSchema {
  OpKind kind;
  OpFamily family;
  std::string name;      // "add.Tensor"
  std::string base;      // "add"
  std::string overload;  // "Tensor" ("" for the default overload)
  std::vector<ArgSchema> args;
  int num_returns = 1;   // -1: a Tensor[] of any length
  bool is_view = false;  // the first output aliases the first input
  std::string text;      // the schema as written in ops.def
  int arg_index(std::string_view arg_name) const;  // -1 when absent
};

const OpSchema& op_schema(OpKind kind);
const std::vector<OpSchema>& all_op_schemas();
// Accepts "add.Tensor", "aten.add.Tensor", "aten::add.Tensor"; a bare base name ("relu",
// "add") means its default overload, or its only one; "max.default" (and
// "torch.ops.aten.max.default") only the default overload itself.
std::optional<OpKind> op_from_name(std::string_view name);

// ---- tensor metadata
struct TensorMeta {
  DType dtype = DType::f32;
  SymShape sizes;
  SymShape strides;
  SymInt offset = 0;
  Device device;

  static TensorMeta contiguous(DType dtype, SymShape sizes, Device device = {});
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  bool is_contiguous() const;
  bool operator==(const TensorMeta&) const = default;
  // "f32[B, 4]" plus " strides=[..]" / " offset=N" / " device=cuda:0" when not the default.
  std::string str() const;
};
SymShape contiguous_strides(const SymShape& sizes);

// ---- nodes and graphs
struct Output {
  std::string name;
  TensorMeta meta;
};

struct Node {
  OpKind op;
  std::vector<Arg> args;  // one per schema argument, in schema order, defaults filled in
  std::vector<Output> outputs;

  const OpSchema& schema() const { return op_schema(op); }
  const Arg& arg(std::string_view name) const;
  const std::string& name() const { return outputs.at(0).name; }
};

// Size-symbol names that look like the compiler's loop variables (x0, r1, i2, t3) are
// reserved; the verifier, the parser and add_symbol reject them.
bool is_reserved_symbol_name(std::string_view name);

struct SymbolDecl {
  std::string name;
  std::optional<int64_t> hint;  // the size used when `coil run` makes random inputs
  // The values the graph is compiled for (text form: `sym S in [2, inf] = 8`): shape inference
  // simplifies by them (a slice's max(0, S - 1) is S - 1) and a run binding S outside them fails.
  int64_t min = 0;
  std::optional<int64_t> max;
};

class Graph {
 public:
  std::string name = "main";
  std::vector<SymbolDecl> symbols;
  std::string weights_file;  // a .safetensors path, relative to the graph file
  std::vector<Node> nodes;   // topological order
  std::vector<ValueRef> outputs;
  // Positions in `outputs` (ascending) whose strides the compiler picks: a training forward's
  // saved activations, which only the backward graph compiled after it reads (channels-last
  // beside cuDNN's convolutions, schedule/channels_last.h). Executable::output_strides says
  // what they got. The other outputs take their value's declared layout.
  std::vector<size_t> any_layout_outputs;
  bool any_layout(size_t output) const;

  const Node& node(ValueRef v) const { return nodes.at(static_cast<size_t>(v.node)); }
  const TensorMeta& meta(ValueRef v) const;
  const std::string& value_name(ValueRef v) const;
  std::optional<ValueRef> find(std::string_view value_name) const;
  std::vector<int> input_nodes() const;   // nodes with op Input, in order
  std::vector<int> weight_nodes() const;  // nodes with op Weight, in order

  // ---- building. Arguments bind like a Python call of the schema; output metadata is
  // inferred; names are generated when empty. Errors throw coil::Error.
  ValueRef add_input(std::string value_name, DType dtype, SymShape sizes, Device device = {});
  ValueRef add_weight(std::string value_name, std::string key, DType dtype, SymShape sizes, Device device = {});
  ValueRef add_constant(std::string value_name, FloatList values, DType dtype, SymShape sizes);
  SymInt add_symbol(std::string symbol_name, std::optional<int64_t> hint = std::nullopt);
  std::vector<ValueRef> call(OpKind op, std::vector<Arg> positional,
                             std::vector<std::pair<std::string, Arg>> keywords = {},
                             std::vector<std::string> output_names = {});
  ValueRef call1(OpKind op, std::vector<Arg> positional, std::vector<std::pair<std::string, Arg>> keywords = {},
                 std::string output_name = "");

  // Appends a node whose arguments are already bound, with the given output metadata.
  ValueRef append(Node node);
  std::string fresh_name(std::string_view stem) const;

 private:
  // Value name -> where it is defined, kept by append() so that find() and fresh names cost
  // O(1) (100,000 nodes took minutes). It is used while it covers every node; code that pushes
  // onto `nodes` directly makes find() scan until the next append() catches up. Names are never
  // changed after a node is appended.
  std::unordered_map<std::string, ValueRef> names_;
  size_t named_nodes_ = 0;
  std::unordered_map<std::string, int> next_suffix_;  // call()'s own names: where each stem's search resumes
  bool index_covers_all() const { return named_nodes_ == nodes.size(); }
  void index_new_nodes();
  std::string fresh_call_name(const std::string& stem);
};

// Binds positional and keyword arguments to the schema, filling defaults and checking types.
// Throws coil::Error describing the mismatch.
std::vector<Arg> bind_arguments(const OpSchema& schema, std::vector<Arg> positional,
                                std::vector<std::pair<std::string, Arg>> keywords);

// Output metadata of `node` as PyTorch would compute it (shapes, dtypes, view strides).
// Throws coil::Error with the reason; callers add the node's name.
std::vector<TensorMeta> infer_outputs(const Graph& graph, const Node& node);

// Checks the whole graph: arguments against schemas, references, names, declared output
// metadata against inference, outputs. Throws coil::Error naming the first bad node.
void verify(const Graph& graph);

// ---- text form
std::string print_graph(const Graph& graph);
// `source_name` appears in error messages as file:line:col.
Graph parse_graph(std::string_view text, const std::string& source_name = "<string>");
Graph parse_graph_file(const std::string& path);

}  // namespace coil
