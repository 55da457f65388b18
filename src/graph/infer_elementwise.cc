// Inference for creation, copy and pointwise ops: PyTorch's type promotion and broadcasting.
#include <algorithm>
#include <cmath>

#include "graph/infer_ops.h"
#include "support/check.h"

namespace coil {

namespace {

// Strides that `preserve_format` keeps: the input's, when they are a permutation of a dense
// layout; otherwise contiguous.
SymShape preserved_strides(const TensorMeta& m) {
  return dense_strides(m.sizes, m.strides).value_or(contiguous_strides(m.sizes));
}

SymShape channels_last_strides(const SymShape& sizes, const std::string& op) {
  if (sizes.size() != 4) fail("{}: channels_last needs a 4-d tensor, got {} dims", op, sizes.size());
  // NHWC: C is innermost, then W, H, N.
  SymShape s(4);
  s[1] = 1;
  s[3] = sizes[1];
  s[2] = sizes[1] * sizes[3];
  s[0] = sizes[1] * sizes[3] * sizes[2];
  return s;
}

TensorMeta with_format(TensorMeta m, const TensorMeta* like, const std::optional<std::string>& format,
                       const std::string& op) {
  std::string f = format.value_or("preserve_format");
  if (f == "preserve_format" && like) m.strides = preserved_strides(*like);
  else if (f == "channels_last") m.strides = channels_last_strides(m.sizes, op);
  else if (f == "channels_last_3d") fail("{}: channels_last_3d is not supported", op);
  else m.strides = contiguous_strides(m.sizes);
  return m;
}

Device device_or(const ArgReader& a, Device fallback) {
  if (a.is_none("device")) return fallback;
  return std::get<Device>(a.raw("device").value);
}

SymShape non_negative(SymShape sizes, const std::string& op) {
  for (const auto& s : sizes)
    if (s.is_constant() && *s.constant() < 0) fail("{}: negative dimension {}", op, *s.constant());
  return sizes;
}

SymInt arange_length(const ArgReader& a) {
  const Arg& start = a.raw("start");
  const Arg& end = a.raw("end");
  const Arg& step = a.raw("step");
  auto as_const = [](const Arg& x) -> std::optional<double> {
    if (auto* b = std::get_if<bool>(&x.value)) return *b ? 1.0 : 0.0;  // a bool bound counts as an int
    if (auto* s = std::get_if<SymInt>(&x.value)) {
      if (!s->is_constant()) return std::nullopt;
      return static_cast<double>(*s->constant());
    }
    if (auto* d = std::get_if<double>(&x.value)) return *d;
    return std::nullopt;
  };
  auto s0 = as_const(start), s1 = as_const(end), st = as_const(step);
  if (st && *st == 0) fail("{}: step must be nonzero", a.op_name());
  if (s0 && s1 && st) {
    double n = std::ceil((*s1 - *s0) / *st);
    if (!std::isfinite(n)) fail("{}: unsupported range {} to {} with step {}", a.op_name(), *s0, *s1, *st);
    if (n < 0) fail("{}: upper bound and larger bound inconsistent with step sign", a.op_name());
    if (n >= 9.2e18) fail("{}: the range {} to {} with step {} is too large ({} elements)", a.op_name(), *s0, *s1, *st, n);
    return static_cast<int64_t>(n);
  }
  // A symbolic end with constant integer start and positive step: ceil((end - start) / step).
  auto* e = std::get_if<SymInt>(&end.value);
  auto* b = std::get_if<SymInt>(&start.value);
  auto* t = std::get_if<SymInt>(&step.value);
  if (e && b && t && b->is_constant() && t->is_constant() && *t->constant() > 0)
    return floordiv(*e - *b + *t - 1, *t);
  fail("{}: start and step must be constants", a.op_name());
}

std::vector<TensorMeta> creation(const ArgReader& a) {
  const std::string& op = a.op_name();
  switch (a.node().op) {
    case OpKind::Full: {
      DType dt = a.opt_dtype("dtype").value_or(scalar_dtype(a.raw("fill_value")));
      TensorMeta m = TensorMeta::contiguous(dt, non_negative(a.syms("size"), op), device_or(a, {}));
      check_fill_value(a.raw("fill_value"), m, op);
      return {m};
    }
    case OpKind::FullLike: {
      const TensorMeta& self = a.tensor("self");
      TensorMeta m = TensorMeta::contiguous(a.opt_dtype("dtype").value_or(self.dtype), self.sizes, device_or(a, self.device));
      check_fill_value(a.raw("fill_value"), m, op);
      return {with_format(m, &self, a.opt_str("memory_format"), op)};
    }
    case OpKind::ArangeStartStep: {
      DType dt = DType::i64;
      for (auto name : {"start", "end", "step"})
        if (std::holds_alternative<double>(a.raw(name).value)) dt = DType::f32;
      dt = a.opt_dtype("dtype").value_or(dt);
      if (dt == DType::b8) fail("{}: not implemented for bool", op);
      return {TensorMeta::contiguous(dt, {arange_length(a)}, device_or(a, {}))};
    }
    case OpKind::PhiloxRandom: {
      const TensorMeta& seed = a.tensor("seed");
      if (seed.dtype != DType::i64 || seed.dim() != 0) fail("{}: the seed must be a 0-d int64 tensor, not {}", op, seed.str());
      const DType dt = a.opt_dtype("dtype").value_or(DType::f32);
      if (!is_float(dt)) fail("{}: random values of dtype {} (floating dtypes only)", op, dtype_name(dt));
      const std::string distribution = a.opt_str("distribution").value_or("");
      if (distribution != "uniform" && distribution != "normal")
        fail("{}: distribution '{}' (uniform or normal)", op, distribution);
      if (a.integer("stream") < 0 || a.integer("stream") >= (int64_t{1} << 52)) fail("{}: stream {} out of range", op, a.integer("stream"));
      return {TensorMeta::contiguous(dt, non_negative(a.syms("size"), op), seed.device)};
    }
    case OpKind::ScalarTensor: {
      TensorMeta m = TensorMeta::contiguous(a.opt_dtype("dtype").value_or(DType::f32), {}, device_or(a, {}));
      check_fill_value(a.raw("s"), m, op);
      return {m};
    }
    case OpKind::EmptyMemoryFormat: {
      TensorMeta m = TensorMeta::contiguous(a.opt_dtype("dtype").value_or(DType::f32), non_negative(a.syms("size"), op), device_or(a, {}));
      if (a.opt_str("memory_format") == "preserve_format") fail("{}: unsupported memory format preserve_format", op);
      return {with_format(m, nullptr, a.opt_str("memory_format"), op)};
    }
    case OpKind::EmptyStrided: {
      TensorMeta m = TensorMeta::contiguous(a.opt_dtype("dtype").value_or(DType::f32), non_negative(a.syms("size"), op), device_or(a, {}));
      m.strides = a.syms("stride");
      if (m.strides.size() != m.sizes.size())
        fail("{}: mismatch in length of strides ({}) and shape ({})", op, m.strides.size(), m.sizes.size());
      return {m};
    }
    case OpKind::Clone: {
      const TensorMeta& self = a.tensor("self");
      return {with_format(TensorMeta::contiguous(self.dtype, self.sizes, self.device), &self, a.opt_str("memory_format"), op)};
    }
    case OpKind::ToCopy: {
      const TensorMeta& self = a.tensor("self");
      TensorMeta m = TensorMeta::contiguous(a.opt_dtype("dtype").value_or(self.dtype), self.sizes, device_or(a, self.device));
      return {with_format(m, &self, a.opt_str("memory_format"), op)};
    }
    case OpKind::Copy: {
      const TensorMeta& self = a.tensor("self");
      const TensorMeta& src = a.tensor("src");
      if (broadcast_shapes(self.sizes, src.sizes, op) != self.sizes)
        fail("{}: src of shape {} cannot be broadcast to self of shape {}", op, shape_str(src.sizes),
             shape_str(self.sizes));
      return {with_format(TensorMeta::contiguous(self.dtype, self.sizes, self.device), &self, std::nullopt, op)};
    }
    default: break;
  }
  COIL_CHECK(false) << "no creation rule for " << op;
}

// int_to_float_32_64: as int_to_float, and f16/bf16 are refused as PyTorch's kernels refuse them.
enum class UnaryRule { int_to_float, int_to_float_32_64, same, same_no_bool, float_only, to_bool, integral_only };

UnaryRule unary_rule(OpKind op) {
  switch (op) {
    case OpKind::Exp: case OpKind::Expm1: case OpKind::Log: case OpKind::Log1p: case OpKind::Log2:
    case OpKind::Log10: case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Reciprocal: case OpKind::Sin:
    case OpKind::Cos: case OpKind::Tan: case OpKind::Tanh: case OpKind::Sigmoid: case OpKind::Erf:
    case OpKind::Asin: case OpKind::Acos: case OpKind::Atan: case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh:
    case OpKind::Sinh: case OpKind::Cosh: case OpKind::Exp2: case OpKind::Erfc: case OpKind::Erfinv:
    case OpKind::Lgamma: case OpKind::Digamma: case OpKind::I0: case OpKind::SpecialI0e: case OpKind::SpecialI1:
    case OpKind::SpecialI1e: case OpKind::Polygamma:
      return UnaryRule::int_to_float;
    case OpKind::SpecialErfcx: case OpKind::SpecialBesselJ0: case OpKind::SpecialBesselJ1: case OpKind::SpecialBesselY0:
    case OpKind::SpecialBesselY1: case OpKind::SpecialModifiedBesselI0: case OpKind::SpecialModifiedBesselI1:
    case OpKind::SpecialModifiedBesselK0: case OpKind::SpecialModifiedBesselK1: case OpKind::SpecialScaledModifiedBesselK0:
    case OpKind::SpecialScaledModifiedBesselK1: case OpKind::SpecialSphericalBesselJ0: case OpKind::SpecialAiryAi:
    case OpKind::SpecialNdtri:
      return UnaryRule::int_to_float_32_64;
    case OpKind::Abs: case OpKind::Neg: case OpKind::Relu: case OpKind::Hardtanh: case OpKind::Floor:
    case OpKind::Ceil: case OpKind::Round: case OpKind::Trunc:
      return UnaryRule::same_no_bool;
    case OpKind::Gelu: case OpKind::Silu: case OpKind::Elu: case OpKind::LeakyRelu: case OpKind::RoundDecimals:
    case OpKind::FrexpTensor:
      return UnaryRule::float_only;
    case OpKind::Isnan: case OpKind::Isinf: case OpKind::LogicalNot: case OpKind::Signbit:
      return UnaryRule::to_bool;
    case OpKind::BitwiseNot:
      return UnaryRule::integral_only;
    default:
      return UnaryRule::same;  // sign
  }
}

DType unary_dtype(const ArgReader& a, DType in) {
  const std::string& op = a.op_name();
  if (a.node().op == OpKind::Polygamma && a.integer("n") < 0) fail("{}: polygamma(n, x) does not support negative n", op);
  switch (unary_rule(a.node().op)) {
    case UnaryRule::int_to_float: return is_integral(in, true) ? DType::f32 : in;
    case UnaryRule::int_to_float_32_64:
      if (in == DType::f16 || in == DType::bf16) fail("{}: not implemented for {}", op, dtype_name(in));
      return is_integral(in, true) ? DType::f32 : in;
    case UnaryRule::same: return in;
    case UnaryRule::same_no_bool:
      if (in == DType::b8) fail("{}: not supported for bool tensors", op);
      // Integer bounds are truncated to ints, which an unsigned tensor cannot hold when negative.
      if (a.node().op == OpKind::Hardtanh && in == DType::u8 &&
          (static_cast<int64_t>(a.real("min_val")) < 0 || static_cast<int64_t>(a.real("max_val")) < 0))
        fail("{}: cannot do hardtanh on an unsigned type with negative limits", op);
      return in;
    case UnaryRule::float_only:
      if (!is_float(in)) fail("{}: expects a floating-point tensor, got {}", op, dtype_name(in));
      return in;
    case UnaryRule::to_bool: return DType::b8;
    case UnaryRule::integral_only:
      if (!is_integral(in, true)) fail("{}: expects an integer or bool tensor, got {}", op, dtype_name(in));
      return in;
  }
  return in;
}

bool is_compare(OpKind op) {
  switch (op) {
    case OpKind::EqTensor: case OpKind::EqScalar: case OpKind::NeTensor: case OpKind::NeScalar:
    case OpKind::LtTensor: case OpKind::LtScalar: case OpKind::LeTensor: case OpKind::LeScalar:
    case OpKind::GtTensor: case OpKind::GtScalar: case OpKind::GeTensor: case OpKind::GeScalar:
    case OpKind::LogicalAnd: case OpKind::LogicalOr: case OpKind::LogicalXor:
      return true;
    default:
      return false;
  }
}

bool is_bitwise(OpKind op) {
  switch (op) {
    case OpKind::BitwiseAndTensor: case OpKind::BitwiseAndScalar: case OpKind::BitwiseOrTensor:
    case OpKind::BitwiseOrScalar: case OpKind::BitwiseXorTensor: case OpKind::BitwiseXorScalar:
    case OpKind::BitwiseAndScalarTensor: case OpKind::BitwiseOrScalarTensor: case OpKind::BitwiseXorScalarTensor:
      return true;
    default:
      return false;
  }
}

// Shifts, gcd and lcm: integer dtypes only, not bool.
bool integer_only(OpKind op) {
  switch (op) {
    case OpKind::BitwiseLeftShiftTensor: case OpKind::BitwiseLeftShiftTensorScalar: case OpKind::BitwiseLeftShiftScalarTensor:
    case OpKind::BitwiseRightShiftTensor: case OpKind::BitwiseRightShiftTensorScalar: case OpKind::BitwiseRightShiftScalarTensor:
    case OpKind::LshiftTensor: case OpKind::LshiftScalar: case OpKind::RshiftTensor: case OpKind::RshiftScalar:
    case OpKind::Gcd: case OpKind::Lcm:
      return true;
    default:
      return false;
  }
}

// Hurwitz zeta and the orthogonal polynomials: PyTorch's kernels take f32 and f64 only (integer
// and bool operands compute in f32).
bool float_32_64_binary(OpKind op) {
  switch (op) {
    case OpKind::SpecialZeta: case OpKind::SpecialZetaSelfScalar: case OpKind::SpecialZetaOtherScalar:
#define COIL_POLYNOMIAL(name) case OpKind::Special##name: case OpKind::Special##name##XScalar: case OpKind::Special##name##NScalar:
    COIL_POLYNOMIAL(ChebyshevPolynomialT) COIL_POLYNOMIAL(ChebyshevPolynomialU) COIL_POLYNOMIAL(ChebyshevPolynomialV)
    COIL_POLYNOMIAL(ChebyshevPolynomialW) COIL_POLYNOMIAL(ShiftedChebyshevPolynomialT) COIL_POLYNOMIAL(ShiftedChebyshevPolynomialU)
    COIL_POLYNOMIAL(ShiftedChebyshevPolynomialV) COIL_POLYNOMIAL(ShiftedChebyshevPolynomialW) COIL_POLYNOMIAL(HermitePolynomialH)
    COIL_POLYNOMIAL(HermitePolynomialHe) COIL_POLYNOMIAL(LaguerrePolynomialL) COIL_POLYNOMIAL(LegendrePolynomialP)
#undef COIL_POLYNOMIAL
      return true;
    default:
      return false;
  }
}

DType binary_dtype(const ArgReader& a, const std::vector<PromoteOperand>& operands, DType common) {
  const std::string& op = a.op_name();
  OpKind k = a.node().op;
  if (is_compare(k)) return DType::b8;
  if (is_bitwise(k) && !is_integral(common, true))
    fail("{}: bitwise ops need integer or bool operands, got {}", op, dtype_name(common));
  if (integer_only(k) && !is_integral(common, false)) fail("{}: not implemented for {}", op, dtype_name(common));
  if ((k == OpKind::Hypot || k == OpKind::Nextafter) && !is_float(common))
    fail("{}: not implemented for {}", op, dtype_name(common));
  if (float_32_64_binary(k)) {
    if (common == DType::f16 || common == DType::bf16) fail("{}: not implemented for {}", op, dtype_name(common));
    return is_integral(common, true) ? DType::f32 : common;
  }
  // ATen's exact ldexp takes integer exponents, not bool ones.
  if (k == OpKind::LdexpTensor && is_float(operands[0].dtype) && operands[1].dtype == DType::b8)
    fail("{}: an exponent of a floating-point tensor must not be bool", op);
  bool any_bool = std::any_of(operands.begin(), operands.end(), [](const PromoteOperand& o) { return o.dtype == DType::b8; });
  if ((k == OpKind::SubTensor || k == OpKind::SubScalar || k == OpKind::RsubScalar) && any_bool)
    fail("{}: subtraction with a bool operand is not supported; use logical_not or logical_xor", op);
  // A bool exponent of a bool tensor is fine: exponents 0 and 1 never reach the kernel.
  bool is_pow = k == OpKind::PowTensorTensor || k == OpKind::PowScalar;
  bool rounding_div = (k == OpKind::DivTensorMode || k == OpKind::DivScalarMode) && !a.is_none("rounding_mode");
  bool modulo = k == OpKind::RemainderTensor || k == OpKind::RemainderScalar || k == OpKind::RemainderScalarTensor ||
                k == OpKind::FmodTensor || k == OpKind::FmodScalar;
  if ((is_pow || rounding_div || modulo) && common == DType::b8) fail("{}: not supported for bool operands", op);
  if (k == OpKind::PowTensorScalar && is_integral(operands[0].dtype, true)) {
    const Arg& exponent = a.raw("exponent");
    if (!std::holds_alternative<double>(exponent.value) && a.real("exponent") < 0)
      fail("{}: integers to negative integer powers are not allowed", op);
  }
  bool true_div = (k == OpKind::DivTensor || k == OpKind::DivScalar) ||
                  ((k == OpKind::DivTensorMode || k == OpKind::DivScalarMode) && a.is_none("rounding_mode"));
  if (k == OpKind::DivTensorMode || k == OpKind::DivScalarMode) {
    auto mode = a.opt_str("rounding_mode");
    if (mode && *mode != "trunc" && *mode != "floor")
      fail("{}: rounding_mode must be none, \"trunc\" or \"floor\", got \"{}\"", op, *mode);
  }
  bool int_to_float = k == OpKind::Atan2 || k == OpKind::CopysignTensor || k == OpKind::CopysignScalar || k == OpKind::LdexpTensor;
  if ((true_div || int_to_float) && is_integral(common, true)) return DType::f32;
  int alpha = a.node().schema().arg_index("alpha");
  if (alpha >= 0) {
    const Arg& al = a.node().args[static_cast<size_t>(alpha)];
    if (is_integral(common, true) && std::holds_alternative<double>(al.value))
      fail("{}: for integral input tensors, argument alpha must not be a floating point number", op);
    if (common != DType::b8 && std::holds_alternative<bool>(al.value))
      fail("{}: boolean alpha only supported for bool tensors", op);
  }
  return common;
}

std::vector<TensorMeta> pointwise(const ArgReader& a) {
  const OpSchema& schema = a.node().schema();
  const std::string& op = schema.name;
  // Operands: every Tensor and Scalar argument that takes part in the computation.
  std::vector<PromoteOperand> operands;
  SymShape shape;
  std::optional<Device> device;
  bool first_tensor = true;
  for (size_t i = 0; i < schema.args.size(); ++i) {
    const ArgSchema& s = schema.args[i];
    const Arg& v = a.node().args[i];
    bool is_condition = s.name == "condition";
    if (s.type == ArgType::Tensor && !v.is_none()) {
      const TensorMeta& m = a.graph().meta(std::get<ValueRef>(v.value));
      shape = first_tensor ? m.sizes : broadcast_shapes(shape, m.sizes, op);
      first_tensor = false;
      if (device && *device != m.device && m.dim() > 0)
        fail("{}: expected all tensors on one device, found {} and {}", op, device_name(*device), device_name(m.device));
      if (!device) device = m.device;
      if (is_condition) {
        // PyTorch still accepts (with a deprecation warning) a u8 condition.
        if (m.dtype != DType::b8 && m.dtype != DType::u8)
          fail("{}: expected condition to be a boolean tensor, but got a tensor with dtype {}", op, dtype_name(m.dtype));
        continue;
      }
      operands.push_back(operand_of(m));
      // alpha (add, sub) and value (addcmul, addcdiv) scale a term, cast to the result's dtype:
      // they take no part in promotion.
    } else if (s.type == ArgType::Scalar && !v.is_none() && s.name != "alpha" && s.name != "value" && schema.family != OpFamily::unary) {
      operands.push_back(operand_of_scalar(v));
    }
  }
  COIL_CHECK(!operands.empty()) << op << " has no operands";
  DType common = result_type(operands);
  OpKind k = a.node().op;
  bool is_clamp = k == OpKind::Clamp || k == OpKind::ClampTensor;
  if (is_clamp && a.is_none("min") && a.is_none("max"))
    fail("{}: at least one of 'min' or 'max' must not be none", op);
  if ((k == OpKind::Addcmul || k == OpKind::Addcdiv) && common == DType::b8) fail("{}: not implemented for bool", op);
  if (k == OpKind::Addcdiv && is_integral(operands[1].dtype, true) && is_integral(operands[2].dtype, true))
    fail("{}: integer division with addcdiv is no longer supported; divide with torch.div(..., rounding_mode=...)", op);
  // ATen clamps bools only against one bound tensor (clamp_min/clamp_max, i.e. or/and).
  if (is_clamp && common == DType::b8 && (k == OpKind::Clamp || (!a.is_none("min") && !a.is_none("max"))))
    fail("{}: not supported for bool tensors", op);
  DType out;
  if (schema.family == OpFamily::unary) out = unary_dtype(a, operands[0].dtype);
  else if (schema.family == OpFamily::binary) out = binary_dtype(a, operands, common);
  else out = common;
  if (k == OpKind::Gelu) {
    auto approx = std::get<std::string>(a.raw("approximate").value);
    if (approx != "none" && approx != "tanh") fail("{}: approximate must be \"none\" or \"tanh\", got \"{}\"", op, approx);
  }
  TensorMeta result = TensorMeta::contiguous(out, shape, device.value_or(Device{}));
  if (k == OpKind::FrexpTensor) return {result, TensorMeta::contiguous(DType::i32, shape, result.device)};
  return {result};
}

}  // namespace

bool ldexp_is_exact(DType self, DType other) { return is_float(self) && is_integral(other, false); }

DType ldexp_power_dtype(DType self, DType other, bool other_is_0d, DType out) {
  if (!is_float(other)) return out;
  DType two = is_float(self) ? self : DType::f32;
  return other_is_0d ? promote_types(two, other) : other;
}

std::vector<TensorMeta> infer_creation(const ArgReader& args) { return creation(args); }
std::vector<TensorMeta> infer_pointwise(const ArgReader& args) { return pointwise(args); }

}  // namespace coil
