// The compiler against the reference interpreter: hand-picked patterns and seeded random
// graphs (chains and DAGs of pointwise, reduction, view, shape and matmul ops). Set
// COIL_FUZZ_GRAPHS for a longer run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <thread>

#include "coil/coil.h"
#include "driver/compile.h"
#include "random_graph.h"
#include "test_util.h"

namespace coil {
namespace {

std::string temp_cache() {
  static const std::string dir = testing::process_cache_dir("coil_compile_test");
  return dir;
}

using testing::expect_close;
using testing::test_device;

void check_against_reference(const Graph& g, uint64_t seed) {
  Executable exe = compile(g, {.cache_dir = temp_cache(), .device = test_device()});
  TensorMap inputs = random_inputs(g, seed);
  auto got = exe.run(inputs, {});
  auto want = evaluate_reference(g, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], g.name + " output " + std::to_string(i));
}

Graph parse(const std::string& body) { return parse_graph("graph t {\n  sym N = 5\n" + body + "}\n"); }

TEST(Compile, PatternsMatchReference) {
  const char* cases[] = {
      "  %x = input() : f32[N, 33]\n  %b = input() : f32[33]\n  %a = add.Tensor(%x, %b)\n  %y = gelu(%a)\n  return %y\n",
      "  %x = input() : f32[N, 33]\n  %y = _softmax(%x, 0, false)\n  %z = _log_softmax(%x, -1, false)\n  return %y, %z\n",
      "  %x = input() : f32[N, 7, 6]\n  %w = input() : f32[7, 6]\n  %y, %m, %r = native_layer_norm(%x, [7, 6], %w, none, 1e-05)\n  return %y, %m, %r\n",
      "  %x = input() : f32[N, 9]\n  %y = input() : f32[9, N]\n  %t = permute(%y, [1, 0])\n  %z = add.Tensor(%x, %t)\n  return %z\n",
      "  %x = input() : f32[N, 9]\n  %s = sum.dim_IntList(%x, [0])\n  %v = var.correction(%x, [1], correction=0)\n  %a = argmax(%x, 1)\n  %m, %i = min.dim(%x, 0, true)\n  return %s, %v, %a, %m, %i\n",
      "  %x = input() : f32[N, 9]\n  %w = input() : f32[9, 4]\n  %b = input() : f32[4]\n  %y = addmm(%b, %x, %w, beta=0.5, alpha=2)\n  %z = mm(%x, %w)\n  return %y, %z\n",
      "  %x = input() : f32[N, 4]\n  %p = constant_pad_nd(%x, [1, 2, -1, 0], value=3.5)\n  %f = flip(%p, [0, 1])\n  %r = repeat(%f, [2, 1, 2])\n  %c = cat([%x, %x], 0)\n  return %r, %c\n",
      "  %x = input(low=-5, high=5) : i32[N, 6]\n  %y = input(low=1, high=4) : i32[6]\n  %d = div.Tensor_mode(%x, %y, rounding_mode=\"floor\")\n  %r = remainder.Tensor(%x, %y)\n  %q = div.Tensor(%x, %y)\n  %c = lt.Scalar(%x, 0.5)\n  %s = sum(%x)\n  return %d, %r, %q, %c, %s\n",
      "  %x = input() : f16[N, 12]\n  %y = input() : bf16[12]\n  %z = mul.Tensor(%x, %y)\n  %s = _softmax(%x, -1, true)\n  return %z, %s\n",
      "  %q = input() : f32[2, N, 8]\n  %k = input() : f32[2, 6, 8]\n  %v = input() : f32[2, 6, 3]\n  %a = scaled_dot_product_attention(%q, %k, %v, scale=0.3)\n  return %a\n",
      "  %q = input() : f32[1, 2, N, 4]\n  %a = scaled_dot_product_attention(%q, %q, %q, is_causal=true)\n  return %a\n",
      "  %x = input() : f32[N, 6]\n  %v = view(%x, [3, -1])\n  %s = slice.Tensor(%v, 1, 1, 100, 2)\n  %u = unsqueeze(%s, 0)\n  %e = expand(%u, [2, -1, -1])\n  %y = exp(%e)\n  %t = permute(%y, [0, 2, 1])\n  %b = bmm(%y, %t)\n  return %b\n",
      "  %x = input() : f32[N, 6, 3, 2]\n  %w = input() : f32[6]\n  %b = input() : f32[6]\n  %y, %m, %r = native_group_norm(%x, %w, %b, N, 6, 6, 3, 1e-05)\n  %z, %m2, %r2 = native_group_norm(%x, none, none, N, 6, 6, 2, 0.1)\n  return %y, %m, %r, %z\n",
      "  %x = input() : f32[N, 7]\n  %a = exp(%x)\n  %c = cumsum(%a, 1)\n  %d = cumsum(%x, -2, dtype=f64)\n  %i = input(low=-9, high=9) : i32[N, 3]\n  %e = cumsum(%i, 0)\n  %s = input() : f32[]\n  %f = cumsum(%s, 0)\n  %g = mul.Scalar(%c, 2)\n  return %g, %d, %e, %f\n",
      "  %w = input() : f32[11, 6]\n  %t = input(low=0, high=11) : i64[N, 3]\n  %e = embedding(%w, %t)\n  %i = input(low=0, high=6) : i32[4]\n  %s = index_select(%w, 1, %i)\n  %g = input(low=0, high=11) : i64[7, 6]\n  %h = gather(%w, 0, %g)\n  %x = exp(%w)\n  %y = index_select(%x, 0, %i)\n  return %e, %s, %h, %y\n",
      "  %x = input() : f32[5, 6, 7]\n  %a = input(low=-5, high=5) : i64[N, 1]\n  %b = input(low=0, high=6) : i64[4]\n  %c = input(low=0, high=7) : i64[4]\n  %y = index.Tensor(%x, [%a, %b])\n  %z = index.Tensor(%x, [%a, none, %c])\n  %w = index.Tensor(%x, [none, %b])\n  return %y, %z, %w\n",
      "  %x = input() : f32[6, 5]\n  %s = input() : f32[N, 5]\n  %i = input(low=0, high=6) : i64[N, 4]\n  %a = scatter_add(%x, 0, %i, %s)\n  %j = input(low=0, high=5) : i64[N, 4]\n  %b = scatter.src(%x, 1, %j, %s)\n  %r = input() : f32[2, 5]\n  %c = slice_scatter(%x, %r, 0, 1, 6, 3)\n  %v = input() : f32[6]\n  %d = select_scatter(%x, %v, 1, -2)\n  return %a, %b, %c, %d\n",
      // scatters of one element a row (a loss's one-hot gradient) as selects: value, add and src
      "  %l = input() : f32[N, 37]\n  %i = input(low=0, high=37) : i64[N, 1]\n  %s = scatter.value(%l, 1, %i, -1.0)\n"
      "  %w = input() : f32[N, 1]\n  %m = mul.Tensor(%s, %w)\n  %r = sum.dim_IntList(%m, [1], true)\n  %u = input() : bf16[N, 3]\n"
      "  %b = input() : bf16[N, 37]\n  %a = scatter_add(%b, 1, %i, %u)\n  %k = input() : f32[4, 37]\n"
      "  %j = input(low=0, high=4) : i64[1, 37]\n  %c = scatter.src(%k, 0, %j, %k)\n  return %s, %r, %a, %c\n",
      // gathers and index_select at data-dependent places of computed values (log-softmax
      // through a flattening view, a transposed exp): computed at those places, not stored
      "  %x = input() : f32[2, N, 37]\n  %v = view(%x, [-1, 37])\n  %l = _log_softmax(%v, 1, false)\n"
      "  %i = input(low=0, high=37) : i64[10, 1]\n  %g = gather(%l, 1, %i)\n  %y = input() : f32[6, 5]\n"
      "  %t = permute(%y, [1, 0])\n  %e = exp(%t)\n  %j = input(low=0, high=6) : i64[4]\n  %s = index_select(%e, 1, %j)\n"
      "  %k = input(low=0, high=5) : i64[7]\n  %r = index_select(%e, 0, %k)\n  return %g, %s, %r\n",
      // a row reduction over a flattened [2 * N, 37] and a pointwise consumer over the [2, N, 37]
      // view reading its per-row result: one row kernel, the consumer's split variables folded
      "  %x = input() : f32[2, 5, 37]\n  %v = view(%x, [-1, 37])\n  %s = sum.dim_IntList(%v, [1], true)\n  %e = exp(%v)\n"
      "  %m = mul.Tensor(%e, %s)\n  %w = view(%m, [2, 5, 37])\n  %c = _to_copy(%w, dtype=bf16)\n  return %c\n",
      // GEMM epilogues: relu and gelu(tanh) move into the product (bias+relu, gelu, bias+gelu
      // in bf16); a product also read raw keeps its pointwise kernel
      "  %x = input() : f32[N, 9]\n  %w = input() : f32[9, 5]\n  %b = input() : f32[5]\n  %h = addmm(%b, %x, %w)\n  %r = relu(%h)\n"
      "  %m = mm(%x, %w)\n  %g = gelu(%m, approximate=\"tanh\")\n  %n = mm(%x, %w)\n  %q = relu(%n)\n  %s = add.Tensor(%q, %n)\n  return %r, %g, %s\n",
      "  %x = input() : bf16[N, 16]\n  %w = input() : bf16[24, 16]\n  %b = input() : bf16[24]\n  %t = permute(%w, [1, 0])\n"
      "  %h = addmm(%b, %x, %t)\n  %g = gelu(%h, approximate=\"tanh\")\n  %y = mul.Scalar(%g, 3)\n  %u = unsqueeze(%x, 0)\n"
      "  %v = expand(%u, [2, -1, -1])\n  %z = input() : bf16[2, 16, 8]\n  %p = bmm(%v, %z)\n  %q = relu(%p)\n  return %y, %q\n",
      // column reductions (reduced dims outside the contiguous one): interchanged loops
      "  %x = input() : f32[N, 7, 67]\n  %a = sum.dim_IntList(%x, [1])\n  %b = amax(%x, [0, 1], true)\n  %c = prod.dim_int(%x, 0)\n  %d = var.correction(%x, [0], correction=0)\n  %i = input(low=-9, high=9) : i32[70, N]\n  %e = amin(%i, [0])\n  return %a, %b, %c, %d, %e\n",
      // Philox random values (a dropout mask fused into its consumer, normal f64, uniform bf16):
      // the kernels compute the reference's bits
      "  %s = input(low=-1000000, high=1000000) : i64[]\n  %x = input() : f32[N, 9]\n"
      "  %u = philox_random(%s, size=[N, 9], stream=2, distribution=\"uniform\", dtype=f32)\n  %m = lt.Scalar(%u, 0.7)\n"
      "  %y = mul.Tensor(%x, %m)\n  %n = philox_random(%s, size=[3, N], stream=0, distribution=\"normal\", dtype=f64)\n"
      "  %h = philox_random(%s, size=[N, 4], stream=1, distribution=\"uniform\", dtype=bf16)\n  return %y, %n, %h\n",
      // a mask returned and applied (one kernel stores both), and a residual sum returned beside
      // the layer norm recomputing it (its row kernel stores it)
      "  %s = input(low=-1000000, high=1000000) : i64[]\n  %x = input() : f32[N, 37]\n"
      "  %u = philox_random(%s, size=[N, 37], stream=3, distribution=\"uniform\", dtype=f32)\n  %m = gt.Scalar(%u, 0.3)\n"
      "  %y = mul.Tensor(%x, %m)\n  %h = input() : f32[N, 37]\n  %w = input() : f32[37]\n  %r = add.Tensor(%y, %h)\n"
      "  %n, %a, %b = native_layer_norm(%r, [37], %w, %w, 1e-05)\n  return %m, %y, %r, %n\n",
      // transposing pointwise kernels (reads or writes across the fast dim): square tiles
      "  %x = input() : f32[N, 37, 45]\n  %t = input() : f32[45, 37, N]\n  %p = permute(%t, [2, 1, 0])\n  %y = mul.Tensor(%x, %p)\n  %z = permute(%y, [0, 2, 1])\n  %w = clone(%z, memory_format=contiguous_format)\n  return %y, %w\n",
  };
  int i = 0;
  for (const char* body : cases) {
    SCOPED_TRACE(body);
    check_against_reference(parse(body), static_cast<uint64_t>(i++));
  }
}

// Convolutions as im2col + GEMM (the CUDA target's way; on the CPU through conv_as_gemm):
// 3x3 with padding, stride and dilation, 1-D and 3-D, 1x1 without col, bias or none, bf16, a
// strided input, and the cases that stay direct loops (groups, transposed).
TEST(Compile, ConvolutionsAsGemmMatchReference) {
  struct Case {
    const char* body;
    int im2col, gemms;
  };
  const Case cases[] = {
      {"  %x = input() : f32[N, 3, 9, 8]\n  %w = input() : f32[5, 3, 3, 3]\n  %b = input() : f32[5]\n"
       "  %y = convolution(%x, %w, %b, [2, 1], [1, 2], [1, 2], false, [0, 0], 1)\n  %r = relu(%y)\n  return %r\n", 1, 1},
      {"  %x = input() : f32[N, 4, 7]\n  %w = input() : f32[6, 4, 1]\n  %y = convolution(%x, %w, none, [1], [0], [1], false, [0], 1)\n"
       "  return %y\n", 0, 1},
      {"  %x = input() : bf16[2, 3, 5, 4, 6]\n  %w = input() : bf16[4, 3, 2, 3, 2]\n  %b = input() : bf16[4]\n"
       "  %y = convolution(%x, %w, %b, [1, 2, 1], [1, 0, 1], [1, 1, 2], false, [0, 0, 0], 1)\n  return %y\n", 1, 1},
      {"  %t = input() : f32[9, 3, N, 2]\n  %x = permute(%t, [2, 1, 0, 3])\n  %w = input() : f32[4, 3, 2, 1]\n"
       "  %y = convolution(%x, %w, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %k = input() : f32[4, 3, 1, 1]\n"
       "  %z = convolution(%x, %k, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  return %y, %z\n", 2, 2},
      {"  %x = input() : f32[N, 4, 6, 6]\n  %w = input() : f32[6, 2, 3, 3]\n  %y = convolution(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 2)\n"
       "  %v = input() : f32[N, 4, 5]\n  %k = input() : f32[4, 3, 2]\n  %z = convolution(%v, %k, none, [2], [0], [1], true, [1], 1)\n  return %y, %z\n", 0, 0},
  };
  int seed = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    Graph g = parse(c.body);
    Generated gen = generate(g, {.conv_as_gemm = true});
    int im2col = 0, gemms = 0;
    for (const auto& k : gen.lowered.program.kernels) {
      if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) im2col += lk->name.ends_with("_im2col");
      else gemms += std::get<loop::ExternCall>(k).kind == loop::ExternKind::bmm;
    }
    EXPECT_EQ(im2col, c.im2col) << loop::to_string(gen.lowered.program);
    EXPECT_EQ(gemms, c.gemms) << loop::to_string(gen.lowered.program);
    Executable exe = compile(g, {.cache_dir = temp_cache(), .device = test_device(), .conv_as_gemm = true});
    TensorMap inputs = random_inputs(g, static_cast<uint64_t>(seed++));
    auto got = exe.run(inputs, {});
    auto want = evaluate_reference(g, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));
  }
}

