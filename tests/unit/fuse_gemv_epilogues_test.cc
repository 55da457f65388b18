// schedule/fuse_gemv_epilogues: which pointwise kernels join the few-row products before them
// (a gated pair, a single product) and which do not (a result read elsewhere, read at another
// element, a reduction after it, products the kernel does not take), on the program an sm_90a
// compile makes, and the epilogue's text. The results are checked on a GPU by
// cuda_gemv_test.cc's cases and tests/python/test_few_row_products.py.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "coil/coil.h"
#include "driver/compile.h"

namespace coil {
namespace {

Generated cuda_code(const std::string& body) {
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  return generate(parse_graph("graph t {\n" + body + "}\n"), t);
}

struct Calls {
  int products = 0, loops = 0, gated = 0, with_epilogue = 0;
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
    c.gated += call->gate.has_value();
    c.with_epilogue += call->epilogue != nullptr;
  }
  return c;
}

// x W1^T and x W3^T, then `tail` over %a and %b.
std::string pair(int rows, const std::string& tail, const std::string& dtype = "bf16") {
  return fmt::format(
      "  %x = input() : {0}[{1}, 512]\n  %w1 = input() : {0}[384, 512]\n  %w3 = input() : {0}[384, 512]\n  %w1t = permute(%w1, [1, 0])\n"
      "  %w3t = permute(%w3, [1, 0])\n  %a = mm(%x, %w1t)\n  %b = mm(%x, %w3t)\n{2}",
      dtype, rows, tail);
}

TEST(GemvEpilogues, AGatedPairAndItsKernelBecomeOneCall) {
  Generated gen = cuda_code(pair(1, "  %s = silu(%a)\n  %y = mul.Tensor(%s, %b)\n  return %y\n"));
  const Calls c = count(gen.lowered.program);
  EXPECT_EQ(c.products, 1);
  EXPECT_EQ(c.loops, 0);
  EXPECT_EQ(c.gated, 1);
  const std::string printed = loop::to_string(gen.lowered.program);
  EXPECT_NE(printed.find(" gate=buf"), std::string::npos) << printed;
  EXPECT_NE(printed.find(" then("), std::string::npos) << printed;
  ASSERT_EQ(gen.cuda.kernels.size(), 1u);
  EXPECT_EQ(gen.cuda.kernels[0].config.form, codegen::CudaConfig::Form::gemv);
  const std::string& body = gen.cuda.bodies[0];
  // both products' sums, each rounded to bf16 as its buffer held it, then the kernel's value
  for (const char* part : {"v2 += part[sl][og][OUT + j][m]", "coil_rt::f32_to_bf16(v)", "coil_rt::f32_to_bf16(v2)", "coil_rt::sigmoid("})
    EXPECT_NE(body.find(part), std::string::npos) << part << "\n" << body;
  // the kernel reads x and both weights, and writes %y only
  EXPECT_EQ(gen.cuda.kernels[0].buffers.size(), 4u) << body;
}

TEST(GemvEpilogues, OnlySoleElementwiseReadersJoin) {
  struct Case {
    std::string body;
    int products, loops, gated, with_epilogue;
  };
  const Case cases[] = {
      // %a also returned: %b's product joins alone; its epilogue reads %a's buffer
      {pair(1, "  %s = silu(%a)\n  %y = mul.Tensor(%s, %b)\n  return %y, %a\n"), 2, 0, 0, 1},
      // %a read transposed: not its element (%b's joins alone)
      {pair(4, "  %at = permute(%a, [1, 0])\n  %bt = permute(%b, [1, 0])\n  %y = add.Tensor(%at, %bt)\n  return %y\n"), 2, 1, 0, 0},
      // a reduction after the products
      {pair(2, "  %y = mul.Tensor(%a, %b)\n  %s = sum.dim_IntList(%y, [1])\n  return %s\n"), 2, 1, 0, 0},
      // 32 rows: cuBLASLt's products
      {pair(32, "  %y = mul.Tensor(%a, %b)\n  return %y\n"), 2, 1, 0, 0},
      // different A: two single epilogues cannot share; the first joins
      {"  %x = input() : bf16[1, 512]\n  %z = input() : bf16[1, 512]\n  %w1 = input() : bf16[384, 512]\n  %w1t = permute(%w1, [1, 0])\n"
       "  %a = mm(%x, %w1t)\n  %b = mm(%z, %w1t)\n  %y = mul.Tensor(%a, %b)\n  return %y\n",
       2, 0, 0, 1},
  };
  for (const Case& c : cases) {
    Generated gen = cuda_code(c.body);
    const Calls got = count(gen.lowered.program);
    EXPECT_EQ(got.products, c.products) << c.body << loop::to_string(gen.lowered.program);
    EXPECT_EQ(got.loops, c.loops) << c.body << loop::to_string(gen.lowered.program);
    EXPECT_EQ(got.gated, c.gated) << c.body << loop::to_string(gen.lowered.program);
    EXPECT_EQ(got.with_epilogue, c.with_epilogue) << c.body << loop::to_string(gen.lowered.program);
  }
}

// On the CPU nothing changes: the products stay calls of the BLAS and the kernel a loop kernel.
TEST(GemvEpilogues, TheCpuKeepsItsKernels) {
  Generated gen = generate(parse_graph("graph t {\n" + pair(1, "  %s = silu(%a)\n  %y = mul.Tensor(%s, %b)\n  return %y\n", "f32") + "}\n"), Target{});
  const Calls c = count(gen.lowered.program);
  EXPECT_EQ(c.with_epilogue, 0);
  EXPECT_GE(c.loops, 1);
}

}  // namespace
}  // namespace coil
