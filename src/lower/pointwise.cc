// Lowering of pointwise, creation and copy ops into expressions. Operands are converted to the
// computation dtype (PyTorch's rule; f16/bf16 compute in f32), combined, and converted to the
// output dtype, exactly as the reference interpreter rounds.
#include <cmath>
#include <numbers>

#include "graph/infer_util.h"
#include "loop/activation.h"
#include "lower/context.h"
#include "support/check.h"

namespace coil::lowering {

ExprRef cast(const ExprRef& e, DType dtype) { return Expr::cast(e, dtype); }

DType opmath(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

ExprRef scalar(const Arg& a, DType dtype) {
  if (auto* d = std::get_if<double>(&a.value)) return Expr::constant(*d, dtype);
  if (auto* b = std::get_if<bool>(&a.value)) return Expr::constant(*b ? 1.0 : 0.0, dtype);
  const SymInt& s = std::get<SymInt>(a.value);
  if (auto c = s.constant()) {
    // Integers beyond 2^53 would lose bits in a double literal: an exact i64 index value.
    bool exact = *c >= -(int64_t{1} << 53) && *c <= (int64_t{1} << 53);
    if (!exact && is_integral(dtype, false)) return cast(Expr::index(s), dtype);
    return Expr::constant(static_cast<double>(*c), dtype);
  }
  return cast(Expr::index(s), dtype);
}

SymShape broadcast_index(const SymShape& out_index, const SymShape& out_sizes, const SymShape& operand_sizes) {
  SymShape idx;
  size_t lead = out_sizes.size() - operand_sizes.size();
  for (size_t k = 0; k < operand_sizes.size(); ++k)
    idx.push_back(operand_sizes[k] == SymInt(1) && out_sizes[k + lead] != SymInt(1) ? SymInt(0) : out_index[k + lead]);
  return idx;
}

namespace {

ExprRef k(double v, DType t) { return Expr::constant(v, t); }
ExprRef op(LoopOp o, std::vector<ExprRef> a) { return Expr::apply(o, std::move(a)); }

ExprRef unary(const Node& n, ExprRef x, const ArgReader& args) {
  DType t = x->dtype();
  switch (n.op) {
    case OpKind::Abs: return op(LoopOp::Abs, {x});
    case OpKind::Neg: return op(LoopOp::Neg, {x});
    case OpKind::Exp: return op(LoopOp::Exp, {x});
    case OpKind::Expm1: return op(LoopOp::Expm1, {x});
    case OpKind::Log: return op(LoopOp::Log, {x});
    case OpKind::Log1p: return op(LoopOp::Log1p, {x});
    case OpKind::Log2: return op(LoopOp::Log2, {x});
    case OpKind::Log10: return op(LoopOp::Log10, {x});
    case OpKind::Sqrt: return op(LoopOp::Sqrt, {x});
    case OpKind::Rsqrt: return op(LoopOp::Rsqrt, {x});
    case OpKind::Reciprocal: return op(LoopOp::Reciprocal, {x});
    case OpKind::Sin: return op(LoopOp::Sin, {x});
    case OpKind::Cos: return op(LoopOp::Cos, {x});
    case OpKind::Tan: return op(LoopOp::Tan, {x});
    case OpKind::Asin: return op(LoopOp::Asin, {x});
    case OpKind::Acos: return op(LoopOp::Acos, {x});
    case OpKind::Atan: return op(LoopOp::Atan, {x});
    case OpKind::Asinh: return op(LoopOp::Asinh, {x});
    case OpKind::Acosh: return op(LoopOp::Acosh, {x});
    case OpKind::Atanh: return op(LoopOp::Atanh, {x});
    case OpKind::Sinh: return op(LoopOp::Sinh, {x});
    case OpKind::Cosh: return op(LoopOp::Cosh, {x});
    case OpKind::Tanh: return op(LoopOp::Tanh, {x});
    case OpKind::Sigmoid: return op(LoopOp::Sigmoid, {x});
    case OpKind::Erf: return op(LoopOp::Erf, {x});
    case OpKind::Exp2: return op(LoopOp::Exp2, {x});
    case OpKind::Erfc: return op(LoopOp::Erfc, {x});
    case OpKind::Erfinv: return op(LoopOp::Erfinv, {x});
    case OpKind::SpecialErfcx: return op(LoopOp::Erfcx, {x});
    case OpKind::Lgamma: return op(LoopOp::Lgamma, {x});
    case OpKind::Digamma: return op(LoopOp::Digamma, {x});
    case OpKind::I0: case OpKind::SpecialModifiedBesselI0: return op(LoopOp::I0, {x});
    case OpKind::SpecialI0e: return op(LoopOp::I0e, {x});
    case OpKind::SpecialI1: case OpKind::SpecialModifiedBesselI1: return op(LoopOp::I1, {x});
    case OpKind::SpecialI1e: return op(LoopOp::I1e, {x});
    case OpKind::SpecialBesselJ0: return op(LoopOp::BesselJ0, {x});
    case OpKind::SpecialBesselJ1: return op(LoopOp::BesselJ1, {x});
    case OpKind::SpecialBesselY0: return op(LoopOp::BesselY0, {x});
    case OpKind::SpecialBesselY1: return op(LoopOp::BesselY1, {x});
    case OpKind::SpecialModifiedBesselK0: return op(LoopOp::BesselK0, {x});
    case OpKind::SpecialModifiedBesselK1: return op(LoopOp::BesselK1, {x});
    case OpKind::SpecialScaledModifiedBesselK0: return op(LoopOp::ScaledBesselK0, {x});
    case OpKind::SpecialScaledModifiedBesselK1: return op(LoopOp::ScaledBesselK1, {x});
    case OpKind::SpecialSphericalBesselJ0: return op(LoopOp::SphericalBesselJ0, {x});
    case OpKind::SpecialAiryAi: return op(LoopOp::AiryAi, {x});
    case OpKind::SpecialNdtri: return op(LoopOp::Ndtri, {x});
    case OpKind::Polygamma: {
      // ATen's kernels: digamma for n = 0, trigamma for n = 1, the zeta form beyond.
      int64_t order = args.integer("n");
      if (order == 0) return op(LoopOp::Digamma, {x});
      if (order == 1) return op(LoopOp::Trigamma, {x});
      const TensorMeta& out_meta = n.outputs[0].meta;
      DType out = out_meta.dtype;
      if ((out == DType::f16 || out == DType::bf16) && out_meta.device.kind == Device::Kind::cpu) {
        // ATen's 16-bit CPU kernel: n! in float, zeta rounded to the 16-bit type before the
        // product (its CUDA kernel computes all of it in float, as the loop op does).
        ExprRef factorial = op(LoopOp::Exp, {op(LoopOp::Lgamma, {k(static_cast<double>(order + 1), t)})});
        ExprRef factor = op(LoopOp::Mul, {k(order % 2 ? 1 : -1, t), factorial});
        ExprRef zeta = op(LoopOp::Zeta, {k(static_cast<double>(order + 1), t), x});
        return op(LoopOp::Mul, {factor, cast(cast(zeta, out), t)});
      }
      return op(LoopOp::Polygamma, {k(static_cast<double>(order), t), x});
    }
    case OpKind::Signbit:
      if (is_float(t)) return op(LoopOp::SignBit, {x});
      return t == DType::b8 || t == DType::u8 ? k(0, DType::b8) : op(LoopOp::Lt, {x, k(0, t)});
    case OpKind::RoundDecimals: {
      // ATen: x * 10^d rounded to an integer, then / 10^d (d < 0: x / 10^-d rounded, times
      // 10^-d), in the compute type.
      int64_t d = args.integer("decimals");
      ExprRef p = k(std::pow(10.0, static_cast<double>(d < 0 ? -d : d)), t);
      if (d < 0) return op(LoopOp::Mul, {op(LoopOp::Round, {op(LoopOp::Div, {x, p})}), p});
      return op(LoopOp::Div, {op(LoopOp::Round, {op(LoopOp::Mul, {x, p})}), p});
    }
    case OpKind::Relu: return loop::activation_expr(loop::Activation::relu, x);
    case OpKind::Gelu: {
      if (*args.opt_str("approximate") == "tanh") return loop::activation_expr(loop::Activation::gelu_tanh, x);
      ExprRef e = op(LoopOp::Erf, {op(LoopOp::Mul, {x, k(1.0 / std::numbers::sqrt2, t)})});
      return op(LoopOp::Mul, {op(LoopOp::Mul, {k(0.5, t), x}), op(LoopOp::Add, {k(1, t), e})});
    }
    case OpKind::Silu: return op(LoopOp::Mul, {x, op(LoopOp::Sigmoid, {x})});
    case OpKind::LeakyRelu:
      return op(LoopOp::Where, {op(LoopOp::Gt, {x, k(0, t)}), x, op(LoopOp::Mul, {x, k(args.real("negative_slope"), t)})});
    case OpKind::Elu: {
      ExprRef neg = op(LoopOp::Mul, {k(args.real("scale") * args.real("alpha"), t),
                                     op(LoopOp::Expm1, {op(LoopOp::Mul, {x, k(args.real("input_scale"), t)})})});
      return op(LoopOp::Where, {op(LoopOp::Gt, {x, k(0, t)}), op(LoopOp::Mul, {x, k(args.real("scale"), t)}), neg});
    }
    case OpKind::Hardtanh:
      return op(LoopOp::Minimum, {op(LoopOp::Maximum, {x, k(args.real("min_val"), t)}), k(args.real("max_val"), t)});
    case OpKind::Floor: return is_float(t) ? op(LoopOp::Floor, {x}) : x;
    case OpKind::Ceil: return is_float(t) ? op(LoopOp::Ceil, {x}) : x;
    case OpKind::Round: return is_float(t) ? op(LoopOp::Round, {x}) : x;
    case OpKind::Trunc: return is_float(t) ? op(LoopOp::Trunc, {x}) : x;
    case OpKind::Sign: return t == DType::b8 ? x : op(LoopOp::Sign, {x});
    case OpKind::Isnan: return is_float(t) ? op(LoopOp::IsNan, {x}) : k(0, DType::b8);
    case OpKind::Isinf: return is_float(t) ? op(LoopOp::IsInf, {x}) : k(0, DType::b8);
    case OpKind::LogicalNot: return op(LoopOp::LogicalNot, {x});
    case OpKind::BitwiseNot: return t == DType::b8 ? op(LoopOp::LogicalNot, {x}) : op(LoopOp::BitwiseNot, {x});
    default: break;
  }
  fail("internal error: no unary lowering for {}", n.schema().name);
}

ExprRef binary(const Node& n, ExprRef a, ExprRef b, const ArgReader& args) {
  DType t = a->dtype();
  bool integral = is_integral(t, true);
  auto alpha_scaled = [&](ExprRef v) {
    const Arg& alpha = n.arg("alpha");
    if (alpha == Arg(1) || alpha == Arg(1.0) || alpha == Arg(true)) return v;
    return op(LoopOp::Mul, {v, scalar(alpha, t)});
  };
  switch (n.op) {
    case OpKind::AddTensor: case OpKind::AddScalar:
      return t == DType::b8 ? op(LoopOp::LogicalOr, {a, b}) : op(LoopOp::Add, {a, alpha_scaled(b)});
    case OpKind::SubTensor: case OpKind::SubScalar: return op(LoopOp::Sub, {a, alpha_scaled(b)});
    case OpKind::RsubScalar: return op(LoopOp::Sub, {b, alpha_scaled(a)});  // other - alpha * self
    case OpKind::MulTensor: case OpKind::MulScalar: return t == DType::b8 ? op(LoopOp::LogicalAnd, {a, b}) : op(LoopOp::Mul, {a, b});
    case OpKind::DivTensor: case OpKind::DivScalar: return op(LoopOp::Div, {a, b});
    case OpKind::DivTensorMode: case OpKind::DivScalarMode: {
      auto mode = args.opt_str("rounding_mode");
      if (!mode) return op(LoopOp::Div, {a, b});
      if (*mode == "floor") return op(LoopOp::FloorDiv, {a, b});
      return integral ? op(LoopOp::TruncDiv, {a, b}) : op(LoopOp::Trunc, {op(LoopOp::Div, {a, b})});
    }
    case OpKind::PowTensorTensor: case OpKind::PowTensorScalar: case OpKind::PowScalar: {
      // ATen computes a floating tensor to a Scalar power of +-0.5, +-1, +-2 or 3 without pow:
      // sqrt / rsqrt (so pow(-inf, 0.5) is nan), x, 1/x, x*x, 1/(x*x), x*x*x.
      if (n.op == OpKind::PowTensorScalar && !integral) {
        double e = args.real("exponent");
        if (e == 0.5) return op(LoopOp::Sqrt, {a});
        if (e == -0.5) return op(LoopOp::Rsqrt, {a});
        if (e == 2) return op(LoopOp::Mul, {a, a});
        if (e == 3) return op(LoopOp::Mul, {op(LoopOp::Mul, {a, a}), a});
        if (e == -1) return op(LoopOp::Div, {k(1, t), a});
        if (e == -2) return op(LoopOp::Div, {k(1, t), op(LoopOp::Mul, {a, a})});
      }
      return op(LoopOp::Pow, {a, b});
    }
    case OpKind::RemainderTensor: case OpKind::RemainderScalar: case OpKind::RemainderScalarTensor:
      return op(LoopOp::Remainder, {a, b});
    case OpKind::FmodTensor: case OpKind::FmodScalar: return op(LoopOp::Fmod, {a, b});
    case OpKind::Maximum: return op(LoopOp::Maximum, {a, b});
    case OpKind::Minimum: return op(LoopOp::Minimum, {a, b});
    case OpKind::Atan2: return op(LoopOp::Atan2, {a, b});
    case OpKind::CopysignTensor: case OpKind::CopysignScalar: return op(LoopOp::CopySign, {a, b});
    case OpKind::Hypot: return op(LoopOp::Hypot, {a, b});
    case OpKind::Nextafter: return op(LoopOp::NextAfter, {a, b});  // in the output dtype itself
    case OpKind::BitwiseLeftShiftTensor: case OpKind::BitwiseLeftShiftTensorScalar: case OpKind::BitwiseLeftShiftScalarTensor:
    case OpKind::LshiftTensor: case OpKind::LshiftScalar:
      return op(LoopOp::ShiftLeft, {a, b});
    case OpKind::BitwiseRightShiftTensor: case OpKind::BitwiseRightShiftTensorScalar: case OpKind::BitwiseRightShiftScalarTensor:
    case OpKind::RshiftTensor: case OpKind::RshiftScalar:
      return op(LoopOp::ShiftRight, {a, b});
    case OpKind::Gcd: return op(LoopOp::Gcd, {a, b});
    case OpKind::Lcm: return op(LoopOp::Lcm, {a, b});
    case OpKind::SpecialZeta: case OpKind::SpecialZetaSelfScalar: case OpKind::SpecialZetaOtherScalar:
      return op(LoopOp::Zeta, {a, b});
#define COIL_POLYNOMIAL(name, loop_op)                                                                      \
  case OpKind::Special##name: case OpKind::Special##name##XScalar: case OpKind::Special##name##NScalar: \
    return op(LoopOp::loop_op, {a, b});
    COIL_POLYNOMIAL(ChebyshevPolynomialT, ChebyshevT) COIL_POLYNOMIAL(ChebyshevPolynomialU, ChebyshevU)
    COIL_POLYNOMIAL(ChebyshevPolynomialV, ChebyshevV) COIL_POLYNOMIAL(ChebyshevPolynomialW, ChebyshevW)
    COIL_POLYNOMIAL(ShiftedChebyshevPolynomialT, ShiftedChebyshevT) COIL_POLYNOMIAL(ShiftedChebyshevPolynomialU, ShiftedChebyshevU)
    COIL_POLYNOMIAL(ShiftedChebyshevPolynomialV, ShiftedChebyshevV) COIL_POLYNOMIAL(ShiftedChebyshevPolynomialW, ShiftedChebyshevW)
    COIL_POLYNOMIAL(HermitePolynomialH, HermiteH) COIL_POLYNOMIAL(HermitePolynomialHe, HermiteHe)
    COIL_POLYNOMIAL(LaguerrePolynomialL, LaguerreL) COIL_POLYNOMIAL(LegendrePolynomialP, LegendreP)
#undef COIL_POLYNOMIAL
    case OpKind::EqTensor: case OpKind::EqScalar: return op(LoopOp::Eq, {a, b});
    case OpKind::NeTensor: case OpKind::NeScalar: return op(LoopOp::Ne, {a, b});
    case OpKind::LtTensor: case OpKind::LtScalar: return op(LoopOp::Lt, {a, b});
    case OpKind::LeTensor: case OpKind::LeScalar: return op(LoopOp::Le, {a, b});
    case OpKind::GtTensor: case OpKind::GtScalar: return op(LoopOp::Gt, {a, b});
    case OpKind::GeTensor: case OpKind::GeScalar: return op(LoopOp::Ge, {a, b});
    case OpKind::LogicalAnd: return op(LoopOp::LogicalAnd, {a, b});
    case OpKind::LogicalOr: return op(LoopOp::LogicalOr, {a, b});
    case OpKind::LogicalXor: return op(LoopOp::LogicalXor, {a, b});
    case OpKind::BitwiseAndTensor: case OpKind::BitwiseAndScalar: case OpKind::BitwiseAndScalarTensor:
      return t == DType::b8 ? op(LoopOp::LogicalAnd, {a, b}) : op(LoopOp::BitwiseAnd, {a, b});
    case OpKind::BitwiseOrTensor: case OpKind::BitwiseOrScalar: case OpKind::BitwiseOrScalarTensor:
      return t == DType::b8 ? op(LoopOp::LogicalOr, {a, b}) : op(LoopOp::BitwiseOr, {a, b});
    case OpKind::BitwiseXorTensor: case OpKind::BitwiseXorScalar: case OpKind::BitwiseXorScalarTensor:
      return t == DType::b8 ? op(LoopOp::LogicalXor, {a, b}) : op(LoopOp::BitwiseXor, {a, b});
    default: break;
  }
  fail("internal error: no binary lowering for {}", n.schema().name);
}

// The dtype operands are converted to: the promoted operand type (as result_type computes it)
// for comparisons and integer results, the output type's compute type otherwise.
DType compute_dtype(const ArgReader& args, const Node& n, DType out) {
  std::vector<PromoteOperand> operands;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const ArgSchema& s = n.schema().args[i];
    if (n.args[i].is_none() || s.name == "condition" || s.name == "alpha" || s.name == "value") continue;
    if (s.type == ArgType::Tensor) operands.push_back(operand_of(args.graph().meta(std::get<ValueRef>(n.args[i].value))));
    else if (s.type == ArgType::Scalar && n.schema().family != OpFamily::unary) operands.push_back(operand_of_scalar(n.args[i]));
  }
  // nextafter steps by the output dtype's own ulp, f16 and bf16 included.
  if (n.op == OpKind::Nextafter) return out;
  if (is_float(out)) return opmath(out);
  DType common = result_type(operands);
  return is_float(common) ? opmath(common) : common;
}

// philox_random's value at `idx`: uniform values from Philox's 53 bits cut to the dtype's
// significand (exact, so a value never rounds up to 1), normal ones by Box and Muller's
// transform of two uniforms (streams 2s and 2s + 1), in f64. An element's counter is its index
// in the row-major order of the sizes, whatever the layout.
ExprRef philox_random(const Node& n, ExprRef seed, const SymShape& idx, const TensorMeta& out) {
  const int64_t stream = std::get<SymInt>(n.arg("stream").value).constant().value();
  SymInt linear = 0;
  for (size_t d = 0; d < idx.size(); ++d) linear = linear * out.sizes[d] + idx[d];
  auto uniform = [&](int64_t s) { return op(LoopOp::PhiloxUniform, {seed, Expr::index(linear), k(static_cast<double>(s), DType::i64)}); };
  const DType f = DType::f64;
  if (std::get<std::string>(n.arg("distribution").value) == "normal") {
    ExprRef radius = op(LoopOp::Sqrt, {op(LoopOp::Mul, {k(-2, f), op(LoopOp::Log, {op(LoopOp::Sub, {k(1, f), uniform(2 * stream)})})})});
    return op(LoopOp::Mul, {radius, op(LoopOp::Cos, {op(LoopOp::Mul, {k(2 * std::numbers::pi, f), uniform(2 * stream + 1)})})});
  }
  const int bits = out.dtype == DType::f64 ? 53 : out.dtype == DType::f32 ? 24 : out.dtype == DType::f16 ? 11 : 8;
  if (bits == 53) return uniform(2 * stream);
  const double scale = std::ldexp(1.0, bits);
  return op(LoopOp::Mul, {op(LoopOp::Floor, {op(LoopOp::Mul, {uniform(2 * stream), k(scale, f)})}), k(1.0 / scale, f)});
}

}  // namespace

std::vector<Value> lower_pointwise(Context& c, const Node& n) {
  ArgReader args(c.graph, n);
  const TensorMeta& out = n.outputs[0].meta;
  SymShape idx = index_vars(out.sizes.size());
  auto operand = [&](std::string_view name, DType t) {
    ValueRef r = std::get<ValueRef>(n.arg(name).value);
    const Value& v = c.value(r);
    return cast(c.at(v, broadcast_index(idx, out.sizes, v.meta.sizes)), t);
  };
  auto result = [&](ExprRef body) { return std::vector<Value>{Value{out, -1, cast(body, out.dtype)}}; };
  const OpFamily family = n.schema().family;
  if (family == OpFamily::creation || family == OpFamily::copy) {
    switch (n.op) {
      case OpKind::Full: case OpKind::FullLike: return result(scalar(n.arg("fill_value"), opmath(out.dtype)));
      case OpKind::ScalarTensor: return result(scalar(n.arg("s"), opmath(out.dtype)));
      case OpKind::EmptyMemoryFormat: case OpKind::EmptyStrided: return result(Expr::constant(0, out.dtype));
      case OpKind::ArangeStartStep: {
        DType t = is_float(out.dtype) ? DType::f64 : DType::i64;
        ExprRef i = cast(Expr::index(idx[0]), t);
        return result(op(LoopOp::Add, {scalar(n.arg("start"), t), op(LoopOp::Mul, {i, scalar(n.arg("step"), t)})}));
      }
      case OpKind::PhiloxRandom: return result(philox_random(n, operand("seed", DType::i64), idx, out));
      case OpKind::Clone: case OpKind::ToCopy: return result(operand("self", c.value(std::get<ValueRef>(n.arg("self").value)).meta.dtype));
      case OpKind::Copy: return result(operand("src", c.value(std::get<ValueRef>(n.arg("src").value)).meta.dtype));
      default: fail("{} is not supported by the compiler yet", n.schema().name);
    }
  }
  DType compute = compute_dtype(args, n, out.dtype);
  if (n.op == OpKind::FrexpTensor) {
    ExprRef x = operand("self", compute);
    const TensorMeta& exponent = n.outputs[1].meta;
    return {Value{out, -1, cast(op(LoopOp::FrexpMantissa, {x}), out.dtype)},
            Value{exponent, -1, cast(op(LoopOp::FrexpExponent, {x}), exponent.dtype)}};
  }
  if (n.op == OpKind::LdexpTensor) {
    const TensorMeta& self = c.value(std::get<ValueRef>(n.arg("self").value)).meta;
    const TensorMeta& other = c.value(std::get<ValueRef>(n.arg("other").value)).meta;
    ExprRef x = operand("self", compute);
    // An integer exponent is taken as an int32, as ATen's ldexp takes it.
    if (ldexp_is_exact(self.dtype, other.dtype)) return result(op(LoopOp::Ldexp, {x, cast(operand("other", DType::i32), compute)}));
    DType power = ldexp_power_dtype(self.dtype, other.dtype, other.dim() == 0, out.dtype);
    ExprRef p = op(LoopOp::Pow, {k(2, opmath(power)), cast(operand("other", power), opmath(power))});
    return result(op(LoopOp::Mul, {x, cast(cast(cast(p, power), out.dtype), compute)}));
  }
  if (family == OpFamily::unary) {
    // The operand is `self`, or `x` in some special functions' schemas.
    std::string_view self = n.schema().arg_index("self") >= 0 ? "self" : "x";
    DType in = c.value(std::get<ValueRef>(n.arg(self).value)).meta.dtype;
    return result(unary(n, operand(self, is_float(out.dtype) ? compute : opmath(in)), args));
  }
  // Binary and ternary: tensors and scalars in schema order.
  std::vector<ExprRef> xs;
  std::optional<ExprRef> condition;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const ArgSchema& s = n.schema().args[i];
    if (s.name == "alpha" || s.name == "value") continue;
    if (s.name == "condition") {
      condition = operand("condition", DType::b8);
    } else if (s.type == ArgType::Tensor) {
      xs.push_back(n.args[i].is_none() ? nullptr : operand(s.name, compute));
    } else if (s.type == ArgType::Scalar) {
      xs.push_back(n.args[i].is_none() ? nullptr : scalar(n.args[i], compute));
    }
  }
  if (family == OpFamily::binary) return result(binary(n, xs[0], xs[1], args));
  if (condition) return result(op(LoopOp::Where, {*condition, xs[0], xs[1]}));
  if (n.op == OpKind::Addcmul || n.op == OpKind::Addcdiv) {
    // self + value * tensor1 * tensor2 (or / tensor2), value in the computation dtype (an
    // integer result truncates it), in the order of PyTorch's kernels.
    Arg value = n.arg("value");
    if (auto* d = std::get_if<double>(&value.value); d && !is_float(compute)) value = Arg(std::trunc(*d));
    ExprRef term = op(LoopOp::Mul, {scalar(value, compute), xs[1]});
    term = op(n.op == OpKind::Addcmul ? LoopOp::Mul : LoopOp::Div, {term, xs[2]});
    return result(op(LoopOp::Add, {xs[0], term}));
  }
  ExprRef v = xs[0];  // clamp: the lower bound first, then the upper
  if (xs[1]) v = op(LoopOp::Maximum, {v, xs[1]});
  if (xs[2]) v = op(LoopOp::Minimum, {v, xs[2]});
  return result(v);
}

}  // namespace coil::lowering
