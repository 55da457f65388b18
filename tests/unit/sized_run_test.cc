#include "runtime/cuda/sized_run.h"

#include <gtest/gtest.h>

#include "coil/coil.h"
#include "driver/compile.h"
#include "runtime/plan.h"

namespace coil {
namespace {

// A graph of one size symbol generated for sm_90a: its program, and per program kernel the
// launch description and a stand-in function (a loop kernel's; none for a library call).
struct Sized {
  Generated gen;
  std::vector<void*> functions;
  std::vector<codegen::CudaKernel> kernels;
};

Sized generate_sized() {
  const char* text =
      "graph t {\n  sym N = 64\n  %x = input() : f32[N, 48]\n  %w = input() : f32[48, 40]\n  %r = relu(%x)\n"
      "  %m = mm(%r, %w)\n  %s = sum.dim_IntList(%m, [1])\n  return %s\n}\n";
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  Sized s{generate(parse_graph(text), t), {}, {}};
  const size_t nk = s.gen.lowered.program.kernels.size();
  s.functions.assign(nk, nullptr);
  s.kernels.resize(nk);
  for (const codegen::CudaKernel& k : s.gen.cuda.kernels) {
    s.kernels[k.program_index] = k;
    s.functions[k.program_index] = reinterpret_cast<void*>(uintptr_t{0x1000} + k.program_index);
  }
  return s;
}

// Every buffer's layout and bytes and every loop kernel's work units are the program's
// expressions at the given values; a library call has no launch; a kernel with a variant for the
// values' size bucket launches the variant.
TEST(SizedRun, EvaluatesEveryBufferAndLaunchAtTheGivenSizes) {
  Sized s = generate_sized();
  const loop::Program& p = s.gen.lowered.program;
  const std::vector<SymbolDecl>& symbols = s.gen.graph.symbols;
  ASSERT_EQ(symbols.size(), 1u);
  size_t loop_kernel = p.kernels.size(), library_call = p.kernels.size();
  for (size_t k = 0; k < p.kernels.size(); ++k) (s.functions[k] ? loop_kernel : library_call) = k;
  ASSERT_LT(loop_kernel, p.kernels.size());
  ASSERT_LT(library_call, p.kernels.size()) << "the product should be cuBLASLt's";
  std::vector<std::vector<SizedVariant>> variants(p.kernels.size());
  SizedVariant variant{codegen::size_bucket(s.kernels[loop_kernel], {300}), reinterpret_cast<void*>(uintptr_t{0xbeef}),
                       s.kernels[loop_kernel]};
  variant.info.launch.block_x = 32;
  variants[loop_kernel].push_back(variant);
  ASSERT_EQ(variant.bucket, (std::vector<int64_t>{512}));

  for (int64_t n : {1, 7, 300, 513}) {
    SCOPED_TRACE(n);
    const SizedRun r = evaluate_sized_run(p, symbols, {n}, s.functions, s.kernels, variants);
    EXPECT_EQ(r.values, (std::vector<int64_t>{n}));
    const std::map<std::string, int64_t> at{{symbols[0].name, n}};
    EXPECT_EQ(r.symbols, at);
    ASSERT_EQ(r.buffers.size(), p.buffers.size());
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      EXPECT_EQ(r.buffers[b].sizes, eval_all(p.buffers[b].sizes, at)) << p.buffers[b].name;
      EXPECT_EQ(r.buffers[b].strides, eval_all(p.buffers[b].strides, at)) << p.buffers[b].name;
      EXPECT_EQ(r.buffers[b].offset, p.buffers[b].offset.eval(at));
      EXPECT_EQ(r.buffers[b].elements, buffer_elements(p.buffers[b], at));
      EXPECT_EQ(r.buffers[b].bytes, buffer_bytes(p.buffers[b], at));
    }
    const auto input = static_cast<size_t>(s.gen.lowered.input_buffers[0]);
    EXPECT_EQ(r.buffers[input].sizes, (Shape{n, 48}));
    EXPECT_EQ(r.buffers[input].bytes, static_cast<size_t>(n * 48 * 4));
    ASSERT_EQ(r.launches.size(), p.kernels.size());
    EXPECT_EQ(r.launches[library_call].function, nullptr);
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      if (!s.functions[k]) continue;
      const bool varied = k == loop_kernel && n > 256 && n <= 512;
      EXPECT_EQ(r.launches[k].function, varied ? variant.function : s.functions[k]) << k;
      EXPECT_EQ(r.launches[k].info, varied ? &variants[k][0].info : &s.kernels[k]) << k;
      EXPECT_EQ(r.launches[k].units, r.launches[k].info->launch.units.eval(at)) << k;
      EXPECT_GT(r.launches[k].units, 0) << k;
    }
  }
}

// The kept sets of values: one evaluation per set, the same SizedRun handed out again; beyond
// kKept sets a run's values are evaluated for it alone, each time.
TEST(SizedRun, KeepsEachSetOfValuesUpToItsBound) {
  SizedRuns runs;
  int evaluated = 0;
  auto evaluate = [&](const std::vector<int64_t>& v) {
    ++evaluated;
    SizedRun r;
    r.values = v;
    return r;
  };
  auto first = runs.at({3}, evaluate);
  EXPECT_EQ(runs.at({3}, evaluate), first);
  EXPECT_EQ(evaluated, 1);
  EXPECT_EQ(runs.at({4}, evaluate)->values, (std::vector<int64_t>{4}));
  EXPECT_EQ(evaluated, 2);
  for (int64_t v = 100; static_cast<size_t>(evaluated) < SizedRuns::kKept; ++v) runs.at({v}, evaluate);
  const int full = evaluated;
  auto beyond = runs.at({-1}, evaluate);
  EXPECT_EQ(beyond->values, (std::vector<int64_t>{-1}));
  EXPECT_NE(runs.at({-1}, evaluate), beyond);
  EXPECT_EQ(evaluated, full + 2);
  EXPECT_EQ(runs.at({3}, evaluate), first);  // (the kept ones stay)
  EXPECT_EQ(evaluated, full + 2);
}

}  // namespace
}  // namespace coil
