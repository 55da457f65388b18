// The CPU runtime's library paths: f16/bf16 <-> f32 conversion of whole tensors (every layout
// path, rounding to nearest even, NaN and infinities), and convolutions through oneDNN and
// 16-bit matrix products through OpenBLAS against the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <unistd.h>

#include <filesystem>

#include "coil/coil.h"
#include "driver/compile.h"
#include "runtime/cpu_convert.h"
#include "schedule/channels_last.h"
#include "support/half.h"
#include "test_util.h"

namespace coil {
namespace {

// Values that exercise rounding: ties to even both ways, the largest finite values, halves'
// subnormals, infinities and NaN, and random ones.
std::vector<float> hard_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 6e-8f, 3e-5f, 1e-40f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()};
  // Exactly between two bf16 values: 1 + 2^-8 (to even: 1), 1 + 3 * 2^-8 (to even: 1 + 2^-6).
  v.push_back(1.0f + std::ldexp(1.0f, -8));
  v.push_back(1.0f + 3 * std::ldexp(1.0f, -8));
  // Exactly between two f16 values: 1 + 2^-11 and 1 + 3 * 2^-11.
  v.push_back(1.0f + std::ldexp(1.0f, -11));
  v.push_back(1.0f + 3 * std::ldexp(1.0f, -11));
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int i = 0; i < 200003; ++i) v.push_back(normal(gen));  // past one parallel chunk, odd length
  return v;
}

std::string temp_cache() {
  static const std::string dir = testing::process_cache_dir("coil_cpu_library_test");
  return dir;
}

double expected(double x, DType t) {
  return t == DType::f16 ? f16_bits_to_double(f16_bits_from_double(x)) : bf16_bits_to_double(bf16_bits_from_double(x));
}

void expect_same(double got, double want, int64_t i) {
  if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << "element " << i;
  else EXPECT_EQ(got, want) << "element " << i;
}

TEST(CpuConvert, NarrowsAndWidensEveryValueAsTheReferenceRounds) {
  std::vector<float> values = hard_values();
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor src = Tensor::borrow(values.data(), DType::f32, {n}, {1});
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor half = Tensor::zeros(t, {n});
    narrow_into(src, half);
    for (int64_t i = 0; i < n; ++i) expect_same(half.load(i), expected(values[static_cast<size_t>(i)], t), i);
    Tensor back = widen_to_f32(half);
    ASSERT_EQ(back.dtype(), DType::f32);
    for (int64_t i = 0; i < n; ++i) expect_same(back.load(i), half.load(i), i);
  }
}

TEST(CpuConvert, KeepsDenseLayoutsAndConvertsOthersElementwise) {
  // Channels-last [2, 3, 4, 5] (dense: one flat pass, layout kept), a slice of it (not dense),
  // and a broadcast dim (stride 0 stays 0).
  Tensor cl = Tensor::zeros_strided(DType::bf16, {2, 3, 4, 5}, {60, 1, 15, 3});
  for (int64_t i = 0; i < cl.numel(); ++i) cl.store(i, 0.25 * static_cast<double>(i) - 7);
  Tensor wide = widen_to_f32(cl);
  EXPECT_EQ(wide.strides(), cl.strides());
  Tensor sliced = cl.view({2, 3, 2, 5}, {60, 1, 30, 3}, 15);
  Tensor ws = widen_to_f32(sliced);
  Tensor bcast = cl.view({2, 3, 4, 5}, {0, 1, 15, 3}, 0);
  Tensor wb = widen_to_f32(bcast);
  EXPECT_EQ(wb.strides()[0], 0);
  for (const auto& [from, to] : {std::pair{cl, wide}, std::pair{sliced, ws}, std::pair{bcast, wb}})
    from.for_each_index([&](std::span<const int64_t> idx) {
      EXPECT_EQ(to.load(to.element_index(idx)), from.load(from.element_index(idx)));
    });
  // Narrowing into a layout other than the source's goes element by element.
  Tensor f = Tensor::zeros(DType::f32, {3, 4});
  for (int64_t i = 0; i < 12; ++i) f.store(i, 1.0 / 3.0 * static_cast<double>(i));
  Tensor t = Tensor::zeros_strided(DType::f16, {3, 4}, {1, 3});
  narrow_into(f, t);
  f.for_each_index([&](std::span<const int64_t> idx) {
    EXPECT_EQ(t.load(t.element_index(idx)), expected(f.load(f.element_index(idx)), DType::f16));
  });
}

