// Fused attention on CUDA (flash-attention style): a block takes 64 query rows of one (batch,
// head), a warp 16 of them, its query fragments in registers; key/value tiles stream through
// double-buffered shared memory (cp.async, the next tile loading while this one is used) while
// each warp keeps its scores, running row max and sum, and output accumulator in registers
// (f32). Both products run on tensor cores through mma.sync m16n8k16 (f16/bf16 in, f32
// accumulate), their B fragments read with ldmatrix (transposed for V); the softmax is the
// online one, in base 2 with the scale folded in. The scores never reach global memory.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numbers>
#include <set>

#include "codegen/c_printer.h"
#include "codegen/cuda/cuda_codegen.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

// Query rows per block, 16 a warp. Blocks of 8 warps (128 rows sharing a key/value tile) measured
// no faster on the H100 (GPT-2's causal 1024x64 heads: 0.110 ms against 0.109).
constexpr int kRows = 64;
constexpr int kWarps = 4;

int64_t constant(const SymInt& s, const char* what) {
  auto c = s.constant();
  COIL_CHECK(c) << "attention: a symbolic " << what;
  return *c;
}

// C++ that sets `name` to the view's offset for the flattened batch index `bh`.
std::string batch_offset(const loop::View& v, const std::string& name) {
  std::string s = fmt::format("    int64_t {} = {};\n", name, constant(v.offset, "offset"));
  s += "    {\n      int64_t rest = bh;\n";
  for (size_t d = v.sizes.size() - 2; d-- > 0;) {
    int64_t n = constant(v.sizes[d], "size"), st = constant(v.strides[d], "stride");
    s += fmt::format("      {} += (rest % {}) * {};\n      rest /= {};\n", name, n, st, n);
  }
  s += "    }\n";
  return s;
}

bool vectorizable(const loop::View& v) {
  if (constant(v.offset, "offset") % 8 != 0) return false;
  for (size_t d = 0; d + 1 < v.strides.size(); ++d)
    if (constant(v.strides[d], "stride") % 8 != 0) return false;
  return true;
}

}  // namespace

