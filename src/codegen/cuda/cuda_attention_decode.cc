// Attention of a few query rows (at most 16: decoding, where grouped_attention makes the query
// heads of one key/value head its rows) over many keys, split over the keys as flash-decoding
// does: a block takes one (batch, head) and a chunk of KC keys, so that a step's few heads still
// fill the GPU and its blocks wait for their keys together, not one tile after another.
//
// A block keeps the queries (f32) and the chunk's values in shared memory and its thread's key in
// registers; scores with f32 FMAs (the products are too small for tensor cores), the chunk's
// softmax per row (base 2, the scale folded in), then its output: warps over groups of keys,
// lanes over the head's columns, the groups' partial rows summed through shared memory.
//
// The chunks of a head are merged one of two ways:
// - a thread-block cluster (Hopper; a head's splits are one cluster of at most 16 blocks): each
//   block leaves its rows' max, sum and output in its own shared memory, and after a cluster
//   barrier each block merges a share of the rows reading the others' through distributed shared
//   memory. Measured at TinyLlama's decoding shape (bench/decode_attention.cu, H200): 4.39 µs a
//   layer against 5.96 for the ticket merge of the same chunks;
// - otherwise each block leaves them in scratch, and the last of a head's blocks to arrive (a
//   ticket) merges them, stores the result and sets the ticket back to zero.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/cuda/attention_parts.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen::attention {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
// The ticket merge reads up to kMergeGroup splits at once.
constexpr int kMergeGroup = 16;
// The output's partial rows of a block's key groups (f32) take at most this much shared memory.
constexpr int64_t kReduceBytes = 32 * 1024;

// How the keys of a head are split.
struct Split {
  int64_t keys = 0;   // KC, keys a block: a power of two from 32 to kThreads
  int64_t splits = 0;
  int key_groups = 0;  // warps over keys in the output (the rest over columns)
  int cluster = 0;     // blocks a cluster (the splits), 0 for the ticket merge or a single split
};

int64_t shared_bytes(const Shape& a, int64_t keys, int key_groups) {
  const int64_t L = *a.L.constant(), E = a.E;
  const int64_t work = L * E * 4 + L * keys * 4 + keys * E * 2, reduce = key_groups * L * E * 4;
  return std::max(work, reduce) + 2 * L * 4 + 16;
}

// The fewest keys a block that leave no more blocks than SMs (few blocks wait on their round
// trips in parallel; more would queue), within the block's threads and static shared memory. At
// TinyLlama's shape: 32 keys at batch 1 (48 blocks), 128 at batch 8 (96 blocks).
std::optional<Split> choose_split(const Shape& a, const cuda::DeviceInfo& device) {
  const int64_t L = *a.L.constant(), S = *a.S.constant(), heads = *a.batch.constant(), E = a.E;
  int groups = kWarps;
  while (groups > 1 && groups * L * E * 4 > kReduceBytes) groups /= 2;
  std::optional<Split> best;
  for (int64_t keys = 32; keys <= kThreads; keys *= 2) {
    if (shared_bytes(a, keys, groups) > device.shared_per_block) break;
    best = Split{keys, (S + keys - 1) / keys, groups, 0};
    if (heads * best->splits <= device.sm_count) break;
  }
  if (!best) return best;
  // Clusters from Hopper on: 8 blocks portably, 16 on sm_90 (a non-portable size its function
  // allows at load).
  const int64_t max_cluster = device.cc_major == 9 && device.cc_minor == 0 ? 16 : device.cc_major >= 9 ? 8 : 0;
  if (best->splits > 1 && best->splits <= max_cluster) best->cluster = static_cast<int>(best->splits);
  return best;
}

}  // namespace

bool decode_attention_fits(const Shape& a, const cuda::DeviceInfo& device) {
  // (Fused heads are 16 to 128 wide, multiples of 16: decompose_attention.cc.)
  return a.fixed() && *a.L.constant() <= kDecodeRows && a.E % 8 == 0 && device.warp_size == 32 && choose_split(a, device).has_value();
}

