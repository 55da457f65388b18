// Matrix products of a few rows as coil's own kernel (codegen/cuda/cuda_gemv.cc): which products
// take it (and which stay with cuBLASLt), every candidate configuration building with NVRTC, and
// on a GPU every candidate against the interpreter: odd N and K (the last warp's rows and the K
// tail), tensor cores (f16/bf16 in 16-byte pieces, up to 16 rows) and FMAs (f32, single
// elements), transposed A, each epilogue and dtype.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>

#include "build/nvrtc.h"
#include "coil/coil.h"
#include "runtime/cuda/gpu_plan.h"
#include "driver/compile.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace coil {
namespace {

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + body + "}\n"); }

Generated cuda_code(const std::string& body) {
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  return generate(parse(body), t);
}

// Each case: a graph whose product takes the kernel, and the 16-byte piece it reads in (elements).
struct Case {
  const char* body;
  int vector;
};
const Case kCases[] = {
    // decoding's projection: one row, nn.Linear's weight; N not a multiple of a block's outputs,
    // K not of a warp's 256-element reads
    {"  %x = input() : bf16[1, 200]\n  %w = input() : bf16[300, 200]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n", 8},
    // a bias and relu, f16, 3 rows
    {"  %x = input() : f16[3, 264]\n  %w = input() : f16[70, 264]\n  %b = input() : f16[70]\n  %wt = permute(%w, [1, 0])\n"
     "  %h = addmm(%b, %x, %wt)\n  %r = relu(%h)\n  return %r\n",
     8},
    // tanh-GELU with a bias, bf16, 8 rows from a [2, 4, K] activation (a batch of 2 sequences of 4)
    {"  %x = input() : bf16[2, 4, 512]\n  %w = input() : bf16[129, 512]\n  %b = input() : bf16[129]\n  %xv = view(%x, [8, 512])\n"
     "  %wt = permute(%w, [1, 0])\n  %h = addmm(%b, %xv, %wt)\n  %g = gelu(%h, approximate=\"tanh\")\n  %y = view(%g, [2, 4, 129])\n"
     "  return %y\n",
     8},
    // a residual added, f32 (pieces of 4), 8 rows, alpha
    {"  %x = input() : f32[8, 1000]\n  %w = input() : f32[1001, 1000]\n  %r = input() : f32[8, 1001]\n  %wt = permute(%w, [1, 0])\n"
     "  %h = mm(%x, %wt)\n  %y = add.Tensor(%h, %r)\n  return %y\n",
     4},
    {"  %x = input() : f32[2, 96]\n  %w = input() : f32[33, 96]\n  %b = input() : f32[33]\n  %wt = permute(%w, [1, 0])\n"
     "  %y = addmm(%b, %x, %wt, alpha=0.5)\n  return %y\n",
     4},
    // K odd: single elements; one output
    {"  %x = input() : bf16[5, 203]\n  %w = input() : bf16[77, 203]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n", 1},
    {"  %x = input() : bf16[2, 4096]\n  %w = input() : bf16[1, 4096]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n", 8},
    // A transposed (its rows apart by one element): single elements
    {"  %x = input() : f16[64, 4]\n  %xt = permute(%x, [1, 0])\n  %w = input() : f16[40, 64]\n  %wt = permute(%w, [1, 0])\n"
     "  %y = mm(%xt, %wt)\n  return %y\n",
     1},
    // 16 and 12 rows on tensor cores: A's rows 8..15 in the mma's upper half
    {"  %x = input() : bf16[16, 320]\n  %w = input() : bf16[100, 320]\n  %r = input() : bf16[16, 100]\n  %wt = permute(%w, [1, 0])\n"
     "  %h = mm(%x, %wt)\n  %y = add.Tensor(%h, %r)\n  return %y\n",
     8},
    {"  %x = input() : f16[12, 200]\n  %w = input() : f16[300, 200]\n  %b = input() : f16[300]\n  %wt = permute(%w, [1, 0])\n"
     "  %h = addmm(%b, %x, %wt)\n  %g = gelu(%h, approximate=\"tanh\")\n  return %g\n",
     8},
    // a long K (a down projection) over few outputs: warps split K
    {"  %x = input() : bf16[1, 5632]\n  %w = input() : bf16[64, 5632]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n", 8},
    // epilogues (schedule/fuse_gemv_epilogues.h): a Llama MLP's gate, silu(x W1^T) * (x W3^T), one
    // row, N odd; the same over 12 rows (tensor cores) in f16
    {"  %x = input() : bf16[1, 512]\n  %w1 = input() : bf16[301, 512]\n  %w3 = input() : bf16[301, 512]\n  %w1t = permute(%w1, [1, 0])\n"
     "  %w3t = permute(%w3, [1, 0])\n  %a = mm(%x, %w1t)\n  %b = mm(%x, %w3t)\n  %s = silu(%a)\n  %y = mul.Tensor(%s, %b)\n  return %y\n",
     8},
    {"  %x = input() : f16[12, 264]\n  %w1 = input() : f16[70, 264]\n  %w3 = input() : f16[70, 264]\n  %w1t = permute(%w1, [1, 0])\n"
     "  %w3t = permute(%w3, [1, 0])\n  %a = mm(%x, %w1t)\n  %b = mm(%x, %w3t)\n  %g = gelu(%b)\n  %y = mul.Tensor(%a, %g)\n  return %y\n",
     8},
    // a norm computing A: an RMSNorm, then the gated pair (a Llama layer's MLP at one row); a
    // LayerNorm over 4 rows before an addmm with tanh-GELU, f16
    {"  %h = input() : bf16[1, 1, 512]\n  %nw = input() : bf16[512]\n  %w1 = input() : bf16[301, 512]\n  %w3 = input() : bf16[301, 512]\n"
     "  %hf = _to_copy(%h, dtype=f32)\n  %sq = pow.Tensor_Scalar(%hf, 2)\n  %ms = mean.dim(%sq, [-1], true)\n  %e = add.Scalar(%ms, 1e-05)\n"
     "  %rs = rsqrt(%e)\n  %n = mul.Tensor(%hf, %rs)\n  %nb = _to_copy(%n, dtype=bf16)\n  %x3 = mul.Tensor(%nb, %nw)\n  %x = view(%x3, [1, 512])\n"
     "  %w1t = permute(%w1, [1, 0])\n  %w3t = permute(%w3, [1, 0])\n  %a = mm(%x, %w1t)\n  %b = mm(%x, %w3t)\n  %s = silu(%a)\n"
     "  %y = mul.Tensor(%s, %b)\n  return %y\n",
     8},
    {"  %h = input() : f16[4, 320]\n  %g = input() : f16[320]\n  %c = input() : f16[320]\n  %w = input() : f16[200, 320]\n  %bias = input() : f16[200]\n"
     "  %x, %mu, %rstd = native_layer_norm(%h, [320], %g, %c, 1e-05)\n  %wt = permute(%w, [1, 0])\n  %y0 = addmm(%bias, %x, %wt)\n"
     "  %y = gelu(%y0, approximate=\"tanh\")\n  return %y\n",
     8},
    // prologues (schedule/fuse_gemv_prologues.h): an RMSNorm over 8 rows of f16 before an addmm
    // with tanh-GELU (tensor cores); a softmax (two reductions) over 3 rows before an mm; an f32
    // RMSNorm of odd K (single elements); decoding's token of 2048 normed before its projection
    {"  %h = input() : f16[8, 264]\n  %nw = input() : f16[264]\n  %w = input() : f16[90, 264]\n  %bias = input() : f16[90]\n"
     "  %hf = _to_copy(%h, dtype=f32)\n  %sq = pow.Tensor_Scalar(%hf, 2)\n  %ms = mean.dim(%sq, [-1], true)\n  %e = add.Scalar(%ms, 1e-05)\n"
     "  %rs = rsqrt(%e)\n  %n = mul.Tensor(%hf, %rs)\n  %nb = _to_copy(%n, dtype=f16)\n  %x = mul.Tensor(%nb, %nw)\n  %wt = permute(%w, [1, 0])\n"
     "  %y0 = addmm(%bias, %x, %wt)\n  %y = gelu(%y0, approximate=\"tanh\")\n  return %y\n",
     8},
    {"  %h = input() : bf16[3, 200]\n  %x = _softmax(%h, -1, false)\n  %w = input() : bf16[77, 200]\n  %wt = permute(%w, [1, 0])\n"
     "  %y = mm(%x, %wt)\n  return %y\n",
     8},
    {"  %h = input() : f32[2, 203]\n  %nw = input() : f32[203]\n  %w = input() : f32[45, 203]\n  %sq = pow.Tensor_Scalar(%h, 2)\n"
     "  %ms = mean.dim(%sq, [-1], true)\n  %e = add.Scalar(%ms, 1e-05)\n  %rs = rsqrt(%e)\n  %n = mul.Tensor(%h, %rs)\n  %x = mul.Tensor(%n, %nw)\n"
     "  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n",
     1},
    {"  %h = input() : bf16[1, 2048]\n  %nw = input() : bf16[2048]\n  %w = input() : bf16[200, 2048]\n  %hf = _to_copy(%h, dtype=f32)\n"
     "  %sq = pow.Tensor_Scalar(%hf, 2)\n  %ms = mean.dim(%sq, [-1], true)\n  %e = add.Scalar(%ms, 1e-05)\n  %rs = rsqrt(%e)\n"
     "  %n = mul.Tensor(%hf, %rs)\n  %nb = _to_copy(%n, dtype=bf16)\n  %x = mul.Tensor(%nb, %nw)\n  %wt = permute(%w, [1, 0])\n"
     "  %y = mm(%x, %wt)\n  return %y\n",
     8},
    // one product's erf-GELU with a bias row and a residual read by the epilogue, f32, 3 rows
    {"  %x = input() : f32[3, 200]\n  %w = input() : f32[90, 200]\n  %c = input() : f32[90]\n  %r = input() : f32[3, 90]\n"
     "  %wt = permute(%w, [1, 0])\n  %h = mm(%x, %wt)\n  %hc = add.Tensor(%h, %c)\n  %g = gelu(%hc)\n  %y = add.Tensor(%g, %r)\n  return %y\n",
     4},
};

