// Shared pieces of output-metadata inference: typed argument access, dim wrapping,
// broadcasting and PyTorch's result_type. Private to src/graph.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "coil/graph.h"

namespace coil {

// Typed access to a node's bound arguments; errors name the op and the argument.
class ArgReader {
 public:
  ArgReader(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}
  const Graph& graph() const { return graph_; }
  const Node& node() const { return node_; }
  const std::string& op_name() const { return node_.schema().name; }

  const TensorMeta& tensor(std::string_view name) const;
  std::optional<TensorMeta> opt_tensor(std::string_view name) const;
  std::vector<std::optional<TensorMeta>> tensor_list(std::string_view name) const;
  SymInt sym(std::string_view name) const;
  std::optional<SymInt> opt_sym(std::string_view name) const;
  int64_t integer(std::string_view name) const;  // must be a constant
  std::optional<std::vector<int64_t>> opt_ints(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name) const;  // constants
  IntList syms(std::string_view name) const;
  double real(std::string_view name) const;
  bool flag(std::string_view name) const;
  std::optional<std::string> opt_str(std::string_view name) const;
  std::optional<DType> opt_dtype(std::string_view name) const;
  const Arg& raw(std::string_view name) const { return node_.arg(name); }
  bool is_none(std::string_view name) const { return node_.arg(name).is_none(); }

 private:
  const Graph& graph_;
  const Node& node_;
};

// When `strides` lay `sizes` out densely in some dim order (a permuted contiguous layout),
// returns that layout's strides with size-1 dims normalized; nullopt otherwise. Symbolic
// sizes work: strides are matched as expressions.
std::optional<SymShape> dense_strides(const SymShape& sizes, const SymShape& strides);

// A slice bound as PyTorch clamps it: negative counts from the end, then into [0, size].
SymInt clamp_slice_bound(const SymInt& v, const SymInt& size);

// PyTorch's dim wrapping: -1 is the last dim; a 0-d tensor accepts dims 0 and -1.
int64_t wrap_dim(int64_t dim, int64_t rank, const std::string& op);
SymShape broadcast_shapes(const SymShape& a, const SymShape& b, const std::string& op);

// An operand of PyTorch's type promotion: a dimensioned tensor, a 0-d tensor, or a wrapped
// Python scalar.
struct PromoteOperand {
  enum class Category { dimensioned, zero_dim, wrapped };
  DType dtype;
  Category category;
};
PromoteOperand operand_of(const TensorMeta& m);
PromoteOperand operand_of_scalar(const Arg& scalar);  // bool, int or float
DType result_type(const std::vector<PromoteOperand>& operands);
// The dtype a Python scalar literal has when it makes a tensor: bool, i64 or f32.
DType scalar_dtype(const Arg& scalar);
// PyTorch's checked conversion of a Scalar to a tensor's dtype (c10::overflows), as fill
// values take it: fails when the value cannot be converted without overflow.
void check_scalar_fits(const Arg& scalar, DType dt, const std::string& op);
// The same check as fill_ makes it on a tensor of `out`'s dtype and shape.
void check_fill_value(const Arg& value, const TensorMeta& out, const std::string& op);

// ldexp(self, other) the two ways PyTorch computes it: a float self times 2 to an integer
// exponent exactly (std::ldexp, the exponent taken as an int32), else self * pow(2, other) with
// the power rounded to its own dtype first: pow of a 0-d 2 of self's float dtype (f32 for an
// integer self) and other, or `out` for an integer exponent.
bool ldexp_is_exact(DType self, DType other);
DType ldexp_power_dtype(DType self, DType other, bool other_is_0d, DType out);

}  // namespace coil
