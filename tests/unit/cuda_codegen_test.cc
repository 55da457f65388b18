// The CUDA backend without a GPU: forms and launch configurations chosen from the kernel and
// the device's facts (a synthetic warp-64 device changes the code), every candidate
// configuration building with NVRTC, extern calls as loop kernels (checked on the CPU against
// the interpreter), and the CPU fallback when there is no driver.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "build/nvrtc.h"
#include "codegen/cuda/launch.h"
#include "codegen/kernel_shape.h"
#include "coil/coil.h"
#include "driver/compile.h"
#include "loop/conv_params.h"
#include "runtime/cuda/gpu_plan.h"

namespace coil {
namespace {

Graph parse(const std::string& body) { return parse_graph("graph t {\n  sym N = 5\n" + body + "}\n"); }

Generated cuda_code(const std::string& body, const cuda::DeviceInfo& device) {
  Target t;
  t.cuda = true;
  t.device = device;
  return generate(parse(body), t);
}

const char* kSoftmax = "  %x = input() : f32[N, 1000]\n  %y = _softmax(%x, -1, false)\n  return %y\n";

TEST(CudaCodegen, FormsFollowTheKernel) {
  auto d = cuda::preset_device("sm_90a");
  auto form = [&](const std::string& body) { return cuda_code(body, d).cuda.kernels.back().config; };
  using F = codegen::CudaConfig::Form;
  EXPECT_EQ(form("  %x = input() : f32[N, 64]\n  %y = exp(%x)\n  return %y\n").vector, 4);
  EXPECT_EQ(form("  %x = input() : bf16[N, 64]\n  %y = exp(%x)\n  return %y\n").vector, 8);
  EXPECT_EQ(form("  %x = input() : f32[N, 63]\n  %y = exp(%x)\n  return %y\n").vector, 1);
  EXPECT_EQ(form("  %x = input() : f32[64, 48]\n  %t = permute(%x, [1, 0])\n  %y = clone(%t, memory_format=contiguous_format)\n  return %y\n").form,
            F::tiled);
  EXPECT_EQ(form("  %x = input() : f32[512, 64]\n  %y = sum.dim_IntList(%x, [0])\n  return %y\n").form, F::column);
  EXPECT_EQ(form("  %x = input() : f32[N, 7]\n  %y = cumsum(%x, 1)\n  return %y\n").form, F::scan);
  // A scatter: a thread per point of its free dims (all but `dim`), each running `dim` in order;
  // without free dims one thread runs it all.
  auto scatter = form("  %x = input() : f32[6, 5]\n  %s = input() : f32[N, 5]\n  %i = input(low=0, high=6) : i64[N, 5]\n"
                      "  %a = scatter_add(%x, 0, %i, %s)\n  return %a\n");
  EXPECT_EQ(scatter.form, F::scatter);
  EXPECT_EQ(scatter.parts, codegen::kScatterParts);  // it reads only the elements it adds to
  EXPECT_FALSE(scatter.listed);                       // its part follows from each column's own index
  // An embedding gradient: rows of 96 columns added at token indices. The part follows from the
  // token alone, so blocks of one part list its tokens once for all their columns.
  auto embedding = form("  %g = input() : f32[N, 64, 96]\n  %i = input(low=0, high=1000) : i64[N, 64]\n  %z = input() : f32[1000, 96]\n"
                        "  %y = index_put(%z, [%i], %g, accumulate=true)\n  return %y\n");
  EXPECT_EQ(embedding.form, F::scatter);
  EXPECT_TRUE(embedding.listed);
  EXPECT_GE(embedding.parts, 2);
  EXPECT_EQ(form("  %x = input() : f32[6]\n  %s = input() : f32[N]\n  %i = input(low=0, high=6) : i64[N]\n"
                 "  %a = scatter_add(%x, 0, %i, %s)\n  return %a\n").form,
            F::serial);
  // Few long rows or few column tiles: blocks split the reduction.
  EXPECT_GT(form("  %x = input() : f32[48, 70001]\n  %s = sum(%x)\n  return %s\n").splits, 1);
  EXPECT_GT(form("  %x = input() : f32[20000, 64]\n  %s = sum.dim_IntList(%x, [0])\n  return %s\n").splits, 1);
  EXPECT_EQ(form("  %x = input() : f32[20000, 64]\n  %s = sum.dim_IntList(%x, [1])\n  return %s\n").splits, 1);
  auto softmax = form(kSoftmax);
  EXPECT_EQ(softmax.form, F::row);
  EXPECT_GT(softmax.persistent, 0);  // a 1000-element row stays in registers
  EXPECT_EQ(softmax.threads_per_row, 128);
}

// How often `needle` occurs in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Transposes take wide tiles first: 16-byte groups, 256 bytes along the staged accesses' dim and
// 128 along the other (128x64 for 16-bit elements, 64x32 for f32); whole groups move as one access
// where the extent and the offset allow, element by element (in the same tile) elsewhere.
TEST(CudaCodegen, TransposesTakeWideTilesFirst) {
  auto d = cuda::preset_device("sm_90a");
  auto tiled = [&](const std::string& type, int rows, int cols) {
    return cuda_code(fmt::format("  %x = input() : {0}[{1}, {2}]\n  %y = input() : {0}[{2}, {1}]\n  %t = permute(%y, [1, 0])\n"
                                 "  %z = add.Tensor(%x, %t)\n  return %z\n",
                                 type, rows, cols),
                     d);
  };
  auto bf16 = tiled("bf16", 256, 512);
  const auto& c = bf16.cuda.kernels.at(0).config;
  EXPECT_EQ(c.form, codegen::CudaConfig::Form::tiled);
  EXPECT_EQ(c.vector, 8);
  EXPECT_EQ(c.tile_a, 128);
  EXPECT_EQ(c.tile_b, 64);
  EXPECT_EQ(bf16.cuda.kernels.at(0).launch.units.constant(), (256 / 128) * (512 / 64));
  const std::string& body = bf16.cuda.bodies.at(0);
  EXPECT_NE(body.find("uint16_t tl0[64][128]"), std::string::npos) << body;
  EXPECT_EQ(count(body, "coil_rt::Vec<uint16_t, 8> V0[4]"), 1u) << body;  // the direct loads, all passes first
  EXPECT_NE(body.find("*reinterpret_cast<coil_rt::Vec<uint16_t, 8>*>(&tl0[yy]"), std::string::npos) << body;
  // Both loads ask L2 to keep their lines over the output's (evict_last).
  EXPECT_EQ(count(body, "coil_rt::load_keep(reinterpret_cast<const coil_rt::Vec<uint16_t, 8>*>(b"), 2u) << body;
  // The other wide candidates: 256 bytes a side, 16 and 8 rows of threads.
  std::vector<std::tuple<int, int, int>> wide;
  for (const auto& k : bf16.lowered.program.kernels)
    if (const auto* loop = std::get_if<loop::LoopKernel>(&k))
      for (const auto& config : codegen::candidate_configs(bf16.lowered.program, *loop, d))
        if (config.tile_a) wide.emplace_back(config.tile_a, config.tile_b, config.block_y);
  EXPECT_EQ(wide, (std::vector<std::tuple<int, int, int>>{{128, 64, 8}, {128, 128, 16}, {128, 128, 8}}));
  auto f32 = tiled("f32", 64, 96).cuda.kernels.at(0).config;
  EXPECT_EQ(f32.vector, 4);
  EXPECT_EQ(f32.tile_a, 64);
  EXPECT_EQ(f32.tile_b, 32);
  // Extents the group does not divide: no whole-group access, the same wide tile.
  auto odd = tiled("bf16", 67, 129);
  EXPECT_EQ(odd.cuda.kernels.at(0).config.tile_a, 128);
  EXPECT_EQ(odd.cuda.bodies.at(0).find("Vec<uint16_t, 8>"), std::string::npos) << odd.cuda.bodies.at(0);
}

// A column split over few tiles takes 4 rows of threads with half the widest vector (8-byte
// loads of bf16), half a wave of splits, and a trip count the compiler sees whole (the split's
// share of rows over the rows of threads); its loads carry no L2 hint, a row's do.
TEST(CudaCodegen, ColumnSplitsTakeNarrowVectorsAndWholeTripCounts) {
  auto d = cuda::preset_device("sm_90a");
  auto gen = cuda_code("  %x = input() : bf16[16384, 8192]\n  %s = sum.dim_IntList(%x, [0])\n  return %s\n", d);
  const auto& c = gen.cuda.kernels.at(0).config;
  EXPECT_EQ(c.form, codegen::CudaConfig::Form::column);
  EXPECT_EQ(c.block_y, 4);
  EXPECT_EQ(c.vector, 4);
  EXPECT_EQ(c.splits, 16);  // 132 SMs x 16 blocks of 128 threads over 64 tiles: 33 fill a wave
  const std::string& body = gen.cuda.bodies.at(0);
  EXPECT_NE(body.find("trips = active ? 256 : 0;"), std::string::npos) << body;  // 16384 / 16 / 4
  // Rows read once, through a pointer from the thread's first row of its share, evict-first.
  EXPECT_NE(body.find("const uint16_t* const pL0_1 = b0 + (x0) + (split * 1024 + static_cast<idx_t>(threadIdx.y)) * 8192;"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("L0 = coil_rt::load_once(reinterpret_cast<const coil_rt::Vec<uint16_t, 4>*>(pL0_1 + it * 32768));"), std::string::npos)
      << body;
  EXPECT_EQ(body.find("load_keep"), std::string::npos) << body;
  // Rows read in several passes: each pass its own pointer from row threadIdx.y, plain loads.
  auto passes = cuda_code("  %x = input() : bf16[3000, 1000]\n  %s = sum.dim_IntList(%x, [0])\n  %v = var.correction(%x, [0], correction=1)\n"
                          "  %i = argmin(%x, 0)\n  return %s, %v, %i\n",
                          d);
  const std::string& three = passes.cuda.bodies.at(0);
  // (the sum shares the variance's Welford pass: schedule/fuse_siblings.h; the argmin takes the second)
  EXPECT_NE(three.find("const uint16_t* const pL0_2 = b0 + (x0) + (static_cast<idx_t>(threadIdx.y)) * 1000;"), std::string::npos) << three;
  EXPECT_NE(three.find("L0 = *reinterpret_cast<const coil_rt::Vec<uint16_t, 8>*>(pL0_2 + it * 8000);"), std::string::npos) << three;
  EXPECT_EQ(three.find("load_once(reinterpret_cast"), std::string::npos) << three;
  // Two reduction dims that do not merge: the index, recomputed each row.
  auto two = cuda_code("  %x = input() : bf16[64, 256, 8192]\n  %t = permute(%x, [1, 0, 2])\n  %s = sum.dim_IntList(%t, [0, 1])\n  return %s\n", d);
  EXPECT_NE(two.cuda.bodies.at(0).find("L0 = *reinterpret_cast<const coil_rt::Vec<uint16_t, 4>*>(b0 + (x0 + (8192 * r0) + (2097152 * r1)));"),
            std::string::npos)
      << two.cuda.bodies.at(0);
  // Rows a split share does not divide evenly keep the per-thread count.
  auto odd = cuda_code("  %x = input() : bf16[16381, 8192]\n  %s = sum.dim_IntList(%x, [0])\n  return %s\n", d);
  EXPECT_EQ(odd.cuda.bodies.at(0).find("trips = active ? "), std::string::npos) << odd.cuda.bodies.at(0);
  EXPECT_NE(odd.cuda.bodies.at(0).find("trips = active && static_cast<idx_t>(threadIdx.y) < coil_rt::imin("), std::string::npos)
      << odd.cuda.bodies.at(0);
  auto norm = cuda_code("  %x = input() : bf16[N, 4096]\n  %y, %m, %r = native_layer_norm(%x, [4096], none, none, 1e-05)\n  return %y\n", d);
  EXPECT_NE(norm.cuda.bodies.at(0).find("coil_rt::load_keep(reinterpret_cast<const coil_rt::Vec<uint16_t, 8>*>(b0 + "), std::string::npos)
      << norm.cuda.bodies.at(0);
}

// A column tile's partials meet in the block's scratch a group of lanes a round, each column
// taken by one thread in straight-line code: a bf16 sum's 4 float lanes in one round (two
// barriers, then the ticket's two and one to hand out the merged sums), split partials read back
// through L2; Welford partials of 8 float lanes take 4 rounds of 2 (kColumnScratchPerThread).
TEST(CudaCodegen, ColumnsCombineLanesInRoundsOfTheBlocksScratch) {
  auto d = cuda::preset_device("sm_90a");
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto sum = cuda_code("  %x = input() : bf16[16384, 8192]\n  %s = sum.dim_IntList(%x, [0])\n  return %s\n", d);
  ASSERT_EQ(sum.cuda.kernels.at(0).config.splits, 16);
  const std::string& body = sum.cuda.bodies.at(0);
  EXPECT_EQ(count(body, "__syncthreads();"), 5u) << body;
  EXPECT_NE(body.find("for (int q = 0; q < 4; ++q) cs0[(threadIdx.y * 32 + threadIdx.x) * 4 + q] = acc0[0 + q];"), std::string::npos) << body;
  EXPECT_NE(body.find("const int c = threadIdx.y * 32 + threadIdx.x;"), std::string::npos) << body;
  EXPECT_EQ(body.find("c += "), std::string::npos) << body;
  EXPECT_NE(body.find("coil_rt::load_l2(reinterpret_cast<float*>(W + 256) + (tile * 16 + q) * 128 + c)"), std::string::npos) << body;
  // Welford partials (16 bytes) of 8 lanes, split: rounds of 2 lanes, column c of the round at
  // lane g * 2 + c % 2 of thread c / 2.
  Target t;
  t.cuda = true;
  t.device = d;
  t.cuda_candidate = 1;
  auto var = generate(parse("  %x = input() : bf16[20000, 200]\n  %v = var.correction(%x, [0], correction=1)\n  return %v\n"), t);
  const auto& c = var.cuda.kernels.at(0).config;
  ASSERT_EQ(c.vector, 8);
  ASSERT_GT(c.splits, 1);
  const std::string& w = var.cuda.bodies.at(0);
  for (int g = 0; g < 4; ++g) {
    EXPECT_NE(w.find(fmt::format("acc0[{} + q] = cs0[threadIdx.x * 2 + q];", 2 * g)), std::string::npos) << g << w;
    EXPECT_NE(w.find(fmt::format("c / 2 * 8 + {} + c % 2", 2 * g)), std::string::npos) << g << w;
  }
  EXPECT_NE(w.find("coil_rt::load_l2(reinterpret_cast<coil_rt::Welford<float>*>(W + "), std::string::npos) << w;
}

// The split kernels of a graph sharing a stream's scratch get regions of their own, 256-byte
// aligned and apart; a kernel without scratch gets none (the regions as the GPU plan lays them
// out: CudaGpu.SplitKernelsOfAGraphKeepTheirScratchApart runs it).
TEST(CudaCodegen, SplitKernelsGetScratchOfTheirOwn) {
  auto d = cuda::preset_device("sm_90a");
  auto gen = cuda_code("  %x = input() : f32[16384, 1024]\n  %y = input() : f32[100, 65536]\n  %z = input() : f32[8, 8]\n"
                       "  %a = sum.dim_IntList(%x, [0])\n  %b = sum.dim_IntList(%y, [1])\n  %c = exp(%z)\n  return %a, %b, %c\n",
                       d);
  const auto& kernels = gen.cuda.kernels;
  ASSERT_EQ(kernels.size(), 3u);
  SplitScratchLayout layout = split_scratch_layout(kernels);
  ASSERT_EQ(layout.offsets.size(), 3u);
  std::vector<std::pair<int64_t, int64_t>> regions;  // [begin, end) of each kernel with scratch
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].launch.scratch_bytes == 0) {
      EXPECT_EQ(layout.offsets[i], -1) << i;
      continue;
    }
    EXPECT_EQ(layout.offsets[i] % 256, 0) << i;
    regions.emplace_back(layout.offsets[i], layout.offsets[i] + kernels[i].launch.scratch_bytes);
  }
  ASSERT_EQ(regions.size(), 2u);  // the column sum and the row sum split
  std::sort(regions.begin(), regions.end());
  EXPECT_LE(regions[0].second, regions[1].first);
  EXPECT_LE(regions[1].second, layout.bytes);
  EXPECT_EQ(split_scratch_layout({}).bytes, 0);
}

