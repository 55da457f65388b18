// Sibling fusion without a common input (schedule/fuse_siblings.h): independent pointwise
// updates of same-shaped parameters merge where their nests are launch-bound, up to a size that
// depends on the target (the CPU pays no launch).
#include <gtest/gtest.h>

#include <string>

#include "coil/coil.h"
#include "driver/compile.h"
#include "runtime/cuda/device_info.h"

namespace coil {
namespace {

// Two parameters' updates, each reading its own parameter, gradient and step size.
std::string updates(const std::string& shape) {
  return "graph t {\n  %t0 = input() : f32[]\n  %t1 = input() : f32[]\n  %p0 = input() : f32" + shape + "\n  %g0 = input() : f32" + shape +
         "\n  %p1 = input() : f32" + shape + "\n  %g1 = input() : f32" + shape +
         "\n  %d0 = mul.Tensor(%g0, %t0)\n  %q0 = sub.Tensor(%p0, %d0)\n  %d1 = mul.Tensor(%g1, %t1)\n  %q1 = sub.Tensor(%p1, %d1)\n"
         "  return %q0, %q1\n}\n";
}

size_t kernels(const std::string& text, bool cuda) {
  Target t;
  t.cuda = cuda;
  if (cuda) t.device = cuda::preset_device("sm_90a");
  return generate(parse_graph(text), t).lowered.program.kernels.size();
}

TEST(FuseSiblings, IndependentUpdatesMergeWhereLaunchBound) {
  EXPECT_EQ(kernels(updates("[384]"), false), 1u);  // small: merged on either target
  EXPECT_EQ(kernels(updates("[384]"), true), 1u);
  EXPECT_EQ(kernels(updates("[1152, 384]"), true), 1u);  // a GPU launch saved
  EXPECT_EQ(kernels(updates("[1152, 384]"), false), 2u);  // the CPU keeps two kernels of few streams
  EXPECT_EQ(kernels(updates("[2048, 1024]"), true), 2u);  // past 2^20 points: memory-bound on either
}

}  // namespace
}  // namespace coil
