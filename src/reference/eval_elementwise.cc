// Reference evaluation of creation, copy and pointwise ops. Operands are converted to the
// op's computation type first (as PyTorch's TensorIterator does), computed in double, and
// rounded to the output dtype on store.
#include <cmath>
#include <limits>
#include <numbers>

#include "graph/infer_util.h"
#include "reference/eval.h"
#include "reference/eval_special.h"
#include "support/check.h"

namespace coil::ref {

namespace {

#define COIL_FN inline
#include "codegen/philox.h"
#undef COIL_FN

std::vector<Tensor> creation(const NodeEval& e) {
  Tensor out = e.new_output();
  switch (e.op()) {
    case OpKind::Full:
    case OpKind::FullLike: {
      const Arg& fill = e.raw("fill_value");
      bool exact = is_integral(out.dtype(), true) && std::holds_alternative<SymInt>(fill.value);
      double v = e.real("fill_value");
      int64_t iv = exact ? e.integer("fill_value") : 0;
      for_each_index(out.sizes(), [&](const Shape& idx) {
        if (exact) out.store_int(out.element_index(idx), iv);
        else set(out, idx, v);
      });
      return {out};
    }
    case OpKind::ArangeStartStep: {
      if (is_integral(out.dtype(), true)) {
        // ATen converts start and step to the integer accumulation type (int64) first:
        // arange(0.5, 5, 1.5, dtype=i32) is 0, 1, 2.
        auto whole = [&](std::string_view name) {
          const auto& v = e.raw(name).value;
          return std::holds_alternative<SymInt>(v) ? e.integer(name) : static_cast<int64_t>(e.real(name));  // a float, or a bool
        };
        int64_t start = whole("start"), step = whole("step");
        for (int64_t i = 0; i < out.numel(); ++i)
          out.store_int(out.element_index(Shape{i}), static_cast<int64_t>(static_cast<uint64_t>(start) + static_cast<uint64_t>(step) * static_cast<uint64_t>(i)));
        return {out};
      }
      double start = e.real("start"), step = e.real("step");
      for (int64_t i = 0; i < out.numel(); ++i) out.store(out.element_index(Shape{i}), start + static_cast<double>(i) * step);
      return {out};
    }
    case OpKind::PhiloxRandom: {
      const Tensor& seed_tensor = e.tensor("seed");
      const int64_t seed = seed_tensor.load_int(seed_tensor.element_index(Shape{}));
      const int64_t stream = e.integer("stream");
      const bool normal = e.opt_str("distribution") == "normal";
      const DType t = out.dtype();
      const double scale = std::ldexp(1.0, t == DType::f64 ? 53 : t == DType::f32 ? 24 : t == DType::f16 ? 11 : 8);
      int64_t linear = 0;  // row-major over the sizes, as the kernels count
      for_each_index(out.sizes(), [&](const Shape& idx) {
        const double u = philox_uniform(seed, linear, 2 * stream);
        double v = std::floor(u * scale) / scale;
        if (normal) v = std::sqrt(-2.0 * std::log(1.0 - u)) * std::cos(2.0 * std::numbers::pi * philox_uniform(seed, linear, 2 * stream + 1));
        out.store(out.element_index(idx), v);
        ++linear;
      });
      return {out};
    }
    case OpKind::ScalarTensor:
      if (is_integral(out.dtype(), true) && std::holds_alternative<SymInt>(e.raw("s").value)) out.store_int(out.offset(), e.integer("s"));
      else out.store(out.offset(), e.real("s"));
      return {out};
    case OpKind::EmptyMemoryFormat:
    case OpKind::EmptyStrided:
      return {out};  // contents are unspecified; zeros keep runs deterministic
    case OpKind::Clone:
    case OpKind::ToCopy:
      copy_into(out, e.tensor("self"));
      return {out};
    case OpKind::Copy:
      copy_into(out, e.tensor("src"));
      return {out};
    default: break;
  }
  COIL_CHECK(false) << "no creation evaluator for " << e.op_name();
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Unary ops in a floating computation type (integer and bool ones take unary_int).
double unary(const NodeEval& e, double x) {
  switch (e.op()) {
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Neg: return -x;
    case OpKind::Exp: return std::exp(x);
    case OpKind::Expm1: return std::expm1(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Log1p: return std::log1p(x);
    case OpKind::Log2: return std::log2(x);
    case OpKind::Log10: return std::log10(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return 1.0 / std::sqrt(x);
    case OpKind::Reciprocal: return 1.0 / x;
    case OpKind::Sin: return std::sin(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Tan: return std::tan(x);
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Asin: return std::asin(x);
    case OpKind::Acos: return std::acos(x);
    case OpKind::Atan: return std::atan(x);
    case OpKind::Asinh: return std::asinh(x);
    case OpKind::Acosh: return std::acosh(x);
    case OpKind::Atanh: return std::atanh(x);
    case OpKind::Sinh: return std::sinh(x);
    case OpKind::Cosh: return std::cosh(x);
    case OpKind::Sigmoid: return sigmoid(x);
    case OpKind::Erf: return std::erf(x);
    case OpKind::Relu: return std::isnan(x) ? x : std::max(x, 0.0);
    case OpKind::Gelu: {
      if (*e.opt_str("approximate") == "tanh") {
        double k = std::sqrt(2.0 / std::numbers::pi);
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    }
    case OpKind::Silu: return x * sigmoid(x);
    case OpKind::LeakyRelu: return x > 0 ? x : x * e.real("negative_slope");
    case OpKind::Elu: {
      double alpha = e.real("alpha"), scale = e.real("scale"), input_scale = e.real("input_scale");
      return x > 0 ? scale * x : scale * alpha * std::expm1(x * input_scale);
    }
    case OpKind::Hardtanh: {
      if (std::isnan(x)) return x;
      return std::min(std::max(x, e.real("min_val")), e.real("max_val"));
    }
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Round: return std::nearbyint(x);  // half to even
    case OpKind::Trunc: return std::trunc(x);
    case OpKind::Sign: return static_cast<double>((x > 0) - (x < 0));
    case OpKind::Isnan: return std::isnan(x);
    case OpKind::Isinf: return std::isinf(x);
    case OpKind::LogicalNot: return x == 0;
    default: break;
  }
  if (auto r = special_unary(e, x)) return *r;
  COIL_CHECK(false) << "no unary evaluator for " << e.op_name();
}

int64_t checked_divisor(int64_t b) {
  if (b == 0) fail("integer division by zero (ZeroDivisionError)");
  return b;
}

int64_t floor_div_int(int64_t a, int64_t b) {
  checked_divisor(b);
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // INT64_MIN / -1 wraps
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Floor division of floats that stays exact where a/b rounds across an integer.
double floor_div_real(double a, double b) {
  if (b == 0) return a / b;
  double m = std::fmod(a, b);
  double d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return std::copysign(0.0, a / b);
  double f = std::floor(d);
  return d - f > 0.5 ? f + 1 : f;
}

double remainder_real(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Integer powers as ATen's powi: a negative exponent gives 0 except for bases 1 and -1 (a
// negative Scalar exponent is rejected by inference).
int64_t ipow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return exp % 2 == 0 ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);  // unsigned: wraps like the kernels do
  while (exp) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(result);
}

// Binary ops in a floating computation type (integer and bool ones take binary_int).
double binary(const NodeEval& e, double a, double b, DType compute) {
  switch (e.op()) {
    // alpha is converted to the computation type first (a bool alpha of -1 is true).
    case OpKind::AddTensor: case OpKind::AddScalar: return a + opmath_round(e.real("alpha"), compute) * b;
    case OpKind::SubTensor: case OpKind::SubScalar: return a - opmath_round(e.real("alpha"), compute) * b;
    case OpKind::RsubScalar: return b - opmath_round(e.real("alpha"), compute) * a;
    case OpKind::MulTensor: case OpKind::MulScalar: return a * b;
    case OpKind::DivTensor: case OpKind::DivScalar: return a / b;
    case OpKind::DivTensorMode: case OpKind::DivScalarMode: {
      auto mode = e.opt_str("rounding_mode");
      if (!mode) return a / b;
      return *mode == "trunc" ? std::trunc(a / b) : floor_div_real(a, b);
    }
    case OpKind::PowTensorTensor: case OpKind::PowTensorScalar: case OpKind::PowScalar:
      // ATen computes a Scalar exponent of +-0.5 as sqrt / rsqrt: pow(-inf, 0.5) is then nan.
      if (e.op() == OpKind::PowTensorScalar && std::fabs(b) == 0.5) return b > 0 ? std::sqrt(a) : 1.0 / std::sqrt(a);
      return std::pow(a, b);
    case OpKind::RemainderTensor: case OpKind::RemainderScalar: case OpKind::RemainderScalarTensor: return remainder_real(a, b);
    case OpKind::FmodTensor: case OpKind::FmodScalar: return std::fmod(a, b);
    case OpKind::Maximum: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case OpKind::Minimum: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case OpKind::Atan2: return std::atan2(a, b);
    case OpKind::EqTensor: case OpKind::EqScalar: return a == b;
    case OpKind::NeTensor: case OpKind::NeScalar: return a != b;
    case OpKind::LtTensor: case OpKind::LtScalar: return a < b;
    case OpKind::LeTensor: case OpKind::LeScalar: return a <= b;
    case OpKind::GtTensor: case OpKind::GtScalar: return a > b;
    case OpKind::GeTensor: case OpKind::GeScalar: return a >= b;
    case OpKind::LogicalAnd: return (a != 0) && (b != 0);
    case OpKind::LogicalOr: return (a != 0) || (b != 0);
    case OpKind::LogicalXor: return (a != 0) != (b != 0);
    default: break;
  }
  if (auto r = special_binary(e.op(), a, b, compute)) return *r;
  COIL_CHECK(false) << "no floating-point evaluator for " << e.op_name() << " in " << dtype_name(compute);
}

// The dtype operands are converted to before computing: the float output type of ops that
// turn integers into floats, else PyTorch's result_type of the operands (0-d tensors and
// scalars only count when they are of a higher category).
DType compute_dtype(const NodeEval& e, const std::vector<PromoteOperand>& operands) {
  DType out = e.out_dtype();
  if (is_float(out) || operands.empty()) return out;
  return result_type(operands);
}

// ---- the integer path: operands and results as exact int64 with two's-complement wrap-around.
int64_t add_wrap(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t sub_wrap(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t mul_wrap(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

int64_t int_scalar(const NodeEval& e, std::string_view name) {
  const Arg& a = e.raw(name);
  if (auto* b = std::get_if<bool>(&a.value)) return *b ? 1 : 0;
  return e.integer(name);
}

int64_t unary_int(const NodeEval& e, int64_t x, DType t) {
  switch (e.op()) {
    case OpKind::Abs: return x < 0 ? sub_wrap(0, x) : x;
    case OpKind::Neg: return sub_wrap(0, x);
    case OpKind::Relu: return std::max<int64_t>(x, 0);
    case OpKind::Hardtanh:
      return std::min(std::max(x, static_cast<int64_t>(e.real("min_val"))), static_cast<int64_t>(e.real("max_val")));
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::Trunc: return x;
    case OpKind::Sign: return t == DType::b8 ? x : (x > 0) - (x < 0);
    case OpKind::Isnan: case OpKind::Isinf: return 0;
    case OpKind::LogicalNot: return x == 0;
    case OpKind::BitwiseNot: return t == DType::b8 ? x == 0 : ~x;
    default: break;
  }
  if (auto r = special_unary_int(e.op(), x, t)) return *r;
  COIL_CHECK(false) << "no integer evaluator for " << e.op_name();
}

int64_t binary_int(const NodeEval& e, int64_t a, int64_t b, DType t) {
  auto alpha = [&] { return wrap_int(int_scalar(e, "alpha"), t); };
  switch (e.op()) {
    case OpKind::AddTensor: case OpKind::AddScalar: return add_wrap(a, mul_wrap(alpha(), b));
    case OpKind::SubTensor: case OpKind::SubScalar: return sub_wrap(a, mul_wrap(alpha(), b));
    case OpKind::RsubScalar: return sub_wrap(b, mul_wrap(alpha(), a));
    case OpKind::MulTensor: case OpKind::MulScalar: return mul_wrap(a, b);
    case OpKind::DivTensorMode: case OpKind::DivScalarMode: {
      checked_divisor(b);
      if (*e.opt_str("rounding_mode") == "floor") return floor_div_int(a, b);
      return a == std::numeric_limits<int64_t>::min() && b == -1 ? a : a / b;
    }
    case OpKind::PowTensorTensor: case OpKind::PowTensorScalar: case OpKind::PowScalar: return ipow(a, b);
    case OpKind::RemainderTensor: case OpKind::RemainderScalar: case OpKind::RemainderScalarTensor:
      checked_divisor(b);
      return b == -1 ? 0 : sub_wrap(a, mul_wrap(floor_div_int(a, b), b));
    case OpKind::FmodTensor: case OpKind::FmodScalar: checked_divisor(b); return b == -1 ? 0 : a % b;
    case OpKind::Maximum: return std::max(a, b);
    case OpKind::Minimum: return std::min(a, b);
    case OpKind::EqTensor: case OpKind::EqScalar: return a == b;
    case OpKind::NeTensor: case OpKind::NeScalar: return a != b;
    case OpKind::LtTensor: case OpKind::LtScalar: return a < b;
    case OpKind::LeTensor: case OpKind::LeScalar: return a <= b;
    case OpKind::GtTensor: case OpKind::GtScalar: return a > b;
    case OpKind::GeTensor: case OpKind::GeScalar: return a >= b;
    case OpKind::LogicalAnd: return (a != 0) && (b != 0);
    case OpKind::LogicalOr: return (a != 0) || (b != 0);
    case OpKind::LogicalXor: return (a != 0) != (b != 0);
    case OpKind::BitwiseAndTensor: case OpKind::BitwiseAndScalar: case OpKind::BitwiseAndScalarTensor: return a & b;
    case OpKind::BitwiseOrTensor: case OpKind::BitwiseOrScalar: case OpKind::BitwiseOrScalarTensor: return a | b;
    case OpKind::BitwiseXorTensor: case OpKind::BitwiseXorScalar: case OpKind::BitwiseXorScalarTensor: return a ^ b;
    default: break;
  }
  if (auto r = special_binary_int(e.op(), a, b, t)) return *r;
  COIL_CHECK(false) << "no integer evaluator for " << e.op_name();
}

std::vector<Tensor> pointwise(const NodeEval& e) {
  if (e.op() == OpKind::FrexpTensor) return eval_frexp(e);
  if (e.op() == OpKind::LdexpTensor) return eval_ldexp(e);
  Tensor out = e.new_output();
  const OpSchema& schema = e.node().schema();
  // Operands in schema order: tensors broadcast to the output, scalars as constants.
  struct Operand {
    std::optional<Tensor> tensor;
    double scalar = 0;
    bool present = true;  // false for an absent clamp bound
  };
  std::vector<Operand> operands;
  std::optional<Tensor> condition;
  std::vector<PromoteOperand> promote;
  for (size_t i = 0; i < schema.args.size(); ++i) {
    const ArgSchema& s = schema.args[i];
    if (s.type == ArgType::Tensor) {
      auto t = e.opt_tensor(s.name);
      if (s.name == "condition") {
        condition = broadcast_to(*t, out.sizes());
        continue;
      }
      if (!t) {
        operands.push_back({std::nullopt, NAN, false});  // an absent clamp bound
        continue;
      }
      promote.push_back({t->dtype(), t->dim() == 0 ? PromoteOperand::Category::zero_dim : PromoteOperand::Category::dimensioned});
      operands.push_back({broadcast_to(*t, out.sizes()), 0});
    } else if (s.type == ArgType::Scalar && s.name != "alpha" && s.name != "value" && schema.family != OpFamily::unary) {
      auto v = e.opt_real(s.name);
      if (v) promote.push_back(operand_of_scalar(e.raw(s.name)));
      operands.push_back({std::nullopt, v.value_or(NAN), v.has_value()});
    }
  }
  DType compute = compute_dtype(e, promote);
  if (schema.family == OpFamily::unary) compute = is_float(e.out_dtype()) ? e.out_dtype() : promote[0].dtype;
  if (is_integral(compute, true)) {
    // Exact int64 arithmetic: integer scalars are read exactly, every operand is first
    // wrapped to the computation type, results wrap when stored.
    std::vector<std::optional<int64_t>> iscalar(operands.size());
    for (size_t k = 0, a = 0; a < schema.args.size(); ++a) {
      const ArgSchema& s = schema.args[a];
      if (s.name == "condition") continue;
      bool is_operand = s.type == ArgType::Tensor || (s.type == ArgType::Scalar && s.name != "alpha" && s.name != "value" && schema.family != OpFamily::unary);
      if (!is_operand) continue;
      if (s.type == ArgType::Scalar && !e.is_none(s.name)) iscalar[k] = wrap_int(int_scalar(e, s.name), compute);
      ++k;
    }
    std::vector<std::optional<int64_t>> v(operands.size());
    for_each_index(out.sizes(), [&](const Shape& idx) {
      for (size_t k = 0; k < operands.size(); ++k) {
        const auto& o = operands[k];
        v[k] = o.tensor ? std::optional<int64_t>(wrap_int(o.tensor->load_int(o.tensor->element_index(idx)), compute)) : iscalar[k];
      }
      int64_t r;
      switch (schema.family) {
        case OpFamily::unary: r = unary_int(e, *v[0], compute); break;
        case OpFamily::binary: r = binary_int(e, *v[0], *v[1], compute); break;
        default:
          if (condition) {
            r = at(*condition, idx) != 0 ? *v[0] : *v[1];
          } else if (e.op() == OpKind::Addcmul) {  // addcdiv of integers is refused
            int64_t value = wrap_int(std::holds_alternative<double>(e.raw("value").value) ? static_cast<int64_t>(e.real("value"))
                                                                                         : int_scalar(e, "value"), compute);
            r = wrap_int(add_wrap(*v[0], mul_wrap(mul_wrap(value, *v[1]), *v[2])), compute);
          } else {  // clamp: lower bound first, then upper
            r = *v[0];
            if (v[1]) r = std::max(r, *v[1]);
            if (v[2]) r = std::min(r, *v[2]);
          }
      }
      out.store_int(out.element_index(idx), r);
    });
    return {out};
  }
  // Comparisons, remainder and fmod see their operands in the computation dtype itself (a
  // float scalar against an f16 tensor becomes f16); arithmetic keeps scalars in f32.
  bool in_dtype = out.dtype() == DType::b8 || e.op() == OpKind::RemainderTensor || e.op() == OpKind::RemainderScalar ||
                  e.op() == OpKind::RemainderScalarTensor || e.op() == OpKind::FmodTensor || e.op() == OpKind::FmodScalar;
  std::vector<double> x(operands.size());
  for_each_index(out.sizes(), [&](const Shape& idx) {
    for (size_t k = 0; k < operands.size(); ++k) {
      const auto& o = operands[k];
      double v = o.tensor ? at(*o.tensor, idx) : o.scalar;
      // NaN stays as it is, sign included (signbit and copysign read it; f16 rounding would not keep it).
      x[k] = std::isnan(v) ? v : (in_dtype ? round_to_dtype(v, compute) : opmath_round(v, compute));
    }
    double r;
    switch (schema.family) {
      case OpFamily::unary: r = unary(e, x[0]); break;
      case OpFamily::binary: r = binary(e, x[0], x[1], compute); break;
      default:
        if (condition) {
          r = at(*condition, idx) != 0 ? x[0] : x[1];
        } else if (e.op() == OpKind::Addcmul || e.op() == OpKind::Addcdiv) {
          // Computed in double and rounded once (PyTorch: in f32 for f16/bf16, rounded once).
          double value = opmath_round(e.real("value"), compute);
          r = x[0] + (e.op() == OpKind::Addcmul ? value * x[1] * x[2] : value * x[1] / x[2]);
        } else {  // clamp: lower bound first, then upper; NaN in the input propagates
          r = x[0];
          // A NaN bound: clamp.Tensor propagates it; clamp with two Scalar bounds gives NaN,
          // with one it leaves the input as it is (ATen's kernels).
          bool nan_bound = (operands[1].present && std::isnan(x[1])) || (operands[2].present && std::isnan(x[2]));
          bool both = operands[1].present && operands[2].present;
          if (nan_bound && (e.op() == OpKind::ClampTensor || both)) r = NAN;
          if (!std::isnan(r) && !std::isnan(x[1])) r = std::max(r, x[1]);
          if (!std::isnan(r) && !std::isnan(x[2])) r = std::min(r, x[2]);
        }
    }
    set(out, idx, r);
  });
  return {out};
}

}  // namespace

std::vector<Tensor> eval_creation(const NodeEval& e) { return creation(e); }
std::vector<Tensor> eval_pointwise(const NodeEval& e) { return pointwise(e); }

}  // namespace coil::ref
