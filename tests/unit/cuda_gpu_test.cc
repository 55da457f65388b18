// The CUDA backend on a GPU (scripts/gpu-check runs these; without a driver they skip): every
// candidate configuration of every kernel against the interpreter, on sizes that make the
// heuristics pick split reductions, persistent rows and tiled transposes; the autotuner (loop
// kernels and cuBLASLt's algorithms) and its on-disk cache, tuning beside a model that holds most of
// the device's memory; device tensors in and out with errors reported asynchronously.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "coil/coil.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace coil {
namespace {

// Sizes that reach every form and the split reductions (few long rows, few column tiles).
const char* kGraphs[] = {
    "  %x = input() : f32[48, 70001]\n  %s = sum(%x)\n  %m = amax(%x, [1])\n  %a = argmax(%x, 1)\n  return %s, %m, %a\n",
    "  %x = input() : f32[20000, 70]\n  %s = sum.dim_IntList(%x, [0])\n  %v = var.correction(%x, [0], correction=1)\n"
    "  %i = argmin(%x, 0)\n  return %s, %v, %i\n",
    "  %x = input() : bf16[6, 50000]\n  %v = var.correction(%x, [1], correction=0)\n  %m = mean.dim(%x, [1])\n  %n = amin(%x, [1])\n"
    "  return %v, %m, %n\n",
    "  %x = input() : bf16[700, 4096]\n  %w = input() : bf16[4096]\n  %y, %m, %r = native_layer_norm(%x, [4096], %w, none, 1e-05)\n"
    "  %s = _softmax(%x, -1, false)\n  return %y, %s\n",
    "  %x = input() : f16[3, 300, 520]\n  %t = permute(%x, [0, 2, 1])\n  %y = mul.Tensor(%t, %t)\n  %z = exp(%x)\n  return %y, %z\n",
    "  %x = input() : f32[3000, 700]\n  %b = input() : f32[700]\n  %y = add.Tensor(%x, %b)\n  %g = gelu(%y)\n  return %g\n",
    // vectorized columns (8 bf16 lanes): Welford, argmin and max partials per lane, in two passes
    "  %x = input() : bf16[3000, 1000]\n  %s = sum.dim_IntList(%x, [0])\n  %v = var.correction(%x, [0], correction=1)\n"
    "  %i = argmin(%x, 0)\n  %m = amax(%x, [0], true)\n  return %s, %v, %i, %m\n",
    // split column tiles of Welford partials (f32 in 8 lanes: the block's scratch takes 2 lanes a
    // round; f64: one) and of argmin partials; f64 columns in two passes (Welford's, then the rest)
    "  %x = input() : bf16[20000, 200]\n  %v = var.correction(%x, [0], correction=1)\n  return %v\n",
    "  %x = input() : bf16[20000, 200]\n  %i = argmin(%x, 0)\n  return %i\n",
    "  %x = input() : f64[20000, 70]\n  %v = var.correction(%x, [0], correction=1)\n  return %v\n",
    "  %y = input() : f64[5000, 90]\n  %v = var.correction(%y, [0], correction=1)\n  %a = argmax(%y, 0)\n"
    "  %s = sum.dim_IntList(%y, [0])\n  return %v, %a, %s\n",
    // 16-bit transposes in pairs: staged loads and stores and direct accesses as 32-bit pairs; an
    // operand at an odd offset (per element); odd extents (no whole pairs, the swizzled tile)
    "  %x = input() : bf16[2, 130, 66]\n  %y = input() : bf16[2, 66, 130]\n  %t = permute(%y, [0, 2, 1])\n  %z = add.Tensor(%x, %t)\n"
    "  %w = permute(%z, [0, 2, 1])\n  %c = clone(%w, memory_format=contiguous_format)\n  return %z, %c\n",
    "  %x = input() : bf16[64, 131]\n  %s = slice.Tensor(%x, 1, 1, 131)\n  %y = input() : bf16[130, 64]\n  %t = permute(%y, [1, 0])\n"
    "  %z = mul.Tensor(%s, %t)\n  return %z\n",
    "  %x = input() : f16[67, 129]\n  %y = input() : f16[129, 67]\n  %t = permute(%y, [1, 0])\n  %z = sub.Tensor(%x, %t)\n  return %z\n",
    // wide tiles with whole 16-byte groups: staged loads, direct loads of two operands, staged
    // stores written back in groups; partial tiles at both ends
    "  %x = input() : f32[2, 96, 160]\n  %y = input() : f32[2, 160, 96]\n  %b = input() : f32[2, 96, 160]\n"
    "  %t = permute(%y, [0, 2, 1])\n  %s = add.Tensor(%x, %t)\n  %z = mul.Tensor(%s, %b)\n  %w = permute(%z, [0, 2, 1])\n"
    "  %c = clone(%w, memory_format=contiguous_format)\n  return %z, %c\n",
    "  %x = input() : bf16[136, 200]\n  %y = input() : bf16[200, 136]\n  %t = permute(%y, [1, 0])\n  %z = sub.Tensor(%x, %t)\n"
    "  return %z\n",
    // transposes of 8-byte and 1-byte elements (tile rows padded by 1 and 4 elements)
    "  %x = input() : f64[130, 97]\n  %t = permute(%x, [1, 0])\n  %y = add.Tensor(%t, %t)\n  return %y\n",
    "  %x = input() : i8[200, 77]\n  %y = input() : i8[77, 200]\n  %t = permute(%y, [1, 0])\n  %z = add.Tensor(%x, %t)\n"
    "  return %z\n",
    // a product with rows of 7002 bytes, padded to 7008 (schedule/pad_gemm_outputs.h), read by a
    // copy into the output view and by a row sum
    "  %x = input() : bf16[300, 64]\n  %w = input() : bf16[3501, 64]\n  %wt = permute(%w, [1, 0])\n  %h = mm(%x, %wt)\n"
    "  %y = view(%h, [3, 100, 3501])\n  %s = sum.dim_IntList(%h, [1])\n  return %y, %s\n",
    // ... and copied into the output view, which keeps its dense rows
    "  %x = input() : bf16[3, 100, 64]\n  %w = input() : bf16[3501, 64]\n  %xv = view(%x, [300, 64])\n"
    "  %wt = permute(%w, [1, 0])\n  %h = mm(%xv, %wt)\n  %y = view(%h, [3, 100, 3501])\n  return %y\n",
    // ... a product that is itself an output and read by a sum: written into padded rows, then
    // copied into the dense output; and returned alone (the same copy)
    "  %x = input() : bf16[300, 64]\n  %w = input() : bf16[3501, 64]\n  %wt = permute(%w, [1, 0])\n  %h = mm(%x, %wt)\n"
    "  %s = sum.dim_IntList(%h, [1])\n  return %h, %s\n",
    "  %x = input() : bf16[300, 64]\n  %w = input() : bf16[3501, 64]\n  %wt = permute(%w, [1, 0])\n  %h = mm(%x, %wt)\n"
    "  return %h\n",
    // ... the copy out of padded rows over one flat dim, in vectors of 8 (schedule/
    // flatten_dense_pointwise.h); a broadcast over rows of an odd length, flat too
    "  %x = input() : bf16[304, 64]\n  %w = input() : bf16[3501, 64]\n  %wt = permute(%w, [1, 0])\n  %h = mm(%x, %wt)\n"
    "  return %h\n",
    "  %x = input() : f32[1024, 1025]\n  %b = input() : f32[1025]\n  %y = add.Tensor(%x, %b)\n  %z = gelu(%y)\n  return %z\n",
    // a scatter whose free columns are shared by threads that each add to the rows of their
    // part (the same rows many times: the sums in order, as the reference's)
    "  %x = input() : f32[50, 64]\n  %s = input() : f32[300, 64]\n  %i = input(low=0, high=50) : i64[300, 64]\n"
    "  %a = scatter_add(%x, 0, %i, %s)\n  return %a\n",
    // ... an operand a kernel writes, read by two products (as it is and transposed) and a sum
    "  %l = input() : bf16[300, 3501]\n  %x = input() : bf16[300, 64]\n  %w = input() : bf16[3501, 64]\n"
    "  %g = mul.Scalar(%l, 2)\n  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n"
    "  %s = sum.dim_IntList(%g, [1])\n  return %d, %e, %s\n",
    // ... and a graph input of unaligned rows read by two products: copied into padded rows first
    "  %g = input() : bf16[300, 3501]\n  %x = input() : bf16[300, 256]\n  %w = input() : bf16[3501, 256]\n"
    "  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n  %s = sum.dim_IntList(%g, [1])\n"
    "  return %d, %e, %s\n",
    // ... whose transposed product, read by a kernel, runs over the padded rows (M 3501 -> 3504)
    "  %g = input() : bf16[300, 3501]\n  %x = input() : bf16[300, 512]\n  %w = input() : bf16[3501, 256]\n"
    "  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n  %f = mul.Scalar(%e, 3)\n  return %d, %f\n",
    // depthwise convolutions (loop kernels) in cuDNN's channels-last chains (schedule/channels_last.h):
    // flat columns of 8, 4 and 2 bf16 channels a thread and rows of threads over the 49 taps, the
    // weight read through its copy with the channels innermost; then one reading a softmax over
    // the channels through a permute (its result takes that layout), f32, odd spatial sizes
    "  %x = input() : bf16[8, 16, 58, 60]\n  %w = input() : bf16[96, 16, 1, 1]\n"
    "  %c = convolution(%x, %w, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %v = input() : bf16[96, 1, 7, 7]\n"
    "  %b = input() : bf16[96]\n  %d = convolution(%c, %v, %b, [1, 1], [3, 3], [1, 1], false, [0, 0], 96)\n  %r = relu(%d)\n"
    "  return %r\n",
    "  %x = input() : f32[8, 16, 58, 61]\n  %w = input() : f32[96, 16, 2, 2]\n"
    "  %c = convolution(%x, %w, none, [2, 2], [0, 0], [1, 1], false, [0, 0], 1)\n  %p = permute(%c, [0, 2, 3, 1])\n"
    "  %m = _softmax(%p, -1, false)\n  %l = permute(%m, [0, 3, 1, 2])\n  %v = input() : f32[96, 1, 3, 3]\n"
    "  %d = convolution(%l, %v, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 96)\n  %r = relu(%d)\n  return %r\n",
};

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + std::string(body) + "}\n"); }

