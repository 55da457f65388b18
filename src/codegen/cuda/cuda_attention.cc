// Fused attention on CUDA (flash-attention style): a block takes 64 or 128 query rows of one
// (batch, head); key/value tiles stream through double-buffered shared memory (cp.async, the
// next tile loading while this one is used) while each warp keeps its scores, running row max
// and sum, and output accumulator in registers (f32). The softmax is the online one, in base 2
// with the scale folded into exp2's argument. The scores never reach global memory.
// On Hopper (sm_90a) with 64-wide heads cuda_attention_wgmma.cc writes the kernel (wgmma);
// here, everywhere else: mma.sync m16n8k16 per warp, 16 rows a warp (32 where the head is at
// most 64: a key or value fragment then serves two row tiles), query fragments in registers, key
// and value B fragments read with ldmatrix (transposed for V).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "codegen/c_printer.h"
#include "codegen/cuda/attention_parts.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/launch.h"
#include "codegen/kernel_shape.h"
#include "support/check.h"

namespace coil::codegen {

namespace attention {

int64_t constant(const SymInt& s, const char* what) {
  auto c = s.constant();
  COIL_CHECK(c) << "attention: a symbolic " << what;
  return *c;
}

std::string text(const SymInt& s) {
  if (auto c = s.constant()) return std::to_string(*c);
  return "(" + index_expr(s) + ")";
}

std::string batch_offset(const loop::View& v, const std::string& name) {
  std::string s = fmt::format("    int64_t {} = {};\n", name, text(v.offset));
  s += "    {\n      int64_t rest = bh;\n";
  for (size_t d = v.sizes.size() - 2; d-- > 0;) {
    const std::string n = text(v.sizes[d]), st = text(v.strides[d]);
    s += fmt::format("      {} += (rest % {}) * {};\n      rest /= {};\n", name, n, st, n);
  }
  s += "    }\n";
  return s;
}

std::string stride(const loop::View& v, size_t from_end) { return text(v.strides[v.strides.size() - from_end]); }

std::vector<std::string> size_params(const Shape& a, const std::vector<std::string>& symbols, CudaKernel& info) {
  std::vector<std::string> used;
  auto views = std::vector<const loop::View*>{&a.q, &a.k, &a.v, &a.o};
  if (a.mask) views.push_back(&*a.mask);
  for (const loop::View* v : views) {
    v->offset.collect_symbols(used);
    for (const auto& x : v->sizes) x.collect_symbols(used);
    for (const auto& x : v->strides) x.collect_symbols(used);
  }
  return size_parameters(used, symbols, info);
}

void tile_launch(const Shape& a, int rows, CudaKernel& info) {
  const SymInt tiles = a.batch * floordiv(a.L + SymInt(rows - 1), SymInt(rows));
  info.launch.units = tiles;
  info.launch.per_block = 1;
  info.launch.max_blocks = tiles.constant().value_or(kMaxGrid);
}

std::string tile_constants(const Shape& a, int rows) {
  if (a.fixed()) {
    const int64_t tiles_q = (*a.L.constant() + rows - 1) / rows;
    return fmt::format("  constexpr int64_t L = {}, S = {}, TILES_Q = {}, TILES = {};\n", *a.L.constant(), *a.S.constant(), tiles_q,
                       *a.batch.constant() * tiles_q);
  }
  return fmt::format("  const int64_t L = {}, S = {}, TILES_Q = (L + {}) / {}, TILES = TILES_Q * {};\n", text(a.L), text(a.S), rows - 1, rows,
                     text(a.batch));
}

std::string open_pieces(const std::string& indent, const char* tile_rows) {
  return fmt::format("{0}#pragma unroll\n{0}for (int i0 = 0; i0 < {1} * HD / 8; i0 += THREADS) {{\n"
                     "{0}  if (({1} * HD / 8) % THREADS != 0 && i0 + static_cast<int>(threadIdx.x) >= {1} * HD / 8) break;\n",
                     indent, tile_rows);
}

std::string swizzled(const std::string& base) { return base + " + 2u * (row * HD + (((col >> 3) ^ (row & 7)) << 3))"; }

std::string online_softmax(const std::string& in, const std::string& sc, const std::string& mr, const std::string& lr, const std::string& hp,
                           double exp_scale) {
  std::string s = in + "float mx0 = -coil_rt::inf<float>(), mx1 = -coil_rt::inf<float>();\n";
  s += fmt::format("{in}#pragma unroll\n{in}for (int nt = 0; nt < BN / 8; ++nt) {{\n", fmt::arg("in", in));
  s += fmt::format("{in}  mx0 = fmaxf(mx0, fmaxf({sc}[nt][0], {sc}[nt][1]));\n{in}  mx1 = fmaxf(mx1, fmaxf({sc}[nt][2], {sc}[nt][3]));\n{in}}}\n",
                   fmt::arg("in", in), fmt::arg("sc", sc));
  s += fmt::format("{in}mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));\n{in}mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));\n"
                   "{in}mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));\n{in}mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));\n",
                   fmt::arg("in", in));
  s += fmt::format("{in}mx0 = fmaxf({mr}[0], mx0 * {e:.9e}f);\n{in}mx1 = fmaxf({mr}[1], mx1 * {e:.9e}f);\n", fmt::arg("in", in), fmt::arg("mr", mr),
                   fmt::arg("e", exp_scale));
  // A row with nothing visible yet keeps 0 as its reference, so no inf - inf.
  s += in + "const float ref0 = mx0 == -coil_rt::inf<float>() ? 0.f : mx0, ref1 = mx1 == -coil_rt::inf<float>() ? 0.f : mx1;\n";
  s += fmt::format("{in}const float a0 = {n}_exp2({mr}[0] - ref0), a1 = {n}_exp2({mr}[1] - ref1);\n", fmt::arg("in", in), fmt::arg("n", hp), fmt::arg("mr", mr));
  s += fmt::format("{in}{mr}[0] = mx0;\n{in}{mr}[1] = mx1;\n{in}float rs0 = 0.f, rs1 = 0.f;\n", fmt::arg("in", in), fmt::arg("mr", mr));
  s += fmt::format("{in}#pragma unroll\n{in}for (int nt = 0; nt < BN / 8; ++nt) {{\n", fmt::arg("in", in));
  for (int c = 0; c < 4; ++c)
    s += fmt::format("{in}  {sc}[nt][{c}] = {n}_exp2(fmaf({sc}[nt][{c}], {e:.9e}f, -ref{r}));\n", fmt::arg("in", in), fmt::arg("sc", sc), fmt::arg("c", c),
                     fmt::arg("n", hp), fmt::arg("e", exp_scale), fmt::arg("r", c / 2));
  s += fmt::format("{in}  rs0 += {sc}[nt][0] + {sc}[nt][1];\n{in}  rs1 += {sc}[nt][2] + {sc}[nt][3];\n{in}}}\n", fmt::arg("in", in), fmt::arg("sc", sc));
  s += fmt::format("{in}{lr}[0] = {lr}[0] * a0 + rs0;\n{in}{lr}[1] = {lr}[1] * a1 + rs1;\n", fmt::arg("in", in), fmt::arg("lr", lr));
  return s;
}

std::string rescale_output(const std::string& in, const std::string& frag) {
  return fmt::format("{in}#pragma unroll\n{in}for (int d = 0; d < HD / 8; ++d) {{\n"
                     "{in}  {f}[0] *= a0;\n{in}  {f}[1] *= a0;\n{in}  {f}[2] *= a1;\n{in}  {f}[3] *= a1;\n{in}}}\n",
                     fmt::arg("in", in), fmt::arg("f", frag));
}

std::string pack_probabilities(const std::string& in, const std::string& dest, const std::string& sc, const std::string& hp) {
  return fmt::format("{in}{d}[0] = {n}_pack({sc}[2 * kk][0], {sc}[2 * kk][1]);\n{in}{d}[1] = {n}_pack({sc}[2 * kk][2], {sc}[2 * kk][3]);\n"
                     "{in}{d}[2] = {n}_pack({sc}[2 * kk + 1][0], {sc}[2 * kk + 1][1]);\n{in}{d}[3] = {n}_pack({sc}[2 * kk + 1][2], {sc}[2 * kk + 1][3]);\n",
                     fmt::arg("in", in), fmt::arg("d", dest), fmt::arg("sc", sc), fmt::arg("n", hp));
}

Shape shape_of(const loop::Program& p, const loop::ExternCall& call) {
  COIL_CHECK(call.kind == loop::ExternKind::attention && (call.inputs.size() == 3 || call.inputs.size() == 4)) << call.name;
  Shape a{.q = call.inputs[0], .k = call.inputs[1], .v = call.inputs[2]};
  if (call.inputs.size() == 4) {
    a.mask = call.inputs[3];
    a.mask_dtype = p.buffers[static_cast<size_t>(a.mask->buffer)].dtype;
    COIL_CHECK(a.mask->sizes.size() == a.q.sizes.size()) << call.name << ": the mask is a view of the scores' sizes";
  }
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(call.output)];
  a.o = call.output_view ? *call.output_view : loop::View{call.output, ob.sizes, ob.strides, ob.offset};
  const size_t r = a.q.sizes.size();
  a.L = a.q.sizes[r - 2];
  a.S = a.k.sizes[r - 2];
  a.E = constant(a.q.sizes[r - 1], "head size");
  for (size_t d = 0; d + 2 < r; ++d) a.batch = a.batch * a.q.sizes[d];
  a.causal = call.params.at(1) != 0;
  a.scale_log2 = call.params.at(0) * std::numbers::log2e;
  a.half = ob.dtype == DType::f16;
  COIL_CHECK(a.half || ob.dtype == DType::bf16) << call.name << ": attention needs f16 or bf16";
  return a;
}

bool vectorizable(const loop::View& v) {
  if (!multiple_of(v.offset, 8)) return false;
  for (size_t d = 0; d + 1 < v.strides.size(); ++d)
    if (!multiple_of(v.strides[d], 8)) return false;
  return true;
}

std::string buffer_param(const Shape& a, int b) {
  if (b == a.o.buffer) return fmt::format("uint16_t* __restrict__ b{}", b);
  if (a.mask && b == a.mask->buffer) {
    const char* type = a.mask_dtype == DType::b8 ? "bool" : a.mask_dtype == DType::f32 ? "float" : "uint16_t";
    return fmt::format("const {}* __restrict__ b{}", type, b);
  }
  return fmt::format("const uint16_t* __restrict__ b{}", b);
}

std::string mask_scores(const Shape& a, const std::string& in, const std::string& sc, const std::string& row) {
  std::string s = fmt::format("{0}#pragma unroll\n{0}for (int nt = 0; nt < BN / 8; ++nt)\n{0}  #pragma unroll\n{0}  for (int c = 0; c < 4; ++c) {{\n", in);
  s += fmt::format("{}    const int key = k0 + nt * 8 + t * 2 + (c & 1), qrow = {} + (c < 2 ? 0 : 8);\n", in, row);
  s += fmt::format("{}    if (key >= S{}) {}[nt][c] = -coil_rt::inf<float>();\n", in, a.causal ? " || key > qrow" : "", sc);
  if (a.mask) {
    const loop::View& m = *a.mask;
    std::string value = fmt::format("b{}[mb + qrow * int64_t({}) + key * int64_t({})]", m.buffer, stride(m, 2), stride(m, 1));
    s += fmt::format("{}    else if (qrow < L) ", in);
    if (a.mask_dtype == DType::b8) {
      s += fmt::format("{{\n{0}      if (!{1}) {2}[nt][c] = -coil_rt::inf<float>();\n{0}    }}\n", in, value, sc);
    } else {
      const char* widen = a.mask_dtype == DType::f16 ? "coil_rt::f16_to_f32" : a.mask_dtype == DType::bf16 ? "coil_rt::bf16_to_f32" : "";
      s += fmt::format("{}[nt][c] += {}({}) * {:.9e}f;\n", sc, widen, value, a.mask_factor());
    }
  }
  s += in + "  }\n";
  return s;
}

}  // namespace attention

