// Fused attention on CUDA (flash-attention style): a block takes 64 or 128 query rows of one
// (batch, head); key/value tiles stream through double-buffered shared memory (cp.async, the
// next tile loading while this one is used) while each warp keeps its scores, running row max
// and sum, and output accumulator in registers (f32). The softmax is the online one, in base 2
// with the scale folded into exp2's argument. The scores never reach global memory.
// - On Hopper (sm_90a) with 64-wide heads: one warpgroup a block, both products wgmma
//   m64n64k16 (f16/bf16 in, f32 accumulate) reading queries and keys from 128-byte-swizzled
//   shared memory, and the probabilities from registers against the values read transposed.
// - Otherwise: mma.sync m16n8k16 per warp, 16 rows a warp (32 where the head is at most 64: a
//   key or value fragment then serves two row tiles), query fragments in registers, key and
//   value B fragments read with ldmatrix (transposed for V).
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

// Warps per block. Each takes 16 query rows per row tile, and two row tiles where the head is
// small enough for their accumulators to stay in registers and the queries are more than one
// block's 64 rows: a key or value fragment read from shared memory then serves both.
constexpr int kWarps = 4;
int row_tiles(int64_t head, int64_t queries) { return head <= 64 && queries > 16 * kWarps ? 2 : 1; }

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

// The wgmma helpers (sm_90a), once per element type: a shared-memory matrix descriptor for the
// 128-byte-swizzled tiles, and m64n64k16 products with both operands in shared memory (scores)
// or the first in registers and the second read transposed (output).
std::string wgmma_helpers(const std::string& hp, const char* type) {
  std::string d;  // the 32 accumulator operands
  for (int i = 0; i < 32; ++i) d += fmt::format("{}%{}", i ? ", " : "", i);
  std::string acc;
  for (int i = 0; i < 32; ++i) acc += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  std::string s = fmt::format("#ifndef {}_WGMMA\n#define {}_WGMMA\n", hp, hp);
  // Start address, leading and stride byte offsets in 16-byte units; 128-byte swizzling. Both
  // offsets are the 1024 bytes from one 8-row atom to the next: the one the layout uses is right
  // whichever it is (a 64-element row is one atom wide).
  s += fmt::format(
      "static __device__ __forceinline__ unsigned long long {n}_desc(const void* p) {{\n"
      "  return static_cast<unsigned long long>(({n}_smem(p) & 0x3FFFF) >> 4) | (64ull << 16) | (64ull << 32) | (1ull << 62);\n"
      "}}\n"
      "static __device__ __forceinline__ void {n}_wg_ss(float* d, unsigned long long a, unsigned long long b, int accumulate) {{\n"
      "  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %34, 0;\\n\"\n"
      "               \"wgmma.mma_async.sync.aligned.m64n64k16.f32.{t}.{t} {{{d}}}, %32, %33, p, 1, 1, 0, 0;\\n}}\\n\"\n"
      "               : {acc}\n"
      "               : \"l\"(a), \"l\"(b), \"r\"(accumulate));\n"
      "}}\n"
      "static __device__ __forceinline__ void {n}_wg_rs(float* d, const uint32_t* a, unsigned long long b) {{\n"
      "  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n\"\n"
      "               \"wgmma.mma_async.sync.aligned.m64n64k16.f32.{t}.{t} {{{d}}}, {{%32, %33, %34, %35}}, %36, p, 1, 1, 1;\\n}}\\n\"\n"
      "               : {acc}\n"
      "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b));\n"
      "}}\n",
      fmt::arg("n", hp), fmt::arg("t", type), fmt::arg("d", d), fmt::arg("acc", acc));
  s += "#endif\n";
  return s;
}

}  // namespace