TEST(CudaGpu, EveryCandidateMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string cache = fresh_cache("candidates");
  for (const char* body : kGraphs) {
    Graph g = parse(body);
    TensorMap inputs = random_inputs(g, 7);
    auto want = evaluate_reference(g, inputs);
    for (int c = 0; c < 8; ++c) {
      Executable exe = compile(g, {.cache_dir = cache, .device = "cuda", .cuda_candidate = c});
      auto got = exe.run(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], fmt::format("{}candidate {} output {}", body, c, i));
    }
  }
}

// The fused attention kernel against the interpreter: packed-projection head views (causal, the
// last query tile partial), f16 with head size 128 and more keys than queries, a causal one
// with more queries than keys (rows past the keys see all of them), head size 16, 3-D inputs,
// warps of two row tiles, a negative scale; masks (bool, added) and grouped-query attention.
TEST(CudaGpu, FusedAttentionMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const char* cases[] = {
      "  %p = input() : bf16[2, 100, 192]\n  %q, %k, %v = split_with_sizes(%p, [64, 64, 64], 2)\n  %q4 = view(%q, [2, 100, 2, 32])\n"
      "  %k4 = view(%k, [2, 100, 2, 32])\n  %v4 = view(%v, [2, 100, 2, 32])\n  %qh = permute(%q4, [0, 2, 1, 3])\n"
      "  %kh = permute(%k4, [0, 2, 1, 3])\n  %vh = permute(%v4, [0, 2, 1, 3])\n"
      "  %a = scaled_dot_product_attention(%qh, %kh, %vh, is_causal=true)\n  return %a\n",
      "  %q = input() : f16[3, 70, 128]\n  %k = input() : f16[3, 130, 128]\n  %v = input() : f16[3, 130, 128]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, scale=0.2)\n  return %a\n",
      "  %q = input() : bf16[2, 3, 150, 64]\n  %k = input() : bf16[2, 3, 70, 64]\n  %v = input() : bf16[2, 3, 70, 64]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, is_causal=true)\n  return %a\n",
      "  %q = input() : bf16[5, 33, 16]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n  return %a\n",
      // 64-wide heads (wgmma on sm_90a): head views of a packed projection, causal; f16 with more
      // keys than queries and a partial last key tile
      "  %p = input() : bf16[2, 130, 192]\n  %q, %k, %v = split_with_sizes(%p, [64, 64, 64], 2)\n  %q4 = view(%q, [2, 130, 1, 64])\n"
      "  %k4 = view(%k, [2, 130, 1, 64])\n  %v4 = view(%v, [2, 130, 1, 64])\n  %qh = permute(%q4, [0, 2, 1, 3])\n"
      "  %kh = permute(%k4, [0, 2, 1, 3])\n  %vh = permute(%v4, [0, 2, 1, 3])\n"
      "  %a = scaled_dot_product_attention(%qh, %kh, %vh, is_causal=true)\n  return %a\n",
      "  %q = input() : f16[3, 70, 64]\n  %k = input() : f16[3, 150, 64]\n  %v = input() : f16[3, 150, 64]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v)\n  return %a\n",
      // the export's copy back to the result's layout, written by the attention itself
      "  %q = input() : bf16[2, 3, 70, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n"
      "  %b = permute(%a, [0, 2, 1, 3])\n  %c = clone(%b, memory_format=contiguous_format)\n  %d = permute(%c, [0, 2, 1, 3])\n"
      "  return %d\n",
      // ... and into the dense rows of a projection (a copy whose loop merged dims)
      "  %q = input() : bf16[2, 3, 70, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n"
      "  %b = permute(%a, [0, 2, 1, 3])\n  %c = clone(%b, memory_format=contiguous_format)\n  %e = view(%c, [140, 192])\n"
      "  %w = input() : bf16[192, 32]\n  %g = mm(%e, %w)\n  return %g\n",
      // two row tiles a warp over several blocks, the diagonal crossing warps; a negative scale
      "  %q = input() : bf16[1, 2, 300, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n  return %a\n",
      "  %q = input() : bf16[2, 150, 32]\n  %k = input() : bf16[2, 90, 32]\n  %v = input() : bf16[2, 90, 32]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, scale=-0.3)\n  return %a\n",
      // masks: bool (random: some rows see nothing and give zeros) over 64-wide heads, and added
      // (f16, broadcast over heads and rows) with 32-wide heads and a negative scale
      "  %q = input() : bf16[2, 3, 70, 64]\n  %m = input() : bool[70, 70]\n  %a = scaled_dot_product_attention(%q, %q, %q, %m)\n  return %a\n",
      "  %q = input() : f16[2, 4, 70, 32]\n  %k = input() : f16[2, 4, 130, 32]\n  %v = input() : f16[2, 4, 130, 32]\n"
      "  %m = input() : f16[2, 1, 1, 130]\n  %a = scaled_dot_product_attention(%q, %k, %v, %m, scale=-0.2)\n  return %a\n",
      "  %q = input() : bf16[1, 2, 40, 128]\n  %m = input() : bf16[40, 40]\n  %a = scaled_dot_product_attention(%q, %q, %q, %m)\n  return %a\n",
      // grouped-query: decoding over a repeated cache (the rows of one key/value head) with an
      // added mask; a prefill over the repeat (stride 0), causal; enable_gqa with a bool mask
      "  %q = input() : bf16[2, 8, 1, 64]\n  %m = input() : bf16[1, 1, 1, 40]\n  %kc = input() : bf16[2, 2, 40, 64]\n"
      "  %vc = input() : bf16[2, 2, 40, 64]\n  %u = unsqueeze(%kc, 2)\n  %e = expand(%u, [2, 2, 4, 40, 64])\n"
      "  %c = clone(%e, memory_format=contiguous_format)\n  %k = view(%c, [2, 8, 40, 64])\n  %uv = unsqueeze(%vc, 2)\n"
      "  %ev = expand(%uv, [2, 2, 4, 40, 64])\n  %cv = clone(%ev, memory_format=contiguous_format)\n  %v = view(%cv, [2, 8, 40, 64])\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, %m)\n  return %a\n",
      "  %q = input() : bf16[2, 8, 33, 64]\n  %kc = input() : bf16[2, 2, 33, 64]\n  %u = unsqueeze(%kc, 2)\n"
      "  %e = expand(%u, [2, 2, 4, 33, 64])\n  %c = clone(%e, memory_format=contiguous_format)\n  %k = view(%c, [2, 8, 33, 64])\n"
      "  %a = scaled_dot_product_attention(%q, %k, %k, is_causal=true)\n  return %a\n",
      "  %q = input() : f16[1, 6, 50, 32]\n  %k = input() : f16[1, 2, 90, 32]\n  %v = input() : f16[1, 2, 90, 32]\n"
      "  %m = input() : bool[1, 1, 50, 90]\n  %a = scaled_dot_product_attention(%q, %k, %v, %m, enable_gqa=true)\n  return %a\n",
      // a few query rows (the decoding kernel, split over the keys): 7 splits of a repeated cache
      // with a random bool mask (some rows see nothing in some splits, or at all); f16 head 128
      // with an added mask; causal over 5 splits; one split
      "  %q = input() : bf16[2, 8, 1, 64]\n  %m = input() : bool[1, 1, 1, 200]\n  %kc = input() : bf16[2, 2, 200, 64]\n"
      "  %u = unsqueeze(%kc, 2)\n  %e = expand(%u, [2, 2, 4, 200, 64])\n  %c = clone(%e, memory_format=contiguous_format)\n"
      "  %k = view(%c, [2, 8, 200, 64])\n  %a = scaled_dot_product_attention(%q, %k, %k, %m)\n  return %a\n",
      "  %q = input() : f16[3, 2, 3, 128]\n  %k = input() : f16[3, 2, 300, 128]\n  %v = input() : f16[3, 2, 300, 128]\n"
      "  %m = input() : f16[3, 1, 3, 300]\n  %a = scaled_dot_product_attention(%q, %k, %v, %m)\n  return %a\n",
      "  %q = input() : bf16[2, 5, 32]\n  %k = input() : bf16[2, 130, 32]\n  %a = scaled_dot_product_attention(%q, %k, %k, is_causal=true)\n  return %a\n",
      "  %q = input() : bf16[4, 16, 48]\n  %k = input() : bf16[4, 30, 48]\n  %a = scaled_dot_product_attention(%q, %k, %k, scale=-0.5)\n  return %a\n",
      // decoding's splits merged in clusters of 16 (4 heads over 512 keys), of 3 (32 heads over
      // 384 keys, 128 a block); by a ticket past a cluster (20 splits of 256 keys); 16 rows of
      // 128-wide heads with a bool mask
      "  %q = input() : bf16[1, 16, 1, 64]\n  %k = input() : bf16[1, 4, 512, 64]\n  %m = input() : bool[1, 1, 1, 512]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %k, %m, enable_gqa=true)\n  return %a\n",
      "  %q = input() : bf16[16, 8, 1, 64]\n  %k = input() : bf16[16, 2, 384, 64]\n  %v = input() : bf16[16, 2, 384, 64]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, enable_gqa=true)\n  return %a\n",
      "  %q = input() : f16[2, 8, 1, 64]\n  %k = input() : f16[2, 2, 5000, 64]\n  %v = input() : f16[2, 2, 5000, 64]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, enable_gqa=true)\n  return %a\n",
      "  %q = input() : bf16[1, 32, 1, 128]\n  %k = input() : bf16[1, 2, 100, 128]\n  %m = input() : bool[1, 1, 1, 100]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %k, %m, enable_gqa=true)\n  return %a\n",
  };
  std::string cache = fresh_cache("attention");
  for (const char* body : cases) {
    Graph g = parse(body);
    TensorMap inputs = random_inputs(g, 11);
    auto want = evaluate_reference(g, inputs);
    Executable exe = compile(g, {.cache_dir = cache, .device = "cuda"});
    EXPECT_NE(exe.source.find("mma.sync"), std::string::npos) << body;
    auto got = exe.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], fmt::format("{}output {}", body, i));
  }
}

