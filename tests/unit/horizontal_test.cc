// Horizontal kernels without a GPU: which steps group (independent small pointwise kernels; not
// a step count's update beside the updates that read it), the group's kernel built with NVRTC,
// and groups turned off where the outputs the adapter computes over inputs make members depend
// on each other. tests/unit/cuda_gpu_test.cc runs grouped plans on the device.
#include <gtest/gtest.h>

#include <algorithm>

#include "build/nvrtc.h"
#include "cuda_test_util.h"
#include "codegen/cuda/horizontal.h"
#include "coil/coil.h"
#include "driver/compile.h"
#include "driver/horizontal_groups.h"
#include "runtime/cuda/gpu_plan.h"

namespace coil {
namespace {

// An AdamW-like step of three parameters: each parameter's update reads its own state and the
// shared step count, whose update comes last.
const char* kUpdates =
    "graph t {\n"
    "  %step = input() : f32[]\n"
    "  %p0 = input() : f32[768]\n  %g0 = input() : f32[768]\n  %m0 = input() : f32[768]\n"
    "  %p1 = input() : f32[64, 48]\n  %g1 = input() : f32[64, 48]\n  %m1 = input() : f32[64, 48]\n"
    "  %p2 = input() : f32[768]\n  %g2 = input() : f32[768]\n  %m2 = input() : f32[768]\n"
    "  %s1 = add.Scalar(%step, other=1)\n"
    "  %a0 = mul.Scalar(%m0, other=0.9)\n  %n0 = add.Tensor(%a0, %g0)\n  %d0 = mul.Tensor(%n0, %s1)\n  %q0 = sub.Tensor(%p0, %d0)\n"
    "  %a1 = mul.Scalar(%m1, other=0.9)\n  %n1 = add.Tensor(%a1, %g1)\n  %d1 = mul.Tensor(%n1, %s1)\n  %q1 = sub.Tensor(%p1, %d1)\n"
    "  %a2 = mul.Scalar(%m2, other=0.9)\n  %n2 = add.Tensor(%a2, %g2)\n  %d2 = mul.Tensor(%n2, %s1)\n  %q2 = sub.Tensor(%p2, %d2)\n"
    "  return %q0, %n0, %q1, %n1, %q2, %n2, %s1\n"
    "}\n";

struct Grouped {
  Generated gen;
  MemoryPlan memory;
  std::vector<std::vector<size_t>> groups;
  std::vector<const codegen::CudaKernel*> plain;
};

Grouped grouped(const std::string& text) {
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  Grouped g{generate(parse_graph(text), t), {}, {}, {}};
  g.memory = plan_memory(g.gen.lowered);
  g.plain.assign(g.gen.lowered.program.kernels.size(), nullptr);
  for (const auto& k : g.gen.cuda.kernels) g.plain[k.program_index] = &k;
  g.groups = horizontal_groups(g.gen.lowered.program, g.plain, g.memory);
  return g;
}

// The kernel of a graph's first group, with its members and their grids.
struct GroupKernel {
  std::vector<codegen::CudaKernel> members;
  std::vector<int64_t> grids;
  std::string text;
};

GroupKernel group_kernel(const Grouped& g, const std::string& name, codegen::CudaKernel& info) {
  GroupKernel out;
  std::vector<std::string> bodies;
  for (size_t k : g.groups.at(0))
    for (size_t i = 0; i < g.gen.cuda.kernels.size(); ++i)
      if (g.gen.cuda.kernels[i].program_index == k) {
        bodies.push_back(g.gen.cuda.bodies[i]);
        out.members.push_back(g.gen.cuda.kernels[i]);
        out.grids.push_back(codegen::static_grid(g.gen.cuda.kernels[i]));
      }
  out.text = codegen::emit_horizontal_kernel(name, bodies, out.members, out.grids, info);
  return out;
}

// The step of each parameter's update groups with the others'; the step count's update, which
// they read and the adapter computes over its input, does not join them.
TEST(Horizontal, ParameterUpdatesGroupWithoutTheStepCount) {
  Grouped g = grouped(kUpdates);
  const auto& kernels = g.gen.lowered.program.kernels;
  std::string names;
  for (const auto& k : kernels) names += std::get<loop::LoopKernel>(k).name + " ";
  ASSERT_EQ(g.groups.size(), 1u) << names;
  // Every kernel of the graph is a member but the step count's (p0's and p2's updates, of one
  // shape, are sibling stores of one kernel).
  EXPECT_EQ(g.groups[0].size(), kernels.size() - 1) << names;
  for (size_t k : g.groups[0]) {
    const auto& lk = std::get<loop::LoopKernel>(kernels[k]);
    EXPECT_GE(lk.stores.size(), 2u) << lk.name;  // a parameter and its moment
    EXPECT_EQ(lk.stores.size() % 2, 0u) << lk.name;
  }
}

// Members of other shapes and dtypes share one group where their blocks are of one size (the
// graph CudaGpu.HorizontalGroupsMatchTheReference runs).
TEST(Horizontal, ShapesAndDtypesMix) {
  Grouped g = grouped(
      "graph t {\n  %step = input() : f32[]\n  %p0 = input() : f32[768]\n  %g0 = input() : f32[768]\n  %p1 = input() : f32[33, 48]\n"
      "  %g1 = input() : f32[33, 48]\n  %p2 = input() : bf16[1000]\n  %g2 = input() : bf16[1000]\n  %s1 = add.Scalar(%step, other=1)\n"
      "  %d0 = mul.Tensor(%g0, %s1)\n  %q0 = sub.Tensor(%p0, %d0)\n  %d1 = mul.Tensor(%g1, %s1)\n  %q1 = sub.Tensor(%p1, %d1)\n"
      "  %d2 = mul.Tensor(%g2, %s1)\n  %q2 = sub.Tensor(%p2, %d2)\n  return %q0, %q1, %q2, %s1\n}\n");
  ASSERT_EQ(g.groups.size(), 1u);
  EXPECT_EQ(g.groups[0], (std::vector<size_t>{0, 1, 2}));
}

// A decoding step's attention inputs (gpt-fast's static KV cache): the key scaled by a table row
// at the position and stored into the key cache there, the value stored into its cache, the
// query scaled by the row at its own position. The two scatters (one position: a thread a point)
// and the query's kernel, each of which may fail (an index checked), are one group; each member
// writes its own status words.
const char* kCacheUpdates =
    "graph kv {\n"
    "  %x = input() : bf16[1, 768]\n  %tab = input() : bf16[40, 64]\n"
    "  %pos = input(low=0, high=40) : i64[1]\n  %qpos = input(low=0, high=40) : i64[1]\n"
    "  %kc = input() : bf16[1, 2, 40, 64]\n  %vc = input() : bf16[1, 2, 40, 64]\n"
    "  %q, %k, %v = split_with_sizes(%x, split_sizes=[512, 128, 128], dim=-1)\n"
    "  %t = index.Tensor(%tab, [%pos])\n  %tq = index.Tensor(%tab, [%qpos])\n"
    "  %k4 = view(%k, size=[1, 1, 2, 64])\n  %kt = mul.Tensor(%k4, %t)\n  %kp = permute(%kt, dims=[0, 2, 1, 3])\n"
    "  %ku = index_put(%kc, [none, none, %pos], %kp)\n"
    "  %v4 = view(%v, size=[1, 1, 2, 64])\n  %vp = permute(%v4, dims=[0, 2, 1, 3])\n"
    "  %vu = index_put(%vc, [none, none, %pos], %vp)\n"
    "  %q3 = view(%q, size=[1, 8, 64])\n  %qt = mul.Tensor(%q3, %tq)\n"
    "  return %ku, %vu, %qt\n"
    "}\n";

TEST(Horizontal, CacheScattersAndTheQueryGroup) {
  Grouped g = grouped(kCacheUpdates);
  const auto& kernels = g.gen.lowered.program.kernels;
  ASSERT_EQ(g.groups.size(), 1u);
  ASSERT_EQ(g.groups[0].size(), 3u);  // (the caches' copy before them writes what they write)
  int scatters = 0;
  for (size_t k : g.groups[0]) {
    const auto& lk = std::get<loop::LoopKernel>(kernels[k]);
    EXPECT_TRUE(loop::may_fail(lk)) << lk.name;
    if (loop::has_dynamic_stores(lk)) {
      ++scatters;
      EXPECT_EQ(g.plain[k]->config.form, codegen::CudaConfig::Form::scatter) << lk.name;
      EXPECT_EQ(g.plain[k]->config.parts, 1) << lk.name;  // one position: no parts
      EXPECT_EQ(codegen::static_grid(*g.plain[k]), 1) << lk.name;  // 128 points, a block of 128 threads
    }
  }
  EXPECT_EQ(scatters, 2);
  codegen::CudaKernel info;
  const std::string text = group_kernel(g, "k1_horizontal", info).text;
  // Member m's status words are the group's first member's plus 3 m (the steps are consecutive).
  const size_t first = g.groups[0][0];
  EXPECT_EQ(g.groups[0], (std::vector<size_t>{first, first + 1, first + 2}));
  EXPECT_NE(text.find("k1_horizontal_m0("), std::string::npos) << text;
  EXPECT_NE(text.find(", E, block - 0u"), std::string::npos) << text;
  EXPECT_NE(text.find(", E + 3, block - "), std::string::npos) << text;
  EXPECT_NE(text.find(", E + 6, block - "), std::string::npos) << text;
}

// A chain (each kernel reads what the one before wrote) and a large kernel form no group.
TEST(Horizontal, DependentOrLargeKernelsStayAlone) {
  EXPECT_TRUE(grouped("graph t {\n  %x = input() : f32[64]\n  %s = sum(%x)\n  %y = sub.Tensor(%x, %s)\n  %z = sum(%y)\n"
                      "  %w = mul.Tensor(%y, %z)\n  return %w\n}\n")
                  .groups.empty());
  EXPECT_TRUE(grouped("graph t {\n  %x = input() : f32[1048576]\n  %y = input() : f32[1048576]\n  %a = exp(%x)\n  %b = exp(%y)\n"
                      "  return %a, %b\n}\n")
                  .groups.empty());
}

// The group's kernel: each member a device function of its block range, built with NVRTC.
TEST(Horizontal, TheGroupKernelBuildsWithNvrtc) {
  Grouped g = grouped(kUpdates);
  ASSERT_EQ(g.groups.size(), 1u);
  codegen::CudaKernel info;
  const GroupKernel group = group_kernel(g, "k0_horizontal", info);
  const std::string& text = group.text;
  const std::vector<codegen::CudaKernel>& members = group.members;
  const std::vector<int64_t>& grids = group.grids;
  int64_t blocks = 0;
  for (int64_t b : grids) blocks += b;
  EXPECT_EQ(*info.launch.units.constant(), blocks);
  EXPECT_EQ(info.launch.max_blocks, blocks);
  EXPECT_EQ(text.find("__global__"), text.rfind("__global__"));  // one kernel, the members device functions
  EXPECT_EQ(text.find("blockIdx.x"), text.rfind("blockIdx.x"));  // read once, by the group
  // Parameters: every member buffer once, then the status word.
  std::set<int> all;
  for (const auto& m : members) all.insert(m.buffers.begin(), m.buffers.end());
  EXPECT_EQ(info.buffers.size(), all.size());
  std::shared_ptr<const build::Nvrtc> nvrtc;
  try {
    nvrtc = build::Nvrtc::load();
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC is not available here: " << e.what();
  }
  build::CudaBuildOptions options{.cache = build::ArtifactCache(testing::TempDir() + "/horizontal"), .nvrtc = nvrtc,
                                  .nvrtc_version = nvrtc->version(), .arch = "sm_90a"};
  EXPECT_FALSE(build::compile_cubin(g.gen.cuda.prelude + text, options).empty());
}

// The adapter's outputs computed over inputs: a parameter's update over its own parameter keeps
// its group; an output over an input another member reads turns the group off.
TEST(Horizontal, OutputsOverInputsTurnAGroupOffWhereMembersWouldRace) {
  Grouped g = grouped(kUpdates);
  ASSERT_EQ(g.groups.size(), 1u);
  GpuPlan plan;
  plan.lowered = g.gen.lowered;
  plan.memory = g.memory;
  plan.horizontals.push_back({g.groups[0], nullptr, {}, true});
  const size_t outputs = g.gen.lowered.output_buffers.size();
  // inputs: step, p0, g0, m0, p1, g1, m1, p2, g2, m2; outputs q0, n0, q1, n1, q2, n2, s1
  plan.output_over_input = {1, 3, 4, 6, 7, 9, 0};
  ASSERT_EQ(plan.output_over_input.size(), outputs);
  plan.enable_horizontals();
  EXPECT_TRUE(plan.horizontals[0].on);  // each update over its own state; the step count is not a member
  plan.output_over_input = {1, 3, 4, 6, 8, 9, -1};  // q2 over g2, which its own member reads: still independent
  plan.enable_horizontals();
  EXPECT_TRUE(plan.horizontals[0].on);
  plan.output_over_input = {4, -1, -1, -1, -1, -1, -1};  // q0 over p1, which the second member reads
  plan.enable_horizontals();
  EXPECT_FALSE(plan.horizontals[0].on);
}

// The cache updates' group on the device: against the interpreter, with the caches updated in
// place (their outputs computed over the inputs), and a failing member reported as its own.
TEST(CudaGpu, HorizontalCacheUpdatesMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  Graph g = parse_graph(kCacheUpdates);
  Executable exe = compile(g, {.cache_dir = fresh_cache("horizontal_cache"), .device = "cuda", .autotune = false});
  ASSERT_EQ(exe.gpu_plan->horizontals.size(), 1u) << exe.source;
  EXPECT_EQ(exe.gpu_plan->horizontals[0].steps.size(), 3u);
  // Host inputs, then device inputs with the caches updated in place (their outputs computed
  // over the inputs: the run returns them undefined, the caches written).
  OnDevice dev{*exe.gpu_plan->context, {}};
  for (bool in_place : {false, true}) {
    if (in_place) {
      EXPECT_EQ(exe.compute_outputs_in_inputs({4, 5, -1}), (std::vector<int>{4, 5, -1}));
    }
    EXPECT_TRUE(exe.gpu_plan->horizontals[0].on);
    for (uint64_t seed : {1, 2}) {
      const TensorMap host = random_inputs(g, seed);
      auto want = evaluate_reference(g, host);
      TensorMap inputs;
      for (const auto& [name, t] : host) inputs.emplace(name, in_place ? dev.put(t) : t.contiguous_copy());
      auto got = exe.run(inputs);
      ASSERT_EQ(got.size(), 3u);
      const std::string what = fmt::format("in place {} seed {}", in_place, seed);
      EXPECT_EQ(got[0].defined(), !in_place) << what;
      EXPECT_EQ(got[1].defined(), !in_place) << what;
      expect_close(in_place ? dev.get(inputs.at("kc")) : got[0], want[0], what + " keys");
      expect_close(in_place ? dev.get(inputs.at("vc")) : got[1], want[1], what + " values");
      expect_close(in_place ? dev.get(got[2]) : got[2], want[2], what + " query");
    }
  }
  // The query's position out of bounds: the error names the query's kernel, not the group's first.
  TensorMap inputs = random_inputs(g, 3);
  inputs.at("qpos").store_int(0, 40);
  try {
    exe.run(inputs);
    exe.synchronize();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("index 40 is out of bounds for a dimension of size 40"), std::string::npos) << message;
    EXPECT_NE(message.find("%qt"), std::string::npos) << message;
    EXPECT_EQ(message.find("%ku"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace coil