// A 16-bit convolution rounds once, after its bias (as PyTorch's CPU kernels and the f32
// reference do). With x = w = 1 + u (u = 2^-10 for f16, 2^-7 for bf16) and bias u/2 the exact
// result 1 + 2u + u/2 + u^2 rounds up to 1 + 3u; rounding the product first (to 1 + 2u) and then
// adding the bias meets a tie, which rounds to even: 1 + 2u.
TEST(Compile, HalfConvolutionRoundsOnceAfterItsBias) {
  for (DType t : {DType::f16, DType::bf16}) {
    const double u = t == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    const std::string name(dtype_name(t));
    // A 1x1 kernel (the product reads the input itself) and a 3-d kernel with a zero tap (im2col).
    const std::string bodies[] = {
        "  %x = input() : " + name + "[2, 1, 3, 4]\n  %w = input() : " + name + "[3, 1, 1, 1]\n  %b = input() : " + name +
            "[3]\n  %y = convolution(%x, %w, %b, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  return %y\n",
        "  %x = input() : " + name + "[1, 1, 2, 2, 3]\n  %w = input() : " + name + "[2, 1, 1, 1, 2]\n  %b = input() : " + name +
            "[2]\n  %y = convolution(%x, %w, %b, [1, 1, 1], [0, 0, 0], [1, 1, 1], false, [0, 0, 0], 1)\n  return %y\n",
    };
    for (const auto& body : bodies) {
      SCOPED_TRACE(body);
      Graph g = parse(body);
      TensorMap inputs;
      for (int node : g.input_nodes()) {
        const Node& n = g.nodes[static_cast<size_t>(node)];
        Shape sizes;
        for (const auto& d : n.outputs[0].meta.sizes) sizes.push_back(*d.constant());
        Tensor v = Tensor::zeros(t, sizes);
        for (int64_t i = 0; i < v.numel(); ++i) {
          bool zero_tap = n.name() == "w" && sizes.size() == 5 && i % 2 == 1;
          v.store(i, n.name() == "b" ? u / 2 : zero_tap ? 0.0 : 1 + u);
        }
        inputs.emplace(n.name(), v);
      }
      for (bool as_gemm : {true, false}) {
        Executable exe = compile(g, {.cache_dir = temp_cache(), .device = "cpu", .conv_as_gemm = as_gemm});
        Tensor got = exe.run(inputs, {})[0].contiguous_copy();
        for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.load(i), 1 + 3 * u) << name << " element " << i << (as_gemm ? " (im2col + gemm)" : " (direct)");
      }
      Tensor want = evaluate_reference(g, inputs)[0].contiguous_copy();
      for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(want.load(i), 1 + 3 * u) << "reference element " << i;
    }
  }
}