// Convolutions and products (oneDNN; OpenBLAS for an addmm that scales) on the CPU against the reference, f16 and bf16
// included; a depthwise and a transposed grouped convolution, channels-last input.
TEST(CpuLibraries, ConvolutionsAndProductsMatchTheReference) {
  const char* bodies[] = {
      "  %x = input() : DT[2, 6, 9, 7]\n  %w = input() : DT[6, 1, 3, 3]\n  %b = input() : DT[6]\n"
      "  %y = convolution(%x, %w, %b, [2, 1], [1, 1], [1, 2], false, [0, 0], 6)\n  return %y\n",
      "  %t = input() : DT[2, 5, 4, 6]\n  %x = permute(%t, [0, 3, 1, 2])\n  %w = input() : DT[6, 4, 2, 2]\n"
      "  %y = convolution(%x, %w, none, [2, 2], [0, 1], [1, 1], true, [1, 0], 2)\n  return %y\n",
      "  %x = input() : DT[2, 3, 5, 4, 6]\n  %w = input() : DT[4, 3, 2, 3, 2]\n  %b = input() : DT[4]\n"
      "  %y = convolution(%x, %w, %b, [1, 2, 1], [1, 0, 1], [1, 1, 2], false, [0, 0, 0], 1)\n  return %y\n",
      "  %a = input() : DT[7, 33]\n  %w = input() : DT[5, 33]\n  %b = input() : DT[5]\n  %t = permute(%w, [1, 0])\n"
      "  %y = addmm(%b, %a, %t, beta=0.5, alpha=2)\n  %p = input() : DT[3, 4, 9]\n  %q = input() : DT[3, 9, 2]\n"
      "  %z = bmm(%p, %q)\n  return %y, %z\n",
  };
  uint64_t seed = 0;
  for (const char* dt : {"f32", "f16", "bf16"})
    for (const char* body : bodies) {
      std::string text = body;
      for (size_t at; (at = text.find("DT")) != std::string::npos;) text.replace(at, 2, dt);
      SCOPED_TRACE(text);
      Graph g = parse_graph("graph t {\n" + text + "}\n");
      Generated gen = generate(g, {});
      int calls = 0;
      for (const auto& k : gen.lowered.program.kernels) calls += std::holds_alternative<loop::ExternCall>(k);
      EXPECT_GE(calls, 1) << "the library call became a loop kernel";
      Executable exe = compile(g, {.cache_dir = temp_cache()});
      TensorMap inputs = random_inputs(g, seed++);
      auto got = exe.run(inputs, {});
      auto want = evaluate_reference(g, inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], want[i], "output " + std::to_string(i));
    }
}

// Products through oneDNN (the bias of an addmm in its kernel: a row, a full matrix) with
// transposed operands and a batch, run again on new values and at other sizes: each call keeps
// its primitive per size in the plan (runtime/cpu_onednn.h), so a second size must not reuse the
// first's, nor a repeat run read stale operands.
TEST(CpuLibraries, ProductsKeepAPrimitivePerCallAndSize) {
  const char* body =
      "  %x = input() : DT[N, 33]\n  %w = input() : DT[5, 33]\n  %b = input() : DT[5]\n  %t = permute(%w, [1, 0])\n"
      "  %y = addmm(%b, %x, %t)\n  %c = input() : DT[N, 5]\n  %z = addmm(%c, %x, %t)\n  %m = mm(%x, %t)\n"
      "  %p = input() : DT[3, N, 9]\n  %q = input() : DT[3, 5, 9]\n  %r = permute(%q, [0, 2, 1])\n  %u = bmm(%p, %r)\n"
      "  return %y, %z, %m, %u\n";
  uint64_t seed = 100;
  for (const char* dt : {"f32", "f16", "bf16"}) {
    std::string text = body;
    for (size_t at; (at = text.find("DT")) != std::string::npos;) text.replace(at, 2, dt);
    SCOPED_TRACE(text);
    Graph g = parse_graph("graph t {\n  sym N = 7\n" + text + "}\n");
    Executable exe = compile(g, {.cache_dir = temp_cache()});
    for (int64_t n : {7, 7, 130, 1, 7}) {
      SCOPED_TRACE("N = " + std::to_string(n));
      TensorMap inputs = random_inputs(g, seed++, {{"N", n}});
      auto got = exe.run(inputs, {});
      auto want = evaluate_reference(g, inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], want[i], "output " + std::to_string(i));
    }
  }
}