TEST(CudaGemv, FewRowsTakeTheKernelAndEveryCandidateBuilds) {
  std::shared_ptr<const build::Nvrtc> nvrtc;
  try {
    nvrtc = build::Nvrtc::load();
  } catch (const Error&) {
  }
  for (const Case& c : kCases) {
    Generated gen = cuda_code(c.body);
    const auto& program = gen.lowered.program;
    size_t products = 0;
    for (size_t i = 0; i < program.kernels.size(); ++i) {
      const auto* call = std::get_if<loop::ExternCall>(&program.kernels[i]);
      if (!call || !loop::is_product(call->kind)) continue;
      ++products;
      auto configs = codegen::gemv_configs(program, *call, cuda::preset_device("sm_90a"));
      ASSERT_FALSE(configs.empty()) << c.body << loop::to_string(program);
      for (const auto& config : configs) {
        EXPECT_EQ(config.form, codegen::CudaConfig::Form::gemv);
        EXPECT_EQ(config.vector, c.vector) << c.body;
      }
      // The generated source launches it as a kernel of its own.
      bool emitted = false;
      for (const auto& k : gen.cuda.kernels) emitted = emitted || k.program_index == i;
      EXPECT_TRUE(emitted) << c.body;
      // Every candidate in one unit, built as the compiler builds them.
      std::string unit = gen.cuda.prelude;
      for (size_t n = 0; n < configs.size(); ++n) {
        codegen::CudaKernel info;
        loop::ExternCall named = *call;
        named.name = fmt::format("gemv_c{}", n);
        unit += codegen::emit_cuda_gemv(program, named, configs[n], info) + "\n";
        EXPECT_EQ(info.launch.block_x, 256);
        const loop::Access access = loop::access(*call);
        std::set<int> buffers = access.reads;
        buffers.insert(access.writes.begin(), access.writes.end());
        EXPECT_EQ(info.buffers.size(), buffers.size());
      }
      if (!nvrtc) continue;
      for (const char* arch : {"sm_80", "sm_90a"}) {
        build::CudaBuildOptions options{.cache = build::ArtifactCache(::testing::TempDir() + "/cuda_gemv"), .nvrtc = nvrtc,
                                        .nvrtc_version = nvrtc->version(), .arch = arch};
        EXPECT_FALSE(build::compile_cubin(unit, options).empty()) << arch << c.body;
      }
    }
    EXPECT_EQ(products, 1u) << c.body;
  }
  if (!nvrtc) GTEST_SKIP() << "NVRTC is not available here: which products take the kernel was checked, the builds were not";
}