std::string emit_decode_attention(const Shape& a, const loop::ExternCall& call, const std::string& hp, std::vector<std::string> params,
                                  const cuda::DeviceInfo& device, CudaKernel& info) {
  COIL_CHECK(decode_attention_fits(a, device)) << call.name << ": the decoding attention takes a few query rows, static sizes";
  const Split sp = *choose_split(a, device);
  const int64_t L = *a.L.constant(), S = *a.S.constant(), batch = *a.batch.constant();
  const int64_t splits = sp.splits, units = batch * splits;
  COIL_CHECK(units <= kMaxGrid) << call.name << ": " << units << " blocks";
  const bool ticket = splits > 1 && sp.cluster == 0;
  // Scratch (ticket merge): a ticket per (batch, head), then per (batch, head, split, row) the
  // max and the sum, then the output rows (f32).
  const int64_t tickets = (batch * 4 + 255) / 256 * 256, stats = batch * splits * L;
  info.config.form = CudaConfig::Form::attention;
  info.config.block = kThreads;
  info.launch.block_x = kThreads;
  info.launch.units = units;
  info.launch.per_block = 1;
  info.launch.max_blocks = units;
  info.launch.cluster = sp.cluster;
  if (ticket) info.launch.scratch_bytes = tickets + 4 * (2 * stats + stats * a.E);

  const bool vec = vectorizable(a.q) && vectorizable(a.k) && vectorizable(a.v);
  if (ticket) params.push_back("unsigned char* __restrict__ W");
  const char* widen = a.half ? "coil_rt::f16_to_f32" : "coil_rt::bf16_to_f32";
  const char* narrow = a.half ? "coil_rt::f32_to_f16" : "coil_rt::f32_to_bf16";
  std::string s = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kThreads, call.name, fmt::join(params, ", "));
  s += "  coil_rt::after_previous();\n  (void)E;\n";
  s += fmt::format("  constexpr int L = {}, S = {}, HD = {}, KC = {}, SPLITS = {}, THREADS = {}, WARPS = {};\n", L, S, a.E, sp.keys, splits, kThreads,
                   kWarps);
  // Shared memory: the chunk's working set (queries, scores, values), its space then reused for
  // the key groups' partial output rows.
  s += fmt::format("  constexpr int KW = {}, WORK = L * HD * 4 + L * KC * 4 + KC * HD * 2, RED = KW * L * HD * 4;\n", sp.key_groups);
  s += "  __shared__ __align__(16) unsigned char pool[WORK > RED ? WORK : RED];\n";
  s += "  float (*qs)[HD] = reinterpret_cast<float (*)[HD]>(pool);\n";
  s += "  float (*ps)[KC] = reinterpret_cast<float (*)[KC]>(pool + L * HD * 4);\n";
  s += "  uint16_t (*vs)[HD] = reinterpret_cast<uint16_t (*)[HD]>(pool + L * HD * 4 + L * KC * 4);\n";
  s += "  float (*red)[L * HD] = reinterpret_cast<float (*)[L * HD]>(pool);\n";
  s += "  __shared__ float row_max[L], row_sum[L];\n";
  s += "  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;\n";
  if (ticket) {
    s += "  __shared__ bool last;\n";
    s += fmt::format("  unsigned* const ticket = reinterpret_cast<unsigned*>(W);\n"
                     "  float* const pmax = reinterpret_cast<float*>(W + {});\n  float* const psum = pmax + {};\n  float* const pout = psum + {};\n",
                     tickets, stats, stats);
  }
  // A block a chunk (a cluster's blocks are consecutive: the chunk is the block's rank).
  s += "  const int64_t bh = blockIdx.x / SPLITS;\n  const int split = static_cast<int>(blockIdx.x % SPLITS), k0 = split * KC;\n";
  s += batch_offset(a.q, "qb") + batch_offset(a.k, "kb") + batch_offset(a.v, "vb") + batch_offset(a.o, "ob");
  if (a.mask) s += batch_offset(*a.mask, "mb");
  // The queries (f32) and the chunk's values (zeros past the keys' end) into shared memory.
  s += fmt::format("  for (int i = tid; i < L * HD; i += THREADS) qs[i / HD][i % HD] = {}(b{}[qb + (i / HD) * int64_t({}) + i % HD]);\n", widen,
                   a.q.buffer, stride(a.q, 2));
  // The thread's key row is requested first (registers, 16-byte pieces where aligned), so that
  // its latency overlaps the queries' and values'.
  s += "  const int kk = tid % KC, part = tid / KC, key = k0 + kk;\n";
  s += fmt::format("  const uint16_t* kp = b{} + kb + (key < S ? key : 0) * int64_t({});\n", a.k.buffer, stride(a.k, 2));
  if (vec) s += "  uint4 kraw[HD / 8];\n  #pragma unroll\n  for (int c = 0; c < HD / 8; ++c) kraw[c] = *reinterpret_cast<const uint4*>(kp + c * 8);\n";
  s += fmt::format("  for (int i = tid; i < KC * HD / 8; i += THREADS) {{\n"
                   "    const int key_v = k0 + i / (HD / 8), col = i % (HD / 8) * 8;\n"
                   "    const uint16_t* src = b{} + vb + (key_v < S ? key_v : 0) * int64_t({}) + col;\n",
                   a.v.buffer, stride(a.v, 2));
  if (vec)
    s += "    *reinterpret_cast<uint4*>(&vs[i / (HD / 8)][col]) = key_v < S ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);\n";
  else
    s += "    for (int j = 0; j < 8; ++j) vs[i / (HD / 8)][col + j] = key_v < S ? src[j] : uint16_t(0);\n";
  s += "  }\n";
  // Scores: THREADS / KC threads a key, each for every (THREADS / KC)-th row; masked, in base 2
  // with the scale. The mask's values are requested with the key, before the block waits for
  // its loads.
  s += "  constexpr int PARTS = THREADS / KC, MINE = (L + PARTS - 1) / PARTS;\n";
  if (a.mask) {
    const loop::View& m = *a.mask;
    const char* mw = a.mask_dtype == DType::f16 ? "coil_rt::f16_to_f32" : a.mask_dtype == DType::bf16 ? "coil_rt::bf16_to_f32" : "";
    const std::string value = fmt::format("b{}[mb + row * int64_t({}) + key * int64_t({})]", m.buffer, stride(m, 2), stride(m, 1));
    s += fmt::format("  {} masked[MINE];\n  #pragma unroll\n  for (int r = 0; r < MINE; ++r) {{\n", a.mask_dtype == DType::b8 ? "bool" : "float");
    s += "    const int row = PARTS * r + part;\n";
    s += a.mask_dtype == DType::b8 ? fmt::format("    masked[r] = row < L && key < S ? {} : false;\n  }}\n", value)
                                   : fmt::format("    masked[r] = row < L && key < S ? {}({}) * {:.9e}f : 0.f;\n  }}\n", mw, value, std::numbers::log2e);
  }
  s += "  __syncthreads();\n";
  s += "  {\n";
  s += "    float acc[MINE];\n    #pragma unroll\n    for (int r = 0; r < MINE; ++r) acc[r] = 0.f;\n";
  s += "    #pragma unroll\n    for (int d0 = 0; d0 < HD; d0 += 8) {\n      float kv[8];\n";
  if (vec) {
    s += "      const uint16_t* h = reinterpret_cast<const uint16_t*>(&kraw[d0 / 8]);\n";
    s += fmt::format("      #pragma unroll\n      for (int j = 0; j < 8; ++j) kv[j] = {}(h[j]);\n", widen);
  } else {
    s += fmt::format("      #pragma unroll\n      for (int j = 0; j < 8; ++j) kv[j] = {}(kp[d0 + j]);\n", widen);
  }
  s += "      #pragma unroll\n      for (int r = 0; r < MINE; ++r) {\n";
  s += "        const int row = PARTS * r + part;\n        if (row >= L) break;\n";
  s += "        #pragma unroll\n        for (int j = 0; j < 8; ++j) acc[r] = fmaf(qs[row][d0 + j], kv[j], acc[r]);\n";
  s += "      }\n    }\n";
  s += "    #pragma unroll\n    for (int r = 0; r < MINE; ++r) {\n";
  s += "      const int row = PARTS * r + part;\n      if (row >= L) break;\n";
  s += fmt::format("      float sc = acc[r] * {:.9e}f;\n", a.scale_log2);
  s += fmt::format("      if (key >= S{}) sc = -coil_rt::inf<float>();\n", a.causal ? " || key > row" : "");
  if (a.mask) s += a.mask_dtype == DType::b8 ? "      else if (!masked[r]) sc = -coil_rt::inf<float>();\n" : "      else sc += masked[r];\n";
  s += "      ps[row][kk] = sc;\n    }\n  }\n  __syncthreads();\n";
  // The chunk's softmax per row, a warp a row: max (0 as the reference where nothing is
  // visible), probabilities in place, their sum.
  s += "  for (int row = warp; row < L; row += WARPS) {\n";
  s += "    float mx = -coil_rt::inf<float>();\n    for (int k = lane; k < KC; k += 32) mx = fmaxf(mx, ps[row][k]);\n";
  s += "    #pragma unroll\n    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));\n";
  s += "    const float ref = mx == -coil_rt::inf<float>() ? 0.f : mx;\n    float sum = 0.f;\n";
  s += fmt::format("    for (int k = lane; k < KC; k += 32) {{\n      const float p = {}_exp2(ps[row][k] - ref);\n      ps[row][k] = p;\n      sum += p;\n    }}\n", hp);
  s += "    #pragma unroll\n    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);\n";
  s += "    if (lane == 0) row_max[row] = mx, row_sum[row] = sum;\n  }\n  __syncthreads();\n";
  // The chunk's output rows: warp w sums key group w % KW over its columns (32-wide pieces
  // w / KW, w / KW + WARPS / KW, ...; a lane a column), each probability read once for all its
  // columns; then the groups' rows (in the working set's space) summed.
  s += "  {\n    constexpr int CG = WARPS / KW, MYCH = ((HD + 31) / 32 + CG - 1) / CG, KPG = KC / KW;\n";
  s += "    const int group = warp % KW, cg = warp / KW;\n";
  s += "    float acc[L][MYCH];\n    #pragma unroll\n    for (int r = 0; r < L; ++r)\n      #pragma unroll\n      for (int c = 0; c < MYCH; ++c) acc[r][c] = 0.f;\n";
  s += "    #pragma unroll 4\n    for (int j = 0; j < KPG; ++j) {\n      const int k = group * KPG + j;\n      float vv[MYCH];\n";
  s += "      #pragma unroll\n      for (int c = 0; c < MYCH; ++c) {\n        const int d = 32 * (cg + CG * c) + lane;\n";
  s += fmt::format("        vv[c] = d < HD ? {}(vs[k][d]) : 0.f;\n      }}\n", widen);
  s += "      #pragma unroll\n      for (int r = 0; r < L; ++r) {\n        const float p = ps[r][k];\n";
  s += "        #pragma unroll\n        for (int c = 0; c < MYCH; ++c) acc[r][c] = fmaf(p, vv[c], acc[r][c]);\n      }\n    }\n";
  s += "    __syncthreads();\n";
  s += "    #pragma unroll\n    for (int r = 0; r < L; ++r)\n      #pragma unroll\n      for (int c = 0; c < MYCH; ++c) {\n";
  s += "        const int d = 32 * (cg + CG * c) + lane;\n        if (d < HD) red[group][r * HD + d] = acc[r][c];\n      }\n  }\n";
  s += "  __syncthreads();\n";
  auto store = [&](const std::string& index, const std::string& value) {
    return fmt::format("b{}[ob + ({}) / HD * int64_t({}) + ({}) % HD * int64_t({})] = {}({})", a.o.buffer, index, stride(a.o, 2), index, stride(a.o, 1),
                       narrow, value);
  };
  s += "  for (int i = tid; i < L * HD; i += THREADS) {\n    float o = 0.f;\n";
  s += "    #pragma unroll\n    for (int g = 0; g < KW; ++g) o += red[g][i];\n";
  if (splits == 1) {
    s += "    const float l = row_sum[i / HD];\n    " + store("i", "l > 0.f ? o / l : 0.f") + ";\n  }\n}\n";
    return s;
  }
  if (sp.cluster) {
    // The merge through distributed shared memory: every block's rows stay in its red[0]; after
    // the cluster barrier (release/acquire: their writes visible), block `split` merges rows
    // [split * PER, (split + 1) * PER) of all of them; the second barrier keeps each block's
    // shared memory alive until the others have read it.
    s += "    red[0][i] = o;\n  }\n";
    s += "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n";
    s += "  constexpr int PER = (L * HD + SPLITS - 1) / SPLITS;\n";
    s += "  for (int i = split * PER + tid; i < (split + 1) * PER && i < L * HD; i += THREADS) {\n";
    s += "    const int r = i / HD;\n    float gm[SPLITS], go[SPLITS], gs[SPLITS];\n";
    s += "    #pragma unroll\n    for (int j = 0; j < SPLITS; ++j) {\n";
    s += "      const void* at[3] = {&row_max[r], &row_sum[r], &red[0][i]};\n      float got[3];\n";
    s += "      #pragma unroll\n      for (int x = 0; x < 3; ++x) {\n";
    s += "        unsigned remote;\n";
    s += "        asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote) : \"r\"(static_cast<unsigned>(__cvta_generic_to_shared(at[x]))), "
         "\"r\"(j));\n";
    s += "        asm volatile(\"ld.shared::cluster.f32 %0, [%1];\" : \"=f\"(got[x]) : \"r\"(remote) : \"memory\");\n      }\n";
    s += "      gm[j] = got[0], gs[j] = got[1], go[j] = got[2];\n    }\n";
    s += "    float mx = -coil_rt::inf<float>();\n    #pragma unroll\n    for (int j = 0; j < SPLITS; ++j) mx = fmaxf(mx, gm[j]);\n";
    s += "    const float ref = mx == -coil_rt::inf<float>() ? 0.f : mx;\n    float num = 0.f, den = 0.f;\n";
    s += fmt::format("    #pragma unroll\n    for (int j = 0; j < SPLITS; ++j) {{\n      const float w = {}_exp2(gm[j] - ref);\n", hp);
    s += "      num = fmaf(w, go[j], num), den = fmaf(w, gs[j], den);\n    }\n";
    s += "    " + store("i", "den > 0.f ? num / den : 0.f") + ";\n  }\n";
    s += "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n}\n";
    return s;
  }
  // The ticket merge: each split's rows rescaled to the rows' overall max, in groups of G splits
  // whose max, sum and output are all requested at once (one round trip a group), each group's
  // sums rescaling those before it.
  s += "    pout[(bh * SPLITS + split) * L * HD + i] = o;\n  }\n";
  s += "  if (tid < L) {\n    pmax[(bh * SPLITS + split) * L + tid] = row_max[tid];\n    psum[(bh * SPLITS + split) * L + tid] = row_sum[tid];\n  }\n";
  s += "  __threadfence();\n  __syncthreads();\n";
  s += "  if (tid == 0) last = atomicAdd(ticket + bh, 1u) == SPLITS - 1u;\n  __syncthreads();\n";
  s += "  if (!last) return;\n  __threadfence();\n";
  s += "  for (int i = tid; i < L * HD; i += THREADS) {\n    const int r = i / HD;\n";
  s += "    float mx = -coil_rt::inf<float>(), num = 0.f, den = 0.f;\n";
  s += fmt::format("    constexpr int G = {};\n", std::min<int64_t>(splits, kMergeGroup));
  s += "    for (int q0 = 0; q0 < SPLITS; q0 += G) {\n      float gm[G], go[G], gs[G];\n";
  s += "      #pragma unroll\n      for (int j = 0; j < G; ++j) {\n        const int64_t at = (bh * SPLITS + (q0 + j < SPLITS ? q0 + j : 0)) * L + r;\n";
  s += "        gm[j] = coil_rt::load_l2(pmax + at), go[j] = coil_rt::load_l2(pout + at * HD + i % HD), gs[j] = coil_rt::load_l2(psum + at);\n";
  s += "      }\n      float next = mx;\n";
  s += "      #pragma unroll\n      for (int j = 0; j < G; ++j) next = q0 + j < SPLITS ? fmaxf(next, gm[j]) : next;\n";
  s += "      const float ref = next == -coil_rt::inf<float>() ? 0.f : next;\n";
  s += fmt::format("      const float old = mx == -coil_rt::inf<float>() ? 0.f : {}_exp2(mx - ref);\n", hp);
  s += "      num *= old, den *= old, mx = next;\n";
  s += "      #pragma unroll\n      for (int j = 0; j < G; ++j) {\n        if (q0 + j >= SPLITS) break;\n";
  s += fmt::format("        const float w = {}_exp2(gm[j] - ref);\n", hp);
  s += "        num = fmaf(w, go[j], num), den = fmaf(w, gs[j], den);\n      }\n    }\n";
  s += "    " + store("i", "den > 0.f ? num / den : 0.f") + ";\n  }\n";
  s += "  if (tid == 0) ticket[bh] = 0u;\n}\n";
  return s;
}

}  // namespace coil::codegen::attention