TEST(Compile, AOneHotScatterIsASelectFusedWithItsReaders) {
  // A loss's gradient: a zero-filled [N, 37] with -1 at each row's target, scaled and summed.
  // No kernel stores at a data-dependent offset; a scatter of several elements a row keeps its pass.
  auto dynamic_stores = [](const std::string& body) {
    auto p = generate(parse(body), {}).lowered.program;
    int count = 0;
    for (const auto& k : p.kernels)
      if (const auto* lk = std::get_if<loop::LoopKernel>(&k))
        for (const auto& st : lk->stores) count += st.dynamic ? 1 : 0;
    return count;
  };
  EXPECT_EQ(dynamic_stores("  %l = input() : f32[N, 37]\n  %z = full_like(%l, 0)\n  %i = input(low=0, high=37) : i64[N, 1]\n"
                           "  %s = scatter.value(%z, 1, %i, -1.0)\n  %w = input() : f32[N, 1]\n  %m = mul.Tensor(%s, %w)\n"
                           "  %r = sum.dim_IntList(%m, [1], true)\n  %e = exp(%l)\n  %d = mul.Tensor(%e, %r)\n"
                           "  %g = sub.Tensor(%m, %d)\n  return %g\n"),
            0);
  EXPECT_EQ(dynamic_stores("  %l = input() : f32[N, 37]\n  %i = input(low=0, high=37) : i64[N, 2]\n"
                           "  %s = scatter.value(%l, 1, %i, -1.0)\n  return %s\n"),
            1);
}

