// Attention of a few query rows (at most 16: decoding, where grouped_attention makes the query
// heads of one key/value head its rows) over many keys, split over the keys as flash-decoding
// does: a block takes one (batch, head) and a chunk of 32 keys, so that a step's few heads still
// fill the GPU and its blocks wait for their keys together, not one tile after another. A block
// keeps the queries (f32) and the chunk's values in shared memory; a thread's key (loaded first,
// into registers) against its rows (f32 FMAs, the products too small for tensor cores), the chunk's softmax per row (base 2,
// the scale folded in), then its share of the output. Each block leaves its rows' max, sum and
// output in scratch; the last of a head's blocks to arrive (a ticket) merges them and stores
// the result, and sets the ticket back to zero.
#include <fmt/format.h>

#include "codegen/cuda/attention_parts.h"
#include "support/check.h"

namespace coil::codegen::attention {

namespace {

// 32 keys a block: at decoding's few heads, more blocks; 8 threads a key for its scores. The
// merge reads up to kMergeGroup splits at once.
constexpr int kKeys = 32, kThreads = 256, kMergeGroup = 16;

}  // namespace

std::string emit_decode_attention(const Shape& a, const loop::ExternCall& call, const std::string& hp, std::vector<std::string> params,
                                  CudaKernel& info) {
  COIL_CHECK(a.fixed() && *a.L.constant() <= kDecodeRows) << call.name << ": the decoding attention takes a few query rows, static sizes";
  const int64_t L = *a.L.constant(), S = *a.S.constant(), batch = *a.batch.constant();
  const int64_t splits = (S + kKeys - 1) / kKeys, units = batch * splits;
  // Scratch: a ticket per (batch, head), then per (batch, head, split, row) the max and the sum,
  // then the output rows (f32).
  const int64_t tickets = (batch * 4 + 255) / 256 * 256, stats = batch * splits * L;
  info.config.form = CudaConfig::Form::attention;
  info.config.block = kThreads;
  info.launch.block_x = kThreads;
  info.launch.units = units;
  info.launch.per_block = 1;
  info.launch.max_blocks = units;
  if (splits > 1) info.launch.scratch_bytes = tickets + 4 * (2 * stats + stats * a.E);

  const bool vec = vectorizable(a.q) && vectorizable(a.k) && vectorizable(a.v);
  if (splits > 1) params.push_back("unsigned char* __restrict__ W");
  const char* widen = a.half ? "coil_rt::f16_to_f32" : "coil_rt::bf16_to_f32";
  const char* narrow = a.half ? "coil_rt::f32_to_f16" : "coil_rt::f32_to_bf16";
  std::string s = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kThreads, call.name, fmt::join(params, ", "));
  s += "  coil_rt::after_previous();\n  (void)E;\n";
  s += fmt::format("  constexpr int L = {}, S = {}, HD = {}, KC = {}, SPLITS = {}, THREADS = {};\n", L, S, a.E, kKeys, splits, kThreads);
  s += "  __shared__ float qs[L][HD];\n  __shared__ float ps[L][KC];\n  __shared__ __align__(16) uint16_t vs[KC][HD];\n";
  s += "  __shared__ float row_max[L], row_sum[L];\n  __shared__ bool last;\n";
  s += "  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;\n";
  if (splits > 1) {
    s += fmt::format("  unsigned* const ticket = reinterpret_cast<unsigned*>(W);\n"
                     "  float* const pmax = reinterpret_cast<float*>(W + {});\n  float* const psum = pmax + {};\n  float* const pout = psum + {};\n",
                     tickets, stats, stats);
  }
  s += fmt::format("  for (int64_t unit = blockIdx.x; unit < {}; unit += gridDim.x) {{\n", units);
  s += "    const int64_t bh = unit / SPLITS;\n    const int split = static_cast<int>(unit % SPLITS), k0 = split * KC;\n";
  s += batch_offset(a.q, "qb") + batch_offset(a.k, "kb") + batch_offset(a.v, "vb") + batch_offset(a.o, "ob");
  if (a.mask) s += batch_offset(*a.mask, "mb");
  // The queries (f32) and the chunk's values (zeros past the keys' end) into shared memory.
  s += fmt::format("    for (int i = tid; i < L * HD; i += THREADS) qs[i / HD][i % HD] = {}(b{}[qb + (i / HD) * int64_t({}) + i % HD]);\n", widen,
                   a.q.buffer, stride(a.q, 2));
  // The thread's key row is requested first (registers, 16-byte pieces where aligned), so that
  // its latency overlaps the queries' and values'.
  s += "    const int kk = tid % KC, part = tid / KC, key = k0 + kk;\n";
  s += fmt::format("    const uint16_t* kp = b{} + kb + (key < S ? key : 0) * int64_t({});\n", a.k.buffer, stride(a.k, 2));
  if (vec) {
    s += "    uint4 kraw[HD / 8];\n    #pragma unroll\n    for (int c = 0; c < HD / 8; ++c) kraw[c] = *reinterpret_cast<const uint4*>(kp + c * 8);\n";
  }
  s += fmt::format("    for (int i = tid; i < KC * HD / 8; i += THREADS) {{\n"
                   "      const int key_v = k0 + i / (HD / 8), col = i % (HD / 8) * 8;\n"
                   "      const uint16_t* src = b{} + vb + (key_v < S ? key_v : 0) * int64_t({}) + col;\n",
                   a.v.buffer, stride(a.v, 2));
  if (vec)
    s += "      *reinterpret_cast<uint4*>(&vs[i / (HD / 8)][col]) = key_v < S ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);\n";
  else
    s += "      for (int j = 0; j < 8; ++j) vs[i / (HD / 8)][col + j] = key_v < S ? src[j] : uint16_t(0);\n";
  s += "    }\n";
  // Scores: THREADS / KC threads a key, each for every (THREADS / KC)-th row; masked, in base 2
  // with the scale. The mask's values are requested with the key, before the block waits for
  // its loads (after the scores, each was one more round trip).
  s += "    constexpr int PARTS = THREADS / KC, MINE = (L + PARTS - 1) / PARTS;\n";
  if (a.mask) {
    const loop::View& m = *a.mask;
    const char* mw = a.mask_dtype == DType::f16 ? "coil_rt::f16_to_f32" : a.mask_dtype == DType::bf16 ? "coil_rt::bf16_to_f32" : "";
    const std::string value = fmt::format("b{}[mb + row * int64_t({}) + key * int64_t({})]", m.buffer, stride(m, 2), stride(m, 1));
    s += fmt::format("    {} masked[MINE];\n    #pragma unroll\n    for (int r = 0; r < MINE; ++r) {{\n", a.mask_dtype == DType::b8 ? "bool" : "float");
    s += "      const int row = PARTS * r + part;\n";
    s += a.mask_dtype == DType::b8 ? fmt::format("      masked[r] = row < L && key < S ? {} : false;\n    }}\n", value)
                                   : fmt::format("      masked[r] = row < L && key < S ? {}({}) * {:.9e}f : 0.f;\n    }}\n", mw, value, std::numbers::log2e);
  }
  s += "    __syncthreads();\n";
  s += "    {\n";
  s += "      float acc[MINE];\n      #pragma unroll\n      for (int r = 0; r < MINE; ++r) acc[r] = 0.f;\n";
  s += "      #pragma unroll\n      for (int d0 = 0; d0 < HD; d0 += 8) {\n        float kv[8];\n";
  if (vec) {
    s += "        const uint16_t* h = reinterpret_cast<const uint16_t*>(&kraw[d0 / 8]);\n";
    s += fmt::format("        #pragma unroll\n        for (int j = 0; j < 8; ++j) kv[j] = {}(h[j]);\n", widen);
  } else {
    s += fmt::format("        #pragma unroll\n        for (int j = 0; j < 8; ++j) kv[j] = {}(kp[d0 + j]);\n", widen);
  }
  s += "        #pragma unroll\n        for (int r = 0; r < MINE; ++r) {\n";
  s += "          const int row = PARTS * r + part;\n          if (row >= L) break;\n";
  s += "          #pragma unroll\n          for (int j = 0; j < 8; ++j) acc[r] = fmaf(qs[row][d0 + j], kv[j], acc[r]);\n";
  s += "        }\n      }\n";
  s += "      #pragma unroll\n      for (int r = 0; r < MINE; ++r) {\n";
  s += "        const int row = PARTS * r + part;\n        if (row >= L) break;\n";
  s += fmt::format("        float sc = acc[r] * {:.9e}f;\n", a.scale_log2);
  s += fmt::format("        if (key >= S{}) sc = -coil_rt::inf<float>();\n", a.causal ? " || key > row" : "");
  if (a.mask) s += a.mask_dtype == DType::b8 ? "        else if (!masked[r]) sc = -coil_rt::inf<float>();\n" : "        else sc += masked[r];\n";
  s += "        ps[row][kk] = sc;\n      }\n    }\n    __syncthreads();\n";
  // The chunk's softmax per row, a warp a row: max (0 as the reference where nothing is
  // visible), probabilities in place, their sum.
  s += "    for (int row = warp; row < L; row += THREADS / 32) {\n";
  s += "      float mx = -coil_rt::inf<float>();\n      for (int k = lane; k < KC; k += 32) mx = fmaxf(mx, ps[row][k]);\n";
  s += "      #pragma unroll\n      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));\n";
  s += "      const float ref = mx == -coil_rt::inf<float>() ? 0.f : mx;\n      float sum = 0.f;\n";
  s += fmt::format("      for (int k = lane; k < KC; k += 32) {{\n        const float p = {}_exp2(ps[row][k] - ref);\n        ps[row][k] = p;\n        sum += p;\n      }}\n", hp);
  s += "      #pragma unroll\n      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);\n";
  s += "      if (lane == 0) row_max[row] = mx, row_sum[row] = sum;\n    }\n    __syncthreads();\n";
  // This chunk's output rows: alone (one split) normalized and stored, else to scratch.
  auto store = [&](const std::string& value) {
    return fmt::format("b{}[ob + r * int64_t({}) + d * int64_t({})] = {}({})", a.o.buffer, stride(a.o, 2), stride(a.o, 1), narrow, value);
  };
  s += "    for (int i = tid; i < L * HD; i += THREADS) {\n      const int r = i / HD, d = i % HD;\n      float o = 0.f;\n";
  s += fmt::format("      #pragma unroll 8\n      for (int k = 0; k < KC; ++k) o = fmaf(ps[r][k], {}(vs[k][d]), o);\n", widen);
  if (splits == 1) {
    s += "      const float l = row_sum[r];\n      " + store("l > 0.f ? o / l : 0.f") + ";\n    }\n    __syncthreads();\n  }\n}\n";
    return s;
  }
  s += "      pout[((bh * SPLITS + split) * L + r) * HD + d] = o;\n    }\n";
  s += "    if (tid < L) {\n      pmax[(bh * SPLITS + split) * L + tid] = row_max[tid];\n      psum[(bh * SPLITS + split) * L + tid] = row_sum[tid];\n    }\n";
  s += "    __threadfence();\n    __syncthreads();\n";
  s += "    if (tid == 0) last = atomicAdd(ticket + bh, 1u) == SPLITS - 1u;\n    __syncthreads();\n";
  s += "    if (!last) continue;\n    __threadfence();\n";
  // The merge: each split's rows rescaled to the rows' overall max, in groups of G splits whose
  // max, sum and output are all requested at once (one round trip a group; before, the maxima
  // were read in a pass of their own), each group's sums rescaling those before it.
  s += "    for (int i = tid; i < L * HD; i += THREADS) {\n      const int r = i / HD, d = i % HD;\n";
  s += "      float mx = -coil_rt::inf<float>(), num = 0.f, den = 0.f;\n";
  s += fmt::format("      constexpr int G = {};\n", std::min<int64_t>(splits, kMergeGroup));
  s += "      for (int q0 = 0; q0 < SPLITS; q0 += G) {\n        float gm[G], go[G], gs[G];\n";
  s += "        #pragma unroll\n        for (int j = 0; j < G; ++j) {\n          const int64_t at = (bh * SPLITS + (q0 + j < SPLITS ? q0 + j : 0)) * L + r;\n";
  s += "          gm[j] = coil_rt::load_l2(pmax + at), go[j] = coil_rt::load_l2(pout + at * HD + d), gs[j] = coil_rt::load_l2(psum + at);\n";
  s += "        }\n        float next = mx;\n";
  s += "        #pragma unroll\n        for (int j = 0; j < G; ++j) next = q0 + j < SPLITS ? fmaxf(next, gm[j]) : next;\n";
  s += "        const float ref = next == -coil_rt::inf<float>() ? 0.f : next;\n";
  s += fmt::format("        const float old = mx == -coil_rt::inf<float>() ? 0.f : {}_exp2(mx - ref);\n", hp);
  s += "        num *= old, den *= old, mx = next;\n";
  s += "        #pragma unroll\n        for (int j = 0; j < G; ++j) {\n          if (q0 + j >= SPLITS) break;\n";
  s += fmt::format("          const float w = {}_exp2(gm[j] - ref);\n", hp);
  s += "          num = fmaf(w, go[j], num), den = fmaf(w, gs[j], den);\n        }\n      }\n";
  s += "      " + store("den > 0.f ? num / den : 0.f") + ";\n    }\n";
  s += "    if (tid == 0) ticket[bh] = 0u;\n    __syncthreads();\n  }\n}\n";
  return s;
}

}  // namespace coil::codegen::attention
