// infer_outputs: dispatch by family, plus the shared helpers of infer_util.h.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "arith/simplify.h"
#include "graph/infer_ops.h"
#include "graph/infer_util.h"
#include "graph/symbol_ranges.h"
#include "support/check.h"

namespace coil {

const TensorMeta& ArgReader::tensor(std::string_view name) const {
  const Arg& a = node_.arg(name);
  auto* r = std::get_if<ValueRef>(&a.value);
  if (!r) fail("{}: argument '{}' must be a tensor", op_name(), name);
  return graph_.meta(*r);
}

std::optional<TensorMeta> ArgReader::opt_tensor(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return tensor(name);
}

std::vector<std::optional<TensorMeta>> ArgReader::tensor_list(std::string_view name) const {
  std::vector<std::optional<TensorMeta>> out;
  for (const auto& e : std::get<TensorList>(node_.arg(name).value)) {
    if (e) out.emplace_back(graph_.meta(*e));
    else out.emplace_back(std::nullopt);
  }
  return out;
}

SymInt ArgReader::sym(std::string_view name) const {
  const Arg& a = node_.arg(name);
  if (auto* s = std::get_if<SymInt>(&a.value)) return *s;
  fail("{}: argument '{}' must be an int", op_name(), name);
}

std::optional<SymInt> ArgReader::opt_sym(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return sym(name);
}

int64_t ArgReader::integer(std::string_view name) const {
  SymInt s = sym(name);
  if (!s.is_constant()) fail("{}: argument '{}' must be a constant int, got {}", op_name(), name, s.str());
  return *s.constant();
}

IntList ArgReader::syms(std::string_view name) const {
  const Arg& a = node_.arg(name);
  if (auto* l = std::get_if<IntList>(&a.value)) return *l;
  fail("{}: argument '{}' must be an int list", op_name(), name);
}

std::vector<int64_t> ArgReader::ints(std::string_view name) const {
  std::vector<int64_t> out;
  for (const auto& s : syms(name)) {
    if (!s.is_constant()) fail("{}: argument '{}' must hold constant ints, got {}", op_name(), name, s.str());
    out.push_back(*s.constant());
  }
  return out;
}

std::optional<std::vector<int64_t>> ArgReader::opt_ints(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return ints(name);
}

double ArgReader::real(std::string_view name) const {
  const Arg& a = node_.arg(name);
  if (auto* d = std::get_if<double>(&a.value)) return *d;
  if (auto* s = std::get_if<SymInt>(&a.value); s && s->is_constant()) return static_cast<double>(*s->constant());
  if (auto* b = std::get_if<bool>(&a.value)) return *b ? 1.0 : 0.0;
  fail("{}: argument '{}' must be a number", op_name(), name);
}

bool ArgReader::flag(std::string_view name) const {
  const Arg& a = node_.arg(name);
  if (auto* b = std::get_if<bool>(&a.value)) return *b;
  fail("{}: argument '{}' must be a bool", op_name(), name);
}

std::optional<std::string> ArgReader::opt_str(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return std::get<std::string>(node_.arg(name).value);
}

std::optional<DType> ArgReader::opt_dtype(std::string_view name) const {
  if (is_none(name)) return std::nullopt;
  return std::get<DType>(node_.arg(name).value);
}

std::optional<SymShape> dense_strides(const SymShape& sizes, const SymShape& strides) {
  if (sizes.size() != strides.size()) return std::nullopt;
  for (const auto& s : sizes)
    if (s == SymInt(0)) return contiguous_strides(sizes);
  // Innermost first: the next dim must have the running product as its stride.
  std::vector<size_t> order, rest;
  for (size_t d = sizes.size(); d-- > 0;)
    if (sizes[d] != SymInt(1)) rest.push_back(d);
  SymInt expected = 1;
  while (!rest.empty()) {
    auto it = std::find_if(rest.begin(), rest.end(), [&](size_t d) { return strides[d] == expected; });
    if (it == rest.end()) return std::nullopt;
    order.push_back(*it);
    expected = expected * sizes[*it];
    rest.erase(it);
  }
  SymShape out = strides;
  // Size-1 dims take the stride they would have in front of their right neighbour.
  for (size_t d = sizes.size(); d-- > 0;)
    if (sizes[d] == SymInt(1)) out[d] = d + 1 < sizes.size() ? out[d + 1] * sizes[d + 1] : SymInt(1);
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const std::string& op) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    fail("{}: dimension out of range (expected to be in range of [{}, {}], but got {})", op, -r, r - 1, dim);
  return dim < 0 ? dim + r : dim;
}

SymShape broadcast_shapes(const SymShape& a, const SymShape& b, const std::string& op) {
  size_t n = std::max(a.size(), b.size());
  SymShape out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymInt* x = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const SymInt* y = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!x || !y) {
      out[i] = x ? *x : *y;
      continue;
    }
    if (*x == *y || *y == SymInt(1)) {
      out[i] = *x;
    } else if (*x == SymInt(1)) {
      out[i] = *y;
    } else {
      fail("{}: the size of tensor a ({}) must match the size of tensor b ({}) at non-singleton dimension {} "
           "(shapes {} and {})",
           op, x->str(), y->str(), i, shape_str(a), shape_str(b));
    }
  }
  return out;
}

PromoteOperand operand_of(const TensorMeta& m) {
  return {m.dtype, m.dim() == 0 ? PromoteOperand::Category::zero_dim : PromoteOperand::Category::dimensioned};
}

