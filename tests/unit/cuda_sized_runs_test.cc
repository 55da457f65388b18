// A GPU plan of symbolic sizes run at sizes met before and new, and given symbol values that its
// inputs contradict (runtime/cuda/sized_run.h: what a run evaluates from the values is kept per
// set of values; given them all, the run checks the inputs against them).
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "coil/coil.h"
#include "runtime/cuda/gpu_plan.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace coil {
namespace {

TEST(CudaGpu, SizedRunsServeEverySizeAndCheckTheGivenValues) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse_graph(
      "graph t {\n  sym N = 16\n  %x = input() : f32[N, 40]\n  %w = input() : f32[40, 24]\n  %m = mm(%x, %w)\n"
      "  %y = relu(%m)\n  %s = sum.dim_IntList(%y, [1])\n  return %y, %s\n}\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("sized_runs"), .device = "cuda", .autotune = false});
  OnDevice dev{*exe.gpu_plan->context, {}};
  auto on_device = [&](const TensorMap& host) { return std::vector<Tensor>{dev.put(host.at("x")), dev.put(host.at("w"))}; };
  for (int64_t n : {5, 17, 5, 1, 17, 300, 1}) {  // sizes met before and new, 1 and primes among them
    TensorMap host = random_inputs(g, static_cast<uint64_t>(n), {{"N", n}});
    const std::vector<Tensor> want = evaluate_reference(g, host);
    for (bool given : {true, false}) {
      std::map<std::string, int64_t> symbols;
      if (given) symbols["N"] = n;
      std::vector<Tensor> out = exe.run_on_stream(on_device(host), {}, nullptr, symbols);
      ASSERT_EQ(out.size(), 2u);
      expect_close(dev.get(out[0]), want[0], fmt::format("relu(x @ w) at N={}, given {}", n, given));
      expect_close(dev.get(out[1]), want[1], fmt::format("its row sums at N={}, given {}", n, given));
    }
  }
  TensorMap host = random_inputs(g, 9, {{"N", 5}});
  const std::string wrong = testing::message_of([&] { exe.run_on_stream(on_device(host), {}, nullptr, {{"N", 6}}); });
  EXPECT_NE(wrong.find("expected shape [6, 40]"), std::string::npos) << wrong;
  const std::string outside = testing::message_of([&] { exe.run_on_stream(on_device(host), {}, nullptr, {{"N", -2}}); });
  EXPECT_NE(outside.find("outside the range"), std::string::npos) << outside;
  exe.synchronize();
}

// x[1] @ w from the inputs' values (x of [2, N, K]), in double, rounded to x's dtype: the reference
// interpreter takes minutes for products of this size (a [2053, 1024] x [1024, 768] took 3 minutes
// on 2 cores: what made an earlier version of the test below time out on the device).
Tensor second_product(const Tensor& x, const Tensor& w) {
  const int64_t n = x.sizes()[1], k = x.sizes()[2], m = w.sizes()[1];
  std::vector<double> a(static_cast<size_t>(n * k)), b(static_cast<size_t>(k * m)), c(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) a[static_cast<size_t>(i * k + j)] = x.load(x.element_index(std::array<int64_t, 3>{1, i, j}));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < m; ++j) b[static_cast<size_t>(i * m + j)] = w.load(w.element_index(std::array<int64_t, 2>{i, j}));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < k; ++l) {
      const double v = a[static_cast<size_t>(i * k + l)];
      for (int64_t j = 0; j < m; ++j) c[static_cast<size_t>(i * m + j)] += v * b[static_cast<size_t>(l * m + j)];
    }
  Tensor out = Tensor::zeros(x.dtype(), {n, m});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) out.store(out.element_index(std::array<int64_t, 2>{i, j}), c[static_cast<size_t>(i * m + j)]);
  return out;
}

// A graph of symbolic sizes has its products tuned at the hints (the tuner's pick preferred at
// sizes in the hints' bucket, the heuristic's elsewhere), and a second compile reads the pick
// from the tuning cache; every size's result matches the product computed here. A's view starts
// at a symbolic offset (the second of two [N, 512] matrices), which the tuner places at the hints.
TEST(CudaGpu, SymbolicProductsAreTunedAtTheHints) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::string cache = fresh_cache("symbolic_products");
  Graph g = parse_graph(
      "graph t {\n  sym N = 1024\n  %x = input() : bf16[2, N, 512]\n  %w = input() : bf16[512, 512]\n  %x1 = select.int(%x, 0, 1)\n"
      "  %m = mm(%x1, %w)\n  return %m\n}\n");
  auto report = [](const Executable& e) { return fmt::format("{}", fmt::join(e.stats.tuning, "\n")); };
  Executable first = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(first.stats.tuned_kernels, 1) << report(first);
  EXPECT_NE(report(first).find("(cuBLASLt)"), std::string::npos) << report(first);
  EXPECT_EQ(first.gpu_plan->gemm_bucket, (std::vector<int64_t>{1024}));
  Executable again = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(again.stats.tuned_kernels, 0) << report(again);
  EXPECT_EQ(again.stats.tuning_cache_hits, 1) << report(again);
  // in the hints' bucket (1000, 1024), past it (37, 1, a prime over 1024)
  for (int64_t n : {1000, 1024, 37, 1031, 1}) {
    TensorMap inputs = random_inputs(g, static_cast<uint64_t>(n), {{"N", n}});
    const Tensor want = second_product(inputs.at("x"), inputs.at("w"));
    for (const Executable* exe : {&first, &again}) expect_close(exe->run(inputs, {})[0], want, fmt::format("N={}", n));
  }
}

}  // namespace
}  // namespace coil