// Where vectors are possible, rows and pointwise kernels get no scalar candidates (slower in every
// tuning, and an NVRTC build each), but for pointwise kernels of many buffers; where vectors are
// not possible, the scalar forms remain.
TEST(CudaCodegen, NoScalarTwinsWhereVectorsArePossible) {
  auto d = cuda::preset_device("sm_90a");
  auto vectors = [&](const std::string& body) {
    Generated gen = cuda_code(body, d);
    std::vector<int> out;
    for (const auto& kernel : gen.lowered.program.kernels)
      if (const auto* k = std::get_if<loop::LoopKernel>(&kernel))
        for (const auto& config : codegen::candidate_configs(gen.lowered.program, *k, d)) out.push_back(config.vector);
    return out;
  };
  auto norm = vectors("  %x = input() : bf16[N, 4096]\n  %y, %m, %r = native_layer_norm(%x, [4096], none, none, 1e-05)\n  return %y\n");
  EXPECT_EQ(norm.size(), 3u);  // persistent rows only: the row fits in registers
  EXPECT_TRUE(std::all_of(norm.begin(), norm.end(), [](int v) { return v == 8; }));
  auto gelu = vectors("  %x = input() : bf16[N, 64]\n  %y = gelu(%x)\n  return %y\n");
  EXPECT_EQ(gelu, (std::vector<int>{8, 8, 8}));  // 4, 8 and 16 warps
  auto odd = vectors("  %x = input() : f32[N, 63]\n  %y = exp(%x)\n  return %y\n");
  EXPECT_EQ(odd, (std::vector<int>{1, 1, 1}));
  // Updates of eight same-shaped parameters merged into one kernel (fuse_siblings: launch-bound
  // nests without a common input), 32 buffers: scalar twins beside the vectors.
  std::string updates;
  for (int i = 0; i < 8; ++i)
    updates += fmt::format("  %p{0} = input() : f32[384, 384]\n  %g{0} = input() : f32[384, 384]\n  %m{0} = input() : f32[384, 384]\n"
                           "  %a{0} = mul.Scalar(%m{0}, other=0.9)\n  %n{0} = add.Tensor(%a{0}, %g{0})\n  %q{0} = sub.Tensor(%p{0}, %n{0})\n",
                           i);
  updates += "  return %q0, %n0, %q1, %n1, %q2, %n2, %q3, %n3, %q4, %n4, %q5, %n5, %q6, %n6, %q7, %n7\n";
  EXPECT_EQ(vectors(updates), (std::vector<int>{4, 4, 4, 1, 1}));
}