// One plan run from several threads at once: the oneDNN primitives it keeps (a product, a
// convolution) run on any thread, concurrently, each execution with its own scratchpad.
TEST(CpuLibraries, APlanRunsInSeveralThreadsAtOnce) {
  Graph g = parse_graph(
      "graph t {\n  %x = input() : f32[64, 96]\n  %w = input() : f32[80, 96]\n  %b = input() : f32[80]\n"
      "  %t = permute(%w, [1, 0])\n  %y = addmm(%b, %x, %t)\n  %i = input() : f32[2, 16, 20, 20]\n"
      "  %k = input() : f32[24, 16, 3, 3]\n  %c = convolution(%i, %k, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n"
      "  return %y, %c\n}\n");
  Executable exe = compile(g, {.cache_dir = temp_cache()});
  constexpr int kThreads = 4;
  std::vector<TensorMap> inputs;
  std::vector<std::vector<Tensor>> want;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(random_inputs(g, 500 + static_cast<uint64_t>(t)));
    want.push_back(evaluate_reference(g, inputs.back()));
  }
  std::vector<std::vector<std::vector<Tensor>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 6; ++r) got[static_cast<size_t>(t)].push_back(exe.run(inputs[static_cast<size_t>(t)], {}));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (const auto& run : got[static_cast<size_t>(t)])
      for (size_t i = 0; i < run.size(); ++i)
        testing::expect_close(run[i], want[static_cast<size_t>(t)][i], "thread " + std::to_string(t) + " output " + std::to_string(i));
}

// Convolution chains in channels-last layouts (schedule/channels_last.h), on the CPU where oneDNN
// takes any strides, against the reference: a ResNet-style block (bias, per-channel scale and
// shift, relu, residual add, a mean over the image), depthwise then pointwise in bf16, a 3-d
// chain, and a ConvNeXt-style block whose channels-last view goes through a layer norm and a
// linear layer and back.
TEST(ChannelsLast, ConvolutionChainsMatchTheReference) {
  const char* bodies[] = {
      "  %x = input() : f32[2, 3, 9, 8]\n  %w = input() : f32[4, 3, 3, 3]\n  %b = input() : f32[4]\n"
      "  %c = convolution(%x, %w, %b, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %s = input() : f32[4, 1, 1]\n"
      "  %m = mul.Tensor(%c, %s)\n  %r = relu(%m)\n  %v = input() : f32[4, 4, 3, 3]\n"
      "  %d = convolution(%r, %v, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %a = add.Tensor(%d, %r)\n"
      "  %o = relu(%a)\n  %p = sum.dim_IntList(%o, [2, 3])\n  return %o, %p\n",
      "  %x = input() : bf16[2, 6, 7, 5]\n  %w = input() : bf16[6, 1, 3, 3]\n"
      "  %c = convolution(%x, %w, none, [2, 2], [1, 1], [1, 1], false, [0, 0], 6)\n  %h = relu(%c)\n"
      "  %v = input() : bf16[8, 6, 1, 1]\n  %e = input() : bf16[8]\n"
      "  %d = convolution(%h, %v, %e, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  return %d\n",
      "  %x = input() : f32[1, 2, 4, 5, 3]\n  %w = input() : f32[3, 2, 2, 2, 2]\n"
      "  %c = convolution(%x, %w, none, [1, 1, 1], [1, 0, 1], [1, 1, 1], false, [0, 0, 0], 1)\n  %r = relu(%c)\n"
      "  %v = input() : f32[3, 3, 1, 2, 1]\n  %d = convolution(%r, %v, none, [1, 1, 1], [0, 0, 0], [1, 1, 1], false, [0, 0, 0], 1)\n"
      "  return %d\n",
      "  %x = input() : f32[2, 8, 5, 6]\n  %w = input() : f32[8, 1, 3, 3]\n  %b = input() : f32[8]\n"
      "  %c = convolution(%x, %w, %b, [1, 1], [1, 1], [1, 1], false, [0, 0], 8)\n  %t = permute(%c, [0, 2, 3, 1])\n"
      "  %g = input() : f32[8]\n  %n, %mean, %rstd = native_layer_norm(%t, [8], %g, none, 1e-06)\n"
      "  %f = view(%n, [60, 8])\n  %l = input() : f32[8, 8]\n  %lb = input() : f32[8]\n  %y = addmm(%lb, %f, %l)\n"
      "  %u = view(%y, [2, 5, 6, 8])\n  %q = permute(%u, [0, 3, 1, 2])\n  %a = add.Tensor(%x, %q)\n"
      "  %v = input() : f32[8, 1, 3, 3]\n  %d = convolution(%a, %v, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 8)\n"
      "  return %d\n",
  };
  uint64_t seed = 100;
  for (const char* body : bodies) {
    SCOPED_TRACE(body);
    Graph g = parse_graph(std::string("graph t {\n") + body + "}\n");
    Generated gen = generate(g, {.channels_last = true});
    int nhwc = 0;
    for (const auto& b : gen.lowered.program.buffers)
      nhwc += b.role == loop::Buffer::Role::temporary && b.sizes.size() >= 4 && b.strides == schedule::channels_last_strides(b.sizes) &&
              b.strides != contiguous_strides(b.sizes);
    EXPECT_GE(nhwc, 2) << loop::to_string(gen.lowered.program);
    // An input over 3 (f32: 12 bytes) or 2 channels is copied with zero channels up to 4 (16
    // bytes); grouped convolutions' inputs (the depthwise one over 6) keep theirs.
    for (const auto& b : gen.lowered.program.buffers)
      if (b.name.ends_with("_input_nhwc")) {
        EXPECT_TRUE(b.sizes[1] != SymInt(3) && b.sizes[1] != SymInt(2)) << loop::to_string(gen.lowered.program);
      }
    Executable exe = compile(g, {.cache_dir = temp_cache(), .channels_last = true});
    TensorMap inputs = random_inputs(g, seed++);
    auto got = exe.run(inputs, {});
    auto want = evaluate_reference(g, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], want[i], "output " + std::to_string(i));
  }
}