// Cluster launches do not depend on overlapped ones: with COIL_LAUNCH_OVERLAP=0 (read when a
// compile opens its context) a decoding attention merged in a cluster still runs, and right.
// (Session 18's first version resolved cuLaunchKernelEx only for overlapped launches.)
TEST(CudaGpu, ClustersLaunchWithOverlapOff) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const char* body = "  %q = input() : bf16[2, 8, 1, 64]\n  %k = input() : bf16[2, 2, 200, 64]\n  %m = input() : bool[1, 1, 1, 200]\n"
                     "  %a = scaled_dot_product_attention(%q, %k, %k, %m, enable_gqa=true)\n  return %a\n";
  Graph g = parse(body);
  TensorMap inputs = random_inputs(g, 5);
  auto want = evaluate_reference(g, inputs);
  ::setenv("COIL_LAUNCH_OVERLAP", "0", 1);
  std::optional<Executable> exe;
  try {
    exe.emplace(compile(g, {.cache_dir = fresh_cache("clusters_no_overlap"), .device = "cuda"}));
  } catch (...) {
    ::unsetenv("COIL_LAUNCH_OVERLAP");
    throw;
  }
  ::unsetenv("COIL_LAUNCH_OVERLAP");
  EXPECT_NE(exe->source.find("barrier.cluster.arrive"), std::string::npos);
  auto got = exe->run(inputs);
  ASSERT_EQ(got.size(), 1u);
  expect_close(got[0], want[0], "attention with overlap off");
}