// Rows that fit in registers get persistent candidates only (1, 1/2 and 1/4 of the threads per
// row); rows too long for them get looped ones.
TEST(CudaCodegen, LoopedRowsOnlyWhereNoPersistentRowFits) {
  auto d = cuda::preset_device("sm_90a");
  auto configs = [&](const std::string& body) {
    Generated gen = cuda_code(body, d);
    std::vector<codegen::CudaConfig> out;
    for (const auto& kernel : gen.lowered.program.kernels)
      if (const auto* k = std::get_if<loop::LoopKernel>(&kernel))
        for (const auto& c : codegen::candidate_configs(gen.lowered.program, *k, d)) out.push_back(c);
    return out;
  };
  auto fits = configs("  %x = input() : bf16[N, 768]\n  %y, %m, %r = native_layer_norm(%x, [768], none, none, 1e-05)\n  return %y\n");
  ASSERT_EQ(fits.size(), 3u);
  for (size_t i = 0; i < fits.size(); ++i) {
    EXPECT_GT(fits[i].persistent, 0) << i;
    EXPECT_EQ(fits[i].threads_per_row, 128 >> i) << i;
  }
  auto long_rows = configs("  %x = input() : f32[N, 1048576]\n  %y = _softmax(%x, -1, false)\n  return %y\n");
  ASSERT_FALSE(long_rows.empty());
  EXPECT_TRUE(std::none_of(long_rows.begin(), long_rows.end(), [](const codegen::CudaConfig& c) { return c.persistent > 0; }));
}

// A row whose reductions read no memory along it (the sum of a one-hot row: the loss gradient's)
// reads the row in its stores alone: looped rows, not persistent ones keeping it in registers.
TEST(CudaCodegen, RowsWhoseReductionsReadNoRowAreLooped) {
  auto d = cuda::preset_device("sm_90a");
  Generated gen = cuda_code("  %x = input() : bf16[64, 50257]\n  %i = input(low=0, high=50257) : i64[64, 1]\n"
                            "  %z = full_like(%x, fill_value=0, dtype=f32)\n  %h = scatter.value(%z, dim=1, index=%i, value=-1.0)\n"
                            "  %s = sum.dim_IntList(%h, [1], true)\n  %f = _to_copy(%x, dtype=f32)\n  %e = exp(%f)\n"
                            "  %m = mul.Tensor(%e, %s)\n  %o = sub.Tensor(%h, %m)\n  %y = _to_copy(%o, dtype=bf16)\n  return %y\n", d);
  std::vector<codegen::CudaConfig> configs;
  for (const auto& kernel : gen.lowered.program.kernels)
    if (const auto* k = std::get_if<loop::LoopKernel>(&kernel); k && !k->reductions.empty())
      for (const auto& c : codegen::candidate_configs(gen.lowered.program, *k, d)) configs.push_back(c);
  ASSERT_FALSE(configs.empty());
  for (const auto& c : configs) {
    EXPECT_EQ(c.form, codegen::CudaConfig::Form::row) << codegen::to_string(c);
    EXPECT_EQ(c.persistent, 0) << codegen::to_string(c);
  }
}

// A sum over the rows of [rows, columns] data scaled by a per-row statistic (a normalization's
// weight gradient) is a column reduction: the statistic is one value per row for every column,
// and the data's columns are adjacent in memory. As a row of 1024 threads a column, each warp
// read 32 rows' single elements (GPT-2's and Llama's norm weight gradients: 0.1-0.16 ms each).
TEST(CudaCodegen, ARowStatisticKeepsAColumnReduction) {
  auto d = cuda::preset_device("sm_90a");
  Generated gen = cuda_code("  %g = input() : bf16[8192, 768]\n  %x = input() : f32[8192, 768]\n  %r = input() : f32[8192, 1]\n"
                            "  %a = _to_copy(%g, dtype=f32)\n  %n = mul.Tensor(%x, %r)\n  %p = mul.Tensor(%a, %n)\n"
                            "  %s = sum.dim_IntList(%p, [0], false)\n  return %s\n", d);
  int reductions = 0;
  for (const auto& kernel : gen.lowered.program.kernels)
    if (const auto* k = std::get_if<loop::LoopKernel>(&kernel); k && !k->reductions.empty()) {
      ++reductions;
      EXPECT_TRUE(codegen::is_column_reduction(*k));
      for (const auto& c : codegen::candidate_configs(gen.lowered.program, *k, d))
        EXPECT_EQ(c.form, codegen::CudaConfig::Form::column) << codegen::to_string(c);
    }
  EXPECT_EQ(reductions, 1);
}

