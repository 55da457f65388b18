// The GPU schedule's flat pointwise kernels (schedule/flatten_dense_pointwise.h): which kernels
// run over one flat dim, how their loads find their elements, and that they then store vectors.
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "driver/compile.h"
#include "runtime/cuda/device_info.h"
#include "schedule/flatten_dense_pointwise.h"

namespace coil {
namespace {

Generated for_cuda(const std::string& body) {
  return generate(parse_graph("graph t {\n" + body + "}\n"), {.cuda = true, .device = cuda::preset_device("sm_90a")});
}

std::string kernels_of(const loop::Program& p) {
  std::string out;
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) out += lk->name + " outer=" + shape_str(lk->outer) + "\n";
  return out;
}

// GPT-2's logits copied out of padded rows, in small: the copy's stores are dense in its nest's
// order over rows of 1001 bf16, so it runs over 1001 * 1048 points in vectors of 8, each load at
// its row's padded offset.
TEST(FlattenDense, ACopyOutOfPaddedRowsStoresVectors) {
  Generated g = for_cuda("  %x = input() : bf16[1048, 64]\n  %w = input() : bf16[64, 1001]\n  %y = mm(%x, %w)\n  return %y\n");
  const std::string text = loop::to_string(g.lowered.program);
  EXPECT_NE(text.find("kernel copy_y outer=[1049048]"), std::string::npos) << text;
  EXPECT_NE(text.find("= load(buf3, 1008*(x0//1001) + (x0 % 1001))"), std::string::npos) << text;
  EXPECT_NE(g.cuda.code().find("(pointwise block=128 vector=8)"), std::string::npos);
}

// An odd last dim over dense f32 rows: flat, its load dense too.
TEST(FlattenDense, DenseReadsStayDense) {
  Generated g = for_cuda("  %x = input() : f32[1024, 1025]\n  %y = exp(%x)\n  return %y\n");
  const std::string text = loop::to_string(g.lowered.program);
  EXPECT_NE(text.find("outer=[1049600]"), std::string::npos) << text;
  EXPECT_NE(g.cuda.code().find("vector=4)"), std::string::npos) << g.cuda.code();
}

// Kept as they are: a last dim vectors already divide, too few points, a total the vector does
// not divide, a permuted store, a reduction.
TEST(FlattenDense, OtherKernelsKeepTheirNests) {
  const char* bodies[] = {
      "  %x = input() : f32[1024, 1024]\n  %y = exp(%x)\n  return %y\n",
      "  %x = input() : f32[64, 1025]\n  %y = exp(%x)\n  return %y\n",
      "  %x = input() : f32[1023, 1025]\n  %y = exp(%x)\n  return %y\n",
      "  %x = input() : f32[1024, 1025]\n  %t = permute(%x, [1, 0])\n  %y = clone(%t, memory_format=contiguous_format)\n  return %y\n",
      "  %x = input() : f32[1024, 1025]\n  %y = sum.dim_IntList(%x, [1])\n  return %y\n",
  };
  for (const char* body : bodies) {
    Generated g = for_cuda(body);
    const std::string text = kernels_of(g.lowered.program);
    for (const auto& k : g.lowered.program.kernels) {
      const auto* lk = std::get_if<loop::LoopKernel>(&k);
      if (lk && lk->inner.empty()) {
        EXPECT_EQ(lk->outer.size(), 2u) << body << text;
      }
    }
  }
}

}  // namespace
}  // namespace coil
