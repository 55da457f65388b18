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
    int kernels = 0, prefetching = 0;
    for (const std::string& body : graphs) {
      Generated gen = generate(parse(body), t);
      ASSERT_EQ(gen.cuda.bodies.size(), gen.cuda.kernels.size());
      for (size_t i = 0; i < gen.cuda.bodies.size(); ++i) {
        const std::string& text = gen.cuda.bodies[i];
        const auto prefix = before_wait(text);
        ASSERT_TRUE(prefix) << "no wait in\n" << text;
        ++kernels;
        if (gen.cuda.kernels[i].config.form == codegen::CudaConfig::Form::gemv) {
          // only the weight's prefetch (rows of %w, buffer of the product's B) comes first
          EXPECT_NE(prefix->find("coil_rt::prefetch_l2("), std::string::npos) << text;
          ++prefetching;
          std::string rest = std::regex_replace(*prefix, std::regex(R"(coil_rt::prefetch_l2\([^;]*;)"), "");
          EXPECT_FALSE(std::regex_search(rest, touches)) << text;
        } else {
          EXPECT_FALSE(std::regex_search(*prefix, touches)) << text;
          EXPECT_EQ(prefix->find("prefetch"), std::string::npos) << text;
        }
      }
    }
    EXPECT_GT(kernels, 12) << arch;
    EXPECT_EQ(prefetching, 1) << arch;
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

}  // namespace
}  // namespace coil