// A training forward's saved activations (Graph::any_layout_outputs) move to channels-last with
// the convolutions' temporaries, and the executable says so (Executable::output_strides); an
// output of declared layout keeps it, and a copy of it (the same value returned again, without
// the mark) is laid out as declared.
TEST(ChannelsLast, OutputsOfAnyLayoutMoveWithTheConvolutions) {
  Graph g = parse_graph(
      "graph t {\n  %x = input() : f32[2, 5, 7, 6]\n  %w = input() : f32[8, 5, 3, 3]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %r = relu(%c)\n"
      "  %v = input() : f32[4, 8, 1, 1]\n  %d = convolution(%r, %v, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n"
      "  return %d, any_layout %c, any_layout %r, %r\n}\n");
  Executable exe = compile(g, {.cache_dir = temp_cache(), .channels_last = true});
  const auto strides = exe.output_strides();
  ASSERT_EQ(strides.size(), 4u);
  EXPECT_EQ(strides[0], contiguous_strides(g.meta(g.outputs[0]).sizes));
  EXPECT_EQ(strides[1], schedule::channels_last_strides(g.meta(g.outputs[1]).sizes));
  EXPECT_EQ(strides[2], schedule::channels_last_strides(g.meta(g.outputs[2]).sizes));
  EXPECT_EQ(strides[3], contiguous_strides(g.meta(g.outputs[3]).sizes));
  TensorMap inputs = random_inputs(g, 7);
  auto got = exe.run(inputs, {});
  auto want = evaluate_reference(g, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].strides(), *constant_shape(strides[i])) << i;
    testing::expect_close(got[i], want[i], "output " + std::to_string(i));
  }
  // Unmarked, the same outputs keep their declared layouts.
  g.any_layout_outputs.clear();
  const auto declared = compile(g, {.cache_dir = temp_cache(), .channels_last = true}).output_strides();
  for (size_t i = 0; i < declared.size(); ++i) EXPECT_EQ(declared[i], contiguous_strides(g.meta(g.outputs[i]).sizes)) << i;
}

}  // namespace
}  // namespace coil
