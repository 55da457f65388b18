// Where does the decoding attention's time go, and which split of the keys is fastest? A
// standalone measurement (nvcc -O3 -arch=sm_90a bench/decode_attention.cu -o /tmp/da && /tmp/da)
// of decoding's attention at TinyLlama's shape: 8 query rows (the query heads of one key/value
// head) over a static cache of 384 keys, head size 64, bf16, a bool mask over the keys; 4 heads a
// token, batch 1 and 8. Each variant runs as a chain of 256 "layers" (each its own cache, 100 MB
// in all at batch 1, so that the caches come from memory as at decoding, not from L2), launched
// with programmatic dependent launch and replayed as a CUDA graph; µs a layer, median of 20.
//   current: coil's kernel as of session 17 (32 keys a block, 12 splits a head; each block
//            leaves its rows' max, sum and output in global scratch, the last to take a ticket
//            merges them);
//   ticket K: the same merge, K keys a block, the output's sum over keys spread over the warps;
//   cluster K: K keys a block, the splits of a head one thread-block cluster; each block keeps
//            its partial in shared memory and the cluster merges through distributed shared
//            memory (no global scratch, no fence, no ticket);
//   whole: one block a head (384 keys, no merge).
// Every variant's output is checked against a float reference computed on the host.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "chain_timing.cuh"

