// Overlapped launches (programmatic dependent launch, cuda::Context::launch): every generated
// kernel waits for the kernel before it (coil_rt::after_previous) before it touches memory that
// kernels write, checked on the generated text of every form without a GPU; on a GPU, a chain of
// dependent kernels (reductions whose results the next kernel reads, a product of one row whose
// weight is prefetched before the wait) against the interpreter, plain and replayed from a CUDA
// graph, with the launches overlapping where the device allows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "coil/coil.h"
#include "cuda_test_util.h"
#include "driver/compile.h"
#include "runtime/cuda/gpu_plan.h"
#include "test_util.h"

namespace coil {
namespace {

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + body + "}\n"); }

// Rounds of a column mean, its subtraction and a row maximum: each round's kernels read what the
// previous kernel wrote. Then a pointwise kernel feeding a product of one row (bf16, nn.Linear's
// weight: coil's own kernel, whose weight stream starts before the wait) and its consumer.
std::string chain(int rounds) {
  std::string s = "  %a0 = input() : f32[64, 96]\n";
  for (int i = 0; i < rounds; ++i)
    s += fmt::format(
        "  %c{0} = mean.dim(%a{0}, [0])\n  %b{0} = sub.Tensor(%a{0}, %c{0})\n  %m{0} = amax(%b{0}, [1])\n"
        "  %v{0} = view(%m{0}, [64, 1])\n  %d{0} = sub.Tensor(%b{0}, %v{0})\n  %a{1} = tanh(%d{0})\n",
        i, i + 1);
  s += "  %x0 = input() : bf16[1, 512]\n  %w = input() : bf16[384, 512]\n  %x = tanh(%x0)\n  %wt = permute(%w, [1, 0])\n"
       "  %h = mm(%x, %wt)\n  %hm = amax(%h, [1])\n  %hv = view(%hm, [1, 1])\n  %y = sub.Tensor(%h, %hv)\n";
  return s + fmt::format("  return %a{}, %y\n", rounds);
}

// The text of a kernel from its signature's brace up to its wait, else nothing.
std::optional<std::string> before_wait(const std::string& body) {
  const size_t open = body.find(") {\n", body.find("__global__"));
  const size_t wait = body.find("coil_rt::after_previous();");
  if (open == std::string::npos || wait == std::string::npos || wait < open) return std::nullopt;
  return body.substr(open + 4, wait - open - 4);
}

TEST(CudaCodegen, EveryKernelWaitsForThePreviousBeforeTouchingMemory) {
  const std::vector<std::string> graphs = {
      chain(2),
      // a split reduction (scratch), a scan, a scatter
      "  %x = input() : f32[48, 70001]\n  %s = sum(%x)\n  %c = cumsum(%x, 1)\n  %g = input() : f32[40, 96]\n"
      "  %i = input(low=0, high=100) : i64[40]\n  %z = input() : f32[100, 96]\n  %y = index_put(%z, [%i], %g, accumulate=true)\n"
      "  return %s, %c, %y\n",
      // a product of one row whose weight a kernel computes: nothing of it is read before the wait
      "  %xb = input() : bf16[1, 512]\n  %wb = input() : bf16[384, 512]\n  %w2 = mul.Scalar(%wb, other=2)\n"
      "  %w2t = permute(%w2, [1, 0])\n  %h2 = mm(%xb, %w2t)\n  return %h2\n",
      // eight rows: the tensor-core form, its first batch of weight pieces early
      "  %x8 = input() : bf16[8, 512]\n  %w8 = input() : bf16[384, 512]\n  %w8t = permute(%w8, [1, 0])\n  %h8 = mm(%x8, %w8t)\n  return %h8\n",
      // attention: the tiled kernel and the decoding one (one query row)
      "  %q = input() : bf16[2, 8, 128, 64]\n  %k = input() : bf16[2, 8, 128, 64]\n  %v = input() : bf16[2, 8, 128, 64]\n"
      "  %o = scaled_dot_product_attention(%q, %k, %v)\n  %q1 = input() : bf16[2, 8, 1, 64]\n"
      "  %o1 = scaled_dot_product_attention(%q1, %k, %v)\n  return %o, %o1\n",
  };
  // Reads and writes of buffers: an indexed parameter or a load helper.
  const std::regex touches(R"(\bb\d+\s*\[|\bb\d+\s*\+|load_keep|load_once|\bE\[|\bW\[)");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Target t;
    t.cuda = true;
    t.device = cuda::preset_device(arch);
    int kernels = 0, prefetching = 0, early = 0;
    for (const std::string& body : graphs) {
      Generated gen = generate(parse(body), t);
      ASSERT_EQ(gen.cuda.bodies.size(), gen.cuda.kernels.size());
      for (size_t i = 0; i < gen.cuda.bodies.size(); ++i) {
        const std::string& text = gen.cuda.bodies[i];
        const auto prefix = before_wait(text);
        ASSERT_TRUE(prefix) << "no wait in\n" << text;
        ++kernels;
        if (gen.cuda.kernels[i].config.form == codegen::CudaConfig::Form::gemv) {
          // Only the weight comes first: its prefetch, and where it is a graph input (%w, not
          // %w2) the first steps' loads (load_once of its rows, w[r]).
          EXPECT_NE(prefix->find("coil_rt::prefetch_l2("), std::string::npos) << text;
          ++prefetching;
          const auto& call = std::get<loop::ExternCall>(gen.lowered.program.kernels[gen.cuda.kernels[i].program_index]);
          const int weight = call.inputs[1].buffer;
          const bool input = gen.lowered.program.buffers[static_cast<size_t>(weight)].role == loop::Buffer::Role::input;
          early += prefix->find("load_once(") != std::string::npos;
          EXPECT_EQ(prefix->find("load_once(") != std::string::npos, input) << text;
          std::string rest = std::regex_replace(*prefix, std::regex(R"(coil_rt::prefetch_l2\([^;]*;)"), "");
          rest = std::regex_replace(rest, std::regex(R"(coil_rt::load_once\(reinterpret_cast<const V\*>\(w\[r\] \+ k\)\))"), "");
          rest = std::regex_replace(rest, std::regex(fmt::format(R"(\bb{}\s*\+)", weight)), "");
          EXPECT_FALSE(std::regex_search(rest, touches)) << text;
        } else {
          EXPECT_FALSE(std::regex_search(*prefix, touches)) << text;
          EXPECT_EQ(prefix->find("prefetch"), std::string::npos) << text;
        }
      }
    }
    EXPECT_GT(kernels, 12) << arch;
    EXPECT_EQ(prefetching, 3) << arch;
    EXPECT_EQ(early, 2) << arch;
  }
}