std::string emit_cuda_attention(const loop::Program& p, const loop::ExternCall& call, const cuda::DeviceInfo& device, CudaKernel& info) {
  COIL_CHECK(call.kind == loop::ExternKind::attention && call.inputs.size() == 3) << call.name;
  const loop::View &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(call.output)];
  loop::View o{call.output, ob.sizes, ob.strides, ob.offset};
  const size_t r = q.sizes.size();
  const int64_t L = constant(q.sizes[r - 2], "query length"), S = constant(k.sizes[r - 2], "key length");
  const int64_t E = constant(q.sizes[r - 1], "head size");
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= constant(q.sizes[d], "batch size");
  const int bn = E <= 64 ? 64 : 32;
  const bool causal = call.params.at(1) != 0;
  const double scale_log2 = call.params.at(0) * std::numbers::log2e;
  const bool half = ob.dtype == DType::f16;
  COIL_CHECK(half || ob.dtype == DType::bf16) << call.name << ": attention needs f16 or bf16";
  const int warp = device.warp_size;
  COIL_CHECK(warp == 32) << "the attention kernel's mma fragments assume 32-lane warps";

  std::set<int> buffers = {q.buffer, k.buffer, v.buffer, o.buffer};
  std::vector<std::string> params;
  info.name = call.name;
  for (int b : buffers) {
    params.push_back(fmt::format("{}uint16_t* __restrict__ b{}", b == o.buffer ? "" : "const ", b));
    info.buffers.push_back(b);
  }
  params.push_back("int64_t* __restrict__ E");
  const int64_t tiles = batch * ((L + kRows - 1) / kRows);
  info.config.form = CudaConfig::Form::attention;
  info.config.block = kWarps * warp;
  info.launch.block_x = kWarps * warp;
  info.launch.units = tiles;
  info.launch.per_block = 1;
  info.launch.max_blocks = tiles;

  bool vec = vectorizable(q) && vectorizable(k) && vectorizable(v);
  auto stride = [&](const loop::View& x, size_t from_end) { return constant(x.strides[x.strides.size() - from_end], "stride"); };
  const std::string n = call.name;
  const char* mma_type = half ? "f16.f16" : "bf16.bf16";
  const char* to_half = half ? "coil_rt::f32_to_f16" : "coil_rt::f32_to_bf16";

  std::string s;
  s += fmt::format("// computes %{} (attention {}x{} keys {} head {}{}, {} rows per block)\n", fmt::join(call.origins, ", %"), batch, L, S, E,
                   causal ? " causal" : "", kRows);
  // Helpers, one set per element type however many attention kernels a unit holds: the kernels'
  // text then differs only in their names and buffers, so a model's layers compile once.
  const std::string hp = half ? "coil_attn_f16" : "coil_attn_bf16";
  s += fmt::format("#ifndef {}_HELPERS\n#define {}_HELPERS\n", hp, hp);
  s += fmt::format(
      "static __device__ __forceinline__ void {n}_mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {{\n"
      "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{mt}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\\n\"\n"
      "               : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
      "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
      "}}\n"
      "static __device__ __forceinline__ unsigned {n}_smem(const void* p) {{\n"
      "  unsigned long long a;\n"
      "  asm(\"cvta.to.shared.u64 %0, %1;\" : \"=l\"(a) : \"l\"(p));\n"
      "  return static_cast<unsigned>(a);\n"
      "}}\n"
      // Four 8x8 matrices of 16-bit elements from shared memory (transposed when `T`).
      "template <bool T> static __device__ __forceinline__ void {n}_ldm(uint32_t* r, const void* p) {{\n"
      "  if (T) asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%0,%1,%2,%3}}, [%4];\\n\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"({n}_smem(p)));\n"
      "  else asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0,%1,%2,%3}}, [%4];\\n\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"({n}_smem(p)));\n"
      "}}\n"
      "static __device__ __forceinline__ uint32_t {n}_pack(float lo, float hi) {{\n"
      "  return static_cast<uint32_t>({th}(lo)) | (static_cast<uint32_t>({th}(hi)) << 16);\n"
      "}}\n"
      // Two adjacent elements as one register (zeros outside).
      "static __device__ __forceinline__ uint32_t {n}_pair(const uint16_t* src, bool inside, bool vec) {{\n"
      "  if (!inside) return 0u;\n"
      "  if (vec) return *reinterpret_cast<const uint32_t*>(src);\n"
      "  return static_cast<uint32_t>(src[0]) | (static_cast<uint32_t>(src[1]) << 16);\n"
      "}}\n"
      // Eight adjacent elements of a row into shared memory: cp.async when aligned (zero-filled
      // outside), else element by element.
      "static __device__ __forceinline__ void {n}_row8(uint16_t* dst, const uint16_t* src, bool inside, bool vec) {{\n"
      "  if (vec) {{\n"
      "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"({n}_smem(dst)), \"l\"(src), \"r\"(inside ? 16 : 0));\n"
      "  }} else {{\n"
      "    for (int q = 0; q < 8; ++q) dst[q] = inside ? src[q] : uint16_t(0);\n"
      "  }}\n"
      "}}\n",
      fmt::arg("n", hp), fmt::arg("mt", mma_type), fmt::arg("th", to_half));
  s += "#endif\n";
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kWarps * warp, n, fmt::join(params, ", "));
  s += "  (void)E;\n";
  s += fmt::format("  constexpr int BM = {}, BN = {}, HD = {}, PAD = 8;\n", kRows, bn, E);
  s += fmt::format("  constexpr int64_t L = {}, S = {}, TILES_Q = {};\n", L, S, (L + kRows - 1) / kRows);
  // Key and value tiles, double-buffered: the next tile loads while this one is used.
  s += "  __shared__ __align__(16) uint16_t Ks[2][BN][HD + PAD];\n";
  s += "  __shared__ __align__(16) uint16_t Vs[2][BN][HD + PAD];\n";
  // Buffer bases are kBufferAlignment-aligned, so row starts that are multiples of 8 elements are too.
  s += fmt::format("  constexpr bool vec = {};\n", vec ? "true" : "false");
  s += "  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;\n";
  s += fmt::format("  for (int64_t tile = blockIdx.x; tile < {}; tile += gridDim.x) {{\n", tiles);
  // Causal: the longest query tiles (the last ones) first, so the short ones fill the tail.
  s += fmt::format("    const int64_t bh = tile / TILES_Q;\n    const int q0 = static_cast<int>({}) * BM;\n",
                   causal ? "TILES_Q - 1 - tile % TILES_Q" : "tile % TILES_Q");
  s += batch_offset(q, "qb") + batch_offset(k, "kb") + batch_offset(v, "vb") + batch_offset(o, "ob");
  s += fmt::format(
      "    auto load_kv = [&](int k0, int buf) {{\n"
      "      for (int i = threadIdx.x; i < BN * HD / 8; i += blockDim.x) {{\n"
      "        const int row = i / (HD / 8), col = (i % (HD / 8)) * 8;\n"
      "        const bool inside = k0 + row < S;\n"
      "        const int64_t at = inside ? k0 + row : S - 1;\n"
      "        {n}_row8(&Ks[buf][row][col], b{kb} + kb + at * int64_t({ks}) + col, inside, vec);\n"
      "        {n}_row8(&Vs[buf][row][col], b{vb} + vb + at * int64_t({vs}) + col, inside, vec);\n"
      "      }}\n"
      "      asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
      "    }};\n",
      fmt::arg("n", hp), fmt::arg("kb", k.buffer), fmt::arg("ks", stride(k, 2)), fmt::arg("vb", v.buffer), fmt::arg("vs", stride(v, 2)));
  s += "    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;\n";
  // This warp's 16 query rows as A fragments, straight from global memory.
  s += "    uint32_t qf[HD / 16][4];\n";
  s += "    #pragma unroll\n    for (int kk = 0; kk < HD / 16; ++kk) {\n";
  s += fmt::format(
      "      const uint16_t* p0 = b{qb} + qb + (row0 < L ? row0 : 0) * int64_t({qs}) + kk * 16 + t * 2;\n"
      "      const uint16_t* p1 = b{qb} + qb + (row1 < L ? row1 : 0) * int64_t({qs}) + kk * 16 + t * 2;\n"
      "      qf[kk][0] = {n}_pair(p0, row0 < L, vec);\n      qf[kk][1] = {n}_pair(p1, row1 < L, vec);\n"
      "      qf[kk][2] = {n}_pair(p0 + 8, row0 < L, vec);\n      qf[kk][3] = {n}_pair(p1 + 8, row1 < L, vec);\n",
      fmt::arg("n", hp), fmt::arg("qb", q.buffer), fmt::arg("qs", stride(q, 2)));
  s += "    }\n";
  s += "    float o[HD / 8][4];\n";
  s += "    #pragma unroll\n    for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;\n";
  s += "    float m0 = -coil_rt::inf<float>(), m1 = -coil_rt::inf<float>(), l0 = 0.f, l1 = 0.f;\n";
  s += fmt::format("    const int kv_end = {};\n", causal ? "static_cast<int>(q0 + BM < S ? q0 + BM : S)" : "static_cast<int>(S)");
  s += "    load_kv(0, 0);\n";
  s += "    for (int k0 = 0, buf = 0; k0 < kv_end; k0 += BN, buf ^= 1) {\n";
  s += "      if (k0 + BN < kv_end) {\n";
  s += "        load_kv(k0 + BN, buf ^ 1);\n";
  s += "        asm volatile(\"cp.async.wait_group 1;\\n\" ::);\n";
  s += "      } else {\n";
  s += "        asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n";
  s += "      }\n";
  s += "      __syncthreads();\n";
  // Scores: 16 rows x BN keys per warp; two key tiles' B fragments per ldmatrix.
  s += "      float sc[BN / 8][4];\n";
  s += "      #pragma unroll\n      for (int nt = 0; nt < BN / 8; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;\n";
  s += "      #pragma unroll\n      for (int kk = 0; kk < HD / 16; ++kk) {\n";
  s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; nt += 2) {\n";
  s += "          uint32_t b[4];\n";
  s += fmt::format("          {}_ldm<false>(b, &Ks[buf][(nt + (lane >> 4)) * 8 + (lane & 7)][kk * 16 + ((lane >> 3) & 1) * 8]);\n", hp);
  s += fmt::format("          {n}_mma(sc[nt], qf[kk], b[0], b[1]);\n          {n}_mma(sc[nt + 1], qf[kk], b[2], b[3]);\n", fmt::arg("n", hp));
  s += "        }\n      }\n";
  // Scale (base 2), mask, row max over the quad that shares a row.
  // Only a tile past the keys' end or across the diagonal needs the mask.
  s += fmt::format("      const bool masked = k0 + BN > S{};\n", causal ? " || k0 + BN > q0 + warp * 16" : "");
  s += "      float mx0 = m0, mx1 = m1;\n";
  s += "      #pragma unroll\n      for (int nt = 0; nt < BN / 8; ++nt) {\n";
  s += "        #pragma unroll\n        for (int c = 0; c < 4; ++c) {\n";
  s += "          const int key = k0 + nt * 8 + t * 2 + (c & 1), row = c < 2 ? row0 : row1;\n";
  s += fmt::format("          float x = sc[nt][c] * {}f;\n", scale_log2);
  s += fmt::format("          if (masked && (key >= S{})) x = -coil_rt::inf<float>();\n", causal ? " || key > row" : "");
  s += "          sc[nt][c] = x;\n";
  s += "        }\n";
  s += "        mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));\n        mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));\n";
  s += "      }\n";
  s += "      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));\n      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));\n";
  s += "      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));\n      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));\n";
  // A row with nothing visible yet keeps 0 as its reference, so no inf - inf.
  s += "      const float ref0 = mx0 == -coil_rt::inf<float>() ? 0.f : mx0, ref1 = mx1 == -coil_rt::inf<float>() ? 0.f : mx1;\n";
  s += "      const float a0 = exp2f(m0 - ref0), a1 = exp2f(m1 - ref1);\n";
  s += "      m0 = mx0;\n      m1 = mx1;\n";
  s += "      float rs0 = 0.f, rs1 = 0.f;\n";
  s += "      #pragma unroll\n      for (int nt = 0; nt < BN / 8; ++nt) {\n";
  s += "        sc[nt][0] = exp2f(sc[nt][0] - ref0);\n        sc[nt][1] = exp2f(sc[nt][1] - ref0);\n";
  s += "        sc[nt][2] = exp2f(sc[nt][2] - ref1);\n        sc[nt][3] = exp2f(sc[nt][3] - ref1);\n";
  s += "        rs0 += sc[nt][0] + sc[nt][1];\n        rs1 += sc[nt][2] + sc[nt][3];\n";
  s += "      }\n";
  s += "      l0 = l0 * a0 + rs0;\n      l1 = l1 * a1 + rs1;\n";
  s += "      #pragma unroll\n      for (int d = 0; d < HD / 8; ++d) {\n";
  s += "        o[d][0] *= a0;\n        o[d][1] *= a0;\n        o[d][2] *= a1;\n        o[d][3] *= a1;\n";
  s += "      }\n";
  // O += P V: two adjacent score tiles are one A fragment; V's B fragments by transposed ldmatrix.
  s += "      #pragma unroll\n      for (int kk = 0; kk < BN / 16; ++kk) {\n";
  s += fmt::format("        const uint32_t pa[4] = {{{n}_pack(sc[2 * kk][0], sc[2 * kk][1]), {n}_pack(sc[2 * kk][2], sc[2 * kk][3]),\n"
                   "                                {n}_pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), {n}_pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3])}};\n",
                   fmt::arg("n", hp));
  s += "        #pragma unroll\n        for (int d = 0; d < HD / 8; d += 2) {\n";
  s += "          uint32_t b[4];\n";
  s += fmt::format("          {}_ldm<true>(b, &Vs[buf][kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][(d + (lane >> 4)) * 8]);\n", hp);
  s += fmt::format("          {n}_mma(o[d], pa, b[0], b[1]);\n          {n}_mma(o[d + 1], pa, b[2], b[3]);\n", fmt::arg("n", hp));
  s += "        }\n      }\n";
  s += "      __syncthreads();\n";
  s += "    }\n";
  // The row sums over the quad; rows nothing was visible to give 0.
  s += "    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);\n    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);\n";
  s += "    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);\n    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);\n";
  s += "    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;\n";
  s += "    #pragma unroll\n    for (int d = 0; d < HD / 8; ++d) {\n";
  s += "      const int col = d * 8 + t * 2;\n";
  s += fmt::format("      if (row0 < L) {{ b{ob}[ob + row0 * int64_t({os}) + col * int64_t({oc})] = {th}(o[d][0] * inv0); "
                   "b{ob}[ob + row0 * int64_t({os}) + (col + 1) * int64_t({oc})] = {th}(o[d][1] * inv0); }}\n",
                   fmt::arg("ob", o.buffer), fmt::arg("os", stride(o, 2)), fmt::arg("oc", stride(o, 1)), fmt::arg("th", to_half));
  s += fmt::format("      if (row1 < L) {{ b{ob}[ob + row1 * int64_t({os}) + col * int64_t({oc})] = {th}(o[d][2] * inv1); "
                   "b{ob}[ob + row1 * int64_t({os}) + (col + 1) * int64_t({oc})] = {th}(o[d][3] * inv1); }}\n",
                   fmt::arg("ob", o.buffer), fmt::arg("os", stride(o, 2)), fmt::arg("oc", stride(o, 1)), fmt::arg("th", to_half));
  s += "    }\n";
  s += "  }\n}\n";
  return s;
}

}  // namespace coil::codegen
