// The interpreter's per-node context and the per-family evaluators. Private to src/reference.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coil/graph.h"
#include "coil/reference.h"

namespace coil::ref {

// A node being evaluated: concrete argument values and the declared output metadata with
// every size symbol bound.
class NodeEval {
 public:
  NodeEval(const Graph& g, const Node& n, const std::vector<std::vector<Tensor>>& values,
           const std::map<std::string, int64_t>& symbols)
      : graph_(g), node_(n), values_(values), symbols_(symbols) {}

  const Node& node() const { return node_; }
  OpKind op() const { return node_.op; }
  const std::string& op_name() const { return node_.schema().name; }

  const Tensor& tensor(std::string_view name) const;
  std::optional<Tensor> opt_tensor(std::string_view name) const;
  std::vector<std::optional<Tensor>> tensor_list(std::string_view name) const;
  int64_t integer(std::string_view name) const;
  std::optional<int64_t> opt_integer(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name) const;
  std::optional<std::vector<int64_t>> opt_ints(std::string_view name) const;
  double real(std::string_view name) const;  // float or Scalar
  std::optional<double> opt_real(std::string_view name) const;
  bool flag(std::string_view name) const;
  std::optional<std::string> opt_str(std::string_view name) const;
  bool is_none(std::string_view name) const { return node_.arg(name).is_none(); }
  const Arg& raw(std::string_view name) const { return node_.arg(name); }

  size_t num_outputs() const { return node_.outputs.size(); }
  DType out_dtype(size_t i = 0) const { return node_.outputs.at(i).meta.dtype; }
  Shape out_sizes(size_t i = 0) const;
  // A zero-filled tensor with output i's declared dtype, sizes and strides.
  Tensor new_output(size_t i = 0) const;
  int64_t eval(const SymInt& s) const { return s.eval(symbols_); }

 private:
  const Graph& graph_;
  const Node& node_;
  const std::vector<std::vector<Tensor>>& values_;
  const std::map<std::string, int64_t>& symbols_;
};

std::vector<Tensor> eval_creation(const NodeEval& e);  // creation and copy
std::vector<Tensor> eval_pointwise(const NodeEval& e);  // unary, binary, ternary
std::vector<Tensor> eval_reduction(const NodeEval& e);
std::vector<Tensor> eval_normalization(const NodeEval& e);
std::vector<Tensor> eval_view(const NodeEval& e);
std::vector<Tensor> eval_shape(const NodeEval& e);
std::vector<Tensor> eval_indexing(const NodeEval& e);
std::vector<Tensor> eval_linalg(const NodeEval& e);
std::vector<Tensor> eval_pooling(const NodeEval& e);  // linalg's pooling ops

// ---- helpers shared by the evaluators
// A view of `t` broadcast to `sizes` (stride 0 on broadcast dims).
Tensor broadcast_to(const Tensor& t, const Shape& sizes);
// Every multi-index of `sizes` in row-major order.
void for_each_index(const Shape& sizes, const std::function<void(const Shape&)>& fn);
// Copies values of `src` (broadcast to dst's shape) into `dst`, converting dtypes.
void copy_into(const Tensor& dst, const Tensor& src);
int64_t wrap(int64_t dim, int64_t rank);
// Reads element `idx` as double, or as exact int64 for integer dtypes.
inline double at(const Tensor& t, const Shape& idx) { return t.load(t.element_index(idx)); }
inline void set(const Tensor& t, const Shape& idx, double v) { t.store(t.element_index(idx), v); }
// Copies one element, exactly for integers (no trip through double).
inline void copy_element(const Tensor& dst, const Shape& di, const Tensor& src, const Shape& si) {
  if (is_integral(dst.dtype(), true) && is_integral(src.dtype(), true)) {
    dst.store_int(dst.element_index(di), src.load_int(src.element_index(si)));
  } else {
    dst.store(dst.element_index(di), src.load(src.element_index(si)));
  }
}
// Two's-complement wrap-around of `v` to the width of integer dtype `t` (bool: != 0).
int64_t wrap_int(int64_t v, DType t);
// An element's storage index when `idx` is a prefix-compatible multi-index.
double opmath_round(double v, DType dtype);  // f16/bf16 compute in f32, others in their type

}  // namespace coil::ref