// A persistent softmax row computes exp(x - max) once, in the sum's pass, keeps it in registers
// for the stores, and multiplies by the sum's reciprocal; its bf16 result is rounded once.
// log_softmax's later passes repeat only cheap arithmetic, so nothing is carried.
TEST(CudaCodegen, PersistentRowsCarryDearValuesBetweenPasses) {
  auto d = cuda::preset_device("sm_90a");
  auto gen = cuda_code("  %x = input() : bf16[N, 1000]\n  %f = _to_copy(%x, dtype=f32)\n  %y = _softmax(%f, -1, false)\n"
                       "  %z = _to_copy(%y, dtype=bf16)\n  return %z\n", d);
  ASSERT_EQ(gen.cuda.kernels.size(), 1u);
  ASSERT_GT(gen.cuda.kernels[0].config.persistent, 0);
  const std::string& body = gen.cuda.bodies[0];
  EXPECT_EQ(count(body, "coil_rt::exp("), 1u) << body;
  EXPECT_EQ(count(body, "k0[e][u] = "), 1u) << body;
  EXPECT_NE(body.find("const float inv1 = 1.0f / acc1;"), std::string::npos) << body;
  EXPECT_NE(body.find("(k0[e][u] * inv1)"), std::string::npos) << body;
  EXPECT_EQ(body.find(" / acc1)"), std::string::npos) << body;
  EXPECT_EQ(count(body, "f32_to_bf16("), 1u) << "one rounding to bf16: " << body;

  auto log = cuda_code("  %x = input() : f32[N, 1000]\n  %y = _log_softmax(%x, -1, false)\n  return %y\n", d);
  EXPECT_EQ(log.cuda.bodies[0].find("k0["), std::string::npos) << log.cuda.bodies[0];
  // Looped rows keep nothing between passes, and compute exp twice.
  codegen::CudaConfig looped = gen.cuda.kernels[0].config;
  looped.persistent = 0;
  const auto* k = std::get_if<loop::LoopKernel>(&gen.lowered.program.kernels.at(0));
  ASSERT_NE(k, nullptr);
  codegen::CudaKernel info;
  std::string text = codegen::emit_cuda_kernel(gen.lowered.program, *k, {"N"}, d, looped, info);
  EXPECT_EQ(count(text, "coil_rt::exp("), 2u) << text;
  EXPECT_NE(text.find("* inv1)"), std::string::npos) << text;
}

// The export's attention result goes through a permuted copy back to its own layout: the
// attention writes the graph output itself and the copy is gone (over static and symbolic
// lengths); with a second reader of the result (here a fused sibling of the copy), the copy stays.
TEST(CudaCodegen, AttentionWritesTheCopyOfItsResult) {
  auto d = cuda::preset_device("sm_90a");
  const std::string body =
      "  %q = input() : bf16[2, 3, 40, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n"
      "  %b = permute(%a, [0, 2, 1, 3])\n  %c = clone(%b, memory_format=contiguous_format)\n  %d = permute(%c, [0, 2, 1, 3])\n";
  auto one = cuda_code(body + "  return %d\n", d);
  const auto& kernels = one.lowered.program.kernels;
  ASSERT_EQ(kernels.size(), 1u) << loop::to_string(one.lowered.program);
  const auto& call = std::get<loop::ExternCall>(kernels[0]);
  ASSERT_TRUE(call.output_view.has_value());
  EXPECT_EQ(one.lowered.program.buffers[static_cast<size_t>(call.output)].role, loop::Buffer::Role::output);
  // A copy into the dense [B, T, H * hd] rows a projection reads: its loop merges dims (indices
  // with divisions), and the attention writes those rows itself.
  auto rows = cuda_code(body + "  %e = view(%c, [80, 192])\n  %w = input() : bf16[192, 32]\n  %g = mm(%e, %w)\n  return %g\n", d);
  ASSERT_EQ(rows.lowered.program.kernels.size(), 2u) << loop::to_string(rows.lowered.program);
  const auto& into = std::get<loop::ExternCall>(rows.lowered.program.kernels[0]);
  ASSERT_TRUE(into.output_view.has_value());
  EXPECT_EQ(into.output_view->strides, (SymShape{SymInt(7680), SymInt(64), SymInt(192), SymInt(1)}));
  // The same over a symbolic length (dynamic shapes): the copy's loop runs over T itself, and
  // the strides the attention writes are expressions of it.
  auto symbolic = cuda_code("  sym T = 40\n  %q = input() : bf16[2, 3, T, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n"
                            "  %b = permute(%a, [0, 2, 1, 3])\n  %c = clone(%b, memory_format=contiguous_format)\n  %e = view(%c, [2*T, 192])\n"
                            "  %w = input() : bf16[192, 32]\n  %g = mm(%e, %w)\n  return %g\n",
                            d);
  ASSERT_EQ(symbolic.lowered.program.kernels.size(), 2u) << loop::to_string(symbolic.lowered.program);
  const auto& written = std::get<loop::ExternCall>(symbolic.lowered.program.kernels[0]);
  ASSERT_TRUE(written.output_view.has_value());
  const SymInt T = SymInt::symbol("T");
  EXPECT_EQ(written.output_view->strides, (SymShape{SymInt(192) * T, SymInt(64), SymInt(192), SymInt(1)}));
  auto two = cuda_code(body + "  %e = exp(%a)\n  return %d, %e\n", d);
  EXPECT_EQ(two.lowered.program.kernels.size(), 2u) << loop::to_string(two.lowered.program);  // the copy and exp, fused
  for (const auto& k : two.lowered.program.kernels)
    if (const auto* e = std::get_if<loop::ExternCall>(&k)) {
      EXPECT_FALSE(e->output_view.has_value());
    }
}

// A loop variable's stride in an offset, constant or an expression of size symbols: none where
// the offset is not affine in it (a division, a square) or the "stride" holds the variable.
TEST(KernelShape, AffineCoefficients) {
  const SymInt T = SymInt::symbol("T"), x0 = SymInt::symbol("x0"), x1 = SymInt::symbol("x1");
  const SymInt offset = x1 * SymInt(64) + x0 * T * SymInt(192) + SymInt(5);
  EXPECT_EQ(codegen::affine_coefficient(offset, "x0"), std::optional<SymInt>(SymInt(192) * T));
  EXPECT_EQ(codegen::affine_coefficient(offset, "x1"), std::optional<SymInt>(SymInt(64)));
  EXPECT_EQ(codegen::affine_coefficient(offset, "x2"), std::optional<SymInt>(SymInt(0)));
  EXPECT_FALSE(codegen::affine_coefficient(floordiv(x0, SymInt(4)) * T, "x0").has_value());
  EXPECT_FALSE(codegen::affine_coefficient(x0 * x0 * T, "x0").has_value());
}

// Three identical "layers" (a norm-like row kernel each) and a column sum: the layers differ only in name and
// buffers, so their canonical texts agree (the driver compiles and tunes them once), and a
// different kernel's does not.
const char* kLayers =
    "  %x = input() : f32[N, 256]\n"
    "  %a = _softmax(%x, -1, false)\n  %b = _softmax(%a, -1, false)\n  %c = _softmax(%b, -1, false)\n"
    "  %d = sum.dim_IntList(%c, [0])\n  return %d\n";

TEST(CudaCodegen, RepeatedLayersHaveOneCanonicalText) {
  auto gen = cuda_code(kLayers, cuda::preset_device("sm_90a"));
  const auto& k = gen.cuda.kernels;
  ASSERT_GE(k.size(), 4u);
  std::set<std::string> texts;
  for (size_t i = 0; i < k.size(); ++i) texts.insert(codegen::canonical_kernel_text(gen.cuda.bodies[i], k[i].name));
  EXPECT_EQ(texts.size(), k.size() - 2) << "three softmax kernels should share one text";
  EXPECT_NE(gen.cuda.bodies[0], gen.cuda.bodies[1]);  // while their own texts differ
  EXPECT_EQ(codegen::canonical_kernel_text("void k1(float* b7, float* b3) { b3[0] = b7[0] + ab12; }", "k1"),
            "void K_(float* B_0, float* B_1) { B_1[0] = B_0[0] + ab12; }");
}

