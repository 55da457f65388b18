// The stages between fusion and running: dead-store elimination, the memory plan (buffer
// lifetimes and reuse), the printed plan, and the split of kernels into translation units.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "coil/coil.h"
#include "driver/compile.h"
#include "runtime/memory_plan.h"

namespace coil {
namespace {

Generated generated(const std::string& body) { return generate(parse_graph("graph t {\n  sym N = 4\n" + body + "}\n")); }

const loop::LoopKernel& loop_kernel(const loop::Program& p, size_t i) { return std::get<loop::LoopKernel>(p.kernels.at(i)); }

TEST(DeadStores, UnusedLayerNormStatisticsAreNotStored) {
  auto g = generated("  %x = input() : f32[N, 8]\n  %y, %m, %r = native_layer_norm(%x, [8], none, none, 1e-05)\n  return %y\n");
  ASSERT_EQ(g.lowered.program.kernels.size(), 1u);
  EXPECT_EQ(loop_kernel(g.lowered.program, 0).stores.size(), 1u) << loop::to_string(g.lowered.program);
}

TEST(DeadStores, UsedStatisticsStay) {
  auto g = generated("  %x = input() : f32[N, 8]\n  %y, %m, %r = native_layer_norm(%x, [8], none, none, 1e-05)\n  return %y, %r\n");
  EXPECT_EQ(loop_kernel(g.lowered.program, 0).stores.size(), 2u) << loop::to_string(g.lowered.program);
}

TEST(DeadStores, KernelWithOnlyDeadStoresIsDropped) {
  // %e is realized for its two consumers, which both end up unused by the output.
  auto g = generated(
      "  %x = input() : f32[N, 8]\n  %e = exp(%x)\n  %a = sum.dim_IntList(%e, [1])\n  %b = amax(%e, [1])\n"
      "  %y = relu(%x)\n  return %y\n");
  EXPECT_EQ(g.lowered.program.kernels.size(), 1u) << loop::to_string(g.lowered.program);
}

// A chain of realized temporaries: each dies after its one reader, and its memory is reused.
TEST(MemoryPlan, LifetimesEndAtTheLastReader) {
  auto g = generated(
      "  %x = input() : f32[N, 8]\n  %w = input() : f32[8, 8]\n  %a = mm(%x, %w)\n  %b = mm(%a, %w)\n"
      "  %c = mm(%b, %w)\n  return %c\n");
  MemoryPlan plan = plan_memory(g.lowered);
  const auto& buffers = g.lowered.program.buffers;
  ASSERT_EQ(g.lowered.program.kernels.size(), 3u);
  std::vector<int> temporaries;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].role == loop::Buffer::Role::temporary) temporaries.push_back(static_cast<int>(b));
  ASSERT_EQ(temporaries.size(), 2u);
  EXPECT_EQ(plan.first_use[static_cast<size_t>(temporaries[0])], 0);
  EXPECT_EQ(plan.last_use[static_cast<size_t>(temporaries[0])], 1);
  EXPECT_EQ(plan.release_after[1], std::vector<int>{temporaries[0]});
  EXPECT_EQ(plan.release_after[2], std::vector<int>{temporaries[1]});
  EXPECT_TRUE(plan.release_after[0].empty());
  std::string text = describe_plan(g.lowered);
  EXPECT_NE(text.find("step 1: extern"), std::string::npos) << text;
  EXPECT_NE(text.find("then frees [buf" + std::to_string(temporaries[0]) + "]"), std::string::npos) << text;
}

TEST(MemoryPlan, ReusedMemoryGivesTheReferenceResult) {
  // Temporaries of equal size die and are reborn along the chain; a stale value would show.
  Graph g = parse_graph(
      "graph t {\n  %x = input() : f32[64, 64]\n  %w = input() : f32[64, 64]\n  %a = mm(%x, %w)\n  %b = tanh(%a)\n"
      "  %c = mm(%b, %w)\n  %d = sin(%c)\n  %e = mm(%d, %w)\n  %f = add.Tensor(%e, %b)\n  return %f\n}\n");
  Executable exe = compile(g, {.cache_dir = (std::filesystem::temp_directory_path() / "coil_plan_test").string()});
  TensorMap inputs = random_inputs(g, 7);
  Tensor got = exe.run(inputs, {})[0].contiguous_copy();
  Tensor want = evaluate_reference(g, inputs)[0];
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.load(i), want.load(i), 1e-4) << i;
}