TEST(Compile, AGatherFromALogSoftmaxStoresNoRowOfIt) {
  // A loss's forward: the target's log-probability of each row. The log-softmax is computed at
  // the gathered places; no kernel stores an [N, 37] value.
  auto p = generate(parse("  %x = input() : bf16[N, 37]\n  %f = _to_copy(%x, dtype=f32)\n  %m = amax(%f, [1], true)\n"
                          "  %s = sub.Tensor(%f, %m)\n  %e = exp(%s)\n  %u = sum.dim_IntList(%e, [1], true)\n  %l = log(%u)\n"
                          "  %o = sub.Tensor(%s, %l)\n  %i = input(low=0, high=37) : i64[N, 1]\n  %g = gather(%o, 1, %i)\n"
                          "  %n = neg(%g)\n  %r = sum(%n)\n  return %r\n"),
                    {}).lowered.program;
  for (const auto& k : p.kernels) {
    const auto* lk = std::get_if<loop::LoopKernel>(&k);
    if (!lk) continue;
    for (const auto& st : lk->stores) EXPECT_NE(shape_str(p.buffers[static_cast<size_t>(st.buffer)].sizes), "[N, 37]") << loop::to_string(p);
  }
}

TEST(Compile, ABackwardsGradientFeedsBothProductsFromOneBuffer) {
  // A linear layer's backward: dY (the cast of a pointwise result) feeds dX = dY @ W and, as its
  // transpose, dW = dY^T @ X. One kernel stores dY; the weight gradient's product reads the same
  // buffer through transposed strides (not a second kernel storing the same bytes), and both match
  // the interpreter.
  const std::string body =
      "  %a = input() : f32[2, 32, 48]\n  %b = input() : f32[2, 32, 48]\n  %w = input() : bf16[48, 64]\n  %x = input() : bf16[64, 64]\n"
      "  %m = mul.Tensor(%a, %b)\n  %c = _to_copy(%m, dtype=bf16)\n  %v = view(%c, [64, 48])\n  %t = permute(%v, [1, 0])\n"
      "  %dx = mm(%v, %w)\n  %dw = mm(%t, %x)\n  return %dx, %dw\n";
  auto p = generate(parse(body), {}).lowered.program;
  int loops = 0;
  std::vector<const loop::ExternCall*> products;
  for (const auto& k : p.kernels) {
    if (std::holds_alternative<loop::LoopKernel>(k)) ++loops;
    else products.push_back(&std::get<loop::ExternCall>(k));
  }
  EXPECT_EQ(loops, 1) << loop::to_string(p);
  ASSERT_EQ(products.size(), 2u) << loop::to_string(p);
  EXPECT_EQ(products[0]->inputs[0].buffer, products[1]->inputs[0].buffer) << loop::to_string(p);
  EXPECT_EQ(shape_str(products[1]->inputs[0].strides), "[1, 48]") << loop::to_string(p);
  check_against_reference(parse(body), 3);
}