TEST(CudaCodegen, AWarpOf64ChangesTheCode) {
  auto d32 = cuda::preset_device("sm_90a");
  auto d64 = d32;
  d64.warp_size = 64;
  auto g32 = cuda_code(kSoftmax, d32), g64 = cuda_code(kSoftmax, d64);
  const auto& k32 = g32.cuda.kernels.at(0);
  const auto& k64 = g64.cuda.kernels.at(0);
  EXPECT_EQ(k32.launch.block_x, 128);  // four warps
  EXPECT_EQ(k64.launch.block_x, 256);
  EXPECT_NE(g32.cuda.bodies[0].find("128, 32, 0xffffffffu, scratch"), std::string::npos) << g32.cuda.bodies[0];
  EXPECT_NE(g64.cuda.bodies[0].find("128, 64, "), std::string::npos) << g64.cuda.bodies[0];
  // A row a block, however many; pointwise grids stop at 8 waves of the device's resident blocks.
  EXPECT_EQ(k32.launch.max_blocks, codegen::kMaxGrid);
  const char* pointwise = "  %x = input() : f32[4096, 1024]\n  %y = relu(%x)\n  return %y\n";
  EXPECT_EQ(cuda_code(pointwise, d32).cuda.kernels.at(0).launch.max_blocks, 132 * (2048 / 128) * 8);
  auto fewer = d32;
  fewer.sm_count = 10;
  EXPECT_EQ(cuda_code(pointwise, fewer).cuda.kernels.at(0).launch.max_blocks, 10 * (2048 / 128) * 8);
}

// Kernels that run the same code in different graphs (a model's repeated layers) are built under
// one name and text, which keeps the op's stem readable.
TEST(CudaCodegen, RepeatedLayersBuildUnderOneContentName) {
  auto d = cuda::preset_device("sm_90a");
  auto built = [&](const std::string& body) {
    Generated gen = generate(parse(body), {.cuda = true, .device = d});
    const auto& k = gen.cuda.kernels.at(0);
    return codegen::content_named_kernel(codegen::canonical_kernel_text(gen.cuda.bodies.at(0), k.name), k.name);
  };
  auto a = built("  %x_1 = input() : f32[N, 64]\n  %gelu_3 = gelu(%x_1)\n  return %gelu_3\n");
  auto b = built("  %x_9 = input() : f32[N, 64]\n  %gelu_17 = gelu(%x_9)\n  return %gelu_17\n");
  auto c = built("  %x_9 = input() : f32[N, 64]\n  %gelu_17 = relu(%x_9)\n  return %gelu_17\n");
  EXPECT_EQ(a, b);
  EXPECT_NE(a.first, c.first);
  EXPECT_EQ(a.first.rfind("gelu_", 0), 0u) << a.first;
  EXPECT_EQ(a.first.size(), std::string("gelu_").size() + 16) << a.first;
  EXPECT_NE(a.second.find(a.first + "("), std::string::npos) << a.second;
}

// Every candidate configuration of every kernel of these graphs, in one unit, for both targets.
TEST(CudaCodegen, EveryCandidateBuildsWithNvrtc) {
  std::shared_ptr<const build::Nvrtc> nvrtc;
  try {
    nvrtc = build::Nvrtc::load();
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC is not available here: " << e.what();
  }
  const char* graphs[] = {
      kSoftmax,
      "  %x = input() : bf16[N, 4096]\n  %w = input() : bf16[4096]\n  %y, %m, %r = native_layer_norm(%x, [4096], %w, none, 1e-05)\n"
      "  %a = argmax(%x, 1)\n  return %y, %a\n",
      "  %x = input() : f32[300, N, 33]\n  %s = sum.dim_IntList(%x, [0])\n  %v = var.correction(%x, [0], correction=1)\n  return %s, %v\n",
      "  %x = input() : f16[N, 40, 72]\n  %t = permute(%x, [0, 2, 1])\n  %y = mul.Tensor(%t, %t)\n  return %y\n",
      "  %x = input() : f32[N, 9]\n  %y = cumsum(%x, 1)\n  %z = exp(%x)\n  return %y, %z\n",
      // split reductions: few long rows, few column tiles, Welford and argmax partials
      "  %x = input() : f32[48, 70001]\n  %s = sum(%x)\n  %a = argmax(%x, 1)\n  %v = var.correction(%x, [1], correction=0)\n  %m = mean.dim(%x, [1])\n"
      "  %c = sum.dim_IntList(%x, [0])\n  %i = argmin(%x, 0)\n  return %s, %a, %v, %m, %c, %i\n",
      // vectorized columns: bf16 (8 lanes), f32 (4), with splits, Welford and argmax partials
      "  %x = input() : bf16[600, 1024]\n  %s = sum.dim_IntList(%x, [0])\n  %v = var.correction(%x, [0], correction=1)\n  %i = argmax(%x, 0)\n"
      "  %c = input() : f32[N, 3, 40]\n  %t = amax(%c, [0])\n  return %s, %v, %i, %t\n",
      // a listed scatter (an embedding gradient) and a partitioned one
      "  %g = input() : f32[N, 64, 96]\n  %i = input(low=0, high=1000) : i64[N, 64]\n  %z = input() : f32[1000, 96]\n"
      "  %y = index_put(%z, [%i], %g, accumulate=true)\n  %s = input() : f32[N, 5]\n  %j = input(low=0, high=6) : i64[N, 5]\n"
      "  %x = input() : f32[6, 5]\n  %a = scatter_add(%x, 0, %j, %s)\n  return %y, %a\n",
  };
  // a depthwise 7x7 in a cuDNN chain (the planner as with cuDNN taking the ungrouped one): flat
  // columns, jammed along the window by 4 and 2
  const std::string depthwise =
      "  %x = input() : bf16[8, 16, 56, 56]\n  %w = input() : bf16[96, 16, 1, 1]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %v = input() : bf16[96, 1, 7, 7]\n"
      "  %d = convolution(%c, %v, none, [1, 1], [3, 3], [1, 1], false, [0, 0], 96)\n  %r = relu(%d)\n  return %r\n";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto d = cuda::preset_device(arch);
    std::string unit;
    std::set<std::string> built;
    int n = 0, jams = 0;
    std::vector<std::pair<std::string, bool>> bodies;
    for (const char* body : graphs) bodies.emplace_back(body, false);
    bodies.emplace_back(depthwise, true);
    for (const auto& [body, library] : bodies) {
      Target t;
      t.cuda = true;
      t.device = d;
      if (library)
        t.library_convolution = [](const loop::ExternCall& c, const loop::Program&) { return loop::conv_params(c.params).groups == 1; };
      Generated gen = generate(parse(body), t);
      if (unit.empty()) unit = gen.cuda.prelude;
      std::vector<std::string> symbols = {"N"};
      for (const auto& kernel : gen.lowered.program.kernels) {
        const auto* k = std::get_if<loop::LoopKernel>(&kernel);
        if (!k) continue;
        for (const auto& config : codegen::candidate_configs(gen.lowered.program, *k, d)) {
          loop::LoopKernel copy = *k;
          copy.name = "c" + std::to_string(n++);
          codegen::CudaKernel info;
          // built as the compiler builds it: canonical text under its content name
          std::string text = codegen::emit_cuda_kernel(gen.lowered.program, copy, symbols, d, config, info);
          auto [name, named] = codegen::content_named_kernel(codegen::canonical_kernel_text(text, copy.name), copy.name);
          if (!built.insert(name).second) continue;
          unit += named;
          EXPECT_LE(info.launch.block_x * info.launch.block_y, d.max_threads_per_block);
          jams += config.jam > 1;
        }
      }
    }
    EXPECT_GT(n, 25);
    EXPECT_EQ(jams, 2) << arch;
    build::CudaBuildOptions options{.cache = build::ArtifactCache(testing::TempDir() + "/cuda_candidates"), .nvrtc = nvrtc, .nvrtc_version = nvrtc->version(), .arch = arch};
    EXPECT_FALSE(build::compile_cubin(unit, options).empty()) << arch;
  }
}

