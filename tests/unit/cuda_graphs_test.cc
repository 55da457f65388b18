// CUDA graphs (runtime/cuda/graph_replays.h) on a GPU; they skip without one. A plan with graphs
// on warms up, captures, then replays: results against the interpreter with new input values at
// new and at unchanged addresses, outputs held across calls (never overwritten), outputs computed
// over an input read from a slot, sizes of a symbolic graph each captured, errors of a replay
// reported by the next call, and a plan that calls PyTorch refused with a note.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coil/coil.h"
#include "cuda_test_util.h"
#include "runtime/cuda/gpu_plan.h"
#include "test_util.h"

namespace coil {
namespace {

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + body + "}\n"); }

// A product, a reduction over a split row (scratch), pointwise work: kernels and a cuBLASLt call.
const char* kBlock =
    "  %x = input() : f32[64, 256]\n  %w = input() : f32[256, 128]\n  %h = mm(%x, %w)\n  %g = gelu(%h)\n"
    "  %s = sum.dim_IntList(%g, [1])\n  %t = sum(%x)\n  return %g, %s, %t\n";

struct Notes {
  std::vector<std::string> heard;
  std::function<void(const std::string&)> note() {
    return [this](const std::string& m) { heard.push_back(m); };
  }
};

// A run on device tensors, on the legacy default stream.
std::vector<Tensor> run_device(const Executable& exe, std::vector<Tensor> inputs) {
  return exe.run_on_stream(std::move(inputs), TensorMap{}, nullptr);
}

std::vector<Tensor> host_of(OnDevice& dev, const std::vector<Tensor>& outs) {
  std::vector<Tensor> h;
  for (const Tensor& t : outs) h.push_back(dev.get(t));
  return h;
}

TEST(CudaGpu, GraphReplaysMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(kBlock);
  Executable exe = compile(g, {.cache_dir = fresh_cache("graphs"), .device = "cuda", .autotune = false});
  Notes notes;
  exe.gpu_plan->use_cuda_graphs(notes.note());
  OnDevice dev{*exe.gpu_plan->context, {}};
  const Tensor w = dev.put(random_inputs(g, 1).at("w"));
  Tensor x_fixed = dev.put(random_inputs(g, 2).at("x"));
  for (uint64_t call = 0; call < 8; ++call) {
    TensorMap host = random_inputs(g, 10 + call);
    host["w"] = random_inputs(g, 1).at("w");
    // calls 0-3: %x at one address, its values changed in place (read in place); then a new
    // tensor each call (read from a slot, in a second graph)
    Tensor x = dev.put(host.at("x"));
    if (call < 4) {
      dev.ctx.copy_on_device(reinterpret_cast<cuda::DevicePtr>(x_fixed.data()), reinterpret_cast<cuda::DevicePtr>(x.data()),
                             static_cast<size_t>(x.numel()) * 4, nullptr);
      x = x_fixed;
    }
    auto want = evaluate_reference(g, host);
    auto got = host_of(dev, run_device(exe, {x, w}));  // outputs dropped at once
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "call " + std::to_string(call) + " output " + std::to_string(i));
  }
  exe.synchronize();
  const CudaGraphStats s = exe.gpu_plan->graph_stats();
  EXPECT_EQ(s.plain_runs, 1);  // the warm-up
  EXPECT_EQ(s.replays, 7);
  EXPECT_EQ(s.captures, 2);
  EXPECT_EQ(s.copied_inputs, 4);
  EXPECT_TRUE(notes.heard.empty()) << notes.heard.front();
}

// Outputs held by the caller are never overwritten: each call while earlier outputs live takes
// another graph, and past kInstances held calls the run is plain, with one note.
TEST(CudaGpu, GraphOutputsHeldAcrossCallsStayValid) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(kBlock);
  Executable exe = compile(g, {.cache_dir = fresh_cache("graphs_held"), .device = "cuda", .autotune = false});
  Notes notes;
  exe.gpu_plan->use_cuda_graphs(notes.note());
  OnDevice dev{*exe.gpu_plan->context, {}};
  std::vector<std::vector<Tensor>> held, wanted;
  const int calls = static_cast<int>(CudaGraphs::kInstances) + 3;
  for (int call = 0; call < calls; ++call) {
    TensorMap host = random_inputs(g, 20 + static_cast<uint64_t>(call));
    wanted.push_back(evaluate_reference(g, host));
    held.push_back(run_device(exe, {dev.put(host.at("x")), dev.put(host.at("w"))}));
  }
  for (int call = 0; call < calls; ++call)
    for (size_t i = 0; i < wanted[0].size(); ++i)
      expect_close(dev.get(held[static_cast<size_t>(call)][i]), wanted[static_cast<size_t>(call)][i], fmt::format("call {} output {}", call, i));
  CudaGraphStats s = exe.gpu_plan->graph_stats();
  EXPECT_EQ(s.graphs, static_cast<int64_t>(CudaGraphs::kInstances));
  EXPECT_EQ(s.plain_runs, 1 + calls - 1 - static_cast<int64_t>(CudaGraphs::kInstances));
  ASSERT_EQ(notes.heard.size(), 1u);
  EXPECT_NE(notes.heard[0].find("still held"), std::string::npos) << notes.heard[0];
  // Let go of them: the graphs replay again.
  held.clear();
  TensorMap host = random_inputs(g, 99);
  auto got = run_device(exe, {dev.put(host.at("x")), dev.put(host.at("w"))});
  expect_close(dev.get(got[0]), evaluate_reference(g, host)[0], "after letting go");
  EXPECT_EQ(exe.gpu_plan->graph_stats().replays, s.replays + 1);
}

