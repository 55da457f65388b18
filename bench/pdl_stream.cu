// Does a few-row product's weight stream overlap the kernel before it? A standalone measurement
// (nvcc -O3 -arch=sm_90a bench/pdl_stream.cu -o /tmp/pdl && /tmp/pdl) of decoding's pattern: a
// chain of 22 "layers", each a small latency-bound kernel (an RMSNorm of one 2048 row) then a
// [1, 2048] x [2048, 2048]^T bf16 product (8 MiB of weights, a different weight each layer so
// nothing stays in L2), launched with programmatic dependent launch and replayed as a CUDA graph.
// The product comes in variants of what it does before griddepcontrol.wait:
//   0 nothing (loads after the wait);
//   1 asks L2 for its rows (cp.async.bulk.prefetch.L2), coil's kernel as of session 16;
//   2 copies its rows into shared memory (cp.async.bulk, an mbarrier), one block an SM;
//   3 loads its rows into registers;
//   4 loads its rows into registers after the wait (3's code otherwise: what the early start buys).
// Each is timed as a chain of products alone, of norms alone, and of both, per layer (median of
// 20 replays, CUDA events); a variant that overlaps costs less than norm + product in the chain.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "chain_timing.cuh"

constexpr int K = 2048, N = 2048, LAYERS = 22, THREADS = 256, ROWS = 16;  // rows a block
constexpr int BLOCKS = N / ROWS;                                          // 128 blocks
constexpr int PIECES = K * 2 / 16;                                        // 16-byte pieces a row

// One row of K elements: y = x * rsqrt(mean(x^2) + eps), one block.
__global__ void __launch_bounds__(1024) norm(const __nv_bfloat16* x, __nv_bfloat16* y) {
  wait_previous();
  __shared__ float part[32];
  float v[2], ss = 0.f;
  for (int i = 0; i < 2; ++i) v[i] = __bfloat162float(x[threadIdx.x * 2 + i]), ss += v[i] * v[i];
  for (int o = 16; o; o /= 2) ss += __shfl_xor_sync(~0u, ss, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  float t = part[threadIdx.x % 32];
  for (int o = 16; o; o /= 2) t += __shfl_xor_sync(~0u, t, o);
  const float r = rsqrtf(t / K + 1e-5f);
  for (int i = 0; i < 2; ++i) y[threadIdx.x * 2 + i] = __float2bfloat16(v[i] * r);
}

// y[n] = W[n, :] . x: a warp two rows, the block ROWS rows.
template <int MODE>
__global__ void __launch_bounds__(THREADS) product(const __nv_bfloat16* w, const __nv_bfloat16* x, __nv_bfloat16* y) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = blockIdx.x * ROWS + warp * 2;
  const uint4* wr[2] = {reinterpret_cast<const uint4*>(w + size_t(row0) * K), reinterpret_cast<const uint4*>(w + size_t(row0 + 1) * K)};
  uint4 held[2][PIECES / 32];
  __shared__ __align__(8) unsigned long long bar;
  if (MODE == 1 && lane < 2) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(wr[lane]), "r"(K * 2) : "memory");
  if (MODE == 2) {
    const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(ROWS * K * 2) : "memory");
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                   "l"(w + size_t(blockIdx.x) * ROWS * K), "r"(ROWS * K * 2), "r"(b)
                   : "memory");
    }
  }
  if (MODE == 4) wait_previous();
  if (MODE >= 3) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int i = 0; i < PIECES / 32; ++i) held[r][i] = wr[r][lane + 32 * i];
  }
  if (MODE != 4) wait_previous();
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  float acc[2] = {0.f, 0.f};
  if (MODE == 2) {
    __syncthreads();  // (the barrier's init seen by all)
    const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
    unsigned done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(b) : "memory");
    const uint4* s = reinterpret_cast<const uint4*>(smem) + (warp * 2) * PIECES;