// scaled_dot_product_attention: f16/bf16 with head sizes 16..128 (masked or not, grouped-query or
// not, static sizes or symbolic batch and lengths) become one fused kernel (tensor-core mma),
// built for both targets; the rest is decomposed.
TEST(CudaCodegen, FusedAttentionWhereItAppliesAndBuildsWithNvrtc) {
  struct Case {
    const char* body;
    bool fused;
  };
  const Case cases[] = {
      // q, k, v as head views of one packed projection (a GPT-2 block), causal
      {"  %p = input() : bf16[2, 100, 192]\n  %q, %k, %v = split_with_sizes(%p, [64, 64, 64], 2)\n  %q4 = view(%q, [2, 100, 2, 32])\n"
       "  %k4 = view(%k, [2, 100, 2, 32])\n  %v4 = view(%v, [2, 100, 2, 32])\n  %qh = permute(%q4, [0, 2, 1, 3])\n"
       "  %kh = permute(%k4, [0, 2, 1, 3])\n  %vh = permute(%v4, [0, 2, 1, 3])\n"
       "  %a = scaled_dot_product_attention(%qh, %kh, %vh, is_causal=true)\n  return %a\n", true},
      {"  %q = input() : f16[3, 70, 128]\n  %k = input() : f16[3, 130, 128]\n  %v = input() : f16[3, 130, 128]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %v, scale=0.2)\n  return %a\n", true},
      // a negative scale (multiplied in before the max) and a scale of exactly 1 after it
      {"  %q = input() : bf16[2, 150, 32]\n  %k = input() : bf16[2, 90, 32]\n  %v = input() : bf16[2, 90, 32]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %v, scale=-0.3)\n  return %a\n", true},
      {"  %q = input() : f32[3, 70, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q)\n  return %a\n", false},
      // masks: bool, and added (f16, broadcast over heads and query rows)
      {"  %q = input() : bf16[2, 4, 70, 64]\n  %m = input() : bool[70, 70]\n  %a = scaled_dot_product_attention(%q, %q, %q, %m)\n  return %a\n", true},
      {"  %q = input() : f16[2, 4, 70, 32]\n  %k = input() : f16[2, 4, 130, 32]\n  %m = input() : f16[2, 1, 1, 130]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, %m)\n  return %a\n", true},
      // grouped-query: decoding over a repeated cache with a mask, enable_gqa causal
      {"  %q = input() : bf16[2, 8, 1, 64]\n  %m = input() : bf16[1, 1, 1, 40]\n  %kc = input() : bf16[2, 2, 40, 64]\n"
       "  %u = unsqueeze(%kc, 2)\n  %e = expand(%u, [2, 2, 4, 40, 64])\n  %c = clone(%e, memory_format=contiguous_format)\n"
       "  %k = view(%c, [2, 8, 40, 64])\n  %a = scaled_dot_product_attention(%q, %k, %k, %m)\n  return %a\n", true},
      {"  %q = input() : bf16[2, 8, 1, 64]\n  %m = input() : bool[1, 1, 1, 40]\n  %kc = input() : bf16[2, 2, 40, 64]\n"
       "  %u = unsqueeze(%kc, 2)\n  %e = expand(%u, [2, 2, 4, 40, 64])\n  %c = clone(%e, memory_format=contiguous_format)\n"
       "  %k = view(%c, [2, 8, 40, 64])\n  %a = scaled_dot_product_attention(%q, %k, %k, %m)\n  return %a\n", true},
      {"  %q = input() : bf16[1, 6, 50, 32]\n  %k = input() : bf16[1, 2, 50, 32]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, is_causal=true, enable_gqa=true)\n  return %a\n", true},
      // decoding: 128 keys a block in clusters of 3; 256 keys a block merged by a ticket; 16 rows
      // of 128-wide heads (key groups over half the warps)
      {"  %q = input() : bf16[16, 8, 1, 64]\n  %k = input() : bf16[16, 2, 384, 64]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, enable_gqa=true)\n  return %a\n", true},
      {"  %q = input() : f16[2, 8, 1, 64]\n  %k = input() : f16[2, 2, 5000, 64]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, enable_gqa=true)\n  return %a\n", true},
      {"  %q = input() : bf16[1, 32, 1, 128]\n  %k = input() : bf16[1, 2, 100, 128]\n  %m = input() : bool[1, 1, 1, 100]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, %m, enable_gqa=true)\n  return %a\n", true},
      // symbolic sizes (dynamic shapes): the batch, the lengths, a mask over them, grouped heads
      {"  %q = input() : bf16[N, 70, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q)\n  return %a\n", true},
      {"  sym B = 2\n  sym T = 100\n  %p = input() : bf16[B, T, 192]\n  %q, %k, %v = split_with_sizes(%p, [64, 64, 64], 2)\n  %q4 = view(%q, [B, T, 2, 32])\n"
       "  %k4 = view(%k, [B, T, 2, 32])\n  %v4 = view(%v, [B, T, 2, 32])\n  %qh = permute(%q4, [0, 2, 1, 3])\n"
       "  %kh = permute(%k4, [0, 2, 1, 3])\n  %vh = permute(%v4, [0, 2, 1, 3])\n"
       "  %a = scaled_dot_product_attention(%qh, %kh, %vh, is_causal=true)\n  return %a\n", true},
      {"  sym L = 70\n  sym S = 90\n  %q = input() : f16[2, 4, L, 128]\n  %k = input() : f16[2, 4, S, 128]\n  %m = input() : bool[L, S]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, %m)\n  return %a\n", true},
      {"  sym T = 50\n  %q = input() : bf16[1, 6, T, 64]\n  %k = input() : bf16[1, 2, T, 64]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %k, is_causal=true, enable_gqa=true)\n  return %a\n", true},
      {"  %q = input() : bf16[2, 70, 72]\n  %a = scaled_dot_product_attention(%q, %q, %q)\n  return %a\n", false},
  };
  std::shared_ptr<const build::Nvrtc> nvrtc;
  try {
    nvrtc = build::Nvrtc::load();
  } catch (const Error&) {
  }
  for (const char* arch : {"sm_80", "sm_90a"}) {
    auto d = cuda::preset_device(arch);
    std::string unit;
    for (const auto& c : cases) {
      Generated gen = cuda_code(c.body, d);
      int fused = 0;
      for (const auto& k : gen.lowered.program.kernels)
        if (const auto* e = std::get_if<loop::ExternCall>(&k)) fused += e->kind == loop::ExternKind::attention;
      EXPECT_EQ(fused, c.fused ? 1 : 0) << c.body << loop::to_string(gen.lowered.program);
      EXPECT_EQ(gen.cuda.code().find("mma.sync.aligned.m16n8k16") != std::string::npos, c.fused);
      // built as the compiler builds it: each kernel's canonical text under its content name
      unit = gen.cuda.prelude;
      for (size_t i = 0; i < gen.cuda.bodies.size(); ++i) {
        const std::string& name = gen.cuda.kernels[i].name;
        unit += codegen::content_named_kernel(codegen::canonical_kernel_text(gen.cuda.bodies[i], name), name).second + "\n";
      }
      if (!nvrtc) continue;
      build::CudaBuildOptions options{.cache = build::ArtifactCache(testing::TempDir() + "/cuda_attention"), .nvrtc = nvrtc, .nvrtc_version = nvrtc->version(), .arch = arch};
      EXPECT_FALSE(build::compile_cubin(unit, options).empty()) << arch << c.body;
    }
  }
  if (!nvrtc) GTEST_SKIP() << "NVRTC is not available here: where attention fuses was checked, the builds were not";
}