// exp(%a) is realized for the matrix products, and %a dies there: the exp overwrites it.
TEST(MemoryPlan, ElementwiseResultOverwritesADyingOperand) {
  const char* text =
      "graph t {\n  %x = input() : f32[16, 16]\n  %w = input() : f32[16, 16]\n  %a = mm(%x, %w)\n  %b = exp(%a)\n"
      "  %c = mm(%b, %w)\n  %d = mm(%w, %b)\n  %e = add.Tensor(%c, %d)\n  return %e\n}\n";
  Graph g = parse_graph(text);
  Generated gen = generate(g);
  MemoryPlan plan = plan_memory(gen.lowered);
  const auto& buffers = gen.lowered.program.buffers;
  int a = -1, b = -1;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].name == "a") a = static_cast<int>(i);
    if (buffers[i].name == "b") b = static_cast<int>(i);
  }
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0) << loop::to_string(gen.lowered.program);
  EXPECT_EQ(plan.in_place_of[static_cast<size_t>(b)], a) << describe_plan(gen.lowered);
  EXPECT_NE(describe_plan(gen.lowered).find("in place of buf" + std::to_string(a)), std::string::npos);
  Executable exe = compile(g, {.cache_dir = (std::filesystem::temp_directory_path() / "coil_plan_test").string()});
  TensorMap inputs = random_inputs(g, 3);
  Tensor got = exe.run(inputs, {})[0].contiguous_copy();
  Tensor want = evaluate_reference(g, inputs)[0];
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.load(i), want.load(i), 1e-3 * (1 + std::abs(want.load(i)))) << i;
}

// An optimizer-style update: the new value of %p is computed over %p's own memory, and the run
// leaves it there (the output comes back undefined), with the reference's values.
TEST(MemoryPlan, UpdateIsComputedOverItsInput) {
  Graph g = parse_graph(
      "graph t {\n  %p = input() : f32[33, 7]\n  %g = input() : f32[33, 7]\n  %s = mul.Scalar(%g, 0.5)\n"
      "  %n = sub.Tensor(%p, %s)\n  %l = sum(%n)\n  return %n, %l\n}\n");
  Executable exe = compile(g, {.cache_dir = (std::filesystem::temp_directory_path() / "coil_plan_test").string()});
  EXPECT_EQ(exe.compute_outputs_in_inputs({0, -1}), (std::vector<int>{0, -1}));
  TensorMap inputs = random_inputs(g, 5);
  std::vector<Tensor> want = evaluate_reference(g, inputs);
  std::vector<Tensor> got = exe.run(inputs, {});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[0].defined());
  const Tensor& p = inputs.at("p");
  for (int64_t i = 0; i < p.numel(); ++i) ASSERT_NEAR(p.load(i), want[0].load(i), 1e-6) << i;
  EXPECT_NEAR(got[1].load(0), want[1].load(0), 1e-4);
}

// The input is read again after its new value is written (the sum of the old %p, and the
// transpose, which reads another element than it writes): the output gets memory of its own.
TEST(MemoryPlan, UpdateReadAfterwardsIsNotInPlace) {
  for (const char* body : {"  %n = add.Scalar(%p, 1)\n  %t = permute(%p, [1, 0])\n  %u = mul.Tensor(%n, %t)\n  return %n, %u\n",
                           "  %n = permute(%p, [1, 0])\n  %u = add.Scalar(%n, 1)\n  return %u, %n\n"}) {
    Graph g = parse_graph(std::string("graph t {\n  %p = input() : f32[8, 8]\n") + body + "}\n");
    Executable exe = compile(g, {.cache_dir = (std::filesystem::temp_directory_path() / "coil_plan_test").string()});
    EXPECT_EQ(exe.compute_outputs_in_inputs({0, -1}), (std::vector<int>{-1, -1})) << body;
    TensorMap inputs = random_inputs(g, 9);
    std::vector<Tensor> want = evaluate_reference(g, inputs);
    std::vector<Tensor> got = exe.run(inputs, {});
    for (size_t o = 0; o < 2; ++o) {
      Tensor c = got[o].contiguous_copy();
      for (int64_t i = 0; i < c.numel(); ++i) ASSERT_NEAR(c.load(i), want[o].contiguous_copy().load(i), 1e-5) << body << o << i;
    }
  }
}