TEST(Compile, AViewStoredForSeveralReadersStoresItsInput) {
  // GPT-2's gelu gradient: an f32 value with a tanh (read twice, so worth storing) feeds a bf16
  // sum that three readers take as a [B*T, 3072] view. The view's input is stored over its own
  // nest, into which the f32 value's kernel fuses: one kernel, no f32 temporary.
  const std::string body =
      "  %a = input() : bf16[2, 16, 96]\n  %b = input() : bf16[2, 16, 96]\n  %af = _to_copy(%a, dtype=f32)\n"
      "  %t = tanh(%af)\n  %t2 = tanh(%t)\n  %t3 = tanh(%t2)\n  %t4 = erf(%t3)\n  %t5 = exp(%t4)\n  %t6 = log1p(%t5)\n"
      "  %m = mul.Tensor(%t6, %af)\n  %c1 = _to_copy(%m, dtype=bf16)\n  %m2 = mul.Scalar(%m, other=0.5)\n"
      "  %c2 = _to_copy(%m2, dtype=bf16)\n  %s = add.Tensor(%c1, %c2)\n  %u = add.Tensor(%s, %b)\n  %v = view(%u, [32, 96])\n"
      "  %w = input() : bf16[96, 8]\n  %y = mm(%v, %w)\n  %r = sum.dim_IntList(%v, [0], dtype=f32)\n  %e = exp(%v)\n  return %y, %r, %e\n";
  auto p = generate(parse(body), {}).lowered.program;
  int f32_stores = 0;  // into temporaries
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k))
      for (const auto& st : lk->stores) {
        const loop::Buffer& b = p.buffers[static_cast<size_t>(st.buffer)];
        f32_stores += b.role == loop::Buffer::Role::temporary && b.dtype == DType::f32;
      }
  EXPECT_EQ(f32_stores, 0) << loop::to_string(p);
  for (const auto& k : p.kernels)  // the product reads the stored [2, 16, 96] through its view
    if (const auto* call = std::get_if<loop::ExternCall>(&k)) {
      EXPECT_EQ(shape_str(p.buffers[static_cast<size_t>(call->inputs[0].buffer)].sizes), "[2, 16, 96]") << loop::to_string(p);
    }
  check_against_reference(parse(body), 4);
}