constexpr int L = 8, HD = 64, S = 384, HEADS = 4;
constexpr float kScaleLog2 = 0.125f * 1.44269504f;
using bf16 = __nv_bfloat16;

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float widen(uint16_t h) { return __uint_as_float(unsigned(h) << 16); }
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The address of `p` (this block's shared memory) in block `rank` of the cluster, and a load there.
__device__ __forceinline__ unsigned remote(const void* p, unsigned rank) {
  unsigned out, local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(local), "r"(rank));
  return out;
}
__device__ __forceinline__ float load_remote(unsigned addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

// One row of a chunk's scores (base 2) into probabilities in place, by a warp: the max (0 as the
// reference where nothing is visible) and the probabilities' sum to row_max / row_sum.
template <int KC>
__device__ __forceinline__ void row_softmax(float* scores, float* row_max, float* row_sum, int lane) {
  float mx = -INFINITY;
  for (int k = lane; k < KC; k += 32) mx = fmaxf(mx, scores[k]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
  const float ref = mx == -INFINITY ? 0.f : mx;
  float sum = 0.f;
  for (int k = lane; k < KC; k += 32) {
    const float p = exp2_approx(scores[k] - ref);
    scores[k] = p;
    sum += p;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(~0u, sum, o);
  if (lane == 0) *row_max = mx, *row_sum = sum;
}

// The merge of SPLITS chunks' rows: each chunk's max gm, output go and sum gs, rescaled to the
// overall max; the normalized output.
template <int SPLITS>
__device__ __forceinline__ float merged(const float* gm, const float* go, const float* gs) {
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < SPLITS; ++j) mx = fmaxf(mx, gm[j]);
  const float ref = mx == -INFINITY ? 0.f : mx;
  float num = 0.f, den = 0.f;
#pragma unroll
  for (int j = 0; j < SPLITS; ++j) {
    const float w = exp2_approx(gm[j] - ref);
    num = fmaf(w, go[j], num), den = fmaf(w, gs[j], den);
  }
  return den > 0.f ? num / den : 0.f;
}

struct Args {
  const uint16_t *q, *k, *v;
  const bool* mask;
  uint16_t* o;
  unsigned char* scratch;
};

// coil's kernel as of session 17, transcribed (one unit a block, the grid the units).
__global__ void __launch_bounds__(256) current(Args a) {
  wait_previous();
  constexpr int KC = 32, SPLITS = S / KC, THREADS = 256, PARTS = THREADS / KC, MINE = (L + PARTS - 1) / PARTS;
  __shared__ float qs[L][HD];
  __shared__ float ps[L][KC];
  __shared__ __align__(16) uint16_t vs[KC][HD];
  __shared__ float row_max[L], row_sum[L];
  __shared__ bool last;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  unsigned* ticket = reinterpret_cast<unsigned*>(a.scratch);
  float* pmax = reinterpret_cast<float*>(a.scratch + 256);
  float* psum = pmax + 32 * SPLITS * L;
  float* pout = psum + 32 * SPLITS * L;
  const int bh = blockIdx.x / SPLITS, split = blockIdx.x % SPLITS, k0 = split * KC;
  const size_t qb = size_t(bh) * L * HD, kb = size_t(bh) * S * HD;
  for (int i = tid; i < L * HD; i += THREADS) qs[i / HD][i % HD] = widen(a.q[qb + i]);
  const int kk = tid % KC, part = tid / KC, key = k0 + kk;
  uint4 kraw[HD / 8];
#pragma unroll
  for (int c = 0; c < HD / 8; ++c) kraw[c] = reinterpret_cast<const uint4*>(a.k + kb + size_t(key) * HD)[c];
  for (int i = tid; i < KC * HD / 8; i += THREADS)
    *reinterpret_cast<uint4*>(&vs[i / (HD / 8)][i % (HD / 8) * 8]) = reinterpret_cast<const uint4*>(a.v + kb + size_t(k0) * HD)[i];
  bool masked[MINE];
#pragma unroll
  for (int r = 0; r < MINE; ++r) masked[r] = a.mask[key];
  __syncthreads();
  float acc[MINE] = {};
#pragma unroll
  for (int d0 = 0; d0 < HD; d0 += 8) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&kraw[d0 / 8]);
#pragma unroll
    for (int r = 0; r < MINE; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r] = fmaf(qs[PARTS * r + part][d0 + j], widen(h[j]), acc[r]);
  }
#pragma unroll
  for (int r = 0; r < MINE; ++r) ps[PARTS * r + part][kk] = masked[r] ? acc[r] * kScaleLog2 : -INFINITY;
  __syncthreads();
  for (int row = warp; row < L; row += THREADS / 32) row_softmax<KC>(ps[row], &row_max[row], &row_sum[row], lane);
  __syncthreads();
  for (int i = tid; i < L * HD; i += THREADS) {
    const int r = i / HD, d = i % HD;
    float o = 0.f;
#pragma unroll 8
    for (int k = 0; k < KC; ++k) o = fmaf(ps[r][k], widen(vs[k][d]), o);
    pout[((bh * SPLITS + split) * L + r) * HD + d] = o;
  }
  if (tid < L) pmax[(bh * SPLITS + split) * L + tid] = row_max[tid], psum[(bh * SPLITS + split) * L + tid] = row_sum[tid];
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(ticket + bh, 1u) == SPLITS - 1u;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = tid; i < L * HD; i += THREADS) {
    const int r = i / HD, d = i % HD;
    float gm[SPLITS], go[SPLITS], gs[SPLITS];
#pragma unroll
    for (int j = 0; j < SPLITS; ++j) {
      const int at = (bh * SPLITS + j) * L + r;
      gm[j] = __ldcg(pmax + at), go[j] = __ldcg(pout + at * HD + d), gs[j] = __ldcg(psum + at);
    }
    a.o[qb + i] = __bfloat16_as_ushort(__float2bfloat16(merged<SPLITS>(gm, go, gs)));
  }
  if (tid == 0) ticket[bh] = 0u;
}

enum Merge { kWhole, kTicket, kCluster };

