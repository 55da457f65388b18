#include "loop/activation.h"

#include <cmath>
#include <numbers>

namespace coil::loop {

namespace {

constexpr double kGeluCubic = 0.044715;
const double kGeluScale = std::sqrt(2.0 / std::numbers::pi);

}  // namespace

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::gelu_tanh: return "gelu_tanh";
  }
  return "?";
}

ExprRef activation_expr(Activation a, ExprRef x) {
  DType t = x->dtype();
  auto k = [&](double v) { return Expr::constant(v, t); };
  auto op = [](LoopOp o, std::vector<ExprRef> args) { return Expr::apply(o, std::move(args)); };
  switch (a) {
    case Activation::none: return x;
    case Activation::relu: return op(LoopOp::Maximum, {x, k(0)});
    case Activation::gelu_tanh: {
      ExprRef cube = op(LoopOp::Mul, {x, op(LoopOp::Mul, {x, x})});
      ExprRef inner = op(LoopOp::Mul, {k(kGeluScale), op(LoopOp::Add, {x, op(LoopOp::Mul, {k(kGeluCubic), cube})})});
      return op(LoopOp::Mul, {op(LoopOp::Mul, {k(0.5), x}), op(LoopOp::Add, {k(1), op(LoopOp::Tanh, {inner})})});
    }
  }
  return x;
}


}  // namespace coil::loop
