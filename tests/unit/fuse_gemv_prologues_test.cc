// schedule/fuse_gemv_prologues: which row kernels run inside the few-row products that read their
// result (an RMSNorm before a gated pair, before three products, a softmax of two reductions) and
// which do not (a result read elsewhere or returned, a Welford LayerNorm, rows too many bytes
// for every block to read, the CPU), on the program an sm_90a compile makes, and the prologue's text. The
// values are checked on a GPU by cuda_gemv_test.cc's cases and tests/python/test_few_row_products.py.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "coil/coil.h"
#include "driver/compile.h"
#include "schedule/fuse_gemv_prologues.h"

namespace coil {
namespace {

Generated cuda_code(const std::string& body) {
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  return generate(parse_graph("graph t {\n" + body + "}\n"), t);
}

struct Calls {
  int products = 0, loops = 0, with_prologue = 0;
};

Calls count(const loop::Program& p) {
  Calls c;
  for (const auto& k : p.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&k);
    if (!call) {
      ++c.loops;
      continue;
    }
    c.products += loop::is_product(call->kind);
    c.with_prologue += call->prologue != nullptr;
  }
  return c;
}

// A Llama RMSNorm of %h ([rows, K], `dtype`) into %x, then `tail`.
std::string rms_norm(int rows, int k, const std::string& tail, const std::string& dtype = "bf16") {
  return fmt::format(
      "  %h = input() : {0}[{1}, {2}]\n  %nw = input() : {0}[{2}]\n  %hf = _to_copy(%h, dtype=f32)\n  %sq = pow.Tensor_Scalar(%hf, 2)\n"
      "  %ms = mean.dim(%sq, [-1], true)\n  %e = add.Scalar(%ms, 1e-06)\n  %rs = rsqrt(%e)\n  %n = mul.Tensor(%hf, %rs)\n"
      "  %nb = _to_copy(%n, dtype={0})\n  %x = mul.Tensor(%nb, %nw)\n{3}",
      dtype, rows, k, tail);
}

std::string weight(const std::string& name, int n, int k, const std::string& dtype = "bf16") {
  return fmt::format("  %{0} = input() : {3}[{1}, {2}]\n  %{0}t = permute(%{0}, [1, 0])\n", name, n, k, dtype);
}

TEST(GemvPrologues, ANormRunsInsideTheGatedPairThatReadsIt) {
  Generated gen = cuda_code(rms_norm(1, 2048,
                                     weight("w1", 352, 2048) + weight("w3", 352, 2048) +
                                         "  %a = mm(%x, %w1t)\n  %b = mm(%x, %w3t)\n  %s = silu(%a)\n  %y = mul.Tensor(%s, %b)\n  return %y\n"));
  const loop::Program& p = gen.lowered.program;
  const Calls c = count(p);
  EXPECT_EQ(c.products, 1);
  EXPECT_EQ(c.loops, 0) << loop::to_string(p);
  EXPECT_EQ(c.with_prologue, 1);
  const std::string printed = loop::to_string(p);
  EXPECT_NE(printed.find(" first(A)"), std::string::npos) << printed;
  // The call reads %h, the norm's weight and both products' weights; not A's buffer.
  const auto& call = std::get<loop::ExternCall>(p.kernels.at(0));
  const int a = call.inputs[0].buffer;
  EXPECT_EQ(loop::access(call).reads.count(a), 0u) << printed;
  EXPECT_EQ(loop::access(call).reads.size(), 4u) << printed;
  ASSERT_EQ(gen.cuda.kernels.size(), 1u);
  EXPECT_EQ(gen.cuda.kernels[0].buffers.size(), 5u);
  const std::string& body = gen.cuda.bodies[0];
  // the block's sum of squares of each row, the store's roundings into shared memory, and the
  // products reading A there (plain loads, a row 16 bytes longer than K)
  for (const char* part : {"coil_rt::group_allreduce(acc0[m], coil_rt::Sum(), 256", "pro[m * KP + r0] = coil_rt::f32_to_bf16(",
                           "constexpr int KP = 2056", "reinterpret_cast<const V*>(pro + m * 2056 + k)"})
    EXPECT_NE(body.find(part), std::string::npos) << part << "\n" << body;
  EXPECT_EQ(body.find(fmt::format("b{}", a)), std::string::npos) << body;
  EXPECT_LT(body.find("after_previous"), body.find("group_allreduce")) << body;
}

TEST(GemvPrologues, EveryReaderComputesItsOwnA) {
  // the attention's q, k and v projections of one normed token, each a product of its own
  Generated gen = cuda_code(rms_norm(1, 512,
                                     weight("wq", 512, 512) + weight("wk", 128, 512) + weight("wv", 128, 512) +
                                         "  %q = mm(%x, %wqt)\n  %k = mm(%x, %wkt)\n  %v = mm(%x, %wvt)\n  return %q, %k, %v\n"));
  const Calls c = count(gen.lowered.program);
  EXPECT_EQ(c.products, 3);
  EXPECT_EQ(c.loops, 0) << loop::to_string(gen.lowered.program);
  EXPECT_EQ(c.with_prologue, 3);
}

TEST(GemvPrologues, TwoPassesOfASoftmax) {
  Generated gen = cuda_code("  %h = input() : f16[3, 200]\n  %x = _softmax(%h, -1, false)\n" + weight("w", 77, 200, "f16") +
                            "  %y = mm(%x, %wt)\n  return %y\n");
  const Calls c = count(gen.lowered.program);
  EXPECT_EQ(c.loops, 0) << loop::to_string(gen.lowered.program);
  EXPECT_EQ(c.with_prologue, 1);
  const std::string& body = gen.cuda.bodies.at(0);
  for (const char* part : {"coil_rt::Max()", "coil_rt::Sum()", "red0[m]", "red1[m]"}) EXPECT_NE(body.find(part), std::string::npos) << part << "\n" << body;
}

TEST(GemvPrologues, OnlyRowKernelsWhoseResultOnlyProductsReadJoin) {
  const std::string mm = weight("w", 384, 512) + "  %y = mm(%x, %wt)\n";
  struct Case {
    std::string body;
    int loops, with_prologue;
  };
  const Case cases[] = {
      // the normed rows returned too
      {rms_norm(1, 512, mm + "  return %y, %x\n"), 1, 0},
      // read by a pointwise kernel besides the product
      {rms_norm(2, 512, mm + "  %z = add.Tensor(%x, %x)\n  return %y, %z\n"), 2, 0},
      // 8 rows of 2048: 32 KiB of A in every block, more than a prologue may read (measured slower)
      {rms_norm(8, 2048, weight("w", 64, 2048) + "  %y = mm(%x, %wt)\n  return %y\n"), 1, 0},
      // 32 rows: cuBLASLt's product
      {rms_norm(32, 512, mm + "  return %y\n"), 1, 0},
      // a LayerNorm: one Welford pass
      {"  %h = input() : f16[4, 320]\n  %g = input() : f16[320]\n  %c = input() : f16[320]\n"
       "  %x, %mu, %rstd = native_layer_norm(%h, [320], %g, %c, 1e-05)\n" +
           weight("w", 200, 320, "f16") + "  %y = mm(%x, %wt)\n  return %y\n",
       1, 0},
      // A read transposed (its columns are the norm's rows)
      {rms_norm(8, 8, weight("w", 40, 8) + "  %xt = permute(%x, [1, 0])\n  %y = mm(%xt, %wt)\n  return %y\n"), 1, 0},
  };
  for (const Case& c : cases) {
    Generated gen = cuda_code(c.body);
    const Calls got = count(gen.lowered.program);
    EXPECT_EQ(got.loops, c.loops) << c.body << loop::to_string(gen.lowered.program);
    EXPECT_EQ(got.with_prologue, c.with_prologue) << c.body << loop::to_string(gen.lowered.program);
  }
}

// A kernel between the norm and the product that writes what the norm reads: the norm keeps its
// kernel (inside the product it would read the new values). The pass on the CPU's program (the
// norm a loop kernel, the product a call), with a kernel adding one to %h put in between.
TEST(GemvPrologues, AWriteBetweenKeepsTheKernel) {
  const Generated gen =
      generate(parse_graph("graph t {\n" + rms_norm(1, 512, weight("w", 384, 512) + "  %y = mm(%x, %wt)\n  return %y\n") + "}\n"), Target{});
  const loop::Program& p = gen.lowered.program;
  auto takes = [](const loop::ExternCall&, const loop::Program&) { return true; };
  ASSERT_EQ(count(p).loops, 1) << loop::to_string(p);
  EXPECT_EQ(count(schedule::fuse_gemv_prologues(p, takes)).with_prologue, 1) << loop::to_string(p);
  const int h = gen.lowered.input_buffers.at(0);
  loop::LoopKernel bump;
  bump.name = "bump";
  bump.outer = {SymInt(512)};
  const SymInt at = SymInt::symbol("x0");
  bump.stores.push_back({h, at,
                         loop::Expr::cast(loop::Expr::apply(loop::LoopOp::Add, {loop::Expr::cast(loop::Expr::load(h, at, DType::bf16), DType::f32),
                                                                                  loop::Expr::constant(1, DType::f32)}),
                                          DType::bf16),
                         false});
  loop::Program between = p;
  const size_t norm = std::holds_alternative<loop::LoopKernel>(p.kernels[0]) ? 0 : 1;
  between.kernels.insert(between.kernels.begin() + static_cast<std::ptrdiff_t>(norm) + 1, bump);
  const Calls c = count(schedule::fuse_gemv_prologues(between, takes));
  EXPECT_EQ(c.with_prologue, 0);
  EXPECT_EQ(c.loops, 2);
}

TEST(GemvPrologues, TheCpuKeepsItsKernels) {
  Generated gen = generate(parse_graph("graph t {\n" + rms_norm(1, 512, weight("w", 384, 512, "f32") + "  %y = mm(%x, %wt)\n  return %y\n", "f32") + "}\n"),
                           Target{});
  const Calls c = count(gen.lowered.program);
  EXPECT_EQ(c.with_prologue, 0);
  EXPECT_GE(c.loops, 1);
}

}  // namespace
}  // namespace coil