// Decoding over a repeated cache: the query heads of a key/value head are the rows of one
// attention, which a kernel split over the keys computes and writes into the result itself (the
// view back to [B, H, 1, E] has the same bytes: no copy). The split: the fewest keys a block (32
// up) that leave no more blocks than SMs. A head's splits merge in a thread-block cluster through
// distributed shared memory where the device has clusters (sm_90a: up to 16 blocks), else
// through a ticket in scratch (sm_80, or more splits than a cluster takes).
TEST(CudaCodegen, DecodingAttentionSplitsTheKeysAndWritesTheResult) {
  auto decoding = [](int64_t batch, int64_t length, const char* arch) {
    return cuda_code(fmt::format("  %q = input() : bf16[{0}, 8, 1, 64]\n  %m = input() : bool[1, 1, 1, {1}]\n  %kc = input() : bf16[{0}, 2, {1}, 64]\n"
                                 "  %u = unsqueeze(%kc, 2)\n  %e = expand(%u, [{0}, 2, 4, {1}, 64])\n  %c = clone(%e, memory_format=contiguous_format)\n"
                                 "  %k = view(%c, [{0}, 8, {1}, 64])\n  %a = scaled_dot_product_attention(%q, %k, %k, %m)\n  return %a\n",
                                 batch, length),
                     cuda::preset_device(arch));
  };
  {
    auto gen = decoding(2, 200, "sm_90a");
    const auto& kernels = gen.lowered.program.kernels;
    ASSERT_EQ(kernels.size(), 1u) << loop::to_string(gen.lowered.program);
    const auto& call = std::get<loop::ExternCall>(kernels[0]);
    EXPECT_EQ(call.kind, loop::ExternKind::attention);
    EXPECT_EQ(call.inputs[0].sizes, (SymShape{2, 2, 4, 64}));      // rows: the 4 query heads of a key/value head
    EXPECT_EQ(call.inputs[1].sizes, (SymShape{2, 2, 200, 64}));    // the cache itself
    EXPECT_EQ(call.inputs[3].strides, (SymShape{0, 0, 0, 1}));     // the mask, broadcast
    EXPECT_EQ(call.output, gen.lowered.output_buffers[0]);         // the graph's output, written in place
    const auto& k = gen.cuda.kernels[0];
    EXPECT_EQ(k.launch.units, SymInt(4 * 7));  // (batch, key/value head) x 7 chunks of 32 keys
    EXPECT_EQ(k.launch.cluster, 7);            // a head's chunks one cluster
    EXPECT_EQ(k.launch.scratch_bytes, 0);
    const std::string& code = gen.cuda.bodies[0];
    EXPECT_NE(code.find("KC = 32, SPLITS = 7"), std::string::npos) << code;
    EXPECT_NE(code.find("ld.shared::cluster.f32"), std::string::npos) << code;
    EXPECT_EQ(code.find("atomicAdd"), std::string::npos) << code;
    EXPECT_NE(code.find("const bool* __restrict__"), std::string::npos) << code;  // the mask in its own type
    EXPECT_EQ(code.find("wgmma"), std::string::npos);
  }
  {  // no clusters before Hopper: the ticket
    auto gen = decoding(2, 200, "sm_80");
    const auto& k = gen.cuda.kernels[0];
    EXPECT_EQ(k.launch.cluster, 0);
    EXPECT_GT(k.launch.scratch_bytes, 0);
    EXPECT_NE(gen.cuda.bodies[0].find("atomicAdd(ticket + bh, 1u)"), std::string::npos) << gen.cuda.bodies[0];
    EXPECT_EQ(gen.cuda.bodies[0].find("cluster"), std::string::npos);
  }
  {  // batch 8 over 384 keys: 32 heads, 128 keys a block (96 blocks), clusters of 3
    auto gen = decoding(16, 384, "sm_90a");
    const auto& k = gen.cuda.kernels[0];
    EXPECT_EQ(k.launch.units, SymInt(32 * 3));
    EXPECT_EQ(k.launch.cluster, 3);
  }
  {  // a long cache: more splits than a cluster takes (4 heads, 256 keys a block, 20 splits)
    auto gen = decoding(2, 5000, "sm_90a");
    const auto& k = gen.cuda.kernels[0];
    EXPECT_EQ(k.launch.units, SymInt(4 * 20));
    EXPECT_EQ(k.launch.cluster, 0);
    EXPECT_NE(gen.cuda.bodies[0].find("atomicAdd(ticket + bh, 1u)"), std::string::npos);
  }
}

// On sm_90a, 64-wide heads take the wgmma kernel: its three key/value stages and the query tile
// live in dynamic shared memory past the default 48 KiB (the launch asks for it), both products
// are wgmma and none is mma.sync; each step waits for its scores with the previous output
// product still in flight (wait_group 1). It builds with NVRTC.
TEST(CudaCodegen, HopperAttentionRunsWgmmaOverAStageRing) {
  const char* cases[] = {
      "  %q = input() : bf16[2, 3, 130, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n  return %a\n",
      "  %q = input() : f16[3, 70, 64]\n  %k = input() : f16[3, 150, 64]\n  %v = input() : f16[3, 150, 64]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, scale=-0.3)\n  return %a\n",
  };
  std::shared_ptr<const build::Nvrtc> nvrtc;
  try {
    nvrtc = build::Nvrtc::load();
  } catch (const Error&) {
  }
  auto d = cuda::preset_device("sm_90a");
  for (const char* body : cases) {
    Generated gen = cuda_code(body, d);
    ASSERT_EQ(gen.cuda.kernels.size(), 1u) << body;
    const codegen::CudaKernel& k = gen.cuda.kernels[0];
    EXPECT_EQ(k.config.form, codegen::CudaConfig::Form::attention);
    EXPECT_EQ(k.launch.block_x, 128);
    EXPECT_EQ(k.launch.shared_bytes, (64 + 2 * 3 * 64) * 64 * 2);
    EXPECT_GT(k.launch.shared_bytes, d.shared_per_block);
    EXPECT_LE(k.launch.shared_bytes, d.shared_per_block_optin);
    const std::string& code = gen.cuda.bodies[0];
    EXPECT_NE(code.find("extern __shared__ __align__(1024)"), std::string::npos);
    EXPECT_NE(code.find("wgmma.mma_async.sync.aligned.m64n64k16.f32"), std::string::npos);
    EXPECT_NE(code.find("_wg_wait<1>()"), std::string::npos);
    const std::string kernel = code.substr(code.find("__global__"));
    EXPECT_EQ(kernel.find("_mma("), std::string::npos);  // the shared helpers define it, the kernel does not use it
    if (!nvrtc) continue;
    build::CudaBuildOptions options{.cache = build::ArtifactCache(testing::TempDir() + "/cuda_attention_wgmma"), .nvrtc = nvrtc, .nvrtc_version = nvrtc->version(), .arch = "sm_90a"};
    EXPECT_FALSE(build::compile_cubin(gen.cuda.code(), options).empty()) << body;
  }
  if (!nvrtc) GTEST_SKIP() << "NVRTC is not available here: the kernels were checked, not built";
}