// Attention over symbolic sizes, compiled once and run at every size against the interpreter:
// packed-projection head views (batch and length symbolic, causal; 32-wide heads, two row tiles
// a warp), 64-wide heads (wgmma on sm_90a) causal, cross-attention with a bool mask over both
// lengths (f16, 128-wide), the result written into the rows of a projection's operand, and
// grouped-query attention (enable_gqa) over a symbolic length.
// Lengths 1, primes, a tile and one past it, and more keys than queries and fewer.
TEST(CudaGpu, SymbolicAttentionMatchesTheReferenceAtEverySize) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    const char* body;
    std::vector<std::map<std::string, int64_t>> sizes;
  };
  const Case cases[] = {
      {"  sym B = 2\n  sym T = 100\n  %p = input() : bf16[B, T, 192]\n  %q, %k, %v = split_with_sizes(%p, [64, 64, 64], 2)\n"
       "  %q4 = view(%q, [B, T, 2, 32])\n  %k4 = view(%k, [B, T, 2, 32])\n  %v4 = view(%v, [B, T, 2, 32])\n"
       "  %qh = permute(%q4, [0, 2, 1, 3])\n  %kh = permute(%k4, [0, 2, 1, 3])\n  %vh = permute(%v4, [0, 2, 1, 3])\n"
       "  %a = scaled_dot_product_attention(%qh, %kh, %vh, is_causal=true)\n  return %a\n",
       {{{"B", 2}, {"T", 100}}, {{"B", 1}, {"T", 1}}, {{"B", 3}, {"T", 37}}, {{"B", 1}, {"T", 128}}, {{"B", 2}, {"T", 129}}, {{"B", 5}, {"T", 257}}}},
      {"  sym T = 64\n  %q = input() : bf16[2, 3, T, 64]\n  %k = input() : bf16[2, 3, T, 64]\n  %v = input() : bf16[2, 3, T, 64]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %v, is_causal=true)\n  return %a\n",
       {{{"T", 64}}, {{"T", 1}}, {{"T", 2}}, {{"T", 63}}, {{"T", 65}}, {{"T", 131}}, {{"T", 300}}}},
      {"  sym L = 70\n  sym S = 90\n  %q = input() : f16[2, 2, L, 128]\n  %k = input() : f16[2, 2, S, 128]\n  %v = input() : f16[2, 2, S, 128]\n"
       "  %m = input() : bool[L, S]\n  %a = scaled_dot_product_attention(%q, %k, %v, %m)\n  return %a\n",
       {{{"L", 70}, {"S", 90}}, {{"L", 1}, {"S", 7}}, {{"L", 33}, {"S", 2}}, {{"L", 129}, {"S", 61}}}},
      // the result written straight into the rows a projection reads (its copy gone)
      {"  sym T = 70\n  %q = input() : bf16[2, 3, T, 64]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n"
       "  %b = permute(%a, [0, 2, 1, 3])\n  %c = clone(%b, memory_format=contiguous_format)\n  %e = view(%c, [2*T, 192])\n"
       "  %w = input() : bf16[192, 32]\n  %g = mm(%e, %w)\n  return %g\n",
       {{{"T", 70}}, {{"T", 1}}, {{"T", 33}}, {{"T", 129}}}},
      {"  sym T = 50\n  %q = input() : f16[1, 6, T, 32]\n  %k = input() : f16[1, 2, T, 32]\n  %v = input() : f16[1, 2, T, 32]\n"
       "  %a = scaled_dot_product_attention(%q, %k, %v, is_causal=true, enable_gqa=true)\n  return %a\n",
       {{{"T", 50}}, {{"T", 3}}, {{"T", 97}}}},
  };
  std::string cache = fresh_cache("symbolic_attention");
  for (const Case& c : cases) {
    Graph g = parse(c.body);
    Executable exe = compile(g, {.cache_dir = cache, .device = "cuda"});
    EXPECT_NE(exe.source.find("const int64_t s_"), std::string::npos) << c.body;  // one kernel, sizes as arguments
    EXPECT_NE(exe.source.find("(attention "), std::string::npos) << c.body;      // the fused kernel, not decomposed
    uint64_t seed = 31;
    for (const auto& sizes : c.sizes) {
      TensorMap inputs = random_inputs(g, ++seed, sizes);
      auto want = evaluate_reference(g, inputs);
      auto got = exe.run(inputs, {});
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], fmt::format("{}sizes {} output {}", c.body, fmt::join(sizes, ","), i));
    }
  }
}

