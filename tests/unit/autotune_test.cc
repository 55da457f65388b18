// Which loop kernels the CUDA tuner times (driver/autotune.h), without a GPU: kernels moving enough
// bytes at their sizes (static, or the size hints), and the tuning cache's winners per size bucket.
#include "driver/autotune.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "coil/coil.h"
#include "driver/compile.h"

namespace coil {
namespace {

// A kernel of static launch may read a buffer of symbolic size at data-dependent places (a
// gather from a log-softmax over [2 * N, 37]): without a hint it has no sizes to time on, and
// asking for them threw "size symbol 'N' has no value" from every CUDA compile of such a graph.
TEST(LoopTuner, KernelsOverBuffersOfSymbolicSizeAreNotTuned) {
  const char* text =
      "graph t {\n  sym N = 5\n"
      "  %x = input() : f32[2, N, 37]\n  %v = view(%x, [-1, 37])\n  %l = _log_softmax(%v, 1, false)\n"
      "  %i = input(low=0, high=37) : i64[10, 1]\n  %g = gather(%l, 1, %i)\n"
      "  %y = input() : f32[1024, 1024]\n  %s = sum.dim_IntList(%y, [1])\n"
      "  return %g, %s\n}\n";
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  Generated gen = generate(parse_graph(text), t);
  build::ArtifactCache cache(::testing::TempDir() + "/autotune_test");
  std::vector<TuningUnit> units;
  ASSERT_NO_THROW(units = tuning_units(gen.lowered.program, gen.cuda, {SymbolDecl{.name = "N"}}, t.device, cache));
  std::vector<std::vector<std::string>> tuned;  // each tuned kernel's origins
  for (const auto& u : units) {
    const auto& k = std::get<loop::LoopKernel>(gen.lowered.program.kernels[gen.cuda.kernels[u.kernel].program_index]);
    tuned.push_back(k.origins);
  }
  // the static row sum over 4 MiB is tuned; the gather (static launch, symbolic source) and the
  // log-softmax (symbolic launch) are not
  EXPECT_EQ(tuned, (std::vector<std::vector<std::string>>{{"s"}}));
}

// A symbolic kernel is tuned at the hints where every symbol has one: a row sum over [N, 4096]
// moves 8 MiB at N = 512 (its bucket 512), and none at all without a hint. The tuning cache keeps
// a winner per bucket: the hints' bucket's is the unit's winner, the others' are read for the plan
// to pick by a run's sizes.
TEST(LoopTuner, SymbolicKernelsAreTunedAtTheHintsPerSizeBucket) {
  const char* text = "graph t {\n  sym N = 512\n  %x = input() : f32[N, 4096]\n  %s = sum.dim_IntList(%x, [1])\n  return %s\n}\n";
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  Generated gen = generate(parse_graph(text), t);
  const std::string dir = ::testing::TempDir() + "/autotune_symbolic_test";
  std::filesystem::remove_all(dir);
  build::ArtifactCache cache(dir);
  EXPECT_TRUE(tuning_units(gen.lowered.program, gen.cuda, {SymbolDecl{.name = "N"}}, t.device, cache).empty());
  const std::vector<SymbolDecl> hinted = {SymbolDecl{.name = "N", .hint = 512}};
  auto units = tuning_units(gen.lowered.program, gen.cuda, hinted, t.device, cache);
  ASSERT_EQ(units.size(), 1u);
  TuningUnit& u = units[0];
  EXPECT_EQ(u.sizes, (std::map<std::string, int64_t>{{"N", 512}}));
  EXPECT_EQ(u.bucket, (std::vector<int64_t>{512}));
  EXPECT_EQ(u.winner, -1);  // not in the cache: to be measured
  ASSERT_GE(u.candidates.size(), 2u);
  EXPECT_EQ(codegen::size_bucket(u.candidates[0], {300}), (std::vector<int64_t>{512}));
  EXPECT_EQ(codegen::size_bucket(u.candidates[0], {513}), (std::vector<int64_t>{1024}));
  // What measure_candidates leaves in the cache: a line per bucket.
  const std::string c0 = codegen::to_string(u.candidates[0].config), c1 = codegen::to_string(u.candidates[1].config);
  cache.store(u.key, "tune", "512 " + c1 + "\n4096 " + c0 + "\n8 no such configuration\n");
  units = tuning_units(gen.lowered.program, gen.cuda, hinted, t.device, cache);
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].winner, 1);
  EXPECT_EQ(units[0].others, (std::vector<std::pair<std::vector<int64_t>, int>>{{{4096}, 0}}));
  // Another hint, another bucket: the cache's 4096 is its winner, 512's among the others.
  units = tuning_units(gen.lowered.program, gen.cuda, {SymbolDecl{.name = "N", .hint = 3000}}, t.device, cache);
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0].winner, 0);
  EXPECT_EQ(units[0].others, (std::vector<std::pair<std::vector<int64_t>, int>>{{{512}, 1}}));
}

}  // namespace
}  // namespace coil