// Attention over symbolic sizes (a graph Dynamo traced with dynamic=True): one kernel for every
// size, taking the batch and the length as arguments after its buffers (the runtime passes them in
// the graph's order); a block a tile of query rows of one (batch, head), the grid counted from the
// sizes at run time; the views' offsets per (batch, head) computed from them; and each length's
// partial tiles masked at run time, as a static odd length's are. The wgmma kernel on sm_90a, the
// mma.sync one elsewhere; a single query row of symbolic length keeps the general kernel (the
// decoding one sizes its scratch at compile time).
TEST(CudaCodegen, SymbolicAttentionTakesItsSizesAsArguments) {
  const char* body = "  sym B = 2\n  sym T = 100\n  %q = input() : bf16[B, 12, T, 64]\n  %k = input() : bf16[B, 12, T, 64]\n  %v = input() : bf16[B, 12, T, 64]\n"
                     "  %a = scaled_dot_product_attention(%q, %k, %v, is_causal=true)\n  return %a\n";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Generated gen = cuda_code(body, cuda::preset_device(arch));
    ASSERT_EQ(gen.cuda.kernels.size(), 1u) << arch;
    const codegen::CudaKernel& k = gen.cuda.kernels[0];
    EXPECT_EQ(k.config.form, codegen::CudaConfig::Form::attention);
    ASSERT_EQ(k.symbols.size(), 2u);
    EXPECT_EQ(gen.graph.symbols[static_cast<size_t>(k.symbols[0])].name, "B");
    EXPECT_EQ(gen.graph.symbols[static_cast<size_t>(k.symbols[1])].name, "T");
    const int64_t rows = std::string(arch) == "sm_90a" ? 64 : 128;  // a block's query rows
    for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {3, 130}, {2, 1000}})
      EXPECT_EQ(k.launch.units.eval({{"B", b}, {"T", t}}), b * 12 * ((t + rows - 1) / rows)) << arch << " B=" << b << " T=" << t;
    EXPECT_EQ(k.launch.max_blocks, codegen::kMaxGrid);
    const std::string& code = gen.cuda.bodies[0];
    EXPECT_NE(code.find("uint16_t* __restrict__ b3, const int64_t s_B, const int64_t s_T, int64_t* __restrict__ E)"), std::string::npos) << code;
    EXPECT_NE(code.find("const int64_t L = (s_T), S = (s_T), TILES_Q = (L + " + std::to_string(rows - 1) + ") / " + std::to_string(rows) +
                        ", TILES = TILES_Q * (12LL * s_B);"),
              std::string::npos)
        << code;
    EXPECT_NE(code.find("(768LL * s_T)"), std::string::npos) << code;  // a batch's stride
    EXPECT_NE(code.find(std::string(arch) == "sm_90a" ? "wgmma.mma_async" : "mma.sync.aligned.m16n8k16"), std::string::npos);
  }
  Generated one = cuda_code("  sym S = 40\n  %q = input() : bf16[2, 8, 1, 64]\n  %k = input() : bf16[2, 8, S, 64]\n"
                            "  %a = scaled_dot_product_attention(%q, %k, %k)\n  return %a\n",
                            cuda::preset_device("sm_90a"));
  ASSERT_EQ(one.cuda.kernels.size(), 1u);
  EXPECT_EQ(one.cuda.kernels[0].launch.scratch_bytes, 0);
  EXPECT_EQ(one.cuda.bodies[0].find("ticket"), std::string::npos);
}

std::string temp_cache() { return testing::TempDir() + "/coil_cuda_codegen_cache"; }

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  Tensor a = got.contiguous_copy(), b = want.contiguous_copy();
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.load(i), b.load(i), 1e-4 * (1 + std::fabs(b.load(i)))) << what << " element " << i;
}

TEST(ExternsAsLoops, MatchTheReference) {
  const char* cases[] = {
      "  %x = input() : f32[N, 9]\n  %w = input() : f32[9, 4]\n  %b = input() : f32[4]\n  %y = addmm(%b, %x, %w, beta=0.5, alpha=2)\n"
      "  %z = mm(%x, %w)\n  %x2 = input() : f32[9, N]\n  %t = permute(%x2, [1, 0])\n  %u = mm(%t, %w)\n  return %y, %z, %u\n",
      "  %x = input(low=-9, high=9) : i32[N, 6]\n  %w = input(low=-9, high=9) : i32[6, 3]\n  %y = mm(%x, %w)\n"
      "  %a = input() : f64[3, N, 4]\n  %b = input() : f64[3, 4, 2]\n  %c = bmm(%a, %b)\n  return %y, %c\n",
      "  %x = input() : f32[2, 4, N, 7]\n  %w = input() : f32[6, 2, 3, 2]\n  %b = input() : f32[6]\n"
      "  %y = convolution(%x, %w, %b, [2, 1], [1, 0], [1, 2], false, [0, 0], 2)\n  return %y\n",
      "  %x = input() : f32[2, 4, N, 3]\n  %w = input() : f32[4, 3, 3, 2]\n"
      "  %y = convolution(%x, %w, none, [2, 1], [1, 1], [1, 1], true, [1, 0], 1)\n"
      "  %v = input() : f32[1, 2, N]\n  %k = input() : f32[3, 2, 3]\n  %z = convolution(%v, %k, none, [1], [2], [2], false, [0], 1)\n"
      "  return %y, %z\n",
  };
  int seed = 0;
  for (const char* body : cases) {
    SCOPED_TRACE(body);
    Graph g = parse(body);
    Executable exe = compile(g, {.cache_dir = temp_cache(), .externs_as_loops = true});
    EXPECT_EQ(exe.stats.extern_calls, 0);
    TensorMap inputs = random_inputs(g, static_cast<uint64_t>(seed++));
    auto got = exe.run(inputs, {});
    auto want = evaluate_reference(g, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));
  }
}

// A bf16 convolution with a bias: cuBLASLt sums the product into an f32 temporary (bf16
// operands, f32 D), and the output kernel adds the bias in f32 and rounds once.
TEST(CudaCodegen, HalfConvolutionProductStaysF32) {
  auto gen = cuda_code("  %x = input() : bf16[2, 3, 8, 8]\n  %w = input() : bf16[4, 3, 3, 3]\n  %b = input() : bf16[4]\n"
                       "  %y = convolution(%x, %w, %b, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  return %y\n",
                       cuda::preset_device("sm_90a"));
  const loop::Program& p = gen.lowered.program;
  int products = 0;
  for (const auto& k : p.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&k);
    if (!call) continue;
    ++products;
    EXPECT_EQ(p.buffers[static_cast<size_t>(call->output)].dtype, DType::f32);
    EXPECT_TRUE(cublas_takes(*call, p));
    cuda::GemmProblem g = gemm_problem(*call, p, {{"N", 5}}, false);
    EXPECT_EQ(g.dtype, DType::bf16);
    EXPECT_TRUE(g.f32_output);
    EXPECT_EQ(cuda::output_dtype(g), DType::f32);
    EXPECT_TRUE(cuda::gemm_supported(g)) << cuda::gemm_unsupported_reason(g).value_or("");
  }
  EXPECT_EQ(products, 1) << loop::to_string(p);
  // Mixed dtypes cuBLASLt does not take: an epilogue on an f32 output, an f32 output of f32.
  cuda::GemmProblem bad{.dtype = DType::bf16, .f32_output = true, .m = 4, .n = 4, .k = 4, .a_rs = 4, .a_cs = 1,
                        .b_rs = 4, .b_cs = 1, .d_rs = 4, .d_cs = 1, .epilogue = cuda::Epilogue::relu};
  EXPECT_FALSE(cuda::gemm_supported(bad));
  bad.epilogue = cuda::Epilogue::none;
  EXPECT_TRUE(cuda::gemm_supported(bad));
  bad.dtype = DType::f32;
  EXPECT_FALSE(cuda::gemm_supported(bad));
}

TEST(CudaRuntime, NoDriverMeansTheCpuAndSaysWhy) {
  const char* old = std::getenv("COIL_LIBCUDA");
  std::string saved = old ? old : "";
  ::setenv("COIL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  Graph g = parse("  %x = input() : f32[N, 3]\n  %y = exp(%x)\n  return %y\n");
  Executable exe = compile(g, {.cache_dir = temp_cache(), .device = "auto"});
  EXPECT_EQ(exe.device, "cpu");
  EXPECT_NE(exe.device_note.find("running on the CPU: no CUDA driver"), std::string::npos) << exe.device_note;
  EXPECT_NE(exe.device_note.find("/nonexistent/libcuda.so.1"), std::string::npos) << exe.device_note;
  EXPECT_EQ(exe.run(random_inputs(g, 1), {}).size(), 1u);
  try {
    compile(g, {.cache_dir = temp_cache(), .device = "cuda"});
    ADD_FAILURE() << "compiling for cuda without a driver should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compile(g, {.device = "tpu"}), Error);
  if (old) ::setenv("COIL_LIBCUDA", saved.c_str(), 1);
  else ::unsetenv("COIL_LIBCUDA");
}

}  // namespace
}  // namespace coil
