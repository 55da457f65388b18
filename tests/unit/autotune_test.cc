// Which loop kernels the CUDA tuner times (driver/autotune.h), without a GPU: kernels of static
// sizes moving enough bytes, not those whose buffers take a size symbol.
#include "driver/autotune.h"

#include <gtest/gtest.h>

#include "coil/coil.h"
#include "driver/compile.h"

namespace coil {
namespace {

// A kernel of static launch may read a buffer of symbolic size at data-dependent places (a
// gather from a log-softmax over [2 * N, 37]): it has no sizes to time on, and asking for them
// threw "size symbol 'N' has no value" from every CUDA compile of such a graph.
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
  ASSERT_NO_THROW(units = tuning_units(gen.lowered.program, gen.cuda, {"N"}, t.device, cache));
  std::vector<std::vector<std::string>> tuned;  // each tuned kernel's origins
  for (const auto& u : units) {
    const auto& k = std::get<loop::LoopKernel>(gen.lowered.program.kernels[gen.cuda.kernels[u.kernel].program_index]);
    tuned.push_back(k.origins);
  }
  // the static row sum over 4 MiB is tuned; the gather (static launch, symbolic source) and the
  // log-softmax (symbolic launch) are not
  EXPECT_EQ(tuned, (std::vector<std::vector<std::string>>{{"s"}}));
}

}  // namespace
}  // namespace coil
