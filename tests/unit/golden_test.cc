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
    float acc0 = -coil_rt::inf<float>();
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

// The CUDA form of a bf16 bias add: 16-byte vector loads and stores (8 elements a thread),
// 32-bit indices, no scalar path (buffer bases are aligned: codegen::kBufferAlignment). `coil compile FILE --device cuda --arch
// sm_90a --emit code` prints it.
TEST(Golden, BiasAddCudaCode) {
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  Generated g = generate(parse_graph(R"(graph t {
  %x = input() : bf16[4, 64]
  %b = input() : bf16[64]
  %y = add.Tensor(%x, %b)
  return %y
}
)"), t);
  ASSERT_EQ(g.cuda.bodies.size(), 1u);
  EXPECT_EQ(g.cuda.bodies[0], R"golden(// computes %y (pointwise block=128 vector=8)
extern "C" __global__ void __launch_bounds__(128) k0_y(const uint16_t* __restrict__ b0, const uint16_t* __restrict__ b1, uint16_t* __restrict__ b2, int64_t* __restrict__ E) {
  coil_rt::after_previous();
  typedef int idx_t;
  (void)E;
  const idx_t n = 32;
  for (idx_t i = static_cast<idx_t>(blockIdx.x) * 128 + static_cast<idx_t>(threadIdx.x); i < n; i += static_cast<idx_t>(gridDim.x) * 128) {
    idx_t x0_rest = i;
    const idx_t x1q = x0_rest % (8);
    x0_rest /= (8);
    const idx_t x0 = x0_rest;
    const idx_t x1 = x1q * 8;
    coil_rt::Vec<uint16_t, 8> L0;
    L0 = coil_rt::load_keep(reinterpret_cast<const coil_rt::Vec<uint16_t, 8>*>(b0 + (x1 + (64 * x0))));
    coil_rt::Vec<uint16_t, 8> L1;
    L1 = coil_rt::load_keep(reinterpret_cast<const coil_rt::Vec<uint16_t, 8>*>(b1 + (x1)));
    coil_rt::Vec<uint16_t, 8> S0;
    #pragma unroll
    for (int x2 = 0; x2 < 8; ++x2) {
      const float t0 = coil_rt::bf16_to_f32(L0.v[x2]);
      const float t1 = static_cast<float>(t0);
      const float t2 = coil_rt::bf16_to_f32(L1.v[x2]);
      const float t3 = static_cast<float>(t2);
      const float t4 = static_cast<float>(t1 + t3);
      S0.v[x2] = coil_rt::f32_to_bf16(t4);
    }
    *reinterpret_cast<coil_rt::Vec<uint16_t, 8>*>(b2 + (x1 + (64 * x0))) = S0;
  }
}
)golden");
}

}  // namespace
}  // namespace coil