// The chain, plain and from a CUDA graph, on fresh inputs each call.
TEST(CudaGpu, OverlappedLaunchesKeepEveryDependence) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(chain(8));
  for (bool graphs : {false, true}) {
    Executable exe = compile(g, {.cache_dir = fresh_cache(graphs ? "overlap_graphs" : "overlap"), .device = "cuda", .autotune = false});
    const auto& plan = *exe.gpu_plan;
    if (plan.context->device().cc_major >= 9) {
      EXPECT_TRUE(plan.context->overlaps());
    }
    int gemv = 0;
    for (const auto& k : plan.kernels) gemv += k.config.form == codegen::CudaConfig::Form::gemv;
    EXPECT_EQ(gemv, 1);
    EXPECT_GT(plan.kernels.size(), 16u);
    if (graphs) {
      exe.gpu_plan->use_cuda_graphs([](const std::string& m) { ADD_FAILURE() << m; });
    }
    OnDevice dev{*plan.context, {}};
    for (uint64_t call = 0; call < 6; ++call) {
      TensorMap host = random_inputs(g, 70 + call);
      auto want = evaluate_reference(g, host);
      auto got = exe.run_on_stream({dev.put(host.at("a0")), dev.put(host.at("x0")), dev.put(host.at("w"))}, TensorMap{}, nullptr);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) expect_close(dev.get(got[i]), want[i], fmt::format("graphs {} call {} output {}", graphs, call, i));
    }
    if (graphs) {
      EXPECT_GT(exe.gpu_plan->graph_stats().replays, 0);
    }
  }
}

// A product of one row loads its first weight pieces before waiting for the kernel before it. A
// run's first launch therefore never overlaps the run before: here one plan negates a weight in
// place (32 MiB, the longest kernel) and the next, on the same stream, multiplies by it first
// thing. Each product must see the weight of the negation just before it.
TEST(CudaGpu, EarlyWeightLoadsSeeTheRunBefore) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph negate = parse("  %w = input() : bf16[4096, 4096]\n  %n = neg(%w)\n  return %n\n");
  Graph product = parse("  %x = input() : bf16[1, 4096]\n  %w = input() : bf16[4096, 4096]\n  %wt = permute(%w, [1, 0])\n"
                        "  %y = mm(%x, %wt)\n  return %y\n");
  Executable update = compile(negate, {.cache_dir = fresh_cache("early_negate"), .device = "cuda", .autotune = false});
  Executable multiply = compile(product, {.cache_dir = fresh_cache("early_product"), .device = "cuda", .autotune = false});
  ASSERT_EQ(update.compute_outputs_in_inputs({0}), (std::vector<int>{0}));
  bool gemv = false;
  for (const auto& k : multiply.gpu_plan->kernels) gemv |= k.config.form == codegen::CudaConfig::Form::gemv;
  EXPECT_TRUE(gemv && multiply.source.find("EARLY") != std::string::npos) << multiply.source;
  TensorMap host = random_inputs(product, 5);
  const std::vector<Tensor> plus = evaluate_reference(product, host);
  OnDevice dev{*multiply.gpu_plan->context, {}};
  Tensor x = dev.put(host.at("x")), w = dev.put(host.at("w"));
  for (int round = 1; round <= 8; ++round) {
    EXPECT_FALSE(update.run_on_stream(std::vector<Tensor>{w}, TensorMap{}, nullptr)[0].defined());  // negated in place
    const Tensor y = dev.get(multiply.run_on_stream(std::vector<Tensor>{x, w}, TensorMap{}, nullptr)[0]).contiguous_copy();
    const Tensor want = plus[0].contiguous_copy();
    const double sign = round % 2 ? -1 : 1;
    for (int64_t e = 0; e < want.numel(); ++e)
      ASSERT_NEAR(y.load(e), sign * want.load(e), 2e-2 * (1 + std::fabs(want.load(e)))) << "round " << round << " element " << e;
  }
}

}  // namespace
}  // namespace coil
