// schedule/hoist_invariants: an optimizer-style update's bias correction (powers of a 0-d step
// count) leaves the per-element kernel for a 0-d kernel before it, on both targets, and the
// compiled update still matches the interpreter; what stays (a small kernel, a value the kernel
// itself writes, an f16 subexpression, cheap arithmetic alone).
#include <gtest/gtest.h>

#include <string>

#include "coil/coil.h"
#include "driver/compile.h"
#include "schedule/hoist_invariants.h"
#include "test_util.h"

namespace coil {
namespace {

// One parameter's Adam-like update at `n` elements: m / (1 - 0.9^(step + 1)) scaled by
// sqrt(step + 1), subtracted from p.
std::string update(int64_t n, const std::string& dtype = "f32") {
  return "graph t {\n  %p = input() : " + dtype + "[" + std::to_string(n) + "]\n  %m = input() : " + dtype + "[" + std::to_string(n) +
         "]\n  %step = input() : f32[]\n  %s1 = add.Scalar(%step, 1)\n  %bc = pow.Scalar(0.9, %s1)\n  %c = rsub.Scalar(%bc, 1)\n"
         "  %d = div.Tensor(%m, %c)\n  %r = sqrt(%s1)\n  %u = mul.Tensor(%d, %r)\n  %y = sub.Tensor(%p, %u)\n  return %y\n}\n";
}

// The kernels of a program whose store values apply `op` (printed form), by their points.
std::vector<std::string> kernels_with(const loop::Program& p, const std::string& op) {
  std::vector<std::string> out;
  for (const auto& k : p.kernels) {
    const auto* lk = std::get_if<loop::LoopKernel>(&k);
    if (!lk) continue;
    for (const auto& s : lk->stores)
      if (loop::to_string(s.value).find(op + "(") != std::string::npos) {
        out.push_back(shape_str(lk->outer));
        break;
      }
  }
  return out;
}

TEST(HoistInvariants, TheBiasCorrectionIsComputedOnce) {
  for (bool cuda : {false, true}) {
    Target t;
    if (cuda) t.cuda = true, t.device = cuda::preset_device("sm_90a");
    const Generated gen = generate(parse_graph(update(10000)), t);
    const loop::Program& p = gen.lowered.program;
    EXPECT_EQ(kernels_with(p, "pow"), std::vector<std::string>{"[]"}) << loop::to_string(p);
    EXPECT_EQ(kernels_with(p, "sqrt"), std::vector<std::string>{"[]"}) << loop::to_string(p);
    // the element kernel divides by the hoisted value (a load of a 0-d temporary)
    EXPECT_EQ(kernels_with(p, "div"), std::vector<std::string>{"[10000]"}) << loop::to_string(p);
  }
}

TEST(HoistInvariants, TheCompiledUpdateMatchesTheInterpreter) {
  for (int64_t n : {int64_t{5000}, int64_t{100}}) {
    const Graph g = parse_graph(update(n));
    TensorMap inputs = random_inputs(g, 3);
    const auto want = evaluate_reference(g, inputs);
    Executable exe = compile(g, CompileOptions{.cache_dir = testing::temp_dir("hoist"), .device = "cpu"});
    const auto got = exe.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    testing::expect_close(got[0], want[0], "update of " + std::to_string(n));
  }
}

TEST(HoistInvariants, WhatStays) {
  // fewer points than the threshold
  EXPECT_EQ(kernels_with(generate(parse_graph(update(100))).lowered.program, "pow"), std::vector<std::string>{"[100]"});
  // f16 elements: the f32 powers leave, the kernel keeps its f16 arithmetic
  const loop::Program half = generate(parse_graph(update(8192, "f16"))).lowered.program;
  EXPECT_EQ(kernels_with(half, "pow"), std::vector<std::string>{"[]"}) << loop::to_string(half);

  // A kernel reading at a fixed place a buffer it writes keeps that work (the value it reads is
  // the one before its own stores), and cheap arithmetic alone stays.
  loop::Program p;
  p.buffers.push_back(loop::Buffer{.name = "x", .role = loop::Buffer::Role::input, .dtype = DType::f32, .sizes = {SymInt(8192)}, .strides = {SymInt(1)}});
  p.buffers.push_back(loop::Buffer{.name = "y", .role = loop::Buffer::Role::output, .dtype = DType::f32, .sizes = {SymInt(8192)}, .strides = {SymInt(1)}});
  p.buffers.push_back(loop::Buffer{.name = "s", .role = loop::Buffer::Role::input, .dtype = DType::f32, .sizes = {}, .strides = {}});
  const SymInt x0 = SymInt::symbol("x0");
  auto load = [](int b, SymInt at) { return loop::Expr::load(b, std::move(at), DType::f32); };
  auto op = [](loop::LoopOp o, std::vector<loop::ExprRef> a) { return loop::Expr::apply(o, std::move(a)); };
  loop::LoopKernel own{.name = "own", .outer = {SymInt(8192)}};
  own.stores.push_back({0, x0, op(loop::LoopOp::Mul, {load(0, x0), op(loop::LoopOp::Sqrt, {load(0, SymInt(0))})}), false});
  loop::LoopKernel plain{.name = "plain", .outer = {SymInt(8192)}};
  plain.stores.push_back({1, x0, op(loop::LoopOp::Mul, {load(0, x0), op(loop::LoopOp::Add, {load(2, SymInt(0)), loop::Expr::constant(1, DType::f32)})}), false});
  p.kernels = {own, plain};
  const loop::Program q = schedule::hoist_invariants(p);
  EXPECT_EQ(q.kernels.size(), 2u) << loop::to_string(q);
  EXPECT_EQ(q.buffers.size(), 3u);
}

}  // namespace
}  // namespace coil
