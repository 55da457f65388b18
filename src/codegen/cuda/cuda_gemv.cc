// Matrix products of a few rows (LLM decoding: one token a sequence, M = the batch) as coil's own
// kernel instead of cuBLASLt's. Such a product reads each weight once and does two flops a
// weight byte: it is a stream over the weight, and its time is the weight's bytes over the
// memory bandwidth plus a launch. cuBLASLt's small-M kernels reached 1.3-3.8 TB/s of an H200's
// 4.8 on TinyLlama's [1, 2048] x [2048, 2048..5632] products (5.9-8.5 us).
//
// The kernel takes B with unit stride along K (nn.Linear's weight [N, K], read as its transpose),
// so that each output is a dot product over a contiguous weight row:
// - a warp computes R adjacent outputs for all M rows; its lanes read 16-byte pieces of the R
//   weight rows (evict-first: read once) and of the M rows of A (kept: every warp reads them),
//   FMAs in f32, then the sums meet through warp shuffles;
// - SPLIT warps of a block share an output group, each over a slice of K (more blocks where N
//   is small), and combine through shared memory;
// - the epilogue (alpha, bias, residual, relu or tanh-GELU) is applied in f32 and the result
//   rounded once, as cuBLASLt's epilogues do.
// The candidates (R, SPLIT) are timed by the autotuner like a loop kernel's configurations.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "codegen/c_printer.h"
#include "codegen/cuda/cuda_codegen.h"
#include "runtime/cuda/gemm_problem.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// The static problem of a product call that the kernel can take, else nothing.
std::optional<cuda::GemmProblem> gemv_problem(const loop::Program& program, const loop::ExternCall& call) {
  if (call.kind != loop::ExternKind::mm && call.kind != loop::ExternKind::addmm) return std::nullopt;
  if (call.residual && call.activation != loop::Activation::none) return std::nullopt;
  const GemmViews views = gemm_views(call);
  auto is_static = [](const loop::View* v) {
    if (!v) return true;
    if (!v->offset.constant()) return false;
    for (const auto& d : v->sizes)
      if (!d.constant()) return false;
    for (const auto& d : v->strides)
      if (!d.constant()) return false;
    return true;
  };
  if (!is_static(views.a) || !is_static(views.b) || !is_static(views.c) || !is_static(views.bias)) return std::nullopt;
  const loop::Buffer& out = program.buffers[static_cast<size_t>(call.output)];
  for (const auto& d : out.sizes)
    if (!d.constant()) return std::nullopt;
  for (const auto& d : out.strides)
    if (!d.constant()) return std::nullopt;
  if (!out.offset.constant() || (call.output_view && !is_static(&*call.output_view))) return std::nullopt;
  const cuda::GemmProblem g = gemm_problem(call, program, {}, false);
  if (g.batch != 1 || g.m < 1 || g.m > kGemvRows || g.n < 1 || g.k < 1) return std::nullopt;
  if (g.dtype != DType::f16 && g.dtype != DType::bf16 && g.dtype != DType::f32) return std::nullopt;
  if (g.b_rs != 1) return std::nullopt;  // a weight row per output
  return g;
}

// Elements of a 16-byte piece of every operand read in pieces (A, B), or 1 where an offset, a
// stride or K does not allow pieces.
int piece(const cuda::GemmProblem& g, const GemmViews& v) {
  const int vec = 16 / static_cast<int>(dtype_size(g.dtype));
  auto whole = [&](int64_t x) { return x % vec == 0; };
  const bool ok = g.a_cs == 1 && whole(g.k) && whole(g.b_cs) && (g.m == 1 || whole(g.a_rs)) &&
                  whole(*v.a->offset.constant()) && whole(*v.b->offset.constant());
  return ok ? vec : 1;
}

const char* widen_fn(DType t) {
  switch (t) {
    case DType::f16: return "coil_rt::f16_to_f32";
    case DType::bf16: return "coil_rt::bf16_to_f32";
    default: return "";
  }
}

const char* narrow_fn(DType t) {
  switch (t) {
    case DType::f16: return "coil_rt::f32_to_f16";
    case DType::bf16: return "coil_rt::f32_to_bf16";
    default: return "";
  }
}

}  // namespace