std::string emit_cuda_attention(const loop::Program& p, const loop::ExternCall& call, const cuda::DeviceInfo& device, CudaKernel& info) {
  COIL_CHECK(call.kind == loop::ExternKind::attention && call.inputs.size() == 3) << call.name;
  const loop::View &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(call.output)];
  loop::View o = call.output_view ? *call.output_view : loop::View{call.output, ob.sizes, ob.strides, ob.offset};
  const size_t r = q.sizes.size();
  const int64_t L = constant(q.sizes[r - 2], "query length"), S = constant(k.sizes[r - 2], "key length");
  const int64_t E = constant(q.sizes[r - 1], "head size");
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= constant(q.sizes[d], "batch size");
  const int bn = E <= 64 ? 64 : 32;
  const bool causal = call.params.at(1) != 0;
  const double scale_log2 = call.params.at(0) * std::numbers::log2e;
  // A positive scale is applied inside exp2's argument (an FFMA per score, the max taken on the
  // raw scores); any other multiplies the scores first.
  const bool prescale = !(scale_log2 > 0);
  const double exp_scale = prescale ? 1.0 : scale_log2;
  bool vec = vectorizable(q) && vectorizable(k) && vectorizable(v);
  // Hopper (sm_90a) with 64-wide heads whose rows move in 16-byte pieces: warpgroup MMAs (wgmma)
  // straight from shared memory, one warpgroup a block.
  const bool wg = device.arch() == "sm_90a" && E == 64 && vec;
  const int mt = wg ? 1 : row_tiles(E, L), rows = 16 * kWarps * mt;
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
  const int64_t tiles = batch * ((L + rows - 1) / rows);
  info.config.form = CudaConfig::Form::attention;
  info.config.block = kWarps * warp;
  info.launch.block_x = kWarps * warp;
  info.launch.units = tiles;
  info.launch.per_block = 1;
  info.launch.max_blocks = tiles;

  auto stride = [&](const loop::View& x, size_t from_end) { return constant(x.strides[x.strides.size() - from_end], "stride"); };
  const std::string n = call.name;
  const char* mma_type = half ? "f16.f16" : "bf16.bf16";
  const char* to_half = half ? "coil_rt::f32_to_f16" : "coil_rt::f32_to_bf16";

  std::string s;
  s += fmt::format("// computes %{} (attention {}x{} keys {} head {}{}, {} rows per block)\n", fmt::join(call.origins, ", %"), batch, L, S, E,
                   causal ? " causal" : "", rows);
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
      "  uint32_t r;\n"
      "  asm(\"cvt.rn.{pk}x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
      "  return r;\n"
      "}}\n"
      // 2^x in one instruction (flushing subnormal results, which a probability this small
      // does not miss).
      "static __device__ __forceinline__ float {n}_exp2(float x) {{\n"
      "  float y;\n"
      "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
      "  return y;\n"
      "}}\n"
      // Two adjacent elements as one register (zeros outside).
      "static __device__ __forceinline__ uint32_t {n}_pair(const uint16_t* src, bool inside, bool vec) {{\n"
      "  if (!inside) return 0u;\n"
      "  if (vec) return *reinterpret_cast<const uint32_t*>(src);\n"
      "  return static_cast<uint32_t>(src[0]) | (static_cast<uint32_t>(src[1]) << 16);\n"
      "}}\n"
      // 16 bytes into shared memory at `dst` (a shared-space address), zeros when outside.
      "static __device__ __forceinline__ void {n}_cp16(unsigned dst, const uint16_t* src, bool inside) {{\n"
      "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"(dst), \"l\"(src), \"r\"(inside ? 16 : 0));\n"
      "}}\n"
      // Eight adjacent elements of a row into shared memory: cp.async when aligned (zero-filled
      // outside), else element by element.
      "static __device__ __forceinline__ void {n}_row8(uint16_t* dst, const uint16_t* src, bool inside, bool vec) {{\n"
      "  if (vec) {{\n"
      "    {n}_cp16({n}_smem(dst), src, inside);\n"
      "  }} else {{\n"
      "    for (int q = 0; q < 8; ++q) dst[q] = inside ? src[q] : uint16_t(0);\n"
      "  }}\n"
      "}}\n",
      fmt::arg("n", hp), fmt::arg("mt", mma_type), fmt::arg("pk", half ? "f16" : "bf16"));
  s += "#endif\n";
  if (wg) s += wgmma_helpers(hp, half ? "f16" : "bf16");
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kWarps * warp, n, fmt::join(params, ", "));
  s += "  (void)E;\n";
  s += fmt::format("  constexpr int MT = {}, BM = {}, BN = {}, HD = {}, PAD = 8, THREADS = {};\n", mt, rows, bn, E, kWarps * warp);
  s += fmt::format("  constexpr int64_t L = {}, S = {}, TILES_Q = {};\n", L, S, (L + rows - 1) / rows);
  // Key and value tiles, double-buffered: the next tile loads while this one is used.
  if (wg) {
    // Rows of 128 bytes whose 16-byte pieces are swizzled (piece c of row r at c ^ (r % 8)), in
    // 1024-byte atoms of 8 rows: the layout wgmma reads with 128-byte swizzling.
    s += "  __shared__ __align__(1024) uint16_t Qs[BM * HD];\n";
    s += "  __shared__ __align__(1024) uint16_t Ks[2][BN * HD];\n";
    s += "  __shared__ __align__(1024) uint16_t Vs[2][BN * HD];\n";
  } else {
    s += "  __shared__ __align__(16) uint16_t Ks[2][BN][HD + PAD];\n";
    s += "  __shared__ __align__(16) uint16_t Vs[2][BN][HD + PAD];\n";
  }
  // Buffer bases are kBufferAlignment-aligned, so row starts that are multiples of 8 elements are too.
  s += fmt::format("  constexpr bool vec = {};\n", vec ? "true" : "false");
  s += "  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;\n";
  // Tiles move in 16-byte pieces, piece i of a tile by thread i % THREADS: this thread's first
  // piece (row, column), the others THREADS / (HD / 8) rows further each (constant offsets).
  s += "  const int piece_row = static_cast<int>(threadIdx.x) / (HD / 8), piece_col = static_cast<int>(threadIdx.x) % (HD / 8) * 8;\n";
  s += fmt::format("  for (int64_t tile = blockIdx.x; tile < {}; tile += gridDim.x) {{\n", tiles);
  // Causal: the longest query tiles (the last ones) of every head first, so the short ones
  // fill the tail.
  if (causal)
    s += fmt::format("    const int64_t bh = tile % {};\n    const int q0 = static_cast<int>(TILES_Q - 1 - tile / {}) * BM;\n", batch, batch);
  else
    s += "    const int64_t bh = tile / TILES_Q;\n    const int q0 = static_cast<int>(tile % TILES_Q) * BM;\n";
  s += batch_offset(q, "qb") + batch_offset(k, "kb") + batch_offset(v, "vb") + batch_offset(o, "ob");
  // wgmma tiles: the shared-memory address of element `col` (a multiple of 8) of row `row` of
  // a tile at `base` (32-bit arithmetic from one conversion of the tile's address).
  auto swizzled = [](const std::string& base) { return base + " + 2u * (row * HD + (((col >> 3) ^ (row & 7)) << 3))"; };
  // One 16-byte piece of a K or V row into its tile: straight cp.async into the swizzled wgmma
  // tile, else through row8 (its padded tile, or element by element).
  auto piece = [&](const std::string& tile, const std::string& src) {
    if (wg) return fmt::format("{}_cp16({}, {}, inside);", hp, swizzled(tile + "0"), src);
    return fmt::format("{}_row8(&{}[buf][row][col], {}, inside, vec);", hp, tile, src);
  };
  // Opens the unrolled loop over the 16-byte pieces of a tile of `tile_rows` rows, i0 the first
  // piece of the pass (the thread's is i0 + threadIdx.x).
  auto open_pieces = [](const std::string& indent, const char* tile_rows) {
    return fmt::format("{0}#pragma unroll\n{0}for (int i0 = 0; i0 < {1} * HD / 8; i0 += THREADS) {{\n"
                       "{0}  if (({1} * HD / 8) % THREADS != 0 && i0 + static_cast<int>(threadIdx.x) >= {1} * HD / 8) break;\n",
                       indent, tile_rows);
  };
  s += fmt::format(
      "    auto load_kv = [&](int k0, int buf) {{\n"
      "      const uint16_t* const kp = b{kb} + kb + (k0 + piece_row) * int64_t({ks}) + piece_col;\n"
      "      const uint16_t* const vp = b{vb} + vb + (k0 + piece_row) * int64_t({vs}) + piece_col;\n"
      "{tiles}{pieces}"
      "        const int step = i0 / (HD / 8), row = piece_row + step, col = piece_col;\n"
      "        const bool inside = S % BN == 0 || k0 + row < S;\n"
      "        const int64_t back = inside ? 0 : k0 + row - (S - 1);  // past the end: the last row, not read\n"
      "        {kpiece}\n"
      "        {vpiece}\n"
      "      }}\n"
      "      asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
      "    }};\n",
      fmt::arg("pieces", open_pieces("      ", "BN")), fmt::arg("kb", k.buffer), fmt::arg("ks", stride(k, 2)), fmt::arg("vb", v.buffer), fmt::arg("vs", stride(v, 2)),
      fmt::arg("tiles", wg ? fmt::format("      const unsigned Ks0 = {n}_smem(Ks[buf]), Vs0 = {n}_smem(Vs[buf]);\n", fmt::arg("n", hp)) : ""),
      fmt::arg("kpiece", piece("Ks", fmt::format("kp + (step - back) * int64_t({})", stride(k, 2)))),
      fmt::arg("vpiece", piece("Vs", fmt::format("vp + (step - back) * int64_t({})", stride(v, 2)))));
  // The warp's rows: MT tiles of 16, row0[m] and row0[m] + 8 of tile m for this lane.
  s += "    const int wrow = q0 + warp * 16 * MT;\n";
  s += "    int row0[MT];\n";
  s += "    #pragma unroll\n    for (int m = 0; m < MT; ++m) row0[m] = wrow + m * 16 + g;\n";
  if (wg) {
    // The block's query rows into shared memory (zeros past the end), with the first key tile.
    s += open_pieces("    ", "BM");
    s += "      const int row = piece_row + i0 / (HD / 8), col = piece_col;\n";
    s += "      const bool inside = L % BM == 0 || q0 + row < L;\n";
    s += fmt::format("      {n}_cp16({qd}, b{qb} + qb + (inside ? q0 + row : 0) * int64_t({qs}) + col, inside);\n", fmt::arg("n", hp),
                     fmt::arg("qd", swizzled(hp + "_smem(Qs)")), fmt::arg("qb", q.buffer), fmt::arg("qs", stride(q, 2)));
    s += "    }\n";
  } else {
    // The warp's query rows as A fragments, straight from global memory.
    s += "    uint32_t qf[MT][HD / 16][4];\n";
    s += "    #pragma unroll\n    for (int m = 0; m < MT; ++m) {\n";
    s += "      #pragma unroll\n      for (int kk = 0; kk < HD / 16; ++kk) {\n";
    s += fmt::format(
        "        const int r0 = row0[m], r1 = row0[m] + 8;\n"
        "        const uint16_t* p0 = b{qb} + qb + (r0 < L ? r0 : 0) * int64_t({qs}) + kk * 16 + t * 2;\n"
        "        const uint16_t* p1 = b{qb} + qb + (r1 < L ? r1 : 0) * int64_t({qs}) + kk * 16 + t * 2;\n"
        "        qf[m][kk][0] = {n}_pair(p0, r0 < L, vec);\n        qf[m][kk][1] = {n}_pair(p1, r1 < L, vec);\n"
        "        qf[m][kk][2] = {n}_pair(p0 + 8, r0 < L, vec);\n        qf[m][kk][3] = {n}_pair(p1 + 8, r1 < L, vec);\n",
        fmt::arg("n", hp), fmt::arg("qb", q.buffer), fmt::arg("qs", stride(q, 2)));
    s += "      }\n    }\n";
  }
  // Per row pair (m, 0 | 1): the running max (base 2, scaled) and sum, and the output accumulator.
  s += "    float o[MT][HD / 8][4], mr[MT][2], lr[MT][2];\n";
  s += "    #pragma unroll\n    for (int m = 0; m < MT; ++m) {\n";
  s += "      mr[m][0] = mr[m][1] = -coil_rt::inf<float>();\n      lr[m][0] = lr[m][1] = 0.f;\n";
  s += "      #pragma unroll\n      for (int d = 0; d < HD / 8; ++d) o[m][d][0] = o[m][d][1] = o[m][d][2] = o[m][d][3] = 0.f;\n";
  s += "    }\n";
  s += fmt::format("    const int kv_end = {};\n", causal ? "static_cast<int>(q0 + BM < S ? q0 + BM : S)" : "static_cast<int>(S)");
  s += "    load_kv(0, 0);\n";
  s += "    for (int k0 = 0, buf = 0; k0 < kv_end; k0 += BN, buf ^= 1) {\n";
  s += "      if (k0 + BN < kv_end) {\n";
  s += "        load_kv(k0 + BN, buf ^ 1);\n";
  s += "        asm volatile(\"cp.async.wait_group 1;\\n\" ::);\n";
  s += "      } else {\n";
  s += "        asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n";
  s += "      }\n";
  // What cp.async wrote is read by wgmma through the async proxy.
  if (wg) s += "      asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n";
  s += "      __syncthreads();\n";
  // wgmma: a fence, one product per 16-element step kk (of `steps`), their commit, and the wait
  // for them.
  auto wgmma_batch = [&](const char* steps, const std::string& product) {
    s += "      asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n";
    s += fmt::format("      #pragma unroll\n      for (int kk = 0; kk < {}; ++kk)\n        {};\n", steps, product);
    s += "      asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n";
    s += "      asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n";
  };
  // Row tile m's probabilities for keys [16 kk, 16 kk + 16) as an A fragment `dest` (two adjacent
  // score tiles, packed to 16 bits).
  auto pack_probabilities = [&](const std::string& dest, const std::string& m, const std::string& in) {
    s += fmt::format("{in}{d}[0] = {n}_pack(sc[{m}][2 * kk][0], sc[{m}][2 * kk][1]);\n{in}{d}[1] = {n}_pack(sc[{m}][2 * kk][2], sc[{m}][2 * kk][3]);\n"
                     "{in}{d}[2] = {n}_pack(sc[{m}][2 * kk + 1][0], sc[{m}][2 * kk + 1][1]);\n{in}{d}[3] = {n}_pack(sc[{m}][2 * kk + 1][2], sc[{m}][2 * kk + 1][3]);\n",
                     fmt::arg("in", in), fmt::arg("d", dest), fmt::arg("m", m), fmt::arg("n", hp));
  };
  s += "      float sc[MT][BN / 8][4];\n";
  if (wg) {
    // S = Q K^T for the block's 64 rows: one m64n64k16 wgmma per 16 of the head's elements, the
    // first overwriting the accumulator.
    wgmma_batch("HD / 16", fmt::format("{n}_wg_ss(&sc[0][0][0], {n}_desc(&Qs[kk * 16]), {n}_desc(&Ks[buf][kk * 16]), kk > 0)", fmt::arg("n", hp)));
  } else {
    // Scores: 16 * MT rows x BN keys per warp; each ldmatrix of two key tiles' B fragments serves
    // all MT row tiles.
    s += "      #pragma unroll\n      for (int m = 0; m < MT; ++m)\n";
    s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; ++nt) sc[m][nt][0] = sc[m][nt][1] = sc[m][nt][2] = sc[m][nt][3] = 0.f;\n";
    s += "      #pragma unroll\n      for (int kk = 0; kk < HD / 16; ++kk) {\n";
    s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; nt += 2) {\n";
    s += "          uint32_t b[4];\n";
    s += fmt::format("          {}_ldm<false>(b, &Ks[buf][(nt + (lane >> 4)) * 8 + (lane & 7)][kk * 16 + ((lane >> 3) & 1) * 8]);\n", hp);
    s += "          #pragma unroll\n          for (int m = 0; m < MT; ++m) {\n";
    s += fmt::format("            {n}_mma(sc[m][nt], qf[m][kk], b[0], b[1]);\n            {n}_mma(sc[m][nt + 1], qf[m][kk], b[2], b[3]);\n",
                     fmt::arg("n", hp));
    s += "          }\n        }\n      }\n";
  }
  // Mask, then the row max over the quad that shares a row, on the raw scores: with a positive
  // scale the scaled max is the max scaled, and scaling folds into exp2's argument (one FFMA).
  // Only a tile past the keys' end or across the diagonal needs the mask.
  s += fmt::format("      const bool masked = k0 + BN > S{};\n", causal ? " || k0 + BN > wrow" : "");
  if (prescale) {  // before the mask, which sets -inf
    s += "      #pragma unroll\n      for (int m = 0; m < MT; ++m)\n";
    s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; ++nt)\n";
    s += fmt::format("          #pragma unroll\n          for (int c = 0; c < 4; ++c) sc[m][nt][c] *= {:.9e}f;\n", scale_log2);
  }
  // One branch for all row tiles, so that the rest of the tile is one block of straight-line
  // code the compiler can interleave (one row tile's softmax with the other's products).
  s += "      if (masked) {\n";
  s += "        #pragma unroll\n        for (int m = 0; m < MT; ++m)\n";
  s += "          #pragma unroll\n          for (int nt = 0; nt < BN / 8; ++nt)\n";
  s += "            #pragma unroll\n            for (int c = 0; c < 4; ++c) {\n";
  s += "              const int key = k0 + nt * 8 + t * 2 + (c & 1);\n";
  s += fmt::format("              if (key >= S{}) sc[m][nt][c] = -coil_rt::inf<float>();\n", causal ? " || key > row0[m] + (c < 2 ? 0 : 8)" : "");
  s += "            }\n";
  s += "      }\n";
  s += "      #pragma unroll\n      for (int m = 0; m < MT; ++m) {\n";
  s += "        float mx0 = -coil_rt::inf<float>(), mx1 = -coil_rt::inf<float>();\n";
  s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; ++nt) {\n";
  s += "          mx0 = fmaxf(mx0, fmaxf(sc[m][nt][0], sc[m][nt][1]));\n          mx1 = fmaxf(mx1, fmaxf(sc[m][nt][2], sc[m][nt][3]));\n";
  s += "        }\n";
  s += "        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));\n        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));\n";
  s += "        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));\n        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));\n";
  s += fmt::format("        mx0 = fmaxf(mr[m][0], mx0 * {sc:.9e}f);\n        mx1 = fmaxf(mr[m][1], mx1 * {sc:.9e}f);\n", fmt::arg("sc", exp_scale));
  // A row with nothing visible yet keeps 0 as its reference, so no inf - inf.
  s += "        const float ref0 = mx0 == -coil_rt::inf<float>() ? 0.f : mx0, ref1 = mx1 == -coil_rt::inf<float>() ? 0.f : mx1;\n";
  s += fmt::format("        const float a0 = {n}_exp2(mr[m][0] - ref0), a1 = {n}_exp2(mr[m][1] - ref1);\n", fmt::arg("n", hp));
  s += "        mr[m][0] = mx0;\n        mr[m][1] = mx1;\n";
  s += "        float rs0 = 0.f, rs1 = 0.f;\n";
  s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; ++nt) {\n";
  s += fmt::format(
      "          sc[m][nt][0] = {n}_exp2(fmaf(sc[m][nt][0], {sc:.9e}f, -ref0));\n          sc[m][nt][1] = {n}_exp2(fmaf(sc[m][nt][1], {sc:.9e}f, -ref0));\n"
      "          sc[m][nt][2] = {n}_exp2(fmaf(sc[m][nt][2], {sc:.9e}f, -ref1));\n          sc[m][nt][3] = {n}_exp2(fmaf(sc[m][nt][3], {sc:.9e}f, -ref1));\n",
      fmt::arg("n", hp), fmt::arg("sc", exp_scale));
  s += "          rs0 += sc[m][nt][0] + sc[m][nt][1];\n          rs1 += sc[m][nt][2] + sc[m][nt][3];\n";
  s += "        }\n";
  s += "        lr[m][0] = lr[m][0] * a0 + rs0;\n        lr[m][1] = lr[m][1] * a1 + rs1;\n";
  s += "        #pragma unroll\n        for (int d = 0; d < HD / 8; ++d) {\n";
  s += "          o[m][d][0] *= a0;\n          o[m][d][1] *= a0;\n          o[m][d][2] *= a1;\n          o[m][d][3] *= a1;\n";
  s += "        }\n      }\n";
  if (wg) {
    // O += P V: P from registers (all of it packed first: one fence), V (keys x head, the head
    // contiguous) read transposed.
    s += "      uint32_t pw[BN / 16][4];\n";
    s += "      #pragma unroll\n      for (int kk = 0; kk < BN / 16; ++kk) {\n";
    pack_probabilities("pw[kk]", "0", "        ");
    s += "      }\n";
    wgmma_batch("BN / 16", fmt::format("{n}_wg_rs(&o[0][0][0], pw[kk], {n}_desc(&Vs[buf][kk * 16 * HD]))", fmt::arg("n", hp)));
  } else {
    // O += P V: V's B fragments by transposed ldmatrix, each serving all MT row tiles.
    s += "      #pragma unroll\n      for (int kk = 0; kk < BN / 16; ++kk) {\n";
    s += "        uint32_t pa[MT][4];\n";
    s += "        #pragma unroll\n        for (int m = 0; m < MT; ++m) {\n";
    pack_probabilities("pa[m]", "m", "          ");
    s += "        }\n";
    s += "        #pragma unroll\n        for (int d = 0; d < HD / 8; d += 2) {\n";
    s += "          uint32_t b[4];\n";
    s += fmt::format("          {}_ldm<true>(b, &Vs[buf][kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][(d + (lane >> 4)) * 8]);\n", hp);
    s += "          #pragma unroll\n          for (int m = 0; m < MT; ++m) {\n";
    s += fmt::format("            {n}_mma(o[m][d], pa[m], b[0], b[1]);\n            {n}_mma(o[m][d + 1], pa[m], b[2], b[3]);\n", fmt::arg("n", hp));
    s += "          }\n        }\n      }\n";
  }
  s += "      __syncthreads();\n";
  s += "    }\n";
  // The row sums over the quad; rows nothing was visible to give 0.
  s += "    #pragma unroll\n    for (int m = 0; m < MT; ++m) {\n";
  s += "      float l0 = lr[m][0], l1 = lr[m][1];\n";
  s += "      l0 += __shfl_xor_sync(0xffffffffu, l0, 1);\n      l0 += __shfl_xor_sync(0xffffffffu, l0, 2);\n";
  s += "      l1 += __shfl_xor_sync(0xffffffffu, l1, 1);\n      l1 += __shfl_xor_sync(0xffffffffu, l1, 2);\n";
  s += "      const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;\n";
  s += "      const int r0 = row0[m], r1 = r0 + 8;\n";
  s += "      #pragma unroll\n      for (int d = 0; d < HD / 8; ++d) {\n";
  s += "        const int col = d * 8 + t * 2;\n";
  s += fmt::format("        if (r0 < L) {{ b{ob}[ob + r0 * int64_t({os}) + col * int64_t({oc})] = {th}(o[m][d][0] * inv0); "
                   "b{ob}[ob + r0 * int64_t({os}) + (col + 1) * int64_t({oc})] = {th}(o[m][d][1] * inv0); }}\n",
                   fmt::arg("ob", o.buffer), fmt::arg("os", stride(o, 2)), fmt::arg("oc", stride(o, 1)), fmt::arg("th", to_half));
  s += fmt::format("        if (r1 < L) {{ b{ob}[ob + r1 * int64_t({os}) + col * int64_t({oc})] = {th}(o[m][d][2] * inv1); "
                   "b{ob}[ob + r1 * int64_t({os}) + (col + 1) * int64_t({oc})] = {th}(o[m][d][3] * inv1); }}\n",
                   fmt::arg("ob", o.buffer), fmt::arg("os", stride(o, 2)), fmt::arg("oc", stride(o, 1)), fmt::arg("th", to_half));
  s += "      }\n";
  s += "    }\n";
  s += "  }\n}\n";
  return s;
}

}  // namespace coil::codegen
