#include "codegen/c_printer.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "support/check.h"

namespace coil::codegen {

extern const char* const scalar_prelude;
extern const char* const special_prelude;
extern const char* const philox;
extern const char* const special_polynomials;

std::string with_scalar_helpers(const char* prelude) {
  std::string text = prelude;
  const std::string marker = "// @scalar-helpers";
  size_t at = text.find(marker);
  COIL_CHECK(at != std::string::npos) << "a prelude without the scalar-helpers line";
  size_t end = text.find('\n', at);
  text.replace(at, end - at, scalar_prelude);
  return text;
}

using loop::Expr;
using loop::ExprRef;
using loop::LoopOp;

std::string with_special_helpers(const char* special) {
  std::string text = special;
  const std::string marker = "// @special-helpers";
  size_t at = text.find(marker);
  COIL_CHECK(at != std::string::npos) << "a special header without the special-helpers line";
  size_t end = text.find('\n', at);
  text.replace(at, end - at, std::string(special_prelude) + "\n" + special_polynomials + "\n" + philox);
  return text;
}

namespace {

bool is_special(LoopOp op) {
  switch (op) {
    case LoopOp::Exp2: case LoopOp::Erfc: case LoopOp::Erfinv: case LoopOp::Erfcx: case LoopOp::Lgamma:
    case LoopOp::Digamma: case LoopOp::I0: case LoopOp::I0e: case LoopOp::I1: case LoopOp::I1e:
    case LoopOp::BesselJ0: case LoopOp::BesselJ1: case LoopOp::BesselY0: case LoopOp::BesselY1:
    case LoopOp::BesselK0: case LoopOp::BesselK1: case LoopOp::SignBit: case LoopOp::FrexpMantissa:
    case LoopOp::FrexpExponent: case LoopOp::Hypot: case LoopOp::NextAfter: case LoopOp::Ldexp:
    case LoopOp::ShiftLeft: case LoopOp::ShiftRight: case LoopOp::Gcd: case LoopOp::Lcm: case LoopOp::Trigamma:
    case LoopOp::Ndtri: case LoopOp::AiryAi: case LoopOp::ScaledBesselK0: case LoopOp::ScaledBesselK1:
    case LoopOp::SphericalBesselJ0: case LoopOp::Zeta: case LoopOp::Polygamma: case LoopOp::ChebyshevT:
    case LoopOp::ChebyshevU: case LoopOp::ChebyshevV: case LoopOp::ChebyshevW: case LoopOp::ShiftedChebyshevT:
    case LoopOp::ShiftedChebyshevU: case LoopOp::ShiftedChebyshevV: case LoopOp::ShiftedChebyshevW: case LoopOp::HermiteH:
    case LoopOp::HermiteHe: case LoopOp::LaguerreL: case LoopOp::LegendreP: case LoopOp::PhiloxUniform:
      return true;
    default:
      return false;
  }
}

bool calls_special(const ExprRef& e, std::set<const Expr*>& seen) {
  if (!e || !seen.insert(e.get()).second) return false;
  if (e->kind() == Expr::Kind::op && is_special(e->op())) return true;
  if (e->kind() == Expr::Kind::load && calls_special(e->dynamic(), seen)) return true;
  for (const auto& o : e->operands())
    if (calls_special(o, seen)) return true;
  return false;
}

}  // namespace

bool uses_special_functions(const loop::Program& p) {
  std::set<const Expr*> seen;
  auto special = [&](const loop::LoopKernel* k) {
    if (!k) return false;
    for (const auto& r : k->reductions)
      if (calls_special(r.value, seen)) return true;
    for (const auto& s : k->stores)
      if (calls_special(s.value, seen) || calls_special(s.dynamic, seen)) return true;
    return false;
  };
  for (const auto& kernel : p.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&kernel);
    if (call ? special(call->epilogue.get()) || special(call->prologue.get()) : special(&std::get<loop::LoopKernel>(kernel))) return true;
  }
  return false;
}

std::string stored_value(ExprPrinter& printer, const loop::ExprRef& value, DType t, std::vector<std::string>& lines, const std::string& indent) {
  const bool rounded = value->kind() == loop::Expr::Kind::cast && value->dtype() == t && (t == DType::f16 || t == DType::bf16) &&
                       value->operands()[0]->dtype() == DType::f32;
  return narrowed(printer.emit(rounded ? value->operands()[0] : value, lines, indent), t);
}