DType scalar_dtype(const Arg& scalar) {
  if (std::holds_alternative<bool>(scalar.value)) return DType::b8;
  if (std::holds_alternative<SymInt>(scalar.value)) return DType::i64;
  return DType::f32;  // torch.get_default_dtype()
}

void check_scalar_fits(const Arg& scalar, DType dt, const std::string& op) {
  if (dt == DType::b8 || std::holds_alternative<bool>(scalar.value)) return;
  double lo = 0, hi = 0;
  switch (dt) {
    case DType::f64: hi = std::numeric_limits<double>::max(); break;
    case DType::f32: hi = std::numeric_limits<float>::max(); break;
    case DType::f16: hi = 65504.0; break;
    case DType::bf16: hi = 3.3895313892515355e38; break;
    case DType::i64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
    case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
    case DType::i16: lo = -32768.0, hi = 32767.0; break;
    case DType::i8: lo = -128.0, hi = 127.0; break;
    case DType::u8: hi = 255.0; break;
    default: return;
  }
  if (is_float(dt)) lo = -hi;
  bool overflows = false;
  if (auto* s = std::get_if<SymInt>(&scalar.value)) {
    auto v = s->constant();
    if (!v) return;
    // A negative integer wraps into an unsigned dtype (`a - b` as `a + 255 * b`) down to -max.
    if (dt == DType::u8 && *v < 0) overflows = *v < -255;
    else overflows = static_cast<double>(*v) < lo || static_cast<double>(*v) > hi;
  } else if (auto* d = std::get_if<double>(&scalar.value)) {
    if (is_float(dt)) overflows = std::isfinite(*d) && (*d < lo || *d > hi);
    else overflows = std::isnan(*d) || *d < lo || *d > hi;
  }
  if (overflows) fail("{}: value cannot be converted to type {} without overflow", op, dtype_name(dt));
}

void check_fill_value(const Arg& value, const TensorMeta& out, const std::string& op) {
  // ATen fills a one-element tensor through a path that converts f16 and bf16 unchecked.
  bool one = std::all_of(out.sizes.begin(), out.sizes.end(), [](const SymInt& s) { return s == SymInt(1); });
  if (one && (out.dtype == DType::f16 || out.dtype == DType::bf16)) return;
  check_scalar_fits(value, out.dtype, op);
}

PromoteOperand operand_of_scalar(const Arg& scalar) {
  return {scalar_dtype(scalar), PromoteOperand::Category::wrapped};
}

namespace {
using MaybeDType = std::optional<DType>;

MaybeDType promote_skip_none(MaybeDType a, MaybeDType b) {
  if (!a) return b;
  if (!b) return a;
  return promote_types(*a, *b);
}

// c10's combine_categories: the higher-priority class keeps its type unless the lower one
// brings a higher category (float over int over bool).
MaybeDType combine_categories(MaybeDType higher, MaybeDType lower) {
  if (higher && is_float(*higher)) return higher;
  if ((higher && *higher == DType::b8) || (lower && is_float(*lower))) return promote_skip_none(higher, lower);
  if (higher) return higher;
  return lower;
}
}  // namespace

DType result_type(const std::vector<PromoteOperand>& operands) {
  MaybeDType dimensioned, zero_dim, wrapped;
  for (const auto& o : operands) {
    switch (o.category) {
      case PromoteOperand::Category::dimensioned: dimensioned = promote_skip_none(dimensioned, o.dtype); break;
      case PromoteOperand::Category::zero_dim: zero_dim = promote_skip_none(zero_dim, o.dtype); break;
      case PromoteOperand::Category::wrapped: wrapped = promote_skip_none(wrapped, o.dtype); break;
    }
  }
  MaybeDType r = combine_categories(dimensioned, combine_categories(zero_dim, wrapped));
  COIL_CHECK(r.has_value()) << "result_type of no operands";
  return *r;
}

namespace {

std::vector<TensorMeta> infer_by_family(const Graph& graph, const Node& node) {
  ArgReader args(graph, node);
  switch (node.schema().family) {
    case OpFamily::source: fail("{} nodes declare their own type", node.schema().name);
    case OpFamily::creation:
    case OpFamily::copy: return infer_creation(args);
    case OpFamily::unary:
    case OpFamily::binary:
    case OpFamily::ternary: return infer_pointwise(args);
    case OpFamily::reduction: return infer_reduction(args);
    case OpFamily::normalization: return infer_normalization(args);
    case OpFamily::view: return infer_view(args);
    case OpFamily::shape: return infer_shape(args);
    case OpFamily::indexing: return infer_indexing(args);
    case OpFamily::linalg: return infer_linalg(args);
  }
  COIL_CHECK(false) << "unknown op family";
}

}  // namespace

std::vector<TensorMeta> infer_outputs(const Graph& graph, const Node& node) {
  std::vector<TensorMeta> out = infer_by_family(graph, node);
  if (graph.symbols.empty()) return out;
  // Sizes simplified by the symbols' ranges: a slice's max(0, min(1, S)) is 1 where S >= 1.
  const RangeEnv env = symbol_ranges(graph.symbols);
  for (TensorMeta& m : out) {
    for (SymInt& s : m.sizes) s = simplify(s, env);
    for (SymInt& s : m.strides) s = simplify(s, env);
    m.offset = simplify(m.offset, env);
  }
  return out;
}

}  // namespace coil