// `exe` run once per seed on new random inputs, each run against the interpreter.
void runs_match_reference(const Executable& exe, const Graph& g, std::initializer_list<uint64_t> seeds) {
  for (uint64_t seed : seeds) {
    TensorMap inputs = random_inputs(g, seed);
    auto want = evaluate_reference(g, inputs);
    auto got = exe.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], fmt::format("run {} output {}", seed, i));
  }
}

TEST(CudaGpu, SplitReductionsAreChosenForFewLongRows) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(kGraphs[0]);
  Executable exe = compile(g, {.cache_dir = fresh_cache("split"), .device = "cuda", .autotune = false});
  EXPECT_NE(exe.source.find("splits="), std::string::npos) << exe.source;
  // The split kernels' tickets live in scratch zeroed once a stream: every run, on new inputs,
  // finds them back at zero (a ticket left over would skip or repeat a merge).
  runs_match_reference(exe, g, {1, 2, 3});
}

// Symbolic kernels are tuned at the size hints, per size bucket: a softmax over [N, 4096] compiled
// with hint 512 measures bucket 512's candidates; compiled with hint 3000 it measures bucket 4096's;
// compiled again with hint 512 it measures nothing and keeps 4096's winner as a variant, which runs
// wherever N falls in (2048, 4096]. Every executable matches the interpreter at sizes in both
// buckets and in neither.
TEST(CudaGpu, SymbolicKernelsAreTunedPerSizeBucket) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string cache = fresh_cache("tune_buckets");
  auto graph = [](int hint) {
    return parse_graph(fmt::format("graph t {{\n  sym N = {}\n  %x = input() : f32[N, 4096]\n  %y = _softmax(%x, 1, false)\n"
                                   "  %z = mul.Tensor(%y, %y)\n  return %z\n}}\n",
                                   hint));
  };
  auto report = [](const Executable& e) { return fmt::format("{}", fmt::join(e.stats.tuning, "\n")); };
  Executable small = compile(graph(512), {.cache_dir = cache, .device = "cuda"});
  EXPECT_GT(small.stats.tuned_kernels, 0) << report(small);
  EXPECT_NE(report(small).find("(size bucket 512)"), std::string::npos) << report(small);
  EXPECT_EQ(small.stats.size_variants, 0);
  Executable large = compile(graph(3000), {.cache_dir = cache, .device = "cuda"});
  EXPECT_GT(large.stats.tuned_kernels, 0) << report(large);
  EXPECT_NE(report(large).find("(size bucket 4096)"), std::string::npos) << report(large);
  Executable again = compile(graph(512), {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(again.stats.tuned_kernels, 0) << report(again);
  EXPECT_EQ(again.stats.tuning_cache_hits, small.stats.tuned_kernels);
  EXPECT_EQ(again.stats.size_variants, large.stats.tuned_kernels);
  Graph g = graph(512);
  for (const Executable* exe : {&small, &large, &again})
    for (int64_t n : {512, 3000, 37, 2049}) {
      TensorMap inputs = random_inputs(g, static_cast<uint64_t>(n), {{"N", n}});
      auto want = evaluate_reference(g, inputs);
      expect_close(exe->run(inputs, {})[0], want[0], fmt::format("N={}", n));
    }
}

// Two split kernels of one graph: a column sum whose partials start at byte 256 of its scratch
// and a row sum with tickets for 100 rows (bytes 0-400). Sharing one region, the row sum found
// the column sum's partials where its tickets should be zero and merged no row past the 64th.
TEST(CudaGpu, SplitKernelsOfAGraphKeepTheirScratchApart) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(
      "  %x = input() : f32[16384, 1024]\n  %y = input() : f32[100, 65536]\n"
      "  %a = sum.dim_IntList(%x, [0])\n  %b = sum.dim_IntList(%y, [1])\n  return %a, %b\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("split_two"), .device = "cuda", .autotune = false});
  EXPECT_NE(exe.source.find("column block=32x4 vector=2 splits="), std::string::npos) << exe.source;
  EXPECT_NE(exe.source.find("row block=512 tpr=512 vector=4 splits="), std::string::npos) << exe.source;
  runs_match_reference(exe, g, {4, 5, 6});
}

TEST(CudaGpu, AutotuneMeasuresOnceThenReadsTheCache) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string cache = fresh_cache("tune");
  Graph g = parse(kGraphs[3]);
  TensorMap inputs = random_inputs(g, 3);
  auto want = evaluate_reference(g, inputs);
  Executable cold = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_GT(cold.stats.tuned_kernels, 0);
  EXPECT_EQ(cold.stats.tuning_cache_hits, 0);
  Executable warm = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(warm.stats.tuned_kernels, 0);
  EXPECT_EQ(warm.stats.tuning_cache_hits, cold.stats.tuned_kernels);
  EXPECT_TRUE(warm.stats.cache_hit);
  EXPECT_EQ(warm.source, cold.source);  // the same winners
  for (const Executable* exe : {&cold, &warm}) {
    auto got = exe->run(inputs);
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "tuned output " + std::to_string(i));
  }
}

