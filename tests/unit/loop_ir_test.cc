// Loop IR: structural equality and hashing, substitution, printing, and the verifier.
#include <gtest/gtest.h>

#include "coil/error.h"
#include "loop/kernel.h"

namespace coil::loop {
namespace {

SymInt var(const std::string& n) { return SymInt::symbol(n); }

// softmax over rows of a [N, C] buffer as one kernel: max, sum of exp, normalize.
Program softmax_program() {
  SymInt n = var("N"), c = var("C");
  Program p;
  p.buffers.push_back({"x", Buffer::Role::input, DType::f32, {n, c}, {c, 1}});
  p.buffers.push_back({"y", Buffer::Role::output, DType::f32, {n, c}, {c, 1}});
  SymInt at = var("x0") * c + var("r0");
  ExprRef x = Expr::load(0, at, DType::f32);
  ExprRef shifted = Expr::apply(LoopOp::Sub, {x, Expr::reduced(0, DType::f32)});
  ExprRef e = Expr::apply(LoopOp::Exp, {shifted});
  LoopKernel k;
  k.name = "softmax_0";
  k.outer = {n};
  k.inner = {c};
  k.reductions = {{ReduceKind::max, x, DType::f32}, {ReduceKind::sum, e, DType::f32}};
  k.stores = {{1, at, Expr::apply(LoopOp::Div, {e, Expr::reduced(1, DType::f32)}), true}};
  k.origins = {"amax", "sub", "exp", "sum", "div"};
  p.kernels.push_back(k);
  return p;
}

TEST(LoopIR, StructuralEqualityAndHash) {
  auto a = Expr::apply(LoopOp::Add, {Expr::load(0, var("x0") * 4, DType::f32), Expr::constant(1.0, DType::f32)});
  auto b = Expr::apply(LoopOp::Add, {Expr::load(0, 4 * var("x0"), DType::f32), Expr::constant(1.0, DType::f32)});
  auto c = Expr::apply(LoopOp::Add, {Expr::load(1, var("x0") * 4, DType::f32), Expr::constant(1.0, DType::f32)});
  EXPECT_TRUE(same(a, b));
  EXPECT_EQ(a->hash(), b->hash());
  EXPECT_FALSE(same(a, c));
  EXPECT_EQ(Expr::apply(LoopOp::Lt, {a, b})->dtype(), DType::b8);
  EXPECT_THROW(Expr::apply(LoopOp::Add, {a, Expr::constant(1, DType::f64)}), Error);
  EXPECT_THROW(Expr::apply(LoopOp::Add, {a}), Error);
}

// Only index checks and integer divisions write the status word; float division does not.
TEST(LoopIR, KernelsThatMayFail) {
  Program p = softmax_program();
  EXPECT_FALSE(may_fail(std::get<LoopKernel>(p.kernels[0]))) << "a float division cannot fail";
  LoopKernel k;
  k.outer = {4};
  ExprRef i = Expr::load(0, var("x0"), DType::i64);
  k.stores = {{1, var("x0"), Expr::apply(LoopOp::Div, {i, i}), false}};
  EXPECT_TRUE(may_fail(k)) << "an integer division by zero is reported";
  ExprRef gather = Expr::load(2, 0, DType::f32, Expr::apply(LoopOp::CheckIndex, {i, Expr::index(8)}));
  k.stores = {{1, var("x0"), gather, false}};
  EXPECT_TRUE(may_fail(k)) << "a checked index inside a load's data-dependent part";
}

TEST(LoopIR, SubstituteAppliesIndexMaps) {
  auto e = Expr::load(0, var("x0") * 8 + var("x1"), DType::f32);
  // A transpose: (x0, x1) -> (x1, x0).
  auto t = substitute(e, {{"x0", var("x1")}, {"x1", var("x0")}});
  EXPECT_EQ(to_string(t), "load(buf0, x0 + 8*x1)");
}

TEST(LoopIR, PrintsAndVerifies) {
  Program p = softmax_program();
  verify(p);
  EXPECT_EQ(to_string(p),
            "buf0 input x: f32[N, C] strides=[C, 1]\n"
            "buf1 output y: f32[N, C] strides=[C, 1]\n"
            "kernel softmax_0 outer=[N] inner=[C]  # from amax, sub, exp, sum, div\n"
            "  reduced0 = max<f32>(load(buf0, r0 + C*x0))\n"
            "  reduced1 = sum<f32>(exp(sub(load(buf0, r0 + C*x0), reduced0)))\n"
            "  inner buf1[r0 + C*x0] = div(exp(sub(load(buf0, r0 + C*x0), reduced0)), reduced1)\n");
}

TEST(LoopIR, VerifierRejectsBrokenKernels) {
  Program p = softmax_program();
  auto& k = std::get<LoopKernel>(p.kernels[0]);
  k.reductions[0].value = Expr::apply(LoopOp::Add, {Expr::load(0, var("r0"), DType::f32), Expr::reduced(1, DType::f32)});
  EXPECT_THROW(verify(p), Error) << "reduced1 used by step 0";
  p = softmax_program();
  std::get<LoopKernel>(p.kernels[0]).stores[0].inner = false;
  EXPECT_THROW(verify(p), Error) << "r0 used outside the inner loop";
  p = softmax_program();
  std::get<LoopKernel>(p.kernels[0]).stores[0].buffer = 7;
  EXPECT_THROW(verify(p), Error);
  p = softmax_program();
  p.buffers[1].dtype = DType::f16;
  EXPECT_THROW(verify(p), Error) << "f32 stored into f16";
}

TEST(LoopIR, WelfordStepsComeInPairsOverOneValue) {
  Program p = softmax_program();
  auto& k = std::get<LoopKernel>(p.kernels[0]);
  ExprRef x = Expr::load(0, var("x0") * var("C") + var("r0"), DType::f32);
  k.reductions = {{ReduceKind::welford_mean, x, DType::f32}, {ReduceKind::welford_m2, x, DType::f32}};
  EXPECT_NO_THROW(verify(p));
  EXPECT_NE(to_string(p).find("reduced1 = welford_m2<f32>"), std::string::npos) << to_string(p);
  k.reductions = {{ReduceKind::welford_mean, x, DType::f32}, {ReduceKind::sum, x, DType::f32}};
  EXPECT_THROW(verify(p), Error) << "mean without M2";
  k.reductions = {{ReduceKind::sum, x, DType::f32}, {ReduceKind::welford_m2, x, DType::f32}};
  EXPECT_THROW(verify(p), Error) << "M2 without mean";
  ExprRef other = Expr::apply(LoopOp::Neg, {x});
  k.reductions = {{ReduceKind::welford_mean, x, DType::f32}, {ReduceKind::welford_m2, other, DType::f32}};
  EXPECT_THROW(verify(p), Error) << "the pair reduces different values";
}

}  // namespace
}  // namespace coil::loop
