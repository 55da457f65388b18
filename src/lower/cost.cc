#include "lower/cost.h"

#include <set>

namespace coil::lowering {

namespace {

constexpr double kLoad = 1, kRoundTrip = 8, kSimple = 1, kDivide = 4, kTranscendental = 10;

double op_cost(loop::LoopOp op) {
  using loop::LoopOp;
  switch (op) {
    case LoopOp::Exp: case LoopOp::Expm1: case LoopOp::Log: case LoopOp::Log1p: case LoopOp::Log2:
    case LoopOp::Log10: case LoopOp::Sin: case LoopOp::Cos: case LoopOp::Tan: case LoopOp::Tanh:
    case LoopOp::Sigmoid: case LoopOp::Erf: case LoopOp::Pow: case LoopOp::Atan2: case LoopOp::Asin: case LoopOp::Acos:
    case LoopOp::Atan: case LoopOp::Asinh: case LoopOp::Acosh: case LoopOp::Atanh:
    case LoopOp::Sinh: case LoopOp::Cosh: case LoopOp::Exp2: case LoopOp::Erfc: case LoopOp::Hypot:
      return kTranscendental;
    // Series, several transcendentals or a loop each (Euclid's for gcd and lcm).
    case LoopOp::Erfinv: case LoopOp::Erfcx: case LoopOp::Lgamma: case LoopOp::Digamma: case LoopOp::I0:
    case LoopOp::I0e: case LoopOp::I1: case LoopOp::I1e: case LoopOp::BesselJ0: case LoopOp::BesselJ1:
    case LoopOp::BesselY0: case LoopOp::BesselY1: case LoopOp::BesselK0: case LoopOp::BesselK1:
    case LoopOp::Gcd: case LoopOp::Lcm: case LoopOp::Trigamma: case LoopOp::Ndtri: case LoopOp::AiryAi:
    case LoopOp::ScaledBesselK0: case LoopOp::ScaledBesselK1: case LoopOp::SphericalBesselJ0:
    case LoopOp::PhiloxUniform:  // ten rounds of two 32x32 -> 64-bit products
      return 2 * kTranscendental;
    // A sum of powers (zeta) or a recurrence up to the degree (the orthogonal polynomials).
    case LoopOp::Zeta: case LoopOp::Polygamma: case LoopOp::ChebyshevT: case LoopOp::ChebyshevU:
    case LoopOp::ChebyshevV: case LoopOp::ChebyshevW: case LoopOp::ShiftedChebyshevT: case LoopOp::ShiftedChebyshevU:
    case LoopOp::ShiftedChebyshevV: case LoopOp::ShiftedChebyshevW: case LoopOp::HermiteH: case LoopOp::HermiteHe:
    case LoopOp::LaguerreL: case LoopOp::LegendreP:
      return 8 * kTranscendental;
    case LoopOp::FrexpMantissa: case LoopOp::FrexpExponent: case LoopOp::Ldexp: case LoopOp::NextAfter:
      return kDivide;
    case LoopOp::Div: case LoopOp::FloorDiv: case LoopOp::TruncDiv: case LoopOp::Remainder: case LoopOp::Fmod:
    case LoopOp::Sqrt: case LoopOp::Rsqrt: case LoopOp::Reciprocal:
      return kDivide;
    default:
      return kSimple;
  }
}

double cost(const loop::ExprRef& e, std::set<const loop::Expr*>& seen) {
  if (!seen.insert(e.get()).second) return 0;
  double c = 0;
  switch (e->kind()) {
    case loop::Expr::Kind::load: c = kLoad; break;
    case loop::Expr::Kind::op: c = op_cost(e->op()); break;
    case loop::Expr::Kind::cast: c = kSimple; break;
    default: break;
  }
  for (const auto& o : e->operands()) c += cost(o, seen);
  return c;
}

}  // namespace

double compute_cost(const loop::ExprRef& body) {
  std::set<const loop::Expr*> seen;
  return cost(body, seen);
}

int large_reads(const loop::ExprRef& body, const std::function<bool(int buffer)>& large) {
  std::set<const loop::Expr*> seen;
  std::set<int> buffers;
  std::function<void(const loop::ExprRef&)> visit = [&](const loop::ExprRef& e) {
    if (!seen.insert(e.get()).second) return;
    if (e->kind() == loop::Expr::Kind::load && large(e->buffer())) buffers.insert(e->buffer());
    for (const auto& o : e->operands()) visit(o);
  };
  visit(body);
  return static_cast<int>(buffers.size());
}

bool should_realize(const loop::ExprRef& body, int uses, int reads) {
  if (uses <= 1) return false;
  if ((uses - 1) * reads > uses + 1) return true;
  double recompute = (uses - 1) * compute_cost(body);
  double round_trip = kRoundTrip * (1 + uses);
  return recompute > round_trip;
}

}  // namespace coil::lowering