// The device's memory all taken but `room` bytes (in 32 MiB pieces, the rest in 2 MiB ones),
// given back when it goes: a model holding most of the GPU while coil compiles beside it.
class DeviceFull {
 public:
  DeviceFull(const cuda::Context& ctx, size_t room) : ctx_(ctx) {
    for (size_t piece : {size_t{32} << 20, size_t{2} << 20})
      while (cuda::DevicePtr p = ctx_.try_allocate(piece)) (piece > (size_t{2} << 20) ? big_ : small_).push_back(p);
    for (size_t freed = 0; freed < room && !big_.empty(); freed += size_t{32} << 20) {
      ctx_.release(big_.back());
      big_.pop_back();
    }
  }
  ~DeviceFull() {
    for (auto* v : {&big_, &small_})
      for (cuda::DevicePtr p : *v) ctx_.release(p);
  }

 private:
  const cuda::Context& ctx_;
  std::vector<cuda::DevicePtr> big_, small_;
};

// The loop tuner does with the device memory a model leaves: with room for one set of a 64 MiB
// column sum's buffers it times on that one (not two), with none it keeps the heuristic's
// candidate, untuned and uncached, so that a compile with room tunes it; every result is right.
TEST(CudaGpu, TuningDoesWithTheDeviceMemoryLeft) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto ctx = cuda::Context::open(0);
  std::string cache = fresh_cache("tune_memory");
  Graph g = parse("  %x = input() : bf16[4096, 8192]\n  %s = sum.dim_IntList(%x, [0])\n  return %s\n");
  TensorMap inputs = random_inputs(g, 5);
  auto want = evaluate_reference(g, inputs);
  auto report = [](const Executable& exe) { return fmt::format("{}", fmt::join(exe.stats.tuning, "\n")); };
  auto compile_in = [&](size_t room, const std::string& cache_dir) {
    DeviceFull full(*ctx, room);
    return compile(g, {.cache_dir = cache_dir, .device = "cuda"});
  };
  Executable one = compile_in(size_t{96} << 20, fresh_cache("tune_memory_one"));
  EXPECT_EQ(one.stats.tuned_kernels, 1) << report(one);
  EXPECT_NE(report(one).find("on 1 buffer set(s)"), std::string::npos) << report(one);
  Executable none = compile_in(size_t{32} << 20, cache);
  EXPECT_EQ(none.stats.tuned_kernels, 0) << report(none);
  EXPECT_NE(report(none).find("not tuned: no device memory"), std::string::npos) << report(none);
  Executable later = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(later.stats.tuned_kernels, 1) << report(later);
  EXPECT_EQ(report(later).find("buffer set"), std::string::npos) << report(later);
  for (const Executable* exe : {&one, &none, &later}) {
    auto got = exe->run(inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], "column sum");
  }
}

// Matrix products of enough work have cuBLASLt's offered algorithms timed at the first compile
// (the report names them), and a later compile reads the choice from the tuning cache; both run
// right. A product whose residual joins it as C is tuned with its C. (2^28 flops, the least
// that is tuned: the interpreter's product in double takes seconds.)
TEST(CudaGpu, GemmAlgorithmsTunedOnceThenReadFromTheCache) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string cache = fresh_cache("gemm_tune");
  Graph g = parse(
      "  %x = input() : bf16[256, 512]\n  %w = input() : bf16[1024, 512]\n  %r = input() : bf16[256, 1024]\n"
      "  %wt = permute(%w, [1, 0])\n  %h = mm(%x, %wt)\n  %y = add.Tensor(%h, %r)\n  return %y\n");
  TensorMap inputs = random_inputs(g, 11);
  auto want = evaluate_reference(g, inputs);
  auto gemm_lines = [](const Executable& exe) {
    int n = 0;
    for (const auto& line : exe.stats.tuning) n += line.find("(cuBLASLt)") != std::string::npos;
    return n;
  };
  Executable cold = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(gemm_lines(cold), 1) << fmt::format("{}", fmt::join(cold.stats.tuning, "\n"));
  EXPECT_EQ(cold.stats.loop_kernels, 0);  // the add is the product's C
  Executable warm = compile(g, {.cache_dir = cache, .device = "cuda"});
  EXPECT_EQ(warm.stats.tuned_kernels, 0);
  EXPECT_EQ(warm.stats.tuning_cache_hits, cold.stats.tuned_kernels);
  EXPECT_EQ(warm.gpu_plan->gemm_algos, cold.gpu_plan->gemm_algos);
  for (const Executable* exe : {&cold, &warm}) {
    auto got = exe->run(inputs);
    expect_close(got[0], want[0], "tuned product");
  }
}