const char* value_type(DType t) {
  switch (t) {
    case DType::f64: return "double";
    case DType::f32: case DType::f16: case DType::bf16: return "float";
    case DType::i64: return "int64_t";
    case DType::i32: return "int32_t";
    case DType::i16: return "int16_t";
    case DType::i8: return "int8_t";
    case DType::u8: return "uint8_t";
    case DType::b8: return "bool";
  }
  return "?";
}

const char* storage_type(DType t) { return t == DType::f16 || t == DType::bf16 ? "uint16_t" : value_type(t); }

std::string symbol_name(const std::string& sym) {
  bool loop_var = sym.size() > 1 && (sym[0] == 'x' || sym[0] == 'r') &&
                  sym.find_first_not_of("0123456789", 1) == std::string::npos;
  return loop_var ? sym : "s_" + sym;
}

std::string index_expr(const SymInt& e, const IndexStyle& style) {
  auto wrap = [&](const SymInt& s) {
    bool atom = s.kind() == SymInt::Kind::constant || s.kind() == SymInt::Kind::symbol;
    return atom ? index_expr(s, style) : "(" + index_expr(s, style) + ")";
  };
  auto join = [&](const char* sep) {
    std::string s;
    for (const auto& o : e.operands()) s += (s.empty() ? "" : sep) + wrap(o);
    return s;
  };
  // a // b and a % b as C's / and % when a >= 0 and b > 0 are provable.
  auto plain = [&]() {
    if (!style.ranges) return false;
    return bounds(e.operands()[0], *style.ranges).lo >= 0 && bounds(e.operands()[1], *style.ranges).lo > 0;
  };
  const auto& ops = e.operands();
  switch (e.kind()) {
    case SymInt::Kind::constant: {
      int64_t v = *e.constant();
      bool fits = v >= INT32_MIN && v <= INT32_MAX;
      return std::to_string(v) + (style.narrow && fits ? "" : "LL");
    }
    case SymInt::Kind::symbol: return symbol_name(e.symbol_name());
    case SymInt::Kind::add: return join(" + ");
    case SymInt::Kind::mul: return join(" * ");
    case SymInt::Kind::floordiv:
      if (plain()) return fmt::format("{} / {}", wrap(ops[0]), wrap(ops[1]));
      return fmt::format("coil_rt::idx_floordiv({}, {})", index_expr(ops[0], style), index_expr(ops[1], style));
    case SymInt::Kind::mod:
      if (plain()) return fmt::format("{} % {}", wrap(ops[0]), wrap(ops[1]));
      return fmt::format("coil_rt::idx_mod({}, {})", index_expr(ops[0], style), index_expr(ops[1], style));
    case SymInt::Kind::min: return fmt::format("coil_rt::imin({}, {})", index_expr(ops[0], style), index_expr(ops[1], style));
    case SymInt::Kind::max: return fmt::format("coil_rt::imax({}, {})", index_expr(ops[0], style), index_expr(ops[1], style));
  }
  return "?";
}

namespace {
void collect_expr_symbols(const loop::ExprRef& e, std::vector<std::string>& out) {
  if (e->kind() == loop::Expr::Kind::load || e->kind() == loop::Expr::Kind::index) e->offset().collect_symbols(out);
  for (const auto& o : e->operands()) collect_expr_symbols(o, out);
}
}  // namespace

std::vector<std::string> kernel_symbols(const loop::LoopKernel& k) {
  std::vector<std::string> used;
  for (const auto& r : k.reductions) collect_expr_symbols(r.value, used);
  for (const auto& s : k.stores) {
    collect_expr_symbols(s.value, used);
    s.offset.collect_symbols(used);
    if (s.dynamic) collect_expr_symbols(s.dynamic, used);
  }
  for (const auto& d : k.outer) d.collect_symbols(used);
  for (const auto& d : k.inner) d.collect_symbols(used);
  return used;
}

std::string fold_statement(loop::ReduceKind k, DType t, const std::string& acc, const std::string& v) {
  using loop::ReduceKind;
  switch (k) {
    case ReduceKind::sum: return fmt::format("{} += {};", acc, v);
    case ReduceKind::prod: return fmt::format("{} *= {};", acc, v);
    case ReduceKind::max:
      if (t == DType::b8) return fmt::format("{} = {} || {};", acc, acc, v);
      return fmt::format("{} = coil_rt::maximum<{}>({}, {});", acc, value_type(t), acc, v);
    case ReduceKind::min:
      if (t == DType::b8) return fmt::format("{} = {} && {};", acc, acc, v);
      return fmt::format("{} = coil_rt::minimum<{}>({}, {});", acc, value_type(t), acc, v);
    case ReduceKind::carry: return fmt::format("{} = {};", acc, v);
    default: COIL_CHECK(false) << "no fold statement for " << loop::reduce_name(k); return "";
  }
}