// cuBLASLt keeps: more rows (17 on tensor cores, 9 in f32), B laid out along N (rows of the weight across memory), a batch,
// symbolic sizes.
TEST(CudaGemv, OtherProductsStayWithTheLibrary) {
  const char* bodies[] = {
      "  %x = input() : bf16[17, 256]\n  %w = input() : bf16[64, 256]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n",
      "  %x = input() : f32[9, 256]\n  %w = input() : f32[64, 256]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n  return %y\n",
      "  %x = input() : bf16[1, 256]\n  %w = input() : bf16[256, 64]\n  %y = mm(%x, %w)\n  return %y\n",
      "  %x = input() : bf16[3, 1, 256]\n  %w = input() : bf16[3, 256, 64]\n  %y = bmm(%x, %w)\n  return %y\n",
      "  sym B = 1\n  %x = input() : bf16[B, 256]\n  %w = input() : bf16[64, 256]\n  %wt = permute(%w, [1, 0])\n  %y = mm(%x, %wt)\n"
      "  return %y\n",
  };
  for (const char* body : bodies) {
    Generated gen = cuda_code(body);
    const auto& program = gen.lowered.program;
    for (const auto& k : program.kernels) {
      const auto* call = std::get_if<loop::ExternCall>(&k);
      if (!call || !loop::is_product(call->kind)) continue;
      EXPECT_TRUE(codegen::gemv_configs(program, *call, cuda::preset_device("sm_90a")).empty()) << body;
    }
    for (const auto& k : gen.cuda.kernels) EXPECT_NE(k.config.form, codegen::CudaConfig::Form::gemv) << body;
  }
}