std::vector<CudaConfig> gemv_configs(const loop::Program& program, const loop::ExternCall& call, const cuda::DeviceInfo& device) {
  const auto g = gemv_problem(program, call);
  if (!g) return {};
  const int vec = piece(*g, gemm_views(call));
  const int64_t chunks = (g->k + 32 * vec - 1) / (32 * vec);  // a warp's reads across K
  // R outputs a warp (R * M sums, at most one per lane when they are stored); the heuristic's
  // SPLIT gives at least two blocks an SM where K allows.
  std::vector<CudaConfig> out;
  auto config = [&](int r, int split) {
    CudaConfig c;
    c.form = CudaConfig::Form::gemv;
    c.block = kThreads;
    c.vector = vec;
    c.parts = r;
    c.splits = split;
    return c;
  };
  const int64_t want_blocks = 2 * std::max(device.sm_count, 1);
  for (int r : {g->m <= 2 ? 2 : g->m <= 4 ? 2 : 4, 1, 2, 4}) {
    if (r * g->m > 32) continue;
    int split = 1;
    while (split < kWarps && split * 2 <= chunks && (g->n + (kWarps / split) * r - 1) / ((kWarps / split) * r) < want_blocks) split *= 2;
    for (int s : {split, split / 2, split * 2}) {
      if (s < 1 || s > kWarps || (s > 1 && s > chunks)) continue;
      CudaConfig c = config(r, s);
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  }
  return out;
}

std::string emit_cuda_gemv(const loop::Program& program, const loop::ExternCall& call, const CudaConfig& config, CudaKernel& info) {
  const auto problem = gemv_problem(program, call);
  COIL_CHECK(problem) << call.name << ": no product of a few rows";
  const cuda::GemmProblem& g = *problem;
  const GemmViews views = gemm_views(call);
  const int vec = config.vector, r = config.parts, split = config.splits, groups = kWarps / split;
  COIL_CHECK(vec == piece(g, views) && r * g.m <= 32 && split >= 1 && kWarps % split == 0) << call.name << ": " << to_string(config);
  const loop::Buffer& ob = program.buffers[static_cast<size_t>(call.output)];
  const DType in = g.dtype, out = ob.dtype;
  auto offset_of = [](const loop::View* v) { return v ? *v->offset.constant() : int64_t{0}; };
  const int64_t d_off = *(call.output_view ? call.output_view->offset : ob.offset).constant();

  // Parameters: each buffer once, in id order; the output written.
  std::set<int> buffers{views.a->buffer, views.b->buffer, call.output};
  if (views.bias) buffers.insert(views.bias->buffer);
  if (views.c) buffers.insert(views.c->buffer);
  std::vector<std::string> params;
  for (int b : buffers) {
    const bool written = b == call.output;
    const bool read_too = written && ((views.c && views.c->buffer == b) || views.a->buffer == b || views.b->buffer == b ||
                                      (views.bias && views.bias->buffer == b));
    params.push_back(fmt::format("{}{}* {}b{}", written ? "" : "const ", storage_type(program.buffers[static_cast<size_t>(b)].dtype),
                                 read_too ? "" : "__restrict__ ", b));
    info.buffers.push_back(b);
  }
  params.push_back("int64_t* __restrict__ E");
  info.name = call.name;
  info.config = config;
  info.launch.block_x = kThreads;
  const int64_t units = (g.n + int64_t{groups} * r - 1) / (int64_t{groups} * r);
  info.launch.units = units;
  info.launch.per_block = 1;
  info.launch.max_blocks = units;

  const char* t = storage_type(in);
  const std::string widen = widen_fn(in);
  std::string s = fmt::format("// computes %{} ({}, M={} N={} K={})\n", fmt::join(call.origins, ", %"), to_string(config), g.m, g.n, g.k);
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kThreads, call.name, fmt::join(params, ", "));
  s += "  (void)E;\n";
  const int64_t chunks = (g.k + 32 * vec - 1) / (32 * vec), per = (chunks + split - 1) / split;
  s += fmt::format("  constexpr int M = {}, N = {}, K = {}, VEC = {}, R = {}, SPLIT = {}, GROUPS = {}, PER = {};\n", g.m, g.n, g.k, vec,
                   r, split, groups, per);
  s += fmt::format("  typedef coil_rt::Vec<{}, VEC> V;\n", t);
  s += "  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;\n";
  s += "  const int group = warp / SPLIT, slice = warp % SPLIT;\n";
  s += "  const int n0 = (static_cast<int>(blockIdx.x) * GROUPS + group) * R;\n";
  // Rows past N read the last row (their sums are dropped): no branch in the loop.
  s += fmt::format("  const {}* w[R];\n  #pragma unroll\n  for (int r = 0; r < R; ++r) w[r] = b{} + {} + int64_t(n0 + r < N ? n0 + r : N - 1) * {};\n",
                   t, views.b->buffer, offset_of(views.b), g.b_cs);
  s += "  float acc[R][M];\n  #pragma unroll\n  for (int r = 0; r < R; ++r)\n    #pragma unroll\n    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;\n";
  s += "  #pragma unroll 4\n  for (int i = 0; i < PER; ++i) {\n    const int c = slice * PER + i;\n";
  if (chunks % split != 0) s += fmt::format("    if (c >= {}) break;\n", chunks);
  s += "    const int k = c * 32 * VEC + lane * VEC;\n";
  const bool tail = g.k % (32 * vec) != 0;
  if (tail) s += "    if (k < K) {\n";
  const std::string in2 = tail ? "      " : "    ";
  auto as_float = [&](const std::string& e) { return widen.empty() ? e : widen + "(" + e + ")"; };
  if (vec > 1) {
    s += fmt::format("{}V wv[R];\n{}#pragma unroll\n{}for (int r = 0; r < R; ++r) wv[r] = coil_rt::load_once(reinterpret_cast<const V*>(w[r] + k));\n",
                     in2, in2, in2);
    s += fmt::format("{}#pragma unroll\n{}for (int m = 0; m < M; ++m) {{\n", in2, in2);
    s += fmt::format("{}  const V xv = coil_rt::load_keep(reinterpret_cast<const V*>(b{} + {} + m * {} + k));\n", in2, views.a->buffer,
                     offset_of(views.a), g.a_rs);
    s += fmt::format("{}  #pragma unroll\n{}  for (int v = 0; v < VEC; ++v) {{\n", in2, in2);
    s += fmt::format("{}    const float x = {};\n", in2, as_float("xv.v[v]"));
    s += fmt::format("{}    #pragma unroll\n{}    for (int r = 0; r < R; ++r) acc[r][m] += x * {};\n", in2, in2, as_float("wv[r].v[v]"));
    s += fmt::format("{}  }}\n{}}}\n", in2, in2);
  } else {
    s += fmt::format("{}float wf[R];\n{}#pragma unroll\n{}for (int r = 0; r < R; ++r) wf[r] = {};\n", in2, in2, in2, as_float("w[r][k]"));
    s += fmt::format("{}#pragma unroll\n{}for (int m = 0; m < M; ++m) {{\n", in2, in2);
    s += fmt::format("{}  const float x = {};\n", in2,
                     as_float(fmt::format("b{}[{} + m * int64_t({}) + k * int64_t({})]", views.a->buffer, offset_of(views.a), g.a_rs, g.a_cs)));
    s += fmt::format("{}  #pragma unroll\n{}  for (int r = 0; r < R; ++r) acc[r][m] += x * wf[r];\n{}}}\n", in2, in2, in2);
  }
  if (tail) s += "    }\n";
  s += "  }\n";
  // The warp's sums, then the slices' through shared memory; a thread per (group, r, m) stores.
  s += "  __shared__ float part[SPLIT][GROUPS][R][M];\n";
  s += "  #pragma unroll\n  for (int r = 0; r < R; ++r)\n    #pragma unroll\n    for (int m = 0; m < M; ++m) {\n";
  s += "      float v = acc[r][m];\n      #pragma unroll\n      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);\n";
  s += "      if (lane == 0) part[slice][group][r][m] = v;\n    }\n  __syncthreads();\n";
  s += "  const int tid = static_cast<int>(threadIdx.x);\n  if (tid >= GROUPS * R * M) return;\n";
  s += "  const int og = tid / (R * M), rr = tid / M % R, m = tid % M, n = (static_cast<int>(blockIdx.x) * GROUPS + og) * R + rr;\n";
  s += "  if (n >= N) return;\n";
  s += "  float v = 0.f;\n  #pragma unroll\n  for (int sl = 0; sl < SPLIT; ++sl) v += part[sl][og][rr][m];\n";
  if (g.alpha != 1) s += fmt::format("  v *= {:.9e}f;\n", g.alpha);
  if (views.bias) {
    const auto& bs = views.bias->strides;
    const loop::Buffer& bb = program.buffers[static_cast<size_t>(views.bias->buffer)];
    s += fmt::format("  v += {};\n", widen_fn(bb.dtype)[0] ? fmt::format("{}(b{}[{} + n * int64_t({})])", widen_fn(bb.dtype), views.bias->buffer,
                                                                          offset_of(views.bias), *bs.back().constant())
                                                           : fmt::format("b{}[{} + n * int64_t({})]", views.bias->buffer, offset_of(views.bias),
                                                                         *bs.back().constant()));
  }
  if (views.c) {
    const loop::Buffer& cb = program.buffers[static_cast<size_t>(views.c->buffer)];
    const std::string value = fmt::format("b{}[{} + m * int64_t({}) + n * int64_t({})]", views.c->buffer, offset_of(views.c), g.c_rs, g.c_cs);
    s += fmt::format("  v += {};\n", widen_fn(cb.dtype)[0] ? std::string(widen_fn(cb.dtype)) + "(" + value + ")" : value);
  }
  switch (call.activation) {
    case loop::Activation::none: break;
    case loop::Activation::relu: s += "  v = coil_rt::maximum(v, 0.f);\n"; break;
    case loop::Activation::gelu_tanh:
      s += "  v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));\n";
      break;
  }
  const std::string stored = narrow_fn(out)[0] ? std::string(narrow_fn(out)) + "(v)" : "v";
  s += fmt::format("  b{}[{} + m * int64_t({}) + n * int64_t({})] = {};\n}}\n", call.output, d_off, g.d_rs, g.d_cs, stored);
  return s;
}

}  // namespace coil::codegen
