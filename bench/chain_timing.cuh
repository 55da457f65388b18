// What the standalone CUDA measurements (bench/pdl_stream.cu, bench/prefetch_chain.cu,
// bench/decode_attention.cu) share: a checked CUDA call, the wait a programmatic launch's kernel
// makes first, a bf16 dot product of two 16-byte pieces, a programmatic launch (optionally in thread-block clusters), and the median time
// of a captured chain of launches replayed as a CUDA graph.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t err_ = (x);                                                              \
    if (err_ != cudaSuccess) {                                                           \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// The previous kernel done and its writes visible; the next kernel's blocks may start.
__device__ __forceinline__ void wait_previous() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The dot product of eight bf16 pairs (two 16-byte pieces), in f32.
__device__ __forceinline__ float dot8(uint4 w, uint4 x) {
  const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 p = __bfloat1622float2(a[i]), q = __bfloat1622float2(b[i]);
    s = fmaf(p.x, q.x, fmaf(p.y, q.y, s));
  }
  return s;
}

// A programmatic launch of f on s (consecutive blocks in clusters of `cluster` when not 0).
template <typename... P, typename... A>
void launch(void (*f)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, unsigned cluster, A... args) {
  cudaLaunchConfig_t c = {};
  c.gridDim = grid, c.blockDim = block, c.dynamicSmemBytes = smem, c.stream = s;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = cluster, at[1].val.clusterDim.y = 1, at[1].val.clusterDim.z = 1;
  c.attrs = at, c.numAttrs = cluster ? 2 : 1;
  CHECK(cudaLaunchKernelEx(&c, f, args...));
}

// The chain `issue` launches on s, captured once and replayed 23 times: the median and quartiles
// of the last 20 replays' times (CUDA events), in µs, divided by `per`.
struct ChainTime {
  float median, low, high;
};
template <typename Issue>
ChainTime time_chain(cudaStream_t s, Issue&& issue, int per) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  issue();
  CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e;
  CHECK(cudaGraphInstantiate(&e, g, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < 23; ++i) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    if (i >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
  const float scale = 1000.f / static_cast<float>(per);
  return {ms[ms.size() / 2] * scale, ms[ms.size() / 4] * scale, ms[ms.size() * 3 / 4] * scale};
}