namespace {

using namespace attention;

// Warps per block. Each takes 16 query rows per row tile, and two row tiles where the head is
// small enough for their accumulators to stay in registers and the queries are more than one
// block's 64 rows: a key or value fragment read from shared memory then serves both.
constexpr int kWarps = 4;
// (A symbolic number of queries counts as many.)
int row_tiles(int64_t head, const SymInt& queries) { return head <= 64 && queries.constant().value_or(kMaxGrid) > 16 * kWarps ? 2 : 1; }

}  // namespace

std::string emit_cuda_attention(const loop::Program& p, const loop::ExternCall& call, const std::vector<std::string>& symbols,
                                const cuda::DeviceInfo& device, CudaKernel& info) {
  const Shape a = shape_of(p, call);
  const loop::View &q = a.q, &k = a.k, &v = a.v, &o = a.o;
  const int64_t E = a.E;
  const bool causal = a.causal, half = a.half;
  const bool vec = vectorizable(q) && vectorizable(k) && vectorizable(v);
  const int warp = device.warp_size;
  COIL_CHECK(warp == 32) << "the attention kernel's mma fragments assume 32-lane warps";
  info.name = call.name;
  std::set<int> buffers{q.buffer, k.buffer, v.buffer, o.buffer};
  if (a.mask) buffers.insert(a.mask->buffer);
  for (int b : buffers) info.buffers.push_back(b);
  // Hopper (sm_90a) with 64-wide heads whose rows move in 16-byte pieces: warpgroup MMAs (wgmma)
  // straight from shared memory (cuda_attention_wgmma.cc).
  const bool wg = device.arch() == "sm_90a" && E == 64 && vec;
  const std::string n = call.name;
  const char* mma_type = half ? "f16.f16" : "bf16.bf16";
  const char* to_half = half ? "coil_rt::f32_to_f16" : "coil_rt::f32_to_bf16";

  std::string s;
  s += fmt::format("// computes %{} (attention {}x{} keys {} head {}{})\n", fmt::join(call.origins, ", %"), a.batch.str(), a.L.str(), a.S.str(), E,
                   causal ? " causal" : "");
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
  std::vector<std::string> params;
  for (int b : info.buffers) params.push_back(buffer_param(a, b));
  for (auto& sp : size_params(a, symbols, info)) params.push_back(std::move(sp));
  params.push_back("int64_t* __restrict__ E");
  if (decode_attention_fits(a, device)) return s + emit_decode_attention(a, call, hp, params, device, info);
  if (wg) return s + emit_wgmma_attention(a, call, hp, params, info);

  const int mt = row_tiles(E, a.L), rows = 16 * kWarps * mt, bn = E <= 64 ? 64 : 32;
  info.config.form = CudaConfig::Form::attention;
  info.config.block = kWarps * warp;
  info.launch.block_x = kWarps * warp;
  tile_launch(a, rows, info);
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kWarps * warp, n, fmt::join(params, ", "));
  s += "  coil_rt::after_previous();\n  (void)E;\n";
  s += fmt::format("  constexpr int MT = {}, BM = {}, BN = {}, HD = {}, PAD = 8, THREADS = {};\n", mt, rows, bn, E, kWarps * warp);
  s += tile_constants(a, rows);
  // Key and value tiles, double-buffered: the next tile loads while this one is used.
  s += "  __shared__ __align__(16) uint16_t Ks[2][BN][HD + PAD];\n";
  s += "  __shared__ __align__(16) uint16_t Vs[2][BN][HD + PAD];\n";
  // Buffer bases are kBufferAlignment-aligned, so row starts that are multiples of 8 elements are too.
  s += fmt::format("  constexpr bool vec = {};\n", vec ? "true" : "false");
  s += "  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;\n";
  // Tiles move in 16-byte pieces, piece i of a tile by thread i % THREADS: this thread's first
  // piece (row, column), the others THREADS / (HD / 8) rows further each (constant offsets).
  s += "  const int piece_row = static_cast<int>(threadIdx.x) / (HD / 8), piece_col = static_cast<int>(threadIdx.x) % (HD / 8) * 8;\n";
  s += "  for (int64_t tile = blockIdx.x; tile < TILES; tile += gridDim.x) {\n";
  // Causal: the longest query tiles (the last ones) of every head first, so the short ones
  // fill the tail.
  if (causal)
    s += fmt::format("    const int64_t bh = tile % {};\n    const int q0 = static_cast<int>(TILES_Q - 1 - tile / {}) * BM;\n", text(a.batch),
                     text(a.batch));
  else
    s += "    const int64_t bh = tile / TILES_Q;\n    const int q0 = static_cast<int>(tile % TILES_Q) * BM;\n";
  s += batch_offset(q, "qb") + batch_offset(k, "kb") + batch_offset(v, "vb") + batch_offset(o, "ob");
  if (a.mask) s += batch_offset(*a.mask, "mb");
  // One 16-byte piece of a K or V row into its padded tile (cp.async, or element by element).
  auto piece = [&](const std::string& tile, const std::string& src) {
    return fmt::format("{}_row8(&{}[buf][row][col], {}, inside, vec);", hp, tile, src);
  };
  s += fmt::format(
      "    auto load_kv = [&](int k0, int buf) {{\n"
      "      const uint16_t* const kp = b{kb} + kb + (k0 + piece_row) * int64_t({ks}) + piece_col;\n"
      "      const uint16_t* const vp = b{vb} + vb + (k0 + piece_row) * int64_t({vs}) + piece_col;\n"
      "{pieces}"
      "        const int step = i0 / (HD / 8), row = piece_row + step, col = piece_col;\n"
      "        const bool inside = S % BN == 0 || k0 + row < S;\n"
      "        const int64_t back = inside ? 0 : k0 + row - (S - 1);  // past the end: the last row, not read\n"
      "        {kpiece}\n"
      "        {vpiece}\n"
      "      }}\n"
      "      asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
      "    }};\n",
      fmt::arg("pieces", open_pieces("      ", "BN")), fmt::arg("kb", k.buffer), fmt::arg("ks", stride(k, 2)), fmt::arg("vb", v.buffer), fmt::arg("vs", stride(v, 2)),
      fmt::arg("kpiece", piece("Ks", fmt::format("kp + (step - back) * int64_t({})", stride(k, 2)))),
      fmt::arg("vpiece", piece("Vs", fmt::format("vp + (step - back) * int64_t({})", stride(v, 2)))));
  // The warp's rows: MT tiles of 16, row0[m] and row0[m] + 8 of tile m for this lane.
  s += "    const int wrow = q0 + warp * 16 * MT;\n";
  s += "    int row0[MT];\n";
  s += "    #pragma unroll\n    for (int m = 0; m < MT; ++m) row0[m] = wrow + m * 16 + g;\n";
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
  s += "      __syncthreads();\n";
  s += "      float sc[MT][BN / 8][4];\n";
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
  // Mask, then the row max over the quad that shares a row, on the raw scores: with a positive
  // scale the scaled max is the max scaled, and scaling folds into exp2's argument (one FFMA).
  // Only a tile past the keys' end or across the diagonal needs the mask, or every tile where an
  // explicit mask is given.
  s += fmt::format("      const bool masked = {};\n", a.mask ? "true" : causal ? "k0 + BN > S || k0 + BN > wrow" : "k0 + BN > S");
  if (a.prescale()) {  // before the mask, which sets -inf
    s += "      #pragma unroll\n      for (int m = 0; m < MT; ++m)\n";
    s += "        #pragma unroll\n        for (int nt = 0; nt < BN / 8; ++nt)\n";
    s += fmt::format("          #pragma unroll\n          for (int c = 0; c < 4; ++c) sc[m][nt][c] *= {:.9e}f;\n", a.scale_log2);
  }
  // One branch for all row tiles, so that the rest of the tile is one block of straight-line
  // code the compiler can interleave (one row tile's softmax with the other's products).
  s += "      if (masked) {\n";
  s += "        #pragma unroll\n        for (int m = 0; m < MT; ++m) {\n";
  s += mask_scores(a, "          ", "sc[m]", "row0[m]");
  s += "        }\n";
  s += "      }\n";
  s += "      #pragma unroll\n      for (int m = 0; m < MT; ++m) {\n";
  s += online_softmax("        ", "sc[m]", "mr[m]", "lr[m]", hp, a.exp_scale());
  s += rescale_output("        ", "o[m][d]");
  s += "      }\n";
  // O += P V: V's B fragments by transposed ldmatrix, each serving all MT row tiles.
  s += "      #pragma unroll\n      for (int kk = 0; kk < BN / 16; ++kk) {\n";
  s += "        uint32_t pa[MT][4];\n";
  s += "        #pragma unroll\n        for (int m = 0; m < MT; ++m) {\n";
  s += pack_probabilities("          ", "pa[m]", "sc[m]", hp);
  s += "        }\n";
  s += "        #pragma unroll\n        for (int d = 0; d < HD / 8; d += 2) {\n";
  s += "          uint32_t b[4];\n";
  s += fmt::format("          {}_ldm<true>(b, &Vs[buf][kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][(d + (lane >> 4)) * 8]);\n", hp);
  s += "          #pragma unroll\n          for (int m = 0; m < MT; ++m) {\n";
  s += fmt::format("            {n}_mma(o[m][d], pa[m], b[0], b[1]);\n            {n}_mma(o[m][d + 1], pa[m], b[2], b[3]);\n", fmt::arg("n", hp));
  s += "          }\n        }\n      }\n";
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
