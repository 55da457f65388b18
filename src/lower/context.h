// The state of one lowering run and the helpers every op lowering uses. Private to src/lower.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "lower/lower.h"

namespace coil::lowering {

using loop::Expr;
using loop::ExprRef;
using loop::LoopOp;

// A graph value during lowering: realized in a buffer (loads follow `meta`'s strides and
// offset into it), or an inline body over the index symbols i0, i1, ...
struct Value {
  TensorMeta meta;
  int buffer = -1;
  ExprRef body;
  bool realized() const { return buffer >= 0; }
};

std::string index_var(int i);  // "i0"
SymShape index_vars(size_t rank);

class Context {
 public:
  explicit Context(const Graph& g) : graph(g), values(g.nodes.size()) {}

  const Graph& graph;
  loop::Program program;
  std::vector<std::vector<Value>> values;
  std::map<std::pair<int, int>, int> uses;  // (node, output) -> consumer count

  Value& value(ValueRef r) { return values[static_cast<size_t>(r.node)][static_cast<size_t>(r.output)]; }
  // The element of `v` at `index` (one entry per dim of v).
  ExprRef at(const Value& v, const SymShape& index) const;
  // The element of `v` at an index some of whose entries are data-dependent i64 expressions
  // (entries of kind `index` are static), plus `extra` elements when given. `v` is realized
  // (as `name`) first when the index is data-dependent.
  ExprRef at_dynamic(Value& v, const std::vector<ExprRef>& index, const std::string& name, ExprRef extra = nullptr);
  // A new buffer with the given layout; returns its id.
  int add_buffer(std::string name, loop::Buffer::Role role, const TensorMeta& meta);
  // Stores `v` into a new buffer laid out as `v.meta` with one pointwise kernel; `v` becomes
  // realized. No-op when already realized.
  void realize(Value& v, const std::string& name, loop::Buffer::Role role = loop::Buffer::Role::temporary);
  // A pointwise kernel writing `body` (over i*) into `buffer` laid out as `meta`.
  void emit_pointwise(const std::string& name, const ExprRef& body, int buffer, const TensorMeta& meta);
  std::string kernel_name(const std::string& stem);

 private:
  int kernel_count_ = 0;
};

// Per family: each returns the node's output values.
std::vector<Value> lower_pointwise(Context& c, const Node& n);   // unary, binary, ternary, creation, copy
std::vector<Value> lower_view(Context& c, const Node& n);        // views and cat/pad/flip/repeat
std::vector<Value> lower_reduction(Context& c, const Node& n);   // reductions and normalizations
std::vector<Value> lower_linalg(Context& c, const Node& n);      // matrix products as extern calls
std::vector<Value> lower_indexing(Context& c, const Node& n);    // gathers, scatters, embedding

// Whether `n` rearranges its input's elements without changing their number (permute, view,
// transpose, squeeze...): over a realized input it is a strided view of the same storage.
bool rearranging_view(const Context& c, const Node& n);
// Where `r` is a chain of such views over a value not yet realized, realizes that value and
// lowers the chain again as views of it (the same bytes the chain's last view would be stored
// as, in its traced strides), so that every reader shares one buffer: a linear layer's backward
// stored dY once for dX's product and again as dY^T for dW's. Else nothing.
void realize_through_views(Context& c, ValueRef r);

// Helpers shared by the families.
ExprRef cast(const ExprRef& e, DType dtype);
DType opmath(DType t);  // f16/bf16 compute in f32
ExprRef scalar(const Arg& a, DType dtype);
// Output index -> the index of an operand broadcast to it.
SymShape broadcast_index(const SymShape& out_index, const SymShape& out_sizes, const SymShape& operand_sizes);
SymInt element_offset(const TensorMeta& m, const SymShape& index);

}  // namespace coil::lowering