// A KV cache's update (index_put: a copy of the input, then a scatter into it) is computed over
// the cache, which the caller's tensor then holds; a graph that reads the old cache after the
// scatter gets memory of its own for the update.
TEST(MemoryPlan, ScatterUpdatesAreComputedOverTheirInput) {
  for (bool read_after : {false, true}) {
    const std::string tail = read_after ? "  %d = sub.Tensor(%u, %c)\n  %s = sum.dim_IntList(%d, [1])\n"
                                        : "  %s = sum.dim_IntList(%u, [1])\n";
    Graph g = parse_graph("graph t {\n  %c = input() : f32[16, 32]\n  %v = input() : f32[4, 32]\n  %i = input() : i64[4]\n"
                          "  %u = index_put(%c, [%i], %v)\n" + tail + "  return %u, %s\n}\n");
    Executable exe = compile(g, {.cache_dir = (std::filesystem::temp_directory_path() / "coil_plan_test").string()});
    EXPECT_EQ(exe.compute_outputs_in_inputs({0, -1}), (std::vector<int>{read_after ? -1 : 0, -1}));
    TensorMap inputs = random_inputs(g, 13);
    for (int64_t r = 0; r < 4; ++r) inputs.at("i").store_int(r, 15 - 3 * r);  // distinct rows
    TensorMap before;
    for (const auto& [name, t] : inputs) before.emplace(name, t.contiguous_copy());
    std::vector<Tensor> want = evaluate_reference(g, before);
    std::vector<Tensor> got = exe.run(inputs, {});
    const Tensor& cache = read_after ? got[0] : inputs.at("c");
    EXPECT_EQ(got[0].defined(), read_after);
    for (int64_t e = 0; e < want[0].numel(); ++e) ASSERT_NEAR(cache.load(e), want[0].load(e), 1e-6) << read_after << " " << e;
    for (int64_t e = 0; e < want[1].numel(); ++e) ASSERT_NEAR(got[1].load(e), want[1].load(e), 1e-4) << read_after << " " << e;
  }
}

// index_put's copy of the cache before its scatter: where the updated cache is granted the
// input's memory, that step only copies the input onto itself (a GPU run skips it); the scatter,
// and a copy that computes something, are no such step.
TEST(MemoryPlan, CopiesOfAnInputOntoItselfAreFound) {
  for (bool scaled : {false, true}) {
    const std::string update = scaled ? "  %h = mul.Scalar(%c, 2)\n  %u = index_put(%h, [%i], %v)\n" : "  %u = index_put(%c, [%i], %v)\n";
    auto g = generated("  %c = input() : f32[16, 32]\n  %v = input() : f32[4, 32]\n  %i = input() : i64[4]\n" + update + "  return %u\n");
    const auto& kernels = g.lowered.program.kernels;
    MemoryPlan plan = plan_memory(g.lowered);
    std::vector<int> granted = outputs_over_inputs(g.lowered, plan, {0});
    EXPECT_EQ(granted, (std::vector<int>{0})) << loop::to_string(g.lowered.program);
    auto copies = copies_onto_inputs(g.lowered, granted);
    ASSERT_EQ(copies.size(), kernels.size());
    size_t found = 0;
    for (size_t s = 0; s < copies.size(); ++s) {
      if (copies[s].empty()) continue;
      EXPECT_EQ(copies[s], (std::vector<size_t>{0}));
      ++found;
    }
    EXPECT_EQ(found, scaled ? 0u : 1u) << loop::to_string(g.lowered.program);
    auto ungranted = copies_onto_inputs(g.lowered, {-1});  // nothing without the grant
    EXPECT_TRUE(std::all_of(ungranted.begin(), ungranted.end(), [](const auto& c) { return c.empty(); }));
  }
}

