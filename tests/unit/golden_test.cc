// Golden tests of the printed loop IR and the generated C++ for one fused kernel (bias add
// feeding softmax): any change to lowering, fusion or codegen shows up here as a readable diff.
// When a change is intended, print the new text with `coil compile FILE --emit loop` (or
// `--emit code`, from the kernel on) on the graph below, and paste it here.
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "driver/compile.h"

namespace coil {
namespace {

constexpr const char* kGraph = R"(graph g {
  sym N = 4
  %x = input() : f32[N, 8]
  %b = input() : f32[8]
  %a = add.Tensor(%x, %b)
  %y = _softmax(%a, -1, false)
  return %y
}
)";

TEST(Golden, BiasSoftmaxLoopIR) {
  Generated g = generate(parse_graph(kGraph));
  EXPECT_EQ(loop::to_string(g.lowered.program), R"golden(buf0 input x: f32[N, 8] strides=[8, 1]
buf1 input b: f32[8] strides=[1]
buf2 output y: f32[N, 8] strides=[8, 1]
kernel k0_y outer=[N] inner=[8]  # from y
  reduced0 = max<f32>(add(load(buf0, r0 + 8*x0), load(buf1, r0)))
  reduced1 = sum<f32>(exp(sub(add(load(buf0, r0 + 8*x0), load(buf1, r0)), reduced0)))
  inner buf2[r0 + 8*x0] = div(exp(sub(add(load(buf0, r0 + 8*x0), load(buf1, r0)), reduced0)), reduced1)
)golden");
}

TEST(Golden, BiasSoftmaxCpuCode) {
  Generated g = generate(parse_graph(kGraph));
  ASSERT_EQ(g.source.bodies.size(), 1u);
  EXPECT_EQ(g.source.bodies[0] + "\n", R"golden(// computes %y
extern "C" void k0_y(void* const* B, const int64_t* S, int64_t* E) {
  (void)E;
  float* __restrict__ b0 = static_cast<float*>(B[0]);
  float* __restrict__ b1 = static_cast<float*>(B[1]);
  float* __restrict__ b2 = static_cast<float*>(B[2]);
  const int64_t s_N = S[0];
  #pragma omp parallel for if(8LL * s_N >= 32768)
  for (int64_t x0 = 0; x0 < s_N; ++x0) {
    float acc0 = float(-__builtin_inf());
    #pragma omp simd reduction(coil_max_float:acc0)
    for (int64_t r0 = 0; r0 < 8LL; ++r0) {
      const float t0 = b0[r0 + (8LL * x0)];
      const float t1 = b1[r0];
      const float t2 = static_cast<float>(t0 + t1);
      acc0 = coil_rt::maximum<float>(acc0, t2);
    }
    float acc1 = float(0);
    #pragma omp simd reduction(+:acc1)
    for (int64_t r0 = 0; r0 < 8LL; ++r0) {
      const float t3 = b0[r0 + (8LL * x0)];
      const float t4 = b1[r0];
      const float t5 = static_cast<float>(t3 + t4);
      const float t6 = static_cast<float>(t5 - acc0);
      const float t7 = coil_rt::exp(t6);
      acc1 += t7;
    }
    for (int64_t r0 = 0; r0 < 8LL; ++r0) {
      const float t8 = b0[r0 + (8LL * x0)];
      const float t9 = b1[r0];
      const float t10 = static_cast<float>(t8 + t9);
      const float t11 = static_cast<float>(t10 - acc0);
      const float t12 = coil_rt::exp(t11);
      const float t13 = (t12 / acc1);
      b2[r0 + (8LL * x0)] = t13;
    }
  }
}

)golden");
}

}  // namespace
}  // namespace coil