// K keys a block, THREADS threads (a multiple of K): a thread's key (registers) against its rows,
// the chunk's softmax a warp a row, the output's sum over the chunk's keys with lanes over pairs
// of the head's columns and warps over keys, then a sum over the warps; the splits merged by
// MERGE.
template <int KC, int THREADS, Merge MERGE>
__global__ void __launch_bounds__(THREADS) split(Args a) {
  constexpr int SPLITS = S / KC, WARPS = THREADS / 32, PARTS = THREADS / KC, MINE = (L + PARTS - 1) / PARTS, KPW = KC / WARPS;
  static_assert(THREADS % KC == 0 && KC % WARPS == 0 && S % KC == 0 && HD == 64 && L <= WARPS);
  extern __shared__ __align__(16) unsigned char smem[];
  float(*qs)[HD] = reinterpret_cast<float(*)[HD]>(smem);
  float(*ps)[KC] = reinterpret_cast<float(*)[KC]>(smem + L * HD * 4);
  uint16_t(*vs)[HD] = reinterpret_cast<uint16_t(*)[HD]>(smem + L * HD * 4 + L * KC * 4);
  float(*red)[L][HD] = reinterpret_cast<float(*)[L][HD]>(smem + L * HD * 4 + L * KC * 4 + KC * HD * 2);
  float* row_max = reinterpret_cast<float*>(smem + L * HD * 4 + L * KC * 4 + KC * HD * 2 + WARPS * L * HD * 4);
  float* row_sum = row_max + L;
  __shared__ bool last;
  wait_previous();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int bh = blockIdx.x / SPLITS, split = blockIdx.x % SPLITS, k0 = split * KC;
  const size_t qb = size_t(bh) * L * HD, kb = size_t(bh) * S * HD;
  const int kk = tid % KC, part = tid / KC, key = k0 + kk;
  uint4 kraw[HD / 8];
#pragma unroll
  for (int c = 0; c < HD / 8; ++c) kraw[c] = reinterpret_cast<const uint4*>(a.k + kb + size_t(key) * HD)[c];
  const bool visible = a.mask[key];
  for (int i = tid; i < KC * HD / 8; i += THREADS)
    *reinterpret_cast<uint4*>(&vs[i / (HD / 8)][i % (HD / 8) * 8]) = reinterpret_cast<const uint4*>(a.v + kb + size_t(k0) * HD)[i];
  for (int i = tid; i < L * HD / 8; i += THREADS) {
    const uint4 raw = reinterpret_cast<const uint4*>(a.q + qb)[i];
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
    for (int j = 0; j < 8; ++j) qs[0][i * 8 + j] = widen(h[j]);
  }
  __syncthreads();
  float acc[MINE] = {};
#pragma unroll
  for (int d0 = 0; d0 < HD; d0 += 8) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&kraw[d0 / 8]);
#pragma unroll
    for (int r = 0; r < MINE; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r] = fmaf(qs[PARTS * r + part][d0 + j], widen(h[j]), acc[r]);
  }
#pragma unroll
  for (int r = 0; r < MINE; ++r) ps[PARTS * r + part][kk] = visible ? acc[r] * kScaleLog2 : -INFINITY;
  __syncthreads();
  if (warp < L) row_softmax<KC>(ps[warp], &row_max[warp], &row_sum[warp], lane);
  __syncthreads();
  float a0[L] = {}, a1[L] = {};
#pragma unroll 4
  for (int j = 0; j < KPW; ++j) {
    const int k = warp * KPW + j;
    const unsigned pair = *reinterpret_cast<const unsigned*>(&vs[k][2 * lane]);
    const float v0 = __uint_as_float(pair << 16), v1 = __uint_as_float(pair & 0xffff0000u);
#pragma unroll
    for (int r = 0; r < L; ++r) a0[r] = fmaf(ps[r][k], v0, a0[r]), a1[r] = fmaf(ps[r][k], v1, a1[r]);
  }