std::string integer_limit(DType t, bool largest) {
  int bits = static_cast<int>(dtype_size(t)) * 8;
  if (t == DType::u8) return largest ? "uint8_t(255)" : "uint8_t(0)";
  if (largest) return fmt::format("{}(0x{:x}LL)", value_type(t), (uint64_t{1} << (bits - 1)) - 1);
  return fmt::format("{}(-0x{:x}LL - 1)", value_type(t), (uint64_t{1} << (bits - 1)) - 1);
}

std::string reduce_init(loop::ReduceKind k, DType t) {
  using loop::ReduceKind;
  switch (k) {
    case ReduceKind::prod: return fmt::format("{}(1)", value_type(t));
    case ReduceKind::max:
      return t == DType::b8 ? "false" : is_float(t) ? fmt::format("-coil_rt::inf<{}>()", value_type(t)) : integer_limit(t, false);
    case ReduceKind::min:
      return t == DType::b8 ? "true" : is_float(t) ? fmt::format("coil_rt::inf<{}>()", value_type(t)) : integer_limit(t, true);
    default: return fmt::format("{}(0)", value_type(t));
  }
}

namespace {

std::string literal(double v, DType t) {
  if (t == DType::b8) return v != 0 ? "true" : "false";
  if (!is_float(t)) return fmt::format("{}({}LL)", value_type(t), static_cast<int64_t>(v));
  if (std::isnan(v)) return fmt::format("coil_rt::nan<{}>()", value_type(t));
  if (std::isinf(v)) return fmt::format("{}coil_rt::inf<{}>()", v < 0 ? "-" : "", value_type(t));
  if (v == 0 && std::signbit(v)) return fmt::format("{}(-0.0)", value_type(t));  // "-0" would be the integer 0
  return fmt::format("{}({:.17g})", value_type(t), v);
}

std::string convert(const std::string& v, DType from, DType to) {
  if (to == DType::b8) return fmt::format("({} != 0)", v);
  // f16 and bf16 compute as float: a cast into them rounds through the storage format.
  if (to == DType::f16 && from != to) return fmt::format("coil_rt::f16_to_f32(coil_rt::f32_to_f16(static_cast<float>({})))", v);
  if (to == DType::bf16 && from != to) return fmt::format("coil_rt::bf16_to_f32(coil_rt::f32_to_bf16(static_cast<float>({})))", v);
  return fmt::format("static_cast<{}>({})", value_type(to), v);
}

std::string apply(LoopOp op, DType t, const std::vector<std::string>& a) {
  bool f = is_float(t);
  switch (op) {
    case LoopOp::Abs: return t == DType::b8 ? a[0] : fmt::format("coil_rt::abs({})", a[0]);
    case LoopOp::Neg: return fmt::format("static_cast<{}>(-{})", value_type(t), a[0]);
    case LoopOp::Exp: return fmt::format("coil_rt::exp({})", a[0]);
    case LoopOp::Expm1: return fmt::format("coil_rt::expm1({})", a[0]);
    case LoopOp::Log: return fmt::format("coil_rt::log({})", a[0]);
    case LoopOp::Log1p: return fmt::format("coil_rt::log1p({})", a[0]);
    case LoopOp::Log2: return fmt::format("coil_rt::log2({})", a[0]);
    case LoopOp::Log10: return fmt::format("coil_rt::log10({})", a[0]);
    case LoopOp::Sqrt: return fmt::format("coil_rt::sqrt({})", a[0]);
    case LoopOp::Rsqrt: return fmt::format("coil_rt::rsqrt({})", a[0]);
    case LoopOp::Reciprocal: return fmt::format("({}(1) / {})", value_type(t), a[0]);
    case LoopOp::Sin: return fmt::format("coil_rt::sin({})", a[0]);
    case LoopOp::Cos: return fmt::format("coil_rt::cos({})", a[0]);
    case LoopOp::Tan: return fmt::format("coil_rt::tan({})", a[0]);
    case LoopOp::Tanh: return fmt::format("coil_rt::tanh({})", a[0]);
    case LoopOp::Asin: return fmt::format("coil_rt::asin({})", a[0]);
    case LoopOp::Acos: return fmt::format("coil_rt::acos({})", a[0]);
    case LoopOp::Atan: return fmt::format("coil_rt::atan({})", a[0]);
    case LoopOp::Asinh: return fmt::format("coil_rt::asinh({})", a[0]);
    case LoopOp::Acosh: return fmt::format("coil_rt::acosh({})", a[0]);
    case LoopOp::Atanh: return fmt::format("coil_rt::atanh({})", a[0]);
    case LoopOp::Sinh: return fmt::format("coil_rt::sinh({})", a[0]);
    case LoopOp::Cosh: return fmt::format("coil_rt::cosh({})", a[0]);
    case LoopOp::Sigmoid: return fmt::format("coil_rt::sigmoid({})", a[0]);
    case LoopOp::Erf: return fmt::format("coil_rt::erf({})", a[0]);
    case LoopOp::Exp2: return fmt::format("coil_rt::exp2({})", a[0]);
    case LoopOp::Erfc: return fmt::format("coil_rt::erfc({})", a[0]);
    case LoopOp::Erfinv: return fmt::format("coil_rt::erfinv({})", a[0]);
    case LoopOp::Erfcx: return fmt::format("coil_rt::erfcx({})", a[0]);
    case LoopOp::Lgamma: return fmt::format("coil_rt::lgamma({})", a[0]);
    case LoopOp::Digamma: return fmt::format("coil_rt::digamma({})", a[0]);
    case LoopOp::I0: return fmt::format("coil_rt::i0({})", a[0]);
    case LoopOp::I0e: return fmt::format("coil_rt::i0e({})", a[0]);
    case LoopOp::I1: return fmt::format("coil_rt::i1({})", a[0]);
    case LoopOp::I1e: return fmt::format("coil_rt::i1e({})", a[0]);
    case LoopOp::BesselJ0: return fmt::format("coil_rt::bessel_j0({})", a[0]);
    case LoopOp::BesselJ1: return fmt::format("coil_rt::bessel_j1({})", a[0]);
    case LoopOp::BesselY0: return fmt::format("coil_rt::bessel_y0({})", a[0]);
    case LoopOp::BesselY1: return fmt::format("coil_rt::bessel_y1({})", a[0]);
    case LoopOp::BesselK0: return fmt::format("coil_rt::bessel_k0({})", a[0]);
    case LoopOp::BesselK1: return fmt::format("coil_rt::bessel_k1({})", a[0]);
    case LoopOp::SignBit: return fmt::format("coil_rt::signbit({})", a[0]);
    case LoopOp::FrexpMantissa: return fmt::format("coil_rt::frexp_mantissa({})", a[0]);
    case LoopOp::FrexpExponent: return fmt::format("coil_rt::frexp_exponent({})", a[0]);
    case LoopOp::Trigamma: case LoopOp::Ndtri: case LoopOp::AiryAi: case LoopOp::ScaledBesselK0:
    case LoopOp::ScaledBesselK1: case LoopOp::SphericalBesselJ0:
      return fmt::format("coil_rt::{}({})", loop::op_name(op), a[0]);
    case LoopOp::Floor: return fmt::format("coil_rt::floor({})", a[0]);
    case LoopOp::Ceil: return fmt::format("coil_rt::ceil({})", a[0]);
    case LoopOp::Round: return fmt::format("coil_rt::nearbyint({})", a[0]);
    case LoopOp::Trunc: return fmt::format("coil_rt::trunc({})", a[0]);
    case LoopOp::Sign: return fmt::format("coil_rt::sign({})", a[0]);
    case LoopOp::IsNan: return fmt::format("coil_rt::isnan({})", a[0]);
    case LoopOp::IsInf: return fmt::format("coil_rt::isinf({})", a[0]);
    case LoopOp::LogicalNot: return fmt::format("!({} != 0)", a[0]);
    case LoopOp::BitwiseNot: return fmt::format("static_cast<{}>(~{})", value_type(t), a[0]);
    case LoopOp::Add: return fmt::format("static_cast<{}>({} + {})", value_type(t), a[0], a[1]);
    case LoopOp::Sub: return fmt::format("static_cast<{}>({} - {})", value_type(t), a[0], a[1]);
    case LoopOp::Mul: return fmt::format("static_cast<{}>({} * {})", value_type(t), a[0], a[1]);
    case LoopOp::Div: return f ? fmt::format("({} / {})", a[0], a[1]) : fmt::format("coil_rt::trunc_div({}, {}, E)", a[0], a[1]);
    case LoopOp::FloorDiv:
      return f ? fmt::format("coil_rt::floor_div_float({}, {})", a[0], a[1]) : fmt::format("coil_rt::floor_div_int({}, {}, E)", a[0], a[1]);
    case LoopOp::TruncDiv: return fmt::format("coil_rt::trunc_div({}, {}, E)", a[0], a[1]);
    case LoopOp::Remainder:
      return f ? fmt::format("coil_rt::remainder_float({}, {})", a[0], a[1]) : fmt::format("coil_rt::remainder_int({}, {}, E)", a[0], a[1]);
    case LoopOp::Fmod: return f ? fmt::format("coil_rt::fmod({}, {})", a[0], a[1]) : fmt::format("coil_rt::fmod_int({}, {}, E)", a[0], a[1]);
    case LoopOp::Pow: return f ? fmt::format("coil_rt::pow({}, {})", a[0], a[1]) : fmt::format("coil_rt::pow_int({}, {})", a[0], a[1]);
    case LoopOp::Maximum: return fmt::format("coil_rt::maximum<{}>({}, {})", value_type(t), a[0], a[1]);
    case LoopOp::Minimum: return fmt::format("coil_rt::minimum<{}>({}, {})", value_type(t), a[0], a[1]);
    case LoopOp::Atan2: return fmt::format("coil_rt::atan2({}, {})", a[0], a[1]);
    case LoopOp::CopySign: return fmt::format("coil_rt::copysign({}, {})", a[0], a[1]);
    case LoopOp::Hypot: return fmt::format("coil_rt::hypot({}, {})", a[0], a[1]);
    case LoopOp::NextAfter: {
      // f16 and bf16 operands (held in floats) step by their own format's ulp.
      const char* fn = t == DType::f16 ? "nextafter_f16" : t == DType::bf16 ? "nextafter_bf16" : "nextafter";
      return fmt::format("coil_rt::{}({}, {})", fn, a[0], a[1]);
    }
    case LoopOp::Ldexp: return fmt::format("coil_rt::ldexp({}, {})", a[0], a[1]);
    case LoopOp::ShiftLeft: return fmt::format("coil_rt::shift_left<{}>({}, {})", value_type(t), a[0], a[1]);
    case LoopOp::ShiftRight: return fmt::format("coil_rt::shift_right<{}>({}, {})", value_type(t), a[0], a[1]);
    case LoopOp::Gcd: return fmt::format("coil_rt::gcd<{}>({}, {})", value_type(t), a[0], a[1]);
    case LoopOp::Lcm: return fmt::format("coil_rt::lcm<{}>({}, {})", value_type(t), a[0], a[1]);
    // Zeta, polygamma and the orthogonal polynomials: helpers of the backends' special headers,
    // named as the loop ops are.
    case LoopOp::Zeta: case LoopOp::Polygamma: case LoopOp::ChebyshevT: case LoopOp::ChebyshevU:
    case LoopOp::ChebyshevV: case LoopOp::ChebyshevW: case LoopOp::ShiftedChebyshevT: case LoopOp::ShiftedChebyshevU:
    case LoopOp::ShiftedChebyshevV: case LoopOp::ShiftedChebyshevW: case LoopOp::HermiteH: case LoopOp::HermiteHe:
    case LoopOp::LaguerreL: case LoopOp::LegendreP:
      return fmt::format("coil_rt::{}({}, {})", loop::op_name(op), a[0], a[1]);
    case LoopOp::Eq: return fmt::format("({} == {})", a[0], a[1]);
    case LoopOp::Ne: return fmt::format("({} != {})", a[0], a[1]);
    case LoopOp::Lt: return fmt::format("({} < {})", a[0], a[1]);
    case LoopOp::Le: return fmt::format("({} <= {})", a[0], a[1]);
    case LoopOp::Gt: return fmt::format("({} > {})", a[0], a[1]);
    case LoopOp::Ge: return fmt::format("({} >= {})", a[0], a[1]);
    case LoopOp::LogicalAnd: return fmt::format("(({} != 0) && ({} != 0))", a[0], a[1]);
    case LoopOp::LogicalOr: return fmt::format("(({} != 0) || ({} != 0))", a[0], a[1]);
    case LoopOp::LogicalXor: return fmt::format("(({} != 0) != ({} != 0))", a[0], a[1]);
    case LoopOp::BitwiseAnd: return fmt::format("static_cast<{}>({} & {})", value_type(t), a[0], a[1]);
    case LoopOp::BitwiseOr: return fmt::format("static_cast<{}>({} | {})", value_type(t), a[0], a[1]);
    case LoopOp::BitwiseXor: return fmt::format("static_cast<{}>({} ^ {})", value_type(t), a[0], a[1]);
    case LoopOp::Where: return fmt::format("({} ? {} : {})", a[0], a[1], a[2]);
    case LoopOp::CheckIndex: return fmt::format("coil_rt::check_index({}, {}, E)", a[0], a[1]);
    case LoopOp::PhiloxUniform: return fmt::format("coil_rt::philox_uniform({}, {}, {})", a[0], a[1], a[2]);
  }
  return "?";
}

}  // namespace