TEST(CudaGemvGpu, EveryCandidateMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string cache = fresh_cache("gemv");
  for (const Case& c : kCases) {
    Graph g = parse(c.body);
    TensorMap inputs = random_inputs(g, 11);
    auto want = evaluate_reference(g, inputs);
    // Every candidate (as many as on an sm_90a preset), then the tuner's choice.
    int count = 0;
    Generated gen = cuda_code(c.body);
    for (const auto& k : gen.lowered.program.kernels)
      if (const auto* call = std::get_if<loop::ExternCall>(&k))
        count = std::max(count, static_cast<int>(codegen::gemv_configs(gen.lowered.program, *call, cuda::preset_device("sm_90a")).size()));
    for (int candidate = 0; candidate <= count; ++candidate) {
      CompileOptions options{.cache_dir = cache, .device = "cuda", .cuda_candidate = candidate < count ? candidate : -1};
      Executable exe = compile(g, options);
      auto got = exe.run(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], fmt::format("{}candidate {} output {}", c.body, candidate, i));
    }
  }
}

// The tuner times the kernel's candidates against cuBLASLt's call and keeps the faster: both
// choices compute the product, and a second compile reads the choice from the tuning cache.
// (On an H200, one row: coil's kernel, 1.1-1.6x faster; eight rows over large weights: cuBLASLt's
// tensor cores.)
TEST(CudaGemvGpu, TunedAgainstTheLibraryThenReadFromTheCache) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::string cache = fresh_cache("gemv_rival");
  for (int rows : {1, 8}) {
    Graph g = parse(fmt::format("  %x = input() : bf16[{}, 4096]\n  %w = input() : bf16[4096, 4096]\n  %wt = permute(%w, [1, 0])\n"
                                "  %y = mm(%x, %wt)\n  return %y\n",
                                rows));
    TensorMap inputs = random_inputs(g, 5);
    auto want = evaluate_reference(g, inputs);
    Executable cold = compile(g, {.cache_dir = cache, .device = "cuda"});
    ASSERT_EQ(cold.stats.tuned_kernels, 1) << fmt::format("{}", fmt::join(cold.stats.tuning, "\n"));
    EXPECT_NE(cold.stats.tuning.front().find("cuBLASLt"), std::string::npos) << cold.stats.tuning.front();
    Executable warm = compile(g, {.cache_dir = cache, .device = "cuda"});
    EXPECT_EQ(warm.stats.tuned_kernels, 0);
    EXPECT_EQ(warm.stats.tuning_cache_hits, 1);
    EXPECT_EQ(warm.gpu_plan->functions[0] != nullptr, cold.gpu_plan->functions[0] != nullptr);
    for (const Executable* exe : {&cold, &warm}) expect_close(exe->run(inputs)[0], want[0], fmt::format("{} rows", rows));
  }
}

}  // namespace
}  // namespace coil