// Repeated layers compile once and tune once: three softmax layers build and tune exactly what
// two do (the same distinct kernels), and each layer still computes its own buffers.
TEST(CudaGpu, RepeatedLayersBuildAndTuneOnce) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto layers = [](int n) {
    std::string text = "graph t {\n  %l0 = input() : f32[4096, 512]\n";
    for (int i = 1; i <= n; ++i) text += fmt::format("  %l{} = _softmax(%l{}, -1, false)\n", i, i - 1);
    return parse_graph(text + fmt::format("  %e = exp(%l{})\n  return %e, %l{}\n}}\n", n, n - 1));
  };
  auto built = [](const Executable& exe) {
    size_t n = 0;
    for (const auto& u : exe.stats.units) n += u.kernels.size();
    return n;
  };
  Executable two = compile(layers(2), {.cache_dir = fresh_cache("layers2"), .device = "cuda"});
  Graph g = layers(3);
  Executable three = compile(g, {.cache_dir = fresh_cache("layers3"), .device = "cuda"});
  EXPECT_EQ(three.stats.loop_kernels, two.stats.loop_kernels + 1);
  EXPECT_EQ(built(three), built(two));
  EXPECT_EQ(three.stats.tuned_kernels, two.stats.tuned_kernels);
  TensorMap inputs = random_inputs(g, 5);
  auto want = evaluate_reference(g, inputs);
  auto got = three.run(inputs);
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));
}

// Every algorithm cuBLASLt offers for a product computes it: each one's result against the
// heuristic's first.
TEST(CudaGpu, EveryOfferedGemmAlgorithmComputesTheProduct) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto ctx = cuda::Context::open(0);
  auto lt = cuda::CublasLt::load();
  const int64_t m = 1000, n = 1536, k = 512;
  cuda::GemmProblem p{.dtype = DType::bf16, .m = m, .n = n, .k = k, .a_rs = k, .a_cs = 1, .b_rs = 1, .b_cs = k,
                      .d_rs = n, .d_cs = 1, .epilogue = cuda::Epilogue::bias_gelu};
  Graph g = parse("  %a = input() : bf16[1000, 512]\n  %b = input() : bf16[1536, 512]\n  %c = input() : bf16[1536]\n  return %a\n");
  TensorMap host = random_inputs(g, 4);
  OnDevice dev{*ctx, {}};
  Tensor a = dev.put(host.at("a")), b = dev.put(host.at("b")), bias = dev.put(host.at("c"));
  Tensor d = dev.put(Tensor::zeros(DType::bf16, {m, n}));
  cuda::DeviceScratch memory(*ctx);
  cuda::DevicePtr workspace = memory.take(kGemmWorkspace);
  auto algos = lt->algorithms(p, a.data(), b.data(), nullptr, d.data(), bias.data(), kGemmWorkspace);
  ASSERT_FALSE(algos.empty());
  Tensor first;
  for (size_t i = 0; i < algos.size(); ++i) {
    lt->gemm(p, a.data(), b.data(), nullptr, d.data(), bias.data(), reinterpret_cast<void*>(workspace), kGemmWorkspace, nullptr,
             &algos[i]);
    Tensor got = dev.get(d);
    if (i == 0) first = got;
    expect_close(got, first, fmt::format("algorithm #{} of {}", i, algos.size()));
  }
}

// Small independent updates run as one horizontal kernel, each member over its own block range;
// turned off (the adapter computing an output over an input another member reads), the members
// run alone. Both match the interpreter.
TEST(CudaGpu, HorizontalGroupsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(
      "  %step = input() : f32[]\n  %p0 = input() : f32[768]\n  %g0 = input() : f32[768]\n  %p1 = input() : f32[33, 48]\n"
      "  %g1 = input() : f32[33, 48]\n  %p2 = input() : bf16[1000]\n  %g2 = input() : bf16[1000]\n  %s1 = add.Scalar(%step, other=1)\n"
      "  %d0 = mul.Tensor(%g0, %s1)\n  %q0 = sub.Tensor(%p0, %d0)\n  %d1 = mul.Tensor(%g1, %s1)\n  %q1 = sub.Tensor(%p1, %d1)\n"
      "  %d2 = mul.Tensor(%g2, %s1)\n  %q2 = sub.Tensor(%p2, %d2)\n  return %q0, %q1, %q2, %s1\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("horizontal"), .device = "cuda", .autotune = false});
  ASSERT_EQ(exe.gpu_plan->horizontals.size(), 1u) << exe.source;
  EXPECT_EQ(exe.gpu_plan->horizontals[0].steps.size(), 3u);
  EXPECT_TRUE(exe.gpu_plan->horizontals[0].on);
  EXPECT_NE(exe.source.find("k0_horizontal"), std::string::npos) << exe.source;
  runs_match_reference(exe, g, {1, 2});
  // Each update over its own parameter, the step count over its input: the group stays on
  // (Horizontal.OutputsOverInputsTurnAGroupOffWhereMembersWouldRace turns one off).
  exe.compute_outputs_in_inputs({1, 3, 5, 0});
  EXPECT_TRUE(exe.gpu_plan->horizontals[0].on);
  runs_match_reference(exe, g, {3});
}

// An embedding gradient in the listed form: tokens of few distinct rows (long runs of one row in
// every part), the columns over several tiles. Every element's additions keep the tokens'
// order: the sums match the interpreter's, and two runs agree to the bit.
TEST(CudaGpu, ListedScattersAddInTokenOrder) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(
      "  %g = input() : f32[4, 1000, 200]\n  %i = input(low=0, high=37) : i64[4, 1000]\n  %z = input() : f32[37, 200]\n"
      "  %y = index_put(%z, [%i], %g, accumulate=true)\n  return %y\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("listed"), .device = "cuda", .autotune = false});
  EXPECT_NE(exe.source.find(" listed"), std::string::npos) << exe.source;
  for (uint64_t seed : {1, 2}) {
    TensorMap inputs = random_inputs(g, seed);
    auto want = evaluate_reference(g, inputs);
    auto got = exe.run(inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], "seed " + std::to_string(seed));
    Tensor a = got[0].contiguous_copy(), b = exe.run(inputs)[0].contiguous_copy();
    for (int64_t e = 0; e < a.numel(); ++e) ASSERT_EQ(a.load(e), b.load(e)) << "element " << e;
  }
}

