// Can a latency-bound kernel keep memory busy for the products after it? A standalone measurement
// (nvcc -O3 -arch=sm_90a bench/prefetch_chain.cu -o /tmp/pc && /tmp/pc) of a decoding layer's
// second half at TinyLlama's shape: a kernel that reads little and waits much (a stand-in for
// the attention: 48 blocks, a chain of dependent loads and block barriers, about 5 µs), then the
// output projection ([1, 2048] x [2048, 2048]^T, 8 MiB of weights), then the MLP's gate and up
// projections ([1, 2048] x [11264, 2048]^T, 44 MiB). Each layer has its own weights (22 layers,
// 1.2 GB, nothing stays in L2 between replays). Products load their first pieces of weight
// before griddepcontrol.wait as coil's do. Variants differ in what the latency-bound kernel asks
// L2 for (cp.async.bulk.prefetch.L2, spread over its blocks) before its own work:
//   0 nothing;
//   1 the output projection's weights;
//   2 those and the first 16 MiB of the gate and up weights;
//   3 those and the first 32 MiB;
//   4 the output projection's weights and the whole gate and up weights (52 MiB).
// µs a layer, median of 20 replays of a CUDA graph with programmatic launches; the results of
// every variant are checked to be identical to variant 0's.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "chain_timing.cuh"

constexpr int K = 2048, N_O = 2048, N_UP = 11264, LAYERS = 22, THREADS = 256, ROWS = 16, PIECES = K * 2 / 16;
constexpr int WAITER_BLOCKS = 48, CHAIN = 6;

struct Prefetch {
  const unsigned char* at[2];
  size_t bytes[2];
};

// The stand-in for the attention: CHAIN rounds of a dependent load through global memory and a
// block barrier, then one value out. Before its wait it asks L2 for the prefetch's ranges, each
// block its share in pieces of at most 64 KiB.
__global__ void __launch_bounds__(256) waiter(const float* in, float* out, Prefetch p) {
  for (int r = 0; r < 2; ++r) {
    const size_t share = (p.bytes[r] / gridDim.x + 15) / 16 * 16, begin = share * blockIdx.x;
    const size_t end = p.bytes[r] < begin + share ? p.bytes[r] : begin + share;
    for (size_t at = begin + size_t(threadIdx.x) * 65536; at < end; at += size_t(blockDim.x) * 65536) {
      const unsigned n = static_cast<unsigned>(end - at < 65536 ? end - at : 65536);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.at[r] + at), "r"(n) : "memory");
    }
  }
  wait_previous();
  __shared__ float s[256];
  float v = in[blockIdx.x * 256 + threadIdx.x];
  for (int i = 0; i < CHAIN; ++i) {
    s[threadIdx.x] = v;
    __syncthreads();
    v = __ldcg(in + (int(s[(threadIdx.x + 1) % 256] * 1000.f) & 4095)) + 0.5f * v;
    __syncthreads();
  }
  out[blockIdx.x * 256 + threadIdx.x] = v;
}

// y[n] = W[n, :] . x, a warp two rows, the block ROWS rows; the rows loaded into registers before
// the wait (the weight is never written).
__global__ void __launch_bounds__(THREADS) product(const __nv_bfloat16* w, const __nv_bfloat16* x, __nv_bfloat16* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = blockIdx.x * ROWS + warp * 2;
  const uint4* wr[2] = {reinterpret_cast<const uint4*>(w + size_t(row0) * K), reinterpret_cast<const uint4*>(w + size_t(row0 + 1) * K)};
  uint4 held[2][PIECES / 32];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int i = 0; i < PIECES / 32; ++i) held[r][i] = wr[r][lane + 32 * i];
  wait_previous();
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  float acc[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < PIECES / 32; ++i) {
    const uint4 xx = xv[lane + 32 * i];
    acc[0] += dot8(held[0][i], xx), acc[1] += dot8(held[1][i], xx);
  }
  for (int r = 0; r < 2; ++r) {
    float v = acc[r];
    for (int o = 16; o; o /= 2) v += __shfl_xor_sync(~0u, v, o);
    if (lane == 0) y[row0 + r] = __float2bfloat16(v);
  }
}