std::string widened(const std::string& raw, DType t) {
  if (t == DType::f16) return "coil_rt::f16_to_f32(" + raw + ")";
  if (t == DType::bf16) return "coil_rt::bf16_to_f32(" + raw + ")";
  return raw;
}

std::string narrowed(const std::string& value, DType t) {
  if (t == DType::f16) return "coil_rt::f32_to_f16(" + value + ")";
  if (t == DType::bf16) return "coil_rt::f32_to_bf16(" + value + ")";
  return value;
}

// The reciprocal's name when `e` is a division by a reduced value that has one, else "".
std::string ExprPrinter::reciprocal_of(const ExprRef& e) const {
  if (e->kind() != Expr::Kind::op || e->op() != loop::LoopOp::Div) return "";
  const ExprRef& d = e->operands()[1];
  if (d->kind() != Expr::Kind::reduced) return "";
  auto it = reciprocals.find(d->slot());
  return it == reciprocals.end() ? "" : it->second;
}

std::string ExprPrinter::emit(const ExprRef& e, std::vector<std::string>& lines, const std::string& indent) {
  return expr(e, lines, indent);
}

std::string ExprPrinter::expr(const ExprRef& e, std::vector<std::string>& lines, const std::string& indent) {
  switch (e->kind()) {
    case Expr::Kind::constant: return literal(e->value(), e->dtype());
    case Expr::Kind::index: return "static_cast<int64_t>(" + index_expr(e->offset(), style) + ")";
    case Expr::Kind::reduced: {
      auto it = reduced.find(e->slot());
      COIL_CHECK(it != reduced.end()) << "reduced" << e->slot() << " has no value here";
      return it->second;
    }
    default: break;
  }
  auto [lo, hi] = cache_.equal_range(e->hash());
  for (auto it = lo; it != hi; ++it)
    if (loop::same(it->second.first, e)) return it->second.second;
  for (const auto& [kept, name] : carried)
    if (kept->hash() == e->hash() && loop::same(kept, e)) return name;
  std::string value;
  std::string hooked = e->kind() == Expr::Kind::load && load_hook ? load_hook(e) : "";
  if (!hooked.empty()) {
    value = widened(hooked, e->dtype());
  } else if (e->kind() == Expr::Kind::load) {
    std::string at = index_expr(e->offset(), style);
    if (e->dynamic()) at += " + " + expr(e->dynamic(), lines, indent);
    value = widened(fmt::format("{}[{}]", buffers_.at(static_cast<size_t>(e->buffer())), at), e->dtype());
  } else if (e->kind() == Expr::Kind::cast) {
    const ExprRef& from = e->operands()[0];
    value = convert(expr(from, lines, indent), from->dtype(), e->dtype());
  } else if (auto r = reciprocal_of(e); !r.empty()) {
    value = "(" + expr(e->operands()[0], lines, indent) + " * " + r + ")";
  } else {
    std::vector<std::string> args;
    for (const auto& o : e->operands()) args.push_back(expr(o, lines, indent));
    value = apply(e->op(), e->operands().back()->dtype(), args);
  }
  std::string name = "t" + std::to_string(next_++);
  lines.push_back(fmt::format("{}const {} {} = {};", indent, value_type(e->dtype()), name, value));
  cache_.emplace(e->hash(), std::make_pair(e, name));
  return name;
}

}  // namespace coil::codegen
