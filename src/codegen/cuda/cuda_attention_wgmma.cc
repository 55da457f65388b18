// The Hopper attention kernel (sm_90a, 64-wide heads): a warpgroup a block takes 64 query rows;
// key/value tiles of 64 keys stream through a ring of NS stages of dynamic shared memory by
// cp.async, tile j + 1 loading while tile j is used. Both products are wgmma: scores
// S = Q K^T (m64n64k16, queries and keys read from 128-byte swizzled tiles) and O += P V
// (the probabilities from registers, the values read transposed). The products overlap the
// softmax: each key tile's scores are issued together with the previous tile's output product,
// the kernel waits for the scores only, and the output product runs on the tensor cores while
// the softmax of the new scores runs on the other pipes; the output is rescaled once it is done.
#include <fmt/format.h>

#include "codegen/cuda/attention_parts.h"
#include "support/check.h"

namespace coil::codegen::attention {

namespace {

// A block: one warpgroup (wgmma's unit: four warps of 32 lanes; emit_cuda_attention checks the
// device's warp size), 64 query rows; key tiles of 64 keys; three stages (tile j + 1 loads
// while tile j's scores and tile j - 1's output product use theirs). Measured on an H100 (GPT-2's
// causal heads, B8 T1024): 0.0602 ms, against 0.0613 for two static buffers with each product
// waited for; 128-key tiles 0.067; two warpgroups a block 0.062-0.077; four stages 0.0612.
constexpr int kRows = 64, kKeys = 64, kStages = 3, kThreads = 128;

// The accumulator operand list "{%0, ..., %n-1}" and its constraints for `n` f32 registers.
std::string operands(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format("{}%{}", i ? ", " : "", i);
  return s;
}
std::string constraints(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  return s;
}

// wgmma helpers, once per element type and width: the shared-memory descriptor of a 128-byte
// swizzled tile, m64nNk16 with both operands in shared memory (the scores, `n` = the key tile)
// or the first in registers and the second read transposed (the output, `n` = the head), and
// `hold`, which keeps the compiler from touching an accumulator while a product is in flight.
std::string helpers(const std::string& hp, const char* type, int n_scores, int n_out) {
  std::string s = fmt::format("#ifndef {0}_WG\n#define {0}_WG\n", hp);
  // Start address, leading and stride byte offsets in 16-byte units; 128-byte swizzling. Both
  // offsets are the 1024 bytes from one 8-row atom to the next: the one the layout uses is right
  // whichever it is (a 64-element row is one atom wide).
  s += fmt::format(
      "static __device__ __forceinline__ unsigned long long {n}_desc(unsigned a) {{\n"
      "  return static_cast<unsigned long long>((a & 0x3FFFF) >> 4) | (64ull << 16) | (64ull << 32) | (1ull << 62);\n"
      "}}\n"
      "template <int N> static __device__ __forceinline__ void {n}_hold(float* x) {{\n"
      "  #pragma unroll\n  for (int i = 0; i < N; ++i) asm volatile(\"\" : \"+f\"(x[i]) :: \"memory\");\n"
      "}}\n"
      "static __device__ __forceinline__ void {n}_wg_fence() {{ asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }}\n"
      "static __device__ __forceinline__ void {n}_wg_commit() {{ asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\"); }}\n"
      "template <int K> static __device__ __forceinline__ void {n}_wg_wait() {{ asm volatile(\"wgmma.wait_group.sync.aligned %0;\\n\" :: \"n\"(K) : \"memory\"); }}\n",
      fmt::arg("n", hp));
  s += "#endif\n";
  s += fmt::format("#ifndef {0}_WGSS{1}\n#define {0}_WGSS{1}\n", hp, n_scores);
  s += fmt::format(
      "static __device__ __forceinline__ void {n}_wg_ss{w}(float* d, unsigned long long a, unsigned long long b, int accumulate) {{\n"
      "  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{i2}, 0;\\n\"\n"
      "               \"wgmma.mma_async.sync.aligned.m64n{w}k16.f32.{t}.{t} {{{d}}}, %{i0}, %{i1}, p, 1, 1, 0, 0;\\n}}\\n\"\n"
      "               : {acc}\n"
      "               : \"l\"(a), \"l\"(b), \"r\"(accumulate));\n"
      "}}\n",
      fmt::arg("n", hp), fmt::arg("t", type), fmt::arg("w", n_scores), fmt::arg("d", operands(n_scores / 2)), fmt::arg("acc", constraints(n_scores / 2)),
      fmt::arg("i0", n_scores / 2), fmt::arg("i1", n_scores / 2 + 1), fmt::arg("i2", n_scores / 2 + 2));
  s += "#endif\n";
  s += fmt::format("#ifndef {0}_WGRS{1}\n#define {0}_WGRS{1}\n", hp, n_out);
  s += fmt::format(
      "static __device__ __forceinline__ void {n}_wg_rs{w}(float* d, const uint32_t* a, unsigned long long b) {{\n"
      "  asm volatile(\"wgmma.mma_async.sync.aligned.m64n{w}k16.f32.{t}.{t} {{{d}}}, {{%{i0}, %{i1}, %{i2}, %{i3}}}, %{i4}, 1, 1, 1, 1;\\n\"\n"
      "               : {acc}\n"
      "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b));\n"
      "}}\n",
      fmt::arg("n", hp), fmt::arg("t", type), fmt::arg("w", n_out), fmt::arg("d", operands(n_out / 2)), fmt::arg("acc", constraints(n_out / 2)),
      fmt::arg("i0", n_out / 2), fmt::arg("i1", n_out / 2 + 1), fmt::arg("i2", n_out / 2 + 2), fmt::arg("i3", n_out / 2 + 3),
      fmt::arg("i4", n_out / 2 + 4));
  s += "#endif\n";
  return s;
}

}  // namespace

std::string emit_wgmma_attention(const Shape& a, const loop::ExternCall& call, const std::string& hp, const std::vector<std::string>& params,
                                 CudaKernel& info) {
  COIL_CHECK(a.E == 64) << call.name << ": the wgmma attention takes 64-wide heads";
  info.config.form = CudaConfig::Form::attention;
  info.config.block = kThreads;
  info.launch.block_x = kThreads;
  tile_launch(a, kRows, info);
  info.launch.shared_bytes = static_cast<int>((kRows + 2 * kStages * kKeys) * a.E * 2);

  std::string s = helpers(hp, a.half ? "f16" : "bf16", kKeys, static_cast<int>(a.E));
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kThreads, call.name, fmt::join(params, ", "));
  s += "  coil_rt::after_previous();\n  (void)E;\n";
  s += fmt::format("  constexpr int BM = {}, BN = {}, HD = {}, NS = {}, THREADS = {};\n", kRows, kKeys, a.E, kStages, kThreads);
  s += tile_constants(a, kRows);
  // The query tile, then NS key tiles, then NS value tiles: rows of 128 bytes whose 16-byte
  // pieces are swizzled, in 1024-byte atoms of 8 rows (the layout wgmma reads with 128-byte
  // swizzling).
  s += "  extern __shared__ __align__(1024) uint16_t coil_smem[];\n";
  s += fmt::format("  const unsigned Qs = {0}_smem(coil_smem), Ks = Qs + 2u * BM * HD, Vs = Ks + 2u * NS * BN * HD;\n", hp);
  s += "  const int warp = static_cast<int>(threadIdx.x) / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;\n";
  // Tiles move in 16-byte pieces, piece i of a tile by thread i % THREADS: this thread's first
  // piece (row, column), the others THREADS / (HD / 8) rows further each (constant offsets).
  s += "  const int piece_row = static_cast<int>(threadIdx.x) / (HD / 8), piece_col = static_cast<int>(threadIdx.x) % (HD / 8) * 8;\n";
  s += "  for (int64_t tile = blockIdx.x; tile < TILES; tile += gridDim.x) {\n";
  // Causal: the longest query tiles (the last ones) of every head first, so the short ones
  // fill the tail.
  if (a.causal)
    s += fmt::format("    const int64_t bh = tile % {};\n    const int q0 = static_cast<int>(TILES_Q - 1 - tile / {}) * BM;\n", text(a.batch),
                     text(a.batch));
  else
    s += "    const int64_t bh = tile / TILES_Q;\n    const int q0 = static_cast<int>(tile % TILES_Q) * BM;\n";
  s += fmt::format("    const int kv_end = {}, n = (kv_end + BN - 1) / BN;\n",
                   a.causal ? "static_cast<int>(q0 + BM < S ? q0 + BM : S)" : "static_cast<int>(S)");
  s += batch_offset(a.q, "qb") + batch_offset(a.k, "kb") + batch_offset(a.v, "vb") + batch_offset(a.o, "ob");
  if (a.mask) s += batch_offset(*a.mask, "mb");
  // Key/value tile j into stage j % NS; the query tile (zeros past the ends).
  s += fmt::format(
      "    auto load_kv = [&](int j) {{\n"
      "      const int k0 = j * BN;\n"
      "      const unsigned ks = Ks + 2u * (j % NS) * BN * HD, vs = Vs + 2u * (j % NS) * BN * HD;\n"
      "      const uint16_t* const kp = b{kb} + kb + (k0 + piece_row) * int64_t({kst}) + piece_col;\n"
      "      const uint16_t* const vp = b{vb} + vb + (k0 + piece_row) * int64_t({vst}) + piece_col;\n"
      "{pieces}"
      "        const int step = i0 / (HD / 8), row = piece_row + step, col = piece_col;\n"
      "        const bool inside = S % BN == 0 || k0 + row < S;\n"
      "        const int64_t back = inside ? 0 : k0 + row - (S - 1);  // past the end: the last row, not read\n"
      "        {n}_cp16({kd}, kp + (step - back) * int64_t({kst}), inside);\n"
      "        {n}_cp16({vd}, vp + (step - back) * int64_t({vst}), inside);\n"
      "      }}\n"
      "    }};\n"
      "{qpieces}"
      "      const int row = piece_row + i0 / (HD / 8), col = piece_col;\n"
      "      const bool inside = L % BM == 0 || q0 + row < L;\n"
      "      {n}_cp16({qd}, b{qbuf} + qb + (inside ? q0 + row : 0) * int64_t({qst}) + col, inside);\n"
      "    }}\n",
      fmt::arg("n", hp), fmt::arg("pieces", open_pieces("      ", "BN")), fmt::arg("qpieces", open_pieces("    ", "BM")),
      fmt::arg("kb", a.k.buffer), fmt::arg("kst", stride(a.k, 2)), fmt::arg("vb", a.v.buffer), fmt::arg("vst", stride(a.v, 2)),
      fmt::arg("kd", swizzled("ks")), fmt::arg("vd", swizzled("vs")), fmt::arg("qd", swizzled("Qs")), fmt::arg("qbuf", a.q.buffer),
      fmt::arg("qst", stride(a.q, 2)));
  // The first NS - 2 tiles, the queries in the first's commit group (every group committed,
  // empty past the last tile, so the wait below counts the same at every step).
  s += "    #pragma unroll\n    for (int j = 0; j < NS - 2; ++j) {\n      if (j < n) load_kv(j);\n      asm volatile(\"cp.async.commit_group;\\n\" ::);\n    }\n";
  // This warp's rows: row0 and row0 + 8 for this lane; the running max (base 2, scaled) and sum
  // per row, the output accumulator, the previous tile's probabilities (A fragments).
  s += "    const int wrow = q0 + warp * 16, row0 = wrow + g;\n";
  s += "    float o[HD / 8][4], sc[BN / 8][4], mr[2] = {-coil_rt::inf<float>(), -coil_rt::inf<float>()}, lr[2] = {0.f, 0.f};\n";
  s += "    uint32_t pw[BN / 16][4];\n";
  s += "    #pragma unroll\n    for (int d = 0; d < HD / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;\n";
  // Tile j lands (it loaded during step j - 1) and is made visible to wgmma's async proxy; after
  // the barrier every warp is done with tile j - 2, whose stage then takes tile j + NS - 2.
  s += "    auto tile_ready = [&](int j) {\n";
  s += "      asm volatile(\"cp.async.wait_group %0;\\n\" :: \"n\"(NS - 3));\n";
  s += "      asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n";
  s += "      __syncthreads();\n";
  s += "      if (j + NS - 2 < n) load_kv(j + NS - 2);\n";
  s += "      asm volatile(\"cp.async.commit_group;\\n\" ::);\n";
  s += "    };\n";
  // The products: tile j's scores (the first step overwriting), and tile j's share of the output.
  s += "    auto scores = [&](int j) {\n";
  s += "      const unsigned kt = Ks + 2u * (j % NS) * BN * HD;\n";
  s += fmt::format("      #pragma unroll\n      for (int kk = 0; kk < HD / 16; ++kk) {n}_wg_ss{bn}(&sc[0][0], {n}_desc(Qs + 32u * kk), {n}_desc(kt + 32u * kk), kk > 0);\n",
                   fmt::arg("n", hp), fmt::arg("bn", kKeys));
  s += fmt::format("      {}_wg_commit();\n", hp);
  s += "    };\n";
  s += "    auto outputs = [&](int j) {\n";
  s += "      const unsigned vt = Vs + 2u * (j % NS) * BN * HD;\n";
  s += fmt::format("      #pragma unroll\n      for (int kk = 0; kk < BN / 16; ++kk) {n}_wg_rs{e}(&o[0][0], pw[kk], {n}_desc(vt + 32u * kk * HD));\n",
                   fmt::arg("n", hp), fmt::arg("e", a.E));
  s += fmt::format("      {}_wg_commit();\n", hp);
  s += "    };\n";
  // The softmax of tile j's scores; it waits for the previous tile's output product (in flight
  // meanwhile) before rescaling the output.
  s += "    auto softmax = [&](int j) {\n";
  // Mask (a tile past the keys' end or across the diagonal), then the row max over the quad
  // that shares a row, on the raw scores when the scale is positive (it folds into exp2's
  // argument).
  s += "      const int k0 = j * BN;\n";
  if (a.prescale())
    s += fmt::format("      #pragma unroll\n      for (int i = 0; i < BN / 2; ++i) (&sc[0][0])[i] *= {:.9e}f;\n", a.scale_log2);
  s += fmt::format("      if ({}) {{\n", a.mask ? "true" : a.causal ? "k0 + BN > S || k0 + BN > wrow" : "k0 + BN > S");
  s += mask_scores(a, "        ", "sc", "row0");
  s += "      }\n";
  s += online_softmax("      ", "sc", "mr", "lr", hp, a.exp_scale());
  // The previous tile's output product is done: rescale, and pack this tile's probabilities (two
  // adjacent score tiles a 16-key A fragment) for the next product.
  s += fmt::format("      {0}_wg_wait<0>();\n      {0}_hold<HD / 2>(&o[0][0]);\n", hp);
  s += rescale_output("      ", "o[d]");
  s += "      #pragma unroll\n      for (int kk = 0; kk < BN / 16; ++kk) {\n";
  s += pack_probabilities("        ", "pw[kk]", "sc", hp);
  s += "      }\n";
  s += "    };\n";
  // Step j issues tile j's scores and tile j - 1's output product, then waits for the scores
  // only. No product sits in a branch (ptxas would serialize them), so step 0 runs the same
  // code: its output product adds zero probabilities times tile 0's values.
  s += "    #pragma unroll\n    for (int kk = 0; kk < BN / 16; ++kk) pw[kk][0] = pw[kk][1] = pw[kk][2] = pw[kk][3] = 0u;\n";
  s += "    for (int j = 0; j < n; ++j) {\n";
  s += fmt::format("      tile_ready(j);\n      {0}_wg_fence();\n      scores(j);\n      outputs(j > 0 ? j - 1 : 0);\n      {0}_wg_wait<1>();\n      {0}_hold<BN / 2>(&sc[0][0]);\n      softmax(j);\n", hp);
  s += "    }\n";
  s += fmt::format("    {0}_wg_fence();\n    outputs(n - 1);\n    {0}_wg_wait<0>();\n    {0}_hold<HD / 2>(&o[0][0]);\n", hp);
  // The row sums over the quad; rows nothing was visible to give 0.
  s += "    float l0 = lr[0], l1 = lr[1];\n";
  s += "    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);\n    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);\n";
  s += "    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);\n    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);\n";
  s += "    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;\n";
  s += "    const int r1 = row0 + 8;\n";
  const char* to_half = a.half ? "coil_rt::f32_to_f16" : "coil_rt::f32_to_bf16";
  s += "    #pragma unroll\n    for (int d = 0; d < HD / 8; ++d) {\n";
  s += "      const int col = d * 8 + t * 2;\n";
  for (const auto& [r, c, inv] : {std::tuple{"row0", 0, "inv0"}, std::tuple{"r1", 2, "inv1"}})
    s += fmt::format("      if ({r} < L) {{ b{ob}[ob + {r} * int64_t({os}) + col * int64_t({oc})] = {th}(o[d][{c}] * {inv}); "
                     "b{ob}[ob + {r} * int64_t({os}) + (col + 1) * int64_t({oc})] = {th}(o[d][{c1}] * {inv}); }}\n",
                     fmt::arg("r", r), fmt::arg("c", c), fmt::arg("c1", c + 1), fmt::arg("inv", inv), fmt::arg("ob", a.o.buffer),
                     fmt::arg("os", stride(a.o, 2)), fmt::arg("oc", stride(a.o, 1)), fmt::arg("th", to_half));
  s += "    }\n";
  // The next tile's loads reuse the stages and the query tile.
  s += "    __syncthreads();\n";
  s += "  }\n}\n";
  return s;
}

}  // namespace coil::codegen::attention