#pragma unroll 4
    for (int i = 0; i < PIECES / 32; ++i) {
      const uint4 xx = xv[lane + 32 * i];
      acc[0] += dot8(s[lane + 32 * i], xx), acc[1] += dot8(s[PIECES + lane + 32 * i], xx);
    }
  } else if (MODE >= 3) {
#pragma unroll
    for (int i = 0; i < PIECES / 32; ++i) {
      const uint4 xx = xv[lane + 32 * i];
      acc[0] += dot8(held[0][i], xx), acc[1] += dot8(held[1][i], xx);
    }
  } else {
#pragma unroll 4
    for (int i = 0; i < PIECES / 32; ++i) {
      const uint4 xx = xv[lane + 32 * i];
      acc[0] += dot8(wr[0][lane + 32 * i], xx), acc[1] += dot8(wr[1][lane + 32 * i], xx);
    }
  }
  for (int r = 0; r < 2; ++r) {
    float v = acc[r];
    for (int o = 16; o; o /= 2) v += __shfl_xor_sync(~0u, v, o);
    if (lane == 0) y[row0 + r] = __float2bfloat16(v);
  }
}

int main() {
  __nv_bfloat16 *w, *x, *h;
  const size_t wbytes = size_t(N) * K * 2;
  CHECK(cudaMalloc(&w, wbytes * LAYERS));
  CHECK(cudaMalloc(&x, K * 2 * (LAYERS + 1)));
  CHECK(cudaMalloc(&h, K * 2 * (LAYERS + 1)));
  std::vector<__nv_bfloat16> host(K * (LAYERS + 1));
  for (size_t i = 0; i < host.size(); ++i) host[i] = __float2bfloat16(0.01f * float(int(i * 2654435761u % 200) - 100));
  CHECK(cudaMemcpy(x, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(w, 0x3c, wbytes * LAYERS));  // bf16 0x3c3c: 0.0115
  const int smem2 = ROWS * K * 2;
  CHECK(cudaFuncSetAttribute(product<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem2));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto chain = [&](int mode, bool norms, bool products) {  // µs a layer
    return time_chain(
        s,
        [&] {
          for (int l = 0; l < LAYERS; ++l) {
            if (norms) launch(&norm, dim3(1), dim3(1024), 0, s, 0, (const __nv_bfloat16*)(x + l * K), h + l * K);
            if (!products) continue;
            const __nv_bfloat16* wl = w + size_t(l) * N * K;
            const __nv_bfloat16* in = h + l * K;
            __nv_bfloat16* out = x + (l + 1) * K;
            switch (mode) {
              case 0: launch(&product<0>, dim3(BLOCKS), dim3(THREADS), 0, s, 0, wl, in, out); break;
              case 1: launch(&product<1>, dim3(BLOCKS), dim3(THREADS), 0, s, 0, wl, in, out); break;
              case 2: launch(&product<2>, dim3(BLOCKS), dim3(THREADS), smem2, s, 0, wl, in, out); break;
              case 3: launch(&product<3>, dim3(BLOCKS), dim3(THREADS), 0, s, 0, wl, in, out); break;
              default: launch(&product<4>, dim3(BLOCKS), dim3(THREADS), 0, s, 0, wl, in, out); break;
            }
          }
        },
        LAYERS)
        .median;
  };
  const float norms = chain(0, true, false);
  std::printf("norm alone: %.2f us a layer\n", norms);
  const char* what[] = {"loads after the wait", "L2 prefetch before", "shared memory before", "registers before", "registers after"};
  for (int mode = 0; mode < 5; ++mode) {
    const float p = chain(mode, false, true), both = chain(mode, true, true);
    std::printf("mode %d (%s): product alone %.2f us (%.2f TB/s), norm + product %.2f us, overlap %.2f us\n", mode, what[mode], p,
                wbytes / (p * 1e-6) / 1e12, both, norms + p - both);
  }
  // results checked against mode 0's
  std::vector<__nv_bfloat16> ref(K * (LAYERS + 1)), got(K * (LAYERS + 1));
  chain(0, true, true);
  CHECK(cudaMemcpy(ref.data(), x, ref.size() * 2, cudaMemcpyDeviceToHost));
  for (int mode = 1; mode < 5; ++mode) {
    CHECK(cudaMemcpy(x, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    chain(mode, true, true);
    CHECK(cudaMemcpy(got.data(), x, got.size() * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += __bfloat162float(got[i]) != __bfloat162float(ref[i]);
    std::printf("mode %d: %d elements differ from mode 0\n", mode, bad);
  }
  return 0;
}
