// Golden tests of fusion decisions: how many kernels the classic patterns compile to, and what
// they fuse.
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "lower/lower.h"
#include "schedule/fuse_epilogues.h"
#include "schedule/fuse_gemm_epilogues.h"
#include "graph_passes/decompose.h"
#include "driver/compile.h"
#include "lower/cost.h"
#include "runtime/memory_plan.h"
#include "test_util.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace coil {
namespace {

loop::Program scheduled(const std::string& body) {
  Graph g = parse_graph("graph t {\n  sym N = 4\n" + body + "}\n");
  return schedule::fuse_epilogues(lower(g).program);
}

int loop_kernels(const loop::Program& p) {
  int n = 0;
  for (const auto& k : p.kernels) n += std::holds_alternative<loop::LoopKernel>(k);
  return n;
}

TEST(Fusion, GeluOfBiasAddIsOneKernel) {
  auto p = scheduled("  %x = input() : f32[N, 64]\n  %b = input() : f32[64]\n  %a = add.Tensor(%x, %b)\n  %y = gelu(%a)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 1) << loop::to_string(p);
}

TEST(Fusion, SoftmaxIsOneKernel) {
  auto p = scheduled("  %x = input() : f32[N, 64]\n  %y = _softmax(%x, -1, false)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 1) << loop::to_string(p);
}

TEST(Fusion, DecomposedSoftmaxIsOneKernel) {
  auto p = scheduled(
      "  %x = input() : f32[N, 64]\n  %m = amax(%x, [-1], true)\n  %s = sub.Tensor(%x, %m)\n  %e = exp(%s)\n"
      "  %t = sum.dim_IntList(%e, [-1], true)\n  %y = div.Tensor(%e, %t)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 1) << loop::to_string(p);
  const auto& k = std::get<loop::LoopKernel>(p.kernels[0]);
  EXPECT_EQ(k.reductions.size(), 2u);
  EXPECT_EQ(k.stores.size(), 1u) << "the row max and sum stay in registers";
}

TEST(Fusion, LayerNormIsOneKernel) {
  auto p = scheduled(
      "  %x = input() : f32[N, 64]\n  %w = input() : f32[64]\n  %y, %m, %r = native_layer_norm(%x, [64], %w, %w, 1e-05)\n"
      "  return %y\n");
  EXPECT_EQ(loop_kernels(p), 1) << loop::to_string(p);
}

TEST(Fusion, RmsNormIsOneKernel) {
  auto p = scheduled(
      "  %x = input() : f32[N, 64]\n  %w = input() : f32[64]\n  %sq = mul.Tensor(%x, %x)\n"
      "  %ms = mean.dim(%sq, [-1], true)\n  %eps = add.Scalar(%ms, 1e-06)\n  %r = rsqrt(%eps)\n"
      "  %n = mul.Tensor(%x, %r)\n  %y = mul.Tensor(%n, %w)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 1) << loop::to_string(p);
}

TEST(Fusion, CastAfterSoftmaxJoinsItsKernel) {
  // softmax(x.float()).to(bf16): the cast reads the per-element result where it was made, so
  // it runs in the softmax kernel and the f32 result is never stored.
  auto p = scheduled("  %x = input() : bf16[N, 64]\n  %f = _to_copy(%x, dtype=f32)\n  %s = _softmax(%f, -1, false)\n"
                     "  %y = _to_copy(%s, dtype=bf16)\n  return %y\n");
  ASSERT_EQ(loop_kernels(p), 1) << loop::to_string(p);
  const auto& k = std::get<loop::LoopKernel>(p.kernels[0]);
  ASSERT_EQ(k.stores.size(), 1u) << loop::to_string(p);
  EXPECT_EQ(p.buffers[static_cast<size_t>(k.stores[0].buffer)].role, loop::Buffer::Role::output);
}

TEST(Fusion, ElementResultReadAtAnotherElementIsNotFused) {
  // flip reads other elements of the softmax: the softmax must be stored first.
  auto p = scheduled("  %x = input() : f32[N, 64]\n  %s = _softmax(%x, -1, false)\n  %f = flip(%s, [1])\n"
                     "  %y = add.Tensor(%s, %f)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 2) << loop::to_string(p);
}

TEST(Lowering, SmallIntegerPowersAreProducts) {
  // ATen computes x ** 2, ** 3, ** -1 and ** -2 of a float tensor by multiplying and dividing.
  for (const char* e : {"2", "3", "-1", "-2.0"}) {
    auto p = scheduled(fmt::format("  %x = input() : f32[N, 64]\n  %y = pow.Tensor_Scalar(%x, {})\n  return %y\n", e));
    EXPECT_EQ(loop::to_string(p).find("pow("), std::string::npos) << e << "\n" << loop::to_string(p);
  }
  auto p = scheduled("  %x = input() : f32[N, 64]\n  %y = pow.Tensor_Scalar(%x, 2.5)\n  return %y\n");
  EXPECT_NE(loop::to_string(p).find("pow("), std::string::npos) << loop::to_string(p);
}

TEST(Fusion, RowResultReadAtAnotherRowIsNotFused) {
  // flip reads the sums of other rows: the sum must stay a buffer and a kernel of its own.
  auto p = scheduled(
      "  %x = input() : f32[N, 64]\n  %s = sum.dim_IntList(%x, [-1], true)\n  %f = flip(%s, [0])\n"
      "  %y = add.Tensor(%x, %f)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 2) << loop::to_string(p);
}

}  // namespace
}  // namespace coil

namespace coil {
namespace {

// The transformer block's kernel groups, in order: which graph values each kernel computes.
TEST(Fusion, TransformerBlockGroups) {
  Graph g = parse_graph_file(std::string(COIL_SOURCE_DIR) + "/models/gpt2_block.coil");
  loop::Program p = schedule::fuse_epilogues(lower(decompose(g)).program);
  std::string groups;
  for (const auto& k : p.kernels) {
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) groups += "kernel " + fmt::format("{}", fmt::join(lk->origins, "+")) + "\n";
    else groups += "extern " + fmt::format("{}", fmt::join(std::get<loop::ExternCall>(k).origins, "+")) + "\n";
  }
  EXPECT_EQ(groups,
            "kernel h1\n"          // layer_norm 1
            "extern qkv_2d\n"      // c_attn
            "kernel att_dense\n"   // q made contiguous for bmm (the value its 3-d view reads)
            "kernel att_dense_1\n" // k made contiguous; the product reads it transposed
            "extern att_qk\n"      // q @ k^T
            "kernel att_probs\n"   // scale + causal mask + softmax
            "kernel att_dense_2\n" // v made contiguous
            "extern att_pv\n"      // probs @ v
            "kernel att_c\n"       // heads merged back (the clone its 2-d view reads)
            "extern o_2d\n"        // c_proj
            "kernel h2\n"          // residual add + layer_norm 2
            "extern f_2d\n"        // c_fc
            "kernel g\n"           // gelu (its 2-d view the product's operand)
            "extern m_2d\n"        // mlp c_proj
            "kernel y\n");         // residual add
}

}  // namespace
}  // namespace coil

namespace coil {
namespace {

loop::Program pipeline(const std::string& body) {
  return generate(parse_graph("graph t {\n  sym N = 4\n" + body + "}\n")).lowered.program;
}

loop::Program gemm_fused(const std::string& body) {
  Graph g = parse_graph("graph t {\n  sym N = 4\n" + body + "}\n");
  return schedule::fuse_gemm_epilogues(lower(g).program);
}

const loop::ExternCall& first_extern(const loop::Program& p) {
  for (const auto& k : p.kernels)
    if (const auto* e = std::get_if<loop::ExternCall>(&k)) return *e;
  throw std::runtime_error("no extern call");
}

TEST(GemmEpilogue, BiasReluMovesIntoTheProductAndTheCopyGoes) {
  auto p = gemm_fused("  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %b = input() : f32[6]\n  %h = addmm(%b, %x, %w)\n"
                      "  %y = relu(%h)\n  return %y\n");
  ASSERT_EQ(p.kernels.size(), 1u) << loop::to_string(p);
  const auto& e = first_extern(p);
  EXPECT_EQ(e.activation, loop::Activation::relu);
  EXPECT_EQ(p.buffers[static_cast<size_t>(e.output)].role, loop::Buffer::Role::output) << "the product writes the output itself";
  EXPECT_NE(loop::to_string(p).find("epilogue=relu"), std::string::npos);
}

TEST(GemmEpilogue, HalfGeluTanhReadThroughItsRoundingFuses) {
  auto p = gemm_fused("  %x = input() : bf16[N, 8]\n  %w = input() : bf16[8, 6]\n  %h = mm(%x, %w)\n"
                      "  %g = gelu(%h, approximate=\"tanh\")\n  %y = add.Tensor(%g, %g)\n  return %y\n");
  EXPECT_EQ(first_extern(p).activation, loop::Activation::gelu_tanh) << loop::to_string(p);
  EXPECT_EQ(loop_kernels(p), 1) << "the add stays a pointwise kernel, now reading the product";
  EXPECT_EQ(loop::to_string(p).find("tanh("), std::string::npos) << loop::to_string(p);
}

TEST(GemmEpilogue, OtherReadsOfTheProductBlockIt) {
  const char* cases[] = {
      // the raw product is read as well
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %h = mm(%x, %w)\n  %r = relu(%h)\n  %y = add.Tensor(%r, %h)\n  return %y\n",
      // the exact (erf) gelu is no cuBLASLt epilogue
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %h = mm(%x, %w)\n  %y = gelu(%h)\n  return %y\n",
      // the product is a graph output
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %h = mm(%x, %w)\n  %y = relu(%h)\n  return %y, %h\n",
      // two different activations of one product
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %h = mm(%x, %w)\n  %r = relu(%h)\n  %g = gelu(%h, approximate=\"tanh\")\n"
      "  return %r, %g\n",
      // integer products are left alone
      "  %x = input() : i32[N, 8]\n  %w = input() : i32[8, 6]\n  %h = mm(%x, %w)\n  %y = relu(%h)\n  return %y\n",
  };
  for (const char* body : cases) {
    auto p = gemm_fused(body);
    EXPECT_EQ(first_extern(p).activation, loop::Activation::none) << body << loop::to_string(p);
  }
}

// A residual added to a product (x + linear(h), GPT-2's skip connections) becomes the product's
// C: the add kernel goes, the next product's residual can be the first one's result, and a half
// product's rounding is read through.
TEST(GemmEpilogue, ResidualAddsBecomeTheProductsC) {
  auto p = gemm_fused(
      "  %x = input() : bf16[N, 8]\n  %w = input() : bf16[8, 8]\n  %b = input() : bf16[8]\n  %v = input() : bf16[8, 8]\n"
      "  %h = addmm(%b, %x, %w)\n  %a = add.Tensor(%x, %h)\n  %g = mm(%a, %v)\n  %y = add.Tensor(%g, %a)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 0) << loop::to_string(p);
  std::vector<const loop::ExternCall*> calls;
  for (const auto& k : p.kernels) calls.push_back(&std::get<loop::ExternCall>(k));
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_TRUE(calls[0]->residual && calls[1]->residual) << loop::to_string(p);
  EXPECT_EQ(calls[0]->residual->buffer, calls[0]->inputs[1].buffer);  // x
  EXPECT_EQ(calls[1]->residual->buffer, calls[0]->output);            // x + h
  EXPECT_EQ(p.buffers[static_cast<size_t>(calls[1]->output)].role, loop::Buffer::Role::output);
  EXPECT_NE(loop::to_string(p).find(" residual=buf"), std::string::npos);
}

TEST(GemmEpilogue, ResidualsNeedOneTensorOfTheProductsElements) {
  const char* cases[] = {
      // a broadcast row is no residual of the product's elements
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %r = input() : f32[6]\n  %h = mm(%x, %w)\n  %y = add.Tensor(%h, %r)\n"
      "  return %y\n",
      // a transposed addend
      "  %x = input() : f32[6, 8]\n  %w = input() : f32[8, 6]\n  %r = input() : f32[6, 6]\n  %t = permute(%r, [1, 0])\n  %h = mm(%x, %w)\n"
      "  %y = add.Tensor(%h, %t)\n  return %y\n",
      // the product read raw as well
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %r = input() : f32[N, 6]\n  %h = mm(%x, %w)\n  %y = add.Tensor(%h, %r)\n"
      "  return %y, %h\n",
      // after an activation
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 6]\n  %r = input() : f32[N, 6]\n  %h = mm(%x, %w)\n  %g = relu(%h)\n"
      "  %y = add.Tensor(%g, %r)\n  return %y\n",
      // batched products keep theirs
      "  %x = input() : f32[2, 4, 8]\n  %w = input() : f32[2, 8, 6]\n  %r = input() : f32[2, 4, 6]\n  %h = bmm(%x, %w)\n"
      "  %y = add.Tensor(%h, %r)\n  return %y\n",
  };
  for (const char* body : cases) {
    auto p = gemm_fused(body);
    EXPECT_FALSE(first_extern(p).residual) << body << loop::to_string(p);
  }
}

TEST(InlinePointwise, ConvolutionOutputKernelAndReluAreOne) {
  Graph g = parse_graph(
      "graph t {\n  %x = input() : f32[2, 3, 8, 8]\n  %w = input() : f32[4, 3, 3, 3]\n  %b = input() : f32[4]\n"
      "  %y = convolution(%x, %w, %b, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %r = relu(%y)\n  return %r\n}\n");
  Generated gen = generate(g, {.conv_as_gemm = true});
  const auto& p = gen.lowered.program;
  ASSERT_EQ(p.kernels.size(), 3u) << loop::to_string(p);  // im2col, the product, bias + relu
  const auto& last = std::get<loop::LoopKernel>(p.kernels[2]);
  EXPECT_EQ(last.origins, (std::vector<std::string>{"y", "r"})) << loop::to_string(p);
}

// A dropout's mask, an output kept for the backward, computed in the one kernel applying it
// (its store kept): GPT-2's forward had a kernel of its own for each layer's masks.
TEST(InlinePointwise, AnOutputReadByOneKernelMovesIntoIt) {
  auto p = pipeline(
      "  %s = input() : i64[]\n  %x = input() : f32[N, 64]\n"
      "  %u = philox_random(%s, size=[N, 64], stream=0, distribution=\"uniform\", dtype=f32)\n  %m = gt.Scalar(%u, 0.1)\n"
      "  %y = mul.Tensor(%x, %m)\n  return %m, %y\n");
  ASSERT_EQ(loop_kernels(p), 1) << loop::to_string(p);
  EXPECT_EQ(std::get<loop::LoopKernel>(p.kernels[0]).stores.size(), 2u) << loop::to_string(p);
}

// A residual sum returned beside the layer norm that recomputes it: the norm's row kernel stores
// it too (GPT-2: 12 kernels of 0.056 ms a step). An update of an input stays a kernel of its own,
// which the runtime may compute over the input's memory (MemoryPlan.UpdateIsComputedOverItsInput).
TEST(Fusion, AValueStoredBesideTheRowKernelRecomputingItJoinsIt) {
  auto p = pipeline(
      "  %t = input() : f32[N, 32]\n  %q = input() : f32[32, 64]\n  %h = mm(%t, %q)\n  %w = input() : f32[64]\n"
      "  %s = add.Tensor(%h, %w)\n  %y, %m, %r = native_layer_norm(%s, [64], %w, %w, 1e-05)\n  return %s, %y\n");
  ASSERT_EQ(loop_kernels(p), 1) << loop::to_string(p);
  const auto& k = std::get<loop::LoopKernel>(p.kernels[1]);
  EXPECT_FALSE(k.inner.empty());
  EXPECT_EQ(k.stores.size(), 2u) << loop::to_string(p);
  auto update = pipeline(
      "  %p = input() : f32[N, 64]\n  %g = input() : f32[N, 64]\n  %n = sub.Tensor(%p, %g)\n  %l = sum.dim_IntList(%n, [1])\n"
      "  return %n, %l\n");
  EXPECT_EQ(loop_kernels(update), 2) << loop::to_string(update);
}

TEST(SiblingFusion, ReductionsOfOneInputShareAKernel) {
  auto p = pipeline(
      "  %x = input() : f32[N, 64]\n  %e = exp(%x)\n  %s = sum.dim_IntList(%e, [1])\n  %m = amax(%x, [1])\n"
      "  %v = var.correction(%x, [1])\n  return %s, %m, %v\n");
  ASSERT_EQ(loop_kernels(p), 1) << loop::to_string(p);
  EXPECT_EQ(std::get<loop::LoopKernel>(p.kernels[0]).stores.size(), 3u);
}

// A mean beside a variance of the same values (a batch norm's statistics) is, for the CUDA
// target, the variance's Welford mean times the row's length: one pass over the row, which a
// GPU may split between blocks. The CPU keeps its vectorized sum (the more accurate mean) and
// the reference's values.
TEST(SiblingFusion, ASumBesideAWelfordMeanOfItsValuesIsThatMeanOnAGpu) {
  const std::string body =
      "  %x = input() : f32[N, 5, 3, 7]\n  %s = sum.dim_IntList(%x, [0, 2, 3], true)\n  %m = mean.dim(%x, [0, 2, 3])\n"
      "  %v = var.correction(%x, [0, 2, 3], correction=0)\n  %e = exp(%x)\n  %t = sum.dim_IntList(%e, [0, 2, 3])\n  return %s, %m, %v, %t\n";
  Graph g = parse_graph("graph t {\n  sym N = 4\n" + body + "}\n");
  auto kinds = [](const loop::Program& p) {
    std::vector<loop::ReduceKind> out;
    for (const auto& k : p.kernels)
      if (const auto* lk = std::get_if<loop::LoopKernel>(&k))
        for (const auto& r : lk->reductions) out.push_back(r.kind);
    return out;
  };
  using K = loop::ReduceKind;
  Target gpu;
  gpu.cuda = true;
  gpu.device = cuda::preset_device("sm_90a");
  const loop::Program on_gpu = generate(g, gpu).lowered.program;
  ASSERT_EQ(loop_kernels(on_gpu), 1) << loop::to_string(on_gpu);
  // the sum of exp(x) is of other values: it stays
  EXPECT_EQ(kinds(on_gpu), (std::vector<K>{K::welford_mean, K::welford_m2, K::sum})) << loop::to_string(on_gpu);
  const loop::Program on_cpu = pipeline(body);
  EXPECT_EQ(kinds(on_cpu).size(), 5u) << loop::to_string(on_cpu);
  Executable exe = compile(g, {.cache_dir = ::testing::TempDir() + "/coil_fusion_cache"});
  TensorMap inputs = random_inputs(g, 3);
  auto got = exe.run(inputs, {});
  auto want = evaluate_reference(g, inputs);
  for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], want[i], "output " + std::to_string(i));
}

// A step that reads the sum before the Welford mean is computed (a two-pass variance merged
// in front of a Welford one) keeps the sum: every step reads only earlier steps' results.
TEST(SiblingFusion, ASumReadBeforeTheWelfordMeanStays) {
  Graph g = parse_graph(
      "graph t {\n  %x = input() : f32[6, 40]\n  %m = mean.dim(%x, [1], true)\n  %d = sub.Tensor(%x, %m)\n  %q = mul.Tensor(%d, %d)\n"
      "  %s = sum.dim_IntList(%q, [1])\n  %v = var.correction(%x, [1])\n  return %s, %v\n}\n");
  Target gpu;
  gpu.cuda = true;
  gpu.device = cuda::preset_device("sm_90a");
  const loop::Program p = generate(g, gpu).lowered.program;
  const std::function<int(const loop::ExprRef&)> latest = [&](const loop::ExprRef& e) {
    int slot = e->kind() == loop::Expr::Kind::reduced ? e->slot() : -1;
    for (const auto& o : e->operands()) slot = std::max(slot, latest(o));
    return slot;
  };
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) {
      for (size_t j = 0; j < lk->reductions.size(); ++j) EXPECT_LT(latest(lk->reductions[j].value), static_cast<int>(j)) << loop::to_string(p);
    }
}

// A reduction whose rows run across memory (per-channel statistics of a channels-last
// activation) keeps the normalization that reads its result in a kernel of its own, so that a
// GPU can split its few long columns; a row reduction takes it as an epilogue.
TEST(Fusion, AColumnReductionTakesNoElementwiseEpilogue) {
  auto p = pipeline(
      "  %x = input() : f32[8, 6, 5]\n  %t = permute(%x, [2, 0, 1])\n  %m = mean.dim(%t, [1, 2], true)\n"
      "  %y = sub.Tensor(%t, %m)\n  return %y\n");
  EXPECT_EQ(loop_kernels(p), 2) << loop::to_string(p);
  auto rows = pipeline("  %x = input() : f32[5, 8, 6]\n  %m = mean.dim(%x, [1, 2], true)\n  %y = sub.Tensor(%x, %m)\n  return %y\n");
  EXPECT_EQ(loop_kernels(rows), 1) << loop::to_string(rows);
}

TEST(SiblingFusion, PointwiseSiblingsReadingOneInputShareAKernel) {
  auto p = pipeline("  %x = input() : f32[N, 64]\n  %a = exp(%x)\n  %b = neg(%x)\n  return %a, %b\n");
  EXPECT_EQ(loop_kernels(p), 1) << loop::to_string(p);
}

TEST(SiblingFusion, DependentKernelsStayApart) {
  // %t realized (two consumers), then read by a sibling-shaped kernel: fusing would read %t
  // before it is written.
  auto p = pipeline(
      "  %x = input() : f32[N, 64]\n  %t = exp(%x)\n  %u = tanh(%t)\n  %a = add.Tensor(%t, %x)\n"
      "  %b = sum.dim_IntList(%u, [1])\n  %c = sum.dim_IntList(%a, [1])\n  return %b, %c, %t\n");
  // The output %t is stored by one kernel and read by later ones only.
  MemoryPlan plan = plan_memory({p, {}, {}, {}});
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (plan.first_use[b] < 0) continue;
    for (size_t s = 0; s < plan.reads.size(); ++s) {
      bool reads = std::count(plan.reads[s].begin(), plan.reads[s].end(), static_cast<int>(b)) > 0;
      bool writes = std::count(plan.writes[s].begin(), plan.writes[s].end(), static_cast<int>(b)) > 0;
      EXPECT_FALSE(reads && writes && p.buffers[b].role != loop::Buffer::Role::input) << "buf" << b << " step " << s << "\n" << loop::to_string(p);
    }
  }
}

}  // namespace
}  // namespace coil

namespace coil {
namespace {

TEST(CostModel, CheapSharedValuesAreRecomputedExpensiveOnesStoredOnce) {
  using lowering::compute_cost;
  using lowering::should_realize;
  // relu(x) read by two consumers: one load and one max per element; recomputing it once more
  // costs less than storing and reloading it.
  auto relu = pipeline("  %x = input() : f32[N, 64]\n  %r = relu(%x)\n  %a = exp(%r)\n  %b = neg(%r)\n  return %a, %b\n");
  EXPECT_EQ(relu.buffers.size(), 3u) << loop::to_string(relu);  // x, a, b: no buffer for r
  // gelu(x) read by four consumers is computed once.
  auto g = pipeline(
      "  %x = input() : f32[N, 64]\n  %r = gelu(%x)\n  %a = sin(%r)\n  %b = neg(%r)\n  %c = sum.dim_IntList(%r, [1])\n"
      "  %d = amax(%r, [1])\n  return %a, %b, %c, %d\n");
  bool stored = false;
  for (const auto& b : g.buffers) stored = stored || b.name == "r";
  EXPECT_TRUE(stored) << loop::to_string(g);
  // The model itself: a shared subexpression counts once.
  auto x = loop::Expr::load(0, SymInt::symbol("x0"), DType::f32);
  auto sq = loop::Expr::apply(loop::LoopOp::Mul, {x, x});
  EXPECT_EQ(compute_cost(sq), 2);  // one load, one multiply
  EXPECT_FALSE(should_realize(sq, 2));
  auto heavy = loop::Expr::apply(loop::LoopOp::Tanh, {loop::Expr::apply(loop::LoopOp::Exp, {x})});
  EXPECT_FALSE(should_realize(heavy, 2));  // 21 to recompute once vs 24 for the round trip
  EXPECT_TRUE(should_realize(heavy, 3));   // 42 vs 32
  EXPECT_FALSE(should_realize(heavy, 1));
  // Memory: a cheap body reading four tensors, read twice, is stored (8 passes inline vs 7).
  EXPECT_FALSE(should_realize(sq, 2, 3));
  EXPECT_TRUE(should_realize(sq, 2, 4));
  EXPECT_FALSE(should_realize(sq, 1, 9));
}

// A residual stream through eight "layers" (x_l = x_{l-1} + y_l, each x_l also read by a row
// sum): cheap enough that the compute bound alone would inline the whole chain into every sum
// (the last reading nine tensors); the memory bound stores it every few layers.
TEST(CostModel, ResidualStreamsAreStoredInsteadOfRecomputedByEveryLayer) {
  std::string text = "  %x0 = input() : f32[N, 64]\n";
  std::string outputs = "%x8";
  for (int l = 1; l <= 8; ++l) {
    text += fmt::format("  %y{0} = input() : f32[N, 64]\n  %x{0} = add.Tensor(%x{1}, %y{0})\n", l, l - 1);
    text += fmt::format("  %s{0} = sum.dim_IntList(%x{0}, [1], true)\n", l);
    outputs += fmt::format(", %s{}", l);
  }
  text += "  return " + outputs + "\n";
  auto p = pipeline(text);
  size_t most = 0;
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) {
      std::set<int> read;
      std::function<void(const loop::ExprRef&)> visit = [&](const loop::ExprRef& e) {
        if (e->kind() == loop::Expr::Kind::load) read.insert(e->buffer());
        for (const auto& o : e->operands()) visit(o);
      };
      for (const auto& s : lk->stores) visit(s.value);
      for (const auto& r : lk->reductions) visit(r.value);
      most = std::max(most, read.size());
    }
  EXPECT_LE(most, 4u) << loop::to_string(p);
}

}  // namespace
}  // namespace coil