// An output computed over an input (an in-place update) read from a slot is copied back into
// the caller's tensor; one read in place is written there directly.
TEST(CudaGpu, GraphUpdatesOfInputsReachTheCaller) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse("  %c = input() : f32[16, 32]\n  %v = input() : f32[16, 32]\n  %u = add.Tensor(%c, %v)\n"
                  "  %s = sum.dim_IntList(%u, [1])\n  return %u, %s\n");
  for (bool same_cache : {false, true}) {
    Executable exe = compile(g, {.cache_dir = fresh_cache("graphs_update"), .device = "cuda", .autotune = false});
    ASSERT_EQ(exe.compute_outputs_in_inputs({0, -1}), (std::vector<int>{0, -1}));
    Notes notes;
    exe.gpu_plan->use_cuda_graphs(notes.note());
    OnDevice dev{*exe.gpu_plan->context, {}};
    Tensor cache = dev.put(random_inputs(g, 3).at("c"));
    Tensor want_cache = dev.get(cache);
    for (int64_t call = 0; call < 5; ++call) {
      TensorMap host = random_inputs(g, 40 + static_cast<uint64_t>(call));
      host["c"] = want_cache;
      auto want = evaluate_reference(g, host);
      // the same tensor each call (read in place), or a new one holding the last call's values (a slot)
      Tensor c = same_cache ? cache : dev.put(want_cache);
      auto got = run_device(exe, {c, dev.put(host.at("v"))});
      EXPECT_FALSE(got[0].defined());  // computed in the caller's %c
      expect_close(dev.get(c), want[0], fmt::format("cache (same {}) call {}", same_cache, call));
      expect_close(dev.get(got[1]), want[1], fmt::format("sums (same {}) call {}", same_cache, call));
      want_cache = want[0];
    }
    const CudaGraphStats s = exe.gpu_plan->graph_stats();
    EXPECT_EQ(s.captures, 1);
    EXPECT_EQ(s.replays, 4);
    EXPECT_EQ(s.copied_inputs, same_cache ? 4 : 8);
    EXPECT_TRUE(notes.heard.empty());
  }
}

// A graph of symbolic sizes: each sizes warmed up and captured, at most kBuckets of them.
TEST(CudaGpu, GraphsOfSymbolicSizesArePerSizes) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse("  sym B in [1, inf] = 8\n  %x = input() : f32[B, 96]\n  %w = input() : f32[96, 64]\n  %h = mm(%x, %w)\n"
                  "  %r = relu(%h)\n  %s = sum.dim_IntList(%r, [0])\n  return %r, %s\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("graphs_sym"), .device = "cuda", .autotune = false});
  Notes notes;
  exe.gpu_plan->use_cuda_graphs(notes.note());
  OnDevice dev{*exe.gpu_plan->context, {}};
  for (int round = 0; round < 3; ++round)
    for (int64_t b : {1, 7, 13}) {
      TensorMap host = random_inputs(g, 50 + static_cast<uint64_t>(b * 3 + round), {{"B", b}});
      auto want = evaluate_reference(g, host);
      auto got = run_device(exe, {dev.put(host.at("x")), dev.put(host.at("w"))});
      for (size_t i = 0; i < got.size(); ++i) expect_close(dev.get(got[i]), want[i], fmt::format("B={} round {} output {}", b, round, i));
    }
  const CudaGraphStats s = exe.gpu_plan->graph_stats();
  EXPECT_EQ(s.plain_runs, 3);
  EXPECT_EQ(s.captures, 3);
  EXPECT_EQ(s.replays, 6);
}

// An index out of bounds inside a replay: the next call (or a synchronize) throws it, once.
TEST(CudaGpu, GraphReplaysReportErrorsLater) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse("  %x = input() : f32[10]\n  %i = input(low=0, high=10) : i64[4]\n  %y = index.Tensor(%x, [%i])\n  return %y\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("graphs_errors"), .device = "cuda"});
  exe.gpu_plan->use_cuda_graphs(Notes().note());
  OnDevice dev{*exe.gpu_plan->context, {}};
  const Tensor x = dev.put(random_inputs(g, 1).at("x"));
  Tensor idx = Tensor::zeros(DType::i64, {4});
  for (int call = 0; call < 3; ++call) run_device(exe, {x, dev.put(idx)});  // warm-up, capture, replay
  exe.synchronize();
  idx.store_int(2, 12);  // out of bounds
  run_device(exe, {x, dev.put(idx)});
  EXPECT_EQ(exe.gpu_plan->graph_stats().replays, 3);
  EXPECT_NE(testing::message_of([&] { exe.synchronize(); }).find("index 12 is out of bounds"), std::string::npos);
  idx.store_int(2, 3);
  run_device(exe, {x, dev.put(idx)});
  exe.synchronize();  // nothing left to report
}

}  // namespace
}  // namespace coil