TEST(Compile, RandomGraphsMatchReference) {
  int count = 40;
  if (const char* n = std::getenv("COIL_FUZZ_GRAPHS")) count = std::atoi(n);
  for (int seed = 0; seed < count; ++seed) {
    Graph g = testing::random_graph(static_cast<uint64_t>(seed) + 1000, {.steps = 8, .symbolic_batch = seed % 2 == 0});
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(g));
    try {
      check_against_reference(g, static_cast<uint64_t>(seed));
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(Compile, CacheHitIsFastAndEquivalent) {
  Graph g = parse("  %x = input() : f32[N, 16]\n  %y = tanh(%x)\n  return %y\n");
  Executable cold = compile(g, {.cache_dir = temp_cache()});
  Executable warm = compile(g, {.cache_dir = temp_cache()});
  EXPECT_TRUE(warm.stats.cache_hit);
  EXPECT_EQ(cold.source, warm.source);
}

// Kernels large enough to start OpenMP worker threads; the executables are then destroyed while
// those threads idle (this once unloaded libgomp under them and crashed the process).
TEST(Compile, ParallelKernelsOutliveTheirExecutable) {
  Graph g = parse_graph("graph t {\n  %x = input() : f32[512, 1024]\n  %y = _softmax(%x, -1, false)\n  return %y\n}\n");
  TensorMap inputs = random_inputs(g, 1);
  for (int i = 0; i < 2; ++i) {
    Executable exe = compile(g, {.cache_dir = temp_cache()});
    Tensor y = exe.run(inputs, {})[0].contiguous_copy();
    double row = 0;
    for (int64_t j = 0; j < 1024; ++j) row += y.load(j);
    EXPECT_NEAR(row, 1.0, 1e-5);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// A plan's temporaries keep their memory from one run to the next (runtime/plan.h): later runs
// with other values, and with other sizes (a larger N needs larger blocks, a smaller one reuses
// them), all match the interpreter, and the runs' results do not share memory.
TEST(Compile, RunsReuseTemporariesMemory) {
  Graph g = parse("  %x = input() : f32[N, 300]\n  %e = exp(%x)\n  %s = sum.dim_IntList(%e, [1], true)\n"
                  "  %y = div.Tensor(%e, %s)\n  %t = permute(%y, [1, 0])\n  %z = mul.Tensor(%t, %t)\n  return %z\n");
  Executable exe = compile(g, {.cache_dir = temp_cache()});
  std::vector<Tensor> kept;
  for (int64_t n : {5, 5, 40, 3, 40}) {
    TensorMap inputs = random_inputs(g, static_cast<uint64_t>(n) * 7 + kept.size(), {{"N", n}});
    auto want = evaluate_reference(g, inputs);
    auto got = exe.run(inputs, {});
    expect_close(got[0], want[0], "run " + std::to_string(kept.size()) + " (N=" + std::to_string(n) + ")");
    kept.push_back(got[0]);
    for (size_t i = 0; i + 1 < kept.size(); ++i) EXPECT_NE(kept[i].data(), got[0].data());
  }
}

// Pooling over symbolic spatial sizes compiles once and runs every size: max pooling (padded,
// its indices; ceil_mode, whose last window may start past the input), average pooling with and
// without the padding counted and with ceil_mode, and adaptive pooling to 1x1 (a CNN's global
// pooling), against the interpreter at sizes odd and even, equal and not, down to a single window.
TEST(Compile, PoolingOverSymbolicSpatialSizes) {
  Graph g = parse_graph(
      "graph t {\n  sym H = 9\n  sym W = 13\n  %x = input() : f32[2, 3, H, W]\n"
      "  %m, %i = max_pool2d_with_indices(%x, [3, 3], [2, 2], [1, 1], [1, 1], false)\n"
      "  %c, %ci = max_pool2d_with_indices(%x, [2, 2], [2, 2], [0, 0], [1, 1], true)\n"
      "  %a = avg_pool2d(%x, [3, 3], [2, 2], [1, 1], false, false, none)\n"
      "  %b = avg_pool2d(%x, [2, 2], [2, 2], [0, 0], true, true, none)\n"
      "  %g = _adaptive_avg_pool2d(%x, [1, 1])\n  return %m, %i, %c, %ci, %a, %b, %g\n}\n");
  Executable exe = compile(g, {.cache_dir = temp_cache(), .device = test_device()});
  for (auto [h, w] : {std::pair<int64_t, int64_t>{9, 13}, {4, 7}, {16, 16}, {5, 3}, {2, 2}, {31, 8}}) {
    TensorMap inputs = random_inputs(g, static_cast<uint64_t>(h * 100 + w), {{"H", h}, {"W", w}});
    auto want = evaluate_reference(g, inputs);
    auto got = exe.run(inputs, {});
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) expect_close(got[o], want[o], fmt::format("{}x{} output {}", h, w, o));
  }
  // Adaptive pooling to other sizes takes static ones: a clear error, which torch.compile turns
  // into a compile per size.
  Graph adaptive = parse_graph("graph t {\n  sym H = 9\n  %x = input() : f32[2, 3, H, 8]\n  %g = _adaptive_avg_pool2d(%x, [2, 2])\n"
                               "  return %g\n}\n");
  EXPECT_THROW(compile(adaptive, {.cache_dir = temp_cache(), .device = test_device()}), Error);
}

}  // namespace
}  // namespace coil