// One kernel storing two updates (a parameter and its momentum), each value recomputing what it
// needs from the old inputs; and a kernel whose other store reads an input another store
// overwrites. Whatever is granted, the values are the reference's.
TEST(MemoryPlan, UpdatesOfOneKernelKeepTheOldValuesTheyRead) {
  const std::vector<std::pair<const char*, std::vector<int>>> cases = {
      {"  %a = mul.Scalar(%m, 0.9)\n  %m2 = add.Tensor(%a, %g)\n  %b = mul.Scalar(%m2, 0.1)\n  %p2 = sub.Tensor(%p, %b)\n"
       "  return %p2, %m2\n",
       {0, 1}},
      {"  %a = mul.Scalar(%g, 2)\n  %b = add.Scalar(%p, 1)\n  return %a, %b\n", {0, -1}},
  };
  for (const auto& [body, wanted] : cases) {
    Graph g = parse_graph(std::string("graph t {\n  %p = input() : f32[9, 5]\n  %m = input() : f32[9, 5]\n  %g = input() : f32[9, 5]\n") +
                          body + "}\n");
    Executable exe = compile(g, {.cache_dir = (std::filesystem::temp_directory_path() / "coil_plan_test").string()});
    std::vector<int> granted = exe.compute_outputs_in_inputs(wanted);
    if (wanted[1] >= 0) {
      EXPECT_EQ(granted, wanted) << body;
    }
    TensorMap inputs = random_inputs(g, 11);
    TensorMap before;
    for (const auto& [name, t] : inputs) before.emplace(name, t.contiguous_copy());
    std::vector<Tensor> want = evaluate_reference(g, before);
    std::vector<Tensor> got = exe.run(inputs, {});
    for (size_t o = 0; o < want.size(); ++o) {
      const Tensor& value = granted[o] >= 0 ? inputs.at(granted[o] == 0 ? "p" : "m") : got[o];
      EXPECT_EQ(got[o].defined(), granted[o] < 0) << body << o;
      for (int64_t i = 0; i < want[o].numel(); ++i) ASSERT_NEAR(value.load(i), want[o].load(i), 1e-5) << body << o << " " << i;
    }
  }
}

// Inputs of another dtype or layout than the output's, and a second output over an input
// already given, are refused.
TEST(MemoryPlan, UpdateNeedsTheInputsLayout) {
  Graph g = parse_graph(
      "graph t {\n  %p = input() : f32[4, 6]\n  %q = input() : f32[4, 6]\n  %h = input() : f16[4, 6]\n"
      "  %n = mul.Scalar(%p, 2)\n  %m = mul.Scalar(%q, 3)\n  %t = permute(%q, [1, 0])\n  %k = mul.Scalar(%t, 2)\n"
      "  %c = _to_copy(%h, dtype=f32)\n  return %n, %m, %k, %c\n}\n");
  Generated gen = generate(g);
  MemoryPlan plan = plan_memory(gen.lowered);
  const std::vector<int> none{-1, -1, -1, -1};
  EXPECT_EQ(outputs_over_inputs(gen.lowered, plan, {2, -1, -1, -1}), none);  // f32 over f16
  EXPECT_EQ(outputs_over_inputs(gen.lowered, plan, {-1, -1, -1, 2}), none);
  EXPECT_EQ(outputs_over_inputs(gen.lowered, plan, {-1, -1, 1, -1}), none);  // [6, 4] over [4, 6]
  EXPECT_EQ(outputs_over_inputs(gen.lowered, plan, {0, 0, -1, -1}), (std::vector<int>{0, -1, -1, -1}));  // %p given once
}

TEST(TranslationUnits, PartitionCoversEveryKernelOnceAndIsDeterministic) {
  codegen::CpuSource src;
  for (int i = 0; i < 7; ++i) {
    src.kernels.push_back("k" + std::to_string(i));
    src.bodies.push_back(std::string(static_cast<size_t>(100 * (i % 3 + 1)), 'x'));
  }
  auto units = codegen::partition_kernels(src, 3);
  ASSERT_EQ(units.size(), 3u);
  std::multiset<size_t> seen;
  for (const auto& u : units) {
    EXPECT_FALSE(u.empty());
    seen.insert(u.begin(), u.end());
  }
  EXPECT_EQ(seen, (std::multiset<size_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(units, codegen::partition_kernels(src, 3));
  EXPECT_EQ(codegen::partition_kernels(src, 100).size(), 7u);
  EXPECT_EQ(codegen::partition_kernels(src, 0).size(), 1u);
}

}  // namespace
}  // namespace coil