int main() {
  const size_t wo_bytes = size_t(N_O) * K * 2, up_bytes = size_t(N_UP) * K * 2;
  __nv_bfloat16 *wo, *wup, *x, *y, *z;
  float *in, *out;
  CHECK(cudaMalloc(&wo, wo_bytes * LAYERS));
  CHECK(cudaMalloc(&wup, up_bytes * LAYERS));
  CHECK(cudaMalloc(&x, K * 2 * LAYERS));
  CHECK(cudaMalloc(&y, N_O * 2 * LAYERS));
  CHECK(cudaMalloc(&z, N_UP * 2 * LAYERS));
  CHECK(cudaMalloc(&in, 4096 * 4 * LAYERS + WAITER_BLOCKS * 256 * 4));
  CHECK(cudaMalloc(&out, WAITER_BLOCKS * 256 * 4 * LAYERS));
  std::vector<__nv_bfloat16> hx(size_t(K) * LAYERS);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = __float2bfloat16(0.01f * float(int(i * 2654435761u % 200) - 100));
  CHECK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  std::vector<float> hin(4096 * LAYERS + WAITER_BLOCKS * 256);
  for (size_t i = 0; i < hin.size(); ++i) hin[i] = float(i % 977) / 977.f;
  CHECK(cudaMemcpy(in, hin.data(), hin.size() * 4, cudaMemcpyHostToDevice));
  // Weights: a pattern that varies along rows and columns (bf16 0x3c00 | low bits).
  {
    std::vector<uint16_t> h(up_bytes / 2);
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(0x3c00 | ((i * 40503u) >> 7 & 0xff));
    for (int l = 0; l < LAYERS; ++l) {
      CHECK(cudaMemcpy(reinterpret_cast<unsigned char*>(wup) + l * up_bytes, h.data(), up_bytes, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(reinterpret_cast<unsigned char*>(wo) + l * wo_bytes, h.data() + l, wo_bytes, cudaMemcpyHostToDevice));
    }
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t up_part[5] = {0, 0, size_t(16) << 20, size_t(32) << 20, up_bytes};
  auto chain = [&](int variant, bool waiters, bool products) {  // µs a layer
    return time_chain(
        s,
        [&] {
          for (int l = 0; l < LAYERS; ++l) {
            const unsigned char* wol = reinterpret_cast<const unsigned char*>(wo) + l * wo_bytes;
            const unsigned char* wupl = reinterpret_cast<const unsigned char*>(wup) + l * up_bytes;
            Prefetch p{{wol, wupl}, {variant >= 1 ? wo_bytes : 0, up_part[variant]}};
            if (waiters) launch(&waiter, dim3(WAITER_BLOCKS), dim3(256), 0, s, 0, (const float*)(in + l * 4096), out + l * WAITER_BLOCKS * 256, p);
            if (!products) continue;
            launch(&product, dim3(N_O / ROWS), dim3(THREADS), 0, s, 0, (const __nv_bfloat16*)(wo + size_t(l) * N_O * K),
                   (const __nv_bfloat16*)(x + l * K), y + l * N_O);
            launch(&product, dim3(N_UP / ROWS), dim3(THREADS), 0, s, 0, (const __nv_bfloat16*)(wup + size_t(l) * N_UP * K),
                   (const __nv_bfloat16*)(x + l * K), z + l * N_UP);
          }
        },
        LAYERS)
        .median;
  };
  const float w0 = chain(0, true, false), p0 = chain(0, false, true);
  std::printf("waiter alone %.2f us a layer; products alone %.2f us (%.2f TB/s over %.1f MiB)\n", w0, p0,
              (wo_bytes + up_bytes) / (p0 * 1e-6) / 1e12, (wo_bytes + up_bytes) / 1048576.0);
  const char* what[] = {"nothing", "the output projection's weights", "+ 16 MiB of gate and up", "+ 32 MiB of gate and up",
                        "+ all of gate and up"};
  std::vector<__nv_bfloat16> ref(size_t(N_UP) * LAYERS), got(ref.size());
  for (int v = 0; v < 5; ++v) {
    const float w = chain(v, true, false), both = chain(v, true, true);
    CHECK(cudaMemcpy(got.data(), z, got.size() * 2, cudaMemcpyDeviceToHost));
    if (v == 0) ref = got;
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += __bfloat162float(got[i]) != __bfloat162float(ref[i]);
    std::printf("variant %d (prefetch %s): waiter alone %.2f us, layer %.2f us (%.2f TB/s of weights), %d outputs differ\n", v, what[v], w,
                both, (wo_bytes + up_bytes) / (both * 1e-6) / 1e12, bad);
  }
  return 0;
}