#pragma unroll
  for (int r = 0; r < L; ++r) *reinterpret_cast<float2*>(&red[warp][r][2 * lane]) = make_float2(a0[r], a1[r]);
  __syncthreads();
  // The chunk's output (unnormalized) back into red[0].
  for (int i = tid; i < L * HD; i += THREADS) {
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) o += red[w][0][i];
    if constexpr (MERGE == kWhole) {
      const float l = row_sum[i / HD];
      a.o[qb + i] = __bfloat16_as_ushort(__float2bfloat16(l > 0.f ? o / l : 0.f));
    } else {
      red[0][0][i] = o;
    }
  }
  if constexpr (MERGE == kCluster) {
    cluster_sync();
    constexpr int PER = (L * HD + SPLITS - 1) / SPLITS;
    static_assert(PER <= THREADS);
    const int i = int(cluster_rank()) * PER + tid;
    if (tid < PER && i < L * HD) {
      const int r = i / HD;
      float gm[SPLITS], go[SPLITS], gs[SPLITS];
#pragma unroll
      for (int j = 0; j < SPLITS; ++j) {
        gm[j] = load_remote(remote(&row_max[r], j)), gs[j] = load_remote(remote(&row_sum[r], j));
        go[j] = load_remote(remote(&red[0][0][i], j));
      }
      a.o[qb + i] = __bfloat16_as_ushort(__float2bfloat16(merged<SPLITS>(gm, go, gs)));
    }
    cluster_sync();  // no block leaves while another reads its shared memory
  } else if constexpr (MERGE == kTicket) {
  unsigned* ticket = reinterpret_cast<unsigned*>(a.scratch);
  float* pmax = reinterpret_cast<float*>(a.scratch + 256);
  float* psum = pmax + 32 * SPLITS * L;
  float* pout = psum + 32 * SPLITS * L;
  __syncthreads();
  for (int i = tid; i < L * HD; i += THREADS) pout[(bh * SPLITS + split) * L * HD + i] = red[0][0][i];
  if (tid < L) pmax[(bh * SPLITS + split) * L + tid] = row_max[tid], psum[(bh * SPLITS + split) * L + tid] = row_sum[tid];
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(ticket + bh, 1u) == SPLITS - 1u;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = tid; i < L * HD; i += THREADS) {
    const int r = i / HD;
    float gm[SPLITS], go[SPLITS], gs[SPLITS];
#pragma unroll
    for (int j = 0; j < SPLITS; ++j) {
      const int at = (bh * SPLITS + j) * L + r;
      gm[j] = __ldcg(pmax + at), go[j] = __ldcg(pout + (bh * SPLITS + j) * L * HD + i), gs[j] = __ldcg(psum + at);
    }
    a.o[qb + i] = __bfloat16_as_ushort(__float2bfloat16(merged<SPLITS>(gm, go, gs)));
  }
  if (tid == 0) ticket[bh] = 0u;
  }
}

template <int KC, int THREADS>
constexpr int split_smem() {
  return L * HD * 4 + L * KC * 4 + KC * HD * 2 + (THREADS / 32) * L * HD * 4 + 2 * L * 4;
}

struct Variant {
  const char* name;
  void (*kernel)(Args);
  int keys, threads, smem, cluster;
};