TEST(CudaGpu, DeviceTensorsInAndOut) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse(kGraphs[3]);
  Executable exe = compile(g, {.cache_dir = fresh_cache("device"), .device = "cuda"});
  TensorMap host = random_inputs(g, 5);
  auto want = evaluate_reference(g, host);
  OnDevice dev{*exe.gpu_plan->context, {}};
  TensorMap inputs;
  for (const auto& [name, t] : host) inputs.emplace(name, dev.put(t));
  for (int round = 0; round < 3; ++round) {
    auto got = exe.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].device().kind, Device::Kind::cuda);
      expect_close(dev.get(got[i]), want[i], "device output " + std::to_string(i));
    }
  }
  exe.synchronize();
  // A device tensor in another layout than the compiled one is refused with the reason.
  Tensor x = inputs.at("x");
  TensorMap wrong = inputs;
  wrong.erase("x");
  wrong.emplace("x", Tensor::borrow(x.data(), x.dtype(), x.sizes(), {1, 700}, 0, x.device()));
  EXPECT_NE(testing::message_of([&] { exe.run(wrong); }).find("strides [1, 700]"), std::string::npos);
}

// A run holds each input only until its last reader is enqueued, and takes each output's memory
// at its first writer: %x handed over (the caller keeping no reference), the output %y, written
// by the product after %x's one reader, reuses %x's block, so two of them are never live at once.
// A caller that keeps %x keeps its memory (the run lets go of its own reference only).
TEST(CudaGpu, InputsHandedOverAreFreedAfterTheirLastReader) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse("  %x = input() : f32[1024, 1024]\n  %w = input() : f32[1024, 16]\n  %v = input() : f32[16, 1024]\n"
                  "  %a = mm(%x, %w)\n  %y = mm(%a, %v)\n  return %y\n");
  auto ctx = cuda::Context::open(0);
  auto memory = std::make_shared<cuda::DeviceAllocator>(ctx);
  Executable exe = compile(g, {.cache_dir = fresh_cache("handed"), .device = "cuda", .device_memory = memory, .autotune = false});
  ASSERT_EQ(exe.gpu_plan->lowered.program.kernels.size(), 2u) << exe.source;
  TensorMap host = random_inputs(g, 3);
  const Tensor want = evaluate_reference(g, host)[0];
  int freed = 0;
  auto put = [&](const Tensor& h) {
    size_t bytes = static_cast<size_t>(h.numel()) * dtype_size(h.dtype());
    cuda::DevicePtr p = memory->allocate(bytes, nullptr);
    ctx->copy_to_device(p, h.data(), bytes, nullptr);
    return Tensor::borrow(reinterpret_cast<void*>(p), h.dtype(), h.sizes(), h.strides(), 0, Device{Device::Kind::cuda, 0},
                          [memory, &freed](void* q) { memory->free(reinterpret_cast<cuda::DevicePtr>(q), nullptr), ++freed; });
  };
  std::map<bool, size_t> peak;
  for (bool handed : {true, false}) {
    freed = 0;
    Tensor x = put(host.at("x"));
    std::vector<Tensor> inputs{x, put(host.at("w")), put(host.at("v"))};
    if (handed) x = Tensor();
    memory->reset_peaks();
    Tensor y = exe.run_on_stream(std::move(inputs), {}, nullptr)[0];
    EXPECT_EQ(freed, handed ? 3 : 2) << "handed " << handed;  // the caller's %x stays
    ctx->synchronize(nullptr);
    peak[handed] = memory->stats().peak_live_bytes;
    OnDevice dev{*ctx, {}};
    expect_close(dev.get(y), want, fmt::format("handed {}", handed));
  }
  const size_t block = size_t{1} << 22;
  EXPECT_LT(peak[true] + block / 2, peak[false]) << "the output did not reuse the memory of the input handed over";
}

TEST(CudaGpu, DeviceRunsReportErrorsLater) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse("  %x = input() : f32[10]\n  %i = input(low=0, high=10) : i64[4]\n  %y = index.Tensor(%x, [%i])\n  return %y\n");
  Executable exe = compile(g, {.cache_dir = fresh_cache("errors"), .device = "cuda"});
  OnDevice dev{*exe.gpu_plan->context, {}};
  Tensor idx = Tensor::zeros(DType::i64, {4});
  idx.store_int(2, 12);  // out of bounds
  TensorMap inputs = {{"x", dev.put(random_inputs(g, 1).at("x"))}, {"i", dev.put(idx)}};
  auto out = exe.run(inputs);  // returns before the kernel finished
  EXPECT_NE(testing::message_of([&] { exe.synchronize(); }).find("index 12 is out of bounds"), std::string::npos);
  idx.store_int(2, 3);
  TensorMap good = {{"x", inputs.at("x")}, {"i", dev.put(idx)}};
  exe.run(good);
  exe.synchronize();  // nothing left to report
}

}  // namespace
}  // namespace coil