template <int KC, int THREADS, Merge MERGE>
Variant variant(const char* name) {
  const int smem = split_smem<KC, THREADS>();
  CHECK(cudaFuncSetAttribute(split<KC, THREADS, MERGE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (MERGE == kCluster && S / KC > 8) CHECK(cudaFuncSetAttribute(split<KC, THREADS, MERGE>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  return {name, split<KC, THREADS, MERGE>, KC, THREADS, smem, MERGE == kCluster ? S / KC : 0};
}

int main() {
  const std::vector<Variant> variants = {
      {"current (32 keys, ticket)", current, 32, 256, 0, 0},
      variant<32, 256, kTicket>("ticket 32"),
      variant<64, 256, kTicket>("ticket 64"),
      variant<128, 256, kTicket>("ticket 128"),
      variant<32, 256, kCluster>("cluster 32 (12 blocks)"),
      variant<48, 384, kCluster>("cluster 48 (8 blocks)"),
      variant<64, 256, kCluster>("cluster 64 (6 blocks)"),
      variant<96, 384, kCluster>("cluster 96 (4 blocks)"),
      variant<128, 256, kCluster>("cluster 128 (3 blocks)"),
      variant<384, 384, kWhole>("whole (384 keys, 1 block)"),
  };
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int batch : {1, 8}) {
    const int bhs = batch * HEADS, LAYERS = batch == 1 ? 256 : 64;
    const size_t qn = size_t(bhs) * L * HD, kn = size_t(bhs) * S * HD;
    std::vector<uint16_t> hq(qn * LAYERS), hk(kn * LAYERS), hv(kn * LAYERS);
    unsigned seed = 12345u;
    auto random = [&]() {
      seed = seed * 1664525u + 1013904223u;
      const float x = float(int(seed >> 9) % 2001 - 1000) / 500.f;
      return __bfloat16_as_ushort(__float2bfloat16(x));
    };
    for (auto* h : {&hq, &hk, &hv})
      for (auto& x : *h) x = random();
    std::vector<char> hm(S);
    for (int i = 0; i < S; ++i) hm[i] = i < 200 || i % 7 == 3;  // the prompt and the tokens so far, with gaps
    uint16_t *q, *k, *v, *o;
    bool* mask;
    unsigned char* scratch;
    CHECK(cudaMalloc(&q, qn * LAYERS * 2));
    CHECK(cudaMalloc(&k, kn * LAYERS * 2));
    CHECK(cudaMalloc(&v, kn * LAYERS * 2));
    CHECK(cudaMalloc(&o, qn * LAYERS * 2));
    CHECK(cudaMalloc(&mask, S));
    CHECK(cudaMalloc(&scratch, size_t(1) << 22));
    CHECK(cudaMemset(scratch, 0, size_t(1) << 22));
    CHECK(cudaMemcpy(q, hq.data(), qn * LAYERS * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(k, hk.data(), kn * LAYERS * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(v, hv.data(), kn * LAYERS * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(mask, hm.data(), S, cudaMemcpyHostToDevice));
    // The reference of layer 0 and the last (float, exact exp).
    auto bf = [](uint16_t h) {
      const unsigned u = unsigned(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    };
    std::vector<float> ref(qn * 2);
    for (int which = 0; which < 2; ++which) {
      const size_t layer = which ? LAYERS - 1 : 0;
      for (int bh = 0; bh < bhs; ++bh)
        for (int r = 0; r < L; ++r) {
          std::vector<double> sc(S);
          double mx = -1e300;
          for (int j = 0; j < S; ++j) {
            double d = 0;
            for (int e = 0; e < HD; ++e) d += double(bf(hq[layer * qn + (bh * L + r) * HD + e])) * bf(hk[layer * kn + (size_t(bh) * S + j) * HD + e]);
            sc[j] = hm[j] ? d * 0.125 : -INFINITY;
            mx = std::max(mx, sc[j]);
          }
          double sum = 0;
          for (int j = 0; j < S; ++j) sum += sc[j] = hm[j] ? std::exp(sc[j] - mx) : 0.0;
          for (int e = 0; e < HD; ++e) {
            double acc = 0;
            for (int j = 0; j < S; ++j) acc += sc[j] * bf(hv[layer * kn + (size_t(bh) * S + j) * HD + e]);
            ref[which * qn + (bh * L + r) * HD + e] = float(acc / sum);
          }
        }
    }
    std::printf("batch %d (%d heads a layer, %zu KiB of cache a layer)\n", batch, bhs, 2 * kn * 2 / 1024);
    for (const Variant& var : variants) {
      const int blocks = bhs * (S / var.keys);
      CHECK(cudaMemset(o, 0, qn * LAYERS * 2));
      const ChainTime us = time_chain(
          s,
          [&] {
            for (int l = 0; l < LAYERS; ++l)
              launch(var.kernel, dim3(blocks), dim3(var.threads), var.smem, s, var.cluster,
                     Args{q + l * qn, k + l * kn, v + l * kn, mask, o + l * qn, scratch});
          },
          LAYERS);
      std::vector<uint16_t> got(qn * LAYERS);
      CHECK(cudaMemcpy(got.data(), o, got.size() * 2, cudaMemcpyDeviceToHost));
      float worst = 0.f;
      for (int which = 0; which < 2; ++which)
        for (size_t i = 0; i < qn; ++i)
          worst = std::max(worst, std::fabs(bf(got[(which ? LAYERS - 1 : 0) * qn + i]) - ref[which * qn + i]));
      std::printf("  %-28s %4d blocks of %3d: %6.2f us a layer (quartiles %.2f-%.2f), max error %.2e%s\n", var.name, blocks, var.threads,
                  us.median, us.low, us.high, worst, worst < 2e-2f ? "" : "  WRONG");
    }
    for (void* p : {(void*)q, (void*)k, (void*)v, (void*)o, (void*)mask, (void*)scratch}) CHECK(cudaFree(p));
  }
  return 0;
}
