// Matrix products of a few rows (LLM decoding: one token a sequence, M = the batch) as coil's own
// kernel instead of cuBLASLt's. Such a product reads each weight once and does two flops a
// weight byte per row: it is a stream over the weight, and its time is the weight's bytes over
// the memory bandwidth plus a launch. cuBLASLt's small-M kernels reached 1.3-3.8 TB/s of an
// H200's 4.8 on TinyLlama's [1, 2048] x [2048, 2048..5632] products (5.6-10 us).
//
// The kernel takes B with unit stride along K (nn.Linear's weight [N, K], read as its transpose),
// so that each output is a dot product over a contiguous weight row. Two forms, both among the
// tuner's candidates where they apply:
// - tensor cores (f16/bf16 in 16-byte pieces, sm_80 on; config tile 16x8): a warp takes R tiles
//   of 8 outputs. Per 32 elements of K, the lane (n, q) = (lane / 4, lane % 4) reads 16 bytes of
//   weight row n at 8q and 16 bytes of A's row n (rows past M are zeros), and two mma.sync
//   m16n8k16 add them up: each mma's k index is a permutation of the 32 (the pairs 8q+0..3 for
//   the first, 8q+4..7 for the second), the same for A and B, which a dot product allows. So the
//   lanes read whole 64-byte pieces of 8 rows, and the M rows (up to 16) cost no more than one;
// - FMAs (up to 8 rows, any of the three dtypes): a warp takes R adjacent outputs for all M rows; its
//   lanes read 16-byte pieces (or elements) of the R weight rows and of A's rows, f32 FMAs, and
//   the sums meet through warp shuffles. Its reads are whole 512-byte runs of a row: at one row
//   it beat the tensor-core form (2048x2048 bf16 on an H200: 3.6 against 4.3 us; 2048x5632: 6.9
//   against 15 us).
// Weights are read evict-first (once), A kept. In the tensor-core form each thread issues all
// its reads of 4 steps of K before their mma (whose asm would otherwise keep them in order).
// SPLIT warps of a block share an output group, each over a slice of
// K (more blocks where N is small), and combine through shared memory, where the epilogue
// (alpha, bias, residual, relu or tanh-GELU) is applied in f32 and the result rounded once, as
// cuBLASLt's epilogues do, then a pointwise kernel fused after the product (its epilogue, with a
// second product of the same A beside the first: schedule/fuse_gemv_epilogues.h). The candidates
// (R, SPLIT) are timed by the autotuner, and against cuBLASLt's call of the same product where no
// epilogue of coil's is fused. Each warp asks L2 for its weight rows before waiting for the
// previous kernel (coil_rt::prefetch_l2, after_previous) and, where no kernel writes the weight,
// loads its first steps' pieces then too (never_written).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/c_printer.h"
#include "codegen/cuda/cuda_codegen.h"
#include "runtime/cuda/gemm_problem.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// A call's first product alone: a fused call's result as the buffer its epilogue reads it from.
loop::ExternCall first_product(const loop::ExternCall& call) {
  loop::ExternCall c = call;
  if (c.epilogue) c.output = c.epilogue_inputs[0];
  c.epilogue.reset(), c.gate.reset(), c.epilogue_inputs.clear();
  return c;
}

// A fused call's second product: the first's A times the gate, a plain mm.
loop::ExternCall second_product(const loop::ExternCall& call) {
  loop::ExternCall c;
  c.name = call.name;
  c.kind = loop::ExternKind::mm;
  c.inputs = {*gemm_views(call).a, *call.gate};
  c.output = call.epilogue_inputs[1];
  return c;
}

// The static problem of a single product call that the kernel can take, else nothing.
std::optional<cuda::GemmProblem> single_problem(const loop::Program& program, const loop::ExternCall& call) {
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

// A's row stride in shared memory where a prologue computes it: K and 16 bytes, so that the
// tensor-core form's lanes reading 8 rows at one k fall in different banks.
int64_t prologue_stride(const cuda::GemmProblem& g) { return g.k + 16 / static_cast<int64_t>(dtype_size(g.dtype)); }

// The most bytes of A's rows a prologue computes in each block (its shared memory; the block's
// share of the partial sums is at most 16 KiB more). Every block reads the rows: on the H200,
// TinyLlama's decoding with its RMSNorms as prologues went 1134 -> 1164 tok/s at one row (4 KiB
// a block) but 6717 -> 5816 at eight (32 KiB: the MLP's pair 16.0 -> 25.5 us, q/k/v 4.2 -> 8.2,
// against 3.2 us a norm kernel saved), bench/results/decode-2026-11-30-s20.md.
constexpr int64_t kPrologueBytes = 8 << 10;
int64_t prologue_bytes(const cuda::GemmProblem& g) { return g.m * prologue_stride(g) * static_cast<int64_t>(dtype_size(g.dtype)); }

// The problem of a call the kernel can take (a fused pair: the first's, the second's the same
// but for B's place), else nothing.
std::optional<cuda::GemmProblem> gemv_problem(const loop::Program& program, const loop::ExternCall& call) {
  auto g = single_problem(program, first_product(call));
  if (g && call.prologue && prologue_bytes(*g) > kPrologueBytes) return std::nullopt;
  if (!g || !call.gate) return g;
  const auto h = single_problem(program, second_product(call));
  if (!h || h->m != g->m || h->n != g->n || h->k != g->k || h->dtype != g->dtype || h->b_cs != g->b_cs || h->a_rs != g->a_rs || h->a_cs != g->a_cs)
    return std::nullopt;
  return g;
}

// A fused call's epilogue: the statements computing its value at the thread's element (m, n),
// where the products' sums are the floats `v` and `v2`, and the store of it.
std::string epilogue_code(const loop::Program& program, const loop::ExternCall& call, int64_t n_size) {
  const loop::LoopKernel& e = *call.epilogue;
  std::string s = fmt::format("    // then %{} on the element\n", fmt::join(e.origins, ", %"));
  // its loop variables at the element's row-major index over its loop nest
  s += fmt::format("    int64_t at = int64_t(m) * {} + n;\n", n_size);
  for (size_t d = e.outer.size(); d-- > 0;) {
    const int64_t extent = *e.outer[d].constant();
    s += d == 0 ? fmt::format("    const int64_t {} = at;\n", loop::loop_var(0))
                : fmt::format("    const int64_t {} = at % {};\n    at /= {};\n", loop::loop_var(static_cast<int>(d)), extent, extent);
  }
  s += "    (void)at;\n";
  std::vector<std::string> names;
  for (size_t b = 0; b < program.buffers.size(); ++b) names.push_back(fmt::format("b{}", b));
  ExprPrinter printer(names);
  printer.load_hook = [&](const loop::ExprRef& load) -> std::string {
    for (size_t i = 0; i < call.epilogue_inputs.size(); ++i)
      if (load->buffer() == call.epilogue_inputs[i])
        return narrowed(i == 0 ? "v" : "v2", program.buffers[static_cast<size_t>(load->buffer())].dtype);
    return "";
  };
  std::vector<std::string> lines;
  const loop::StoreStep& st = e.stores[0];
  const std::string value = stored_value(printer, st.value, program.buffers[static_cast<size_t>(st.buffer)].dtype, lines, "    ");
  for (const auto& line : lines) s += line + "\n";
  return s + fmt::format("    b{}[{}] = {};\n", st.buffer, index_expr(st.offset), value);
}

const char* combiner(loop::ReduceKind k) {
  switch (k) {
    case loop::ReduceKind::sum: return "coil_rt::Sum()";
    case loop::ReduceKind::prod: return "coil_rt::Prod()";
    case loop::ReduceKind::max: return "coil_rt::Max()";
    default: return "coil_rt::Min()";
  }
}

// Whether buffer b is never written while the plan runs: a graph input, weight or constant that
// no kernel writes. (One computed over in place is another buffer, granted only where nothing
// reads this one after its first writer: MemoryPlan's outputs_over_inputs.) So a kernel may
// read it before the previous kernel ends; a run's first launch never overlaps the run before
// (GpuPlan::run_steps), whose last kernel may have written it.
bool never_written(const loop::Program& program, int b) {
  const loop::Buffer::Role role = program.buffers[static_cast<size_t>(b)].role;
  if (role != loop::Buffer::Role::input && role != loop::Buffer::Role::weight && role != loop::Buffer::Role::constant) return false;
  return std::none_of(program.kernels.begin(), program.kernels.end(), [&](const loop::Kernel& k) { return loop::access(k).writes.count(b) > 0; });
}

// Every load of `e`, in the order of a walk from the root (repeats included).
void all_loads(const loop::ExprRef& e, std::vector<loop::ExprRef>& out) {
  if (e->kind() == loop::Expr::Kind::load) out.push_back(e);
  for (const auto& o : e->operands()) all_loads(o, out);
}

// Registers a thread may hold A's loads in (PIT x M per load, PIT the block's steps along K).
constexpr int64_t kPrologueRegisters = 64;

// A call's prologue: the block computes A's M rows into the shared `pro` (row stride KP), each
// reduction step a pass of the block's threads over every row at once (registers acc<i>[M], then
// the block's combine), then the store's pass. Thread t takes elements t, t + 256, ... of each
// row (PIT steps, unrolled so that their loads are in flight together); loop variables x* (the
// row's point) and r0 (its element) as the row kernel had them. Where they fit in registers,
// every load is issued once, before the passes, and those of buffers no kernel writes (the
// norm's weight) before the wait for the previous kernel (`before`); the rest after it (`after`).
struct Prologue {
  std::string before, after;
};
Prologue prologue_code(const loop::Program& program, const loop::ExternCall& call) {
  const loop::LoopKernel& p = *call.prologue;
  const DType a_type = program.buffers[static_cast<size_t>(p.stores[0].buffer)].dtype;
  const int64_t k = *p.inner[0].constant(), steps = (k + kThreads - 1) / kThreads;
  int64_t m = 1;
  for (const auto& d : p.outer) m *= *d.constant();
  std::vector<loop::ExprRef> loads;
  for (const auto& r : p.reductions) all_loads(r.value, loads);
  all_loads(p.stores[0].value, loads);
  std::vector<loop::ExprRef> staged;
  for (const auto& l : loads)
    if (std::none_of(staged.begin(), staged.end(), [&](const loop::ExprRef& o) { return o->buffer() == l->buffer() && o->offset() == l->offset(); }))
      staged.push_back(l);
  if (steps * m * static_cast<int64_t>(staged.size()) > kPrologueRegisters) staged.clear();
  auto staged_index = [&](const loop::ExprRef& l) -> int {
    for (size_t j = 0; j < staged.size(); ++j)
      if (staged[j]->buffer() == l->buffer() && staged[j]->offset() == l->offset()) return static_cast<int>(j);
    return -1;
  };

  Prologue out;
  std::string& s = out.after;
  s = fmt::format("  // A: %{} on the block's rows\n", fmt::join(p.origins, ", %"));
  s += fmt::format("  __shared__ __align__(16) {} pro[M * KP];\n  __shared__ __align__(16) unsigned char pro_s[{} * 8];\n",
                   storage_type(a_type), kWarps);
  std::vector<std::string> names;
  for (size_t b = 0; b < program.buffers.size(); ++b) names.push_back(fmt::format("b{}", b));
  ExprPrinter printer(names);
  printer.load_hook = [&](const loop::ExprRef& l) -> std::string {
    const int j = staged_index(l);
    return j < 0 ? "" : fmt::format("ld{}[it][m]", j);
  };
  const bool tail = k % kThreads != 0;
  const std::string in = tail ? "        " : "      ";
  // The steps along K, each of the M rows inside: `body` prints the statements at (m, r0).
  auto pass = [&](std::string& to, const std::function<void(std::vector<std::string>&)>& body) {
    to += fmt::format("  #pragma unroll\n  for (int it = 0; it < {}; ++it) {{\n    const int64_t r0 = int64_t(it) * {} + threadIdx.x;\n", steps, kThreads);
    to += "    #pragma unroll\n    for (int m = 0; m < M; ++m) {\n";
    if (tail) to += "      if (r0 < K) {\n";
    to += in + "int64_t at = m;\n";
    for (size_t d = p.outer.size(); d-- > 0;) {
      const int64_t extent = *p.outer[d].constant();
      to += d == 0 ? fmt::format("{}const int64_t {} = at;\n", in, loop::loop_var(0))
                   : fmt::format("{0}const int64_t {1} = at % {2};\n{0}at /= {2};\n", in, loop::loop_var(static_cast<int>(d)), extent);
    }
    to += in + "(void)at;\n";
    printer.reset();
    std::vector<std::string> lines;
    body(lines);
    for (const auto& line : lines) to += line + "\n";
    to += tail ? "      }\n    }\n  }\n" : "    }\n  }\n";
  };
  // The staged loads (past K: left unset, never read).
  for (const bool early : {true, false}) {
    std::vector<size_t> these;
    for (size_t j = 0; j < staged.size(); ++j)
      if (never_written(program, staged[j]->buffer()) == early) these.push_back(j);
    if (these.empty()) continue;
    std::string& to = early ? out.before : s;
    for (size_t j : these)
      to += fmt::format("  {} ld{}[{}][M];\n", storage_type(staged[j]->dtype()), j, steps);
    pass(to, [&](std::vector<std::string>& lines) {
      for (size_t j : these)
        lines.push_back(fmt::format("{}ld{}[it][m] = b{}[{}];", in, j, staged[j]->buffer(), index_expr(staged[j]->offset())));
    });
  }
  for (size_t i = 0; i < p.reductions.size(); ++i) {
    const loop::ReduceStep& r = p.reductions[i];
    const std::string acc = fmt::format("acc{}", i), t = value_type(r.acc);
    s += fmt::format("  {} {}[M];\n  #pragma unroll\n  for (int m = 0; m < M; ++m) {}[m] = {};\n", t, acc, acc, reduce_init(r.kind, r.acc));
    pass(s, [&](std::vector<std::string>& lines) {
      const std::string v = printer.emit(r.value, lines, in);
      lines.push_back(in + fold_statement(r.kind, r.acc, acc + "[m]", v));
    });
    s += fmt::format("  {} red{}[M];\n  #pragma unroll\n  for (int m = 0; m < M; ++m)\n", t, i);
    s += fmt::format("    red{0}[m] = coil_rt::group_allreduce({1}[m], {2}, {3}, 32, 0xffffffffu, pro_s);\n", i, acc, combiner(r.kind), kThreads);
    printer.reduced[static_cast<int>(i)] = fmt::format("red{}[m]", i);
  }
  pass(s, [&](std::vector<std::string>& lines) {
    const std::string v = stored_value(printer, p.stores[0].value, a_type, lines, in);
    lines.push_back(fmt::format("{}pro[m * KP + r0] = {};", in, v));
  });
  s += "  __syncthreads();\n";
  return out;
}

// Elements of a 16-byte piece of every operand read in pieces (A, B), or 1 where an offset, a
// stride or K does not allow pieces.
int piece(const cuda::GemmProblem& g, const GemmViews& v, const loop::ExternCall& call) {
  const int vec = 16 / static_cast<int>(dtype_size(g.dtype));
  auto whole = [&](int64_t x) { return x % vec == 0; };
  const bool ok = g.a_cs == 1 && whole(g.k) && whole(g.b_cs) && (g.m == 1 || whole(g.a_rs)) &&
                  whole(*v.a->offset.constant()) && whole(*v.b->offset.constant()) && (!call.gate || whole(*call.gate->offset.constant()));
  return ok ? vec : 1;
}

bool in_dtype_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// Weight pieces (16 bytes) a lane loads before waiting for the kernel before: 64 registers.
constexpr int64_t kEarlyPieces = 16;
// Steps over K the tensor-core form loads at once (U in its code): 8 where a lane reads one weight
// row, so that more bytes are in flight (TinyLlama's decoding at B=8 on an H200: the down
// projection 11.5 -> 9.3 µs exposed, the output projection 4.2 -> 2.5), 4 past that (the gated
// pair with 8 went 15.9 -> 19.7 µs).
int mma_batch(int weight_rows) { return weight_rows == 1 ? 8 : 4; }

}  // namespace

std::vector<CudaConfig> gemv_configs(const loop::Program& program, const loop::ExternCall& call, const cuda::DeviceInfo& device) {
  const auto g = gemv_problem(program, call);
  if (!g) return {};
  const loop::ExternCall first = first_product(call);
  const int vec = piece(*g, gemm_views(first), call), products = call.gate ? 2 : 1;
  const bool fma = g->m <= kGemvFmaRows, mma = in_dtype_half(g->dtype) && vec == 8 && device.cc_major >= 8;
  // Each form's candidates: R (tiles of 8 outputs a warp on tensor cores, outputs a warp with
  // FMAs: R * M sums, one a lane at most) and SPLIT, the heuristic's (at least two blocks an SM
  // where K allows), half and twice that. A K step is 32 pieces (FMAs) or 32 elements (tensor
  // cores, 4 lanes a row). The first is the heuristic's: FMAs up to 4 rows (on an H200, one
  // row: 1.1-1.6x cuBLASLt where the tensor-core form was 0.7-1.2x), tensor cores past that.
  std::vector<CudaConfig> out;
  const int64_t want_blocks = 2 * std::max(device.sm_count, 1);
  auto add = [&](bool tensor_cores, const std::vector<int>& rs) {
    const int tile = tensor_cores ? 8 : 1;
    const int64_t step = tensor_cores ? 32 : 32 * vec, chunks = (g->k + step - 1) / step;
    for (int r : rs) {
      if (!tensor_cores && r * g->m * products > 32) continue;
      const int64_t per_block = int64_t{r} * tile;
      int split = 1;
      while (split < kWarps && split * 2 <= chunks && (g->n + (kWarps / split) * per_block - 1) / ((kWarps / split) * per_block) < want_blocks)
        split *= 2;
      for (int sp : {split, split / 2, split * 2}) {
        if (sp < 1 || sp > kWarps || (sp > 1 && sp > chunks)) continue;
        CudaConfig c;
        c.form = CudaConfig::Form::gemv;
        c.block = kThreads;
        c.vector = vec;
        c.parts = r;
        c.splits = sp;
        if (tensor_cores) c.tile_a = 16, c.tile_b = 8;
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      }
    }
  };
  const std::vector<int> fma_rs{g->m <= 2 ? 2 : 4, 1, 2, 4}, mma_rs{1, 2};
  if (fma && (g->m <= 4 || !mma)) add(false, fma_rs);
  if (mma) add(true, mma_rs);
  if (fma && g->m > 4 && mma) add(false, fma_rs);
  return out;
}

std::string emit_cuda_gemv(const loop::Program& program, const loop::ExternCall& call, const CudaConfig& config, CudaKernel& info) {
  const auto problem = gemv_problem(program, call);
  COIL_CHECK(problem) << call.name << ": no product of a few rows";
  const cuda::GemmProblem& g = *problem;
  const loop::ExternCall first = first_product(call);
  const GemmViews views = gemm_views(first);
  const int products = call.gate ? 2 : 1;
  const int vec = config.vector, r = config.parts, split = config.splits, groups = kWarps / split;
  const bool mma = config.tile_a > 0;
  const int out_per_warp = mma ? 8 * r : r;
  const bool weights_early = never_written(program, views.b->buffer) && (!call.gate || never_written(program, call.gate->buffer));
  const int64_t step = mma ? 32 : 32 * vec, chunks = (g.k + step - 1) / step, per = (chunks + split - 1) / split;
  const int batch = mma_batch(r * products);
  COIL_CHECK(vec == piece(g, views, call) && (mma ? vec == 8 && in_dtype_half(g.dtype) : r * g.m * products <= 32 && g.m <= kGemvFmaRows) && split >= 1 &&
             kWarps % split == 0)
      << call.name << ": " << to_string(config);
  const loop::Buffer& ob = program.buffers[static_cast<size_t>(call.output)];
  const DType in = g.dtype, out = ob.dtype;
  auto offset_of = [](const loop::View* v) { return v ? *v->offset.constant() : int64_t{0}; };
  const int64_t d_off = *(call.output_view ? call.output_view->offset : ob.offset).constant();

  // Parameters: each buffer once, in id order; the output written (not restrict where it is
  // also read).
  std::set<int> reads = loop::access(call).reads;
  std::set<int> buffers = reads;
  buffers.insert(call.output);
  std::vector<std::string> params;
  for (int b : buffers) {
    const bool written = b == call.output;
    params.push_back(fmt::format("{}{}* {}b{}", written ? "" : "const ", storage_type(program.buffers[static_cast<size_t>(b)].dtype),
                                 written && reads.count(b) ? "" : "__restrict__ ", b));
    info.buffers.push_back(b);
  }
  params.push_back("int64_t* __restrict__ E");
  info.name = call.name;
  info.config = config;
  info.launch.block_x = kThreads;
  const int64_t units = (g.n + int64_t{groups} * out_per_warp - 1) / (int64_t{groups} * out_per_warp);
  info.launch.units = units;
  info.launch.per_block = 1;
  info.launch.max_blocks = units;

  const char* t = storage_type(in);
  std::string s = fmt::format("// computes %{} ({}, M={} N={} K={})\n", fmt::join(call.origins, ", %"), to_string(config), g.m, g.n, g.k);
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kThreads, call.name, fmt::join(params, ", "));
  s += "  (void)E;\n";
  s += fmt::format("  constexpr int M = {}, N = {}, K = {}, VEC = {}, R = {}, P = {}, RP = R * P, OUT = {}, SPLIT = {}, GROUPS = {}, PER = {}, U = {};\n",
                   g.m, g.n, g.k, vec, r, products, out_per_warp, split, groups, per, batch);
  if (call.prologue) s += fmt::format("  constexpr int KP = {};\n", prologue_stride(g));
  s += fmt::format("  typedef coil_rt::Vec<{}, VEC> V;\n", t);
  s += "  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;\n";
  s += "  const int group = warp / SPLIT, slice = warp % SPLIT;\n";
  s += "  const int n0 = (static_cast<int>(blockIdx.x) * GROUPS + group) * OUT;\n";
  s += "  __shared__ float part[SPLIT][GROUPS][OUT * P][M];\n";
  // The weight row of product p (0: B, 1: the gate) at output n.
  auto weight_row = [&](const std::string& p, const std::string& n) {
    const std::string first_b = fmt::format("b{} + {}", views.b->buffer, offset_of(views.b));
    const std::string base = call.gate ? fmt::format("({} == 0 ? {} : b{} + {})", p, first_b, call.gate->buffer, offset_of(&*call.gate)) : first_b;
    return fmt::format("{} + int64_t({}) * {}", base, n, g.b_cs);
  };
  // The warp's weight rows over its slice of K, asked of L2 before waiting for the kernel before
  // (the weight does not depend on it): the stream starts during that kernel's tail.
  if (vec * static_cast<int>(dtype_size(in)) == 16) {
    const int64_t slice_elems = per * step;
    s += fmt::format("  if (lane < OUT * P && n0 + lane % OUT < N) {{\n    const int64_t k0 = int64_t(slice) * {0}, k1 = k0 + {0} < K ? k0 + {0} : K;\n",
                     slice_elems);
    s += fmt::format("    if (k0 < k1) coil_rt::prefetch_l2({} + k0, static_cast<unsigned>((k1 - k0) * {}));\n  }}\n",
                     weight_row("lane / OUT", "n0 + lane % OUT"), dtype_size(in));
  }
  // A: its buffer, or the rows the prologue computed into shared memory (plain loads).
  const bool pro = call.prologue != nullptr;
  const std::string a_at = pro ? "pro" : fmt::format("b{} + {}", views.a->buffer, offset_of(views.a));
  const int64_t a_rs = pro ? prologue_stride(g) : g.a_rs, a_cs = pro ? 1 : g.a_cs;
  auto a_load = [&](const std::string& piece_at) {
    return pro ? fmt::format("*reinterpret_cast<const V*>({})", piece_at) : fmt::format("coil_rt::load_keep(reinterpret_cast<const V*>({}))", piece_at);
  };
  const Prologue prologue = pro ? prologue_code(program, call) : Prologue{};
  const std::string wait = prologue.before + "  coil_rt::after_previous();\n" + prologue.after;
  if (mma) {
    // Whether step u of the batch at i0 lies in K (parts that always hold left out).
    std::vector<std::string> inside;
    if (per % batch != 0) inside.push_back("i0 + u < PER");
    if (chunks % split != 0) inside.push_back(fmt::format("c < {}", chunks));
    if (g.k % step != 0) inside.push_back("k < K");
    const std::string in_k = inside.empty() ? "true" : fmt::format("{}", fmt::join(inside, " && "));
    // Lane (row, q): weight row n0 + 8r + row of each tile, A's rows row and row + 8, at 8q of
    // each 32 elements of K. Rows past N read the last row (their sums are dropped).
    s += "  const int q = lane % 4, row = lane / 4;\n";
    s += fmt::format("  const {}* w[RP];\n  #pragma unroll\n  for (int r = 0; r < RP; ++r) w[r] = {};\n", t,
                     weight_row("r / R", "n0 + 8 * (r % R) + row < N ? n0 + 8 * (r % R) + row : N - 1"));
    // The first batch's weight pieces before the wait, as the FMA form's first steps (below).
    const bool early = weights_early && batch * r * products <= kEarlyPieces;
    if (early) {
      s += "  V held[U][RP];\n  {\n    const int i0 = 0;\n    (void)i0;\n";
      s += "    #pragma unroll\n    for (int u = 0; u < U; ++u) {\n      const int c = slice * PER + u, k = c * 32 + q * 8;\n";
      s += fmt::format("      const bool in = {};\n      (void)c, (void)k;\n", in_k);
      s += "      #pragma unroll\n      for (int r = 0; r < RP; ++r) held[u][r] = in ? coil_rt::load_once(reinterpret_cast<const V*>(w[r] + k)) : V{};\n";
      s += "    }\n  }\n";
    }
    s += wait;
    s += fmt::format("  const {0}* xr0 = {1} + int64_t(row) * {2};\n  const {0}* xr1 = {1} + int64_t(row + 8) * {2};\n  (void)xr1;\n", t, a_at, a_rs);
    s += "  float acc[RP][4];\n  #pragma unroll\n  for (int r = 0; r < RP; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.f;\n";
    s += "  for (int i0 = 0; i0 < PER; i0 += U) {\n    V wv[U][RP], xa[U], xb[U];\n";
    s += "    #pragma unroll\n    for (int u = 0; u < U; ++u) {\n      const int c = slice * PER + i0 + u, k = c * 32 + q * 8;\n";
    s += fmt::format("      const bool in = {};\n      (void)c, (void)k;\n", in_k);
    s += fmt::format("      #pragma unroll\n      for (int r = 0; r < RP; ++r) wv[u][r] = in ? {}coil_rt::load_once(reinterpret_cast<const V*>(w[r] + k)) : V{{}};\n",
                     early ? "i0 == 0 ? held[u][r] : " : "");
    s += fmt::format("      xa[u] = in && row < M ? {} : V{{}};\n", a_load("xr0 + k"));
    s += fmt::format("      xb[u] = in && row + 8 < M ? {} : V{{}};\n    }}\n", a_load("xr1 + k"));
    s += "    #pragma unroll\n    for (int u = 0; u < U; ++u) {\n";
    s += "      const uint32_t* a = reinterpret_cast<const uint32_t*>(&xa[u]);\n      const uint32_t* b = reinterpret_cast<const uint32_t*>(&xb[u]);\n";
    s += "      #pragma unroll\n      for (int r = 0; r < RP; ++r) {\n        const uint32_t* ww = reinterpret_cast<const uint32_t*>(&wv[u][r]);\n";
    s += "        #pragma unroll\n        for (int h = 0; h < 2; ++h)\n";
    s += fmt::format("          asm(\"mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\"\n"
                     "              : \"+f\"(acc[r][0]), \"+f\"(acc[r][1]), \"+f\"(acc[r][2]), \"+f\"(acc[r][3])\n"
                     "              : \"r\"(a[2 * h]), \"r\"(b[2 * h]), \"r\"(a[2 * h + 1]), \"r\"(b[2 * h + 1]), \"r\"(ww[2 * h]), \"r\"(ww[2 * h + 1]));\n",
                     in == DType::f16 ? "f16" : "bf16");
    s += "      }\n    }\n  }\n";
    // acc[r]: rows row and row + 8 of outputs 2q and 2q + 1 of tile r.
    s += "  #pragma unroll\n  for (int r = 0; r < RP; ++r) {\n";
    s += "    if (row < M) part[slice][group][8 * r + 2 * q][row] = acc[r][0], part[slice][group][8 * r + 2 * q + 1][row] = acc[r][1];\n";
    s += "    if (row + 8 < M) part[slice][group][8 * r + 2 * q][row + 8] = acc[r][2], part[slice][group][8 * r + 2 * q + 1][row + 8] = acc[r][3];\n";
    s += "  }\n";
  } else {
    s += fmt::format("  const {}* w[RP];\n  #pragma unroll\n  for (int r = 0; r < RP; ++r) w[r] = {};\n", t,
                     weight_row("r / R", "n0 + r % R < N ? n0 + r % R : N - 1"));
    // The first EARLY steps' weight pieces are loaded before waiting for the kernel before, where
    // no kernel writes the weights: their loads then run during that kernel (a chain of [2048,
    // 2048] products on an H200: 3.6 against 5.2 us each, bench/pdl_stream.cu).
    const int64_t early = vec > 1 && weights_early ? std::min<int64_t>(per, std::max<int64_t>(1, kEarlyPieces / (int64_t{r} * products))) : 0;
    // Whether step c's piece at k lies in K (parts that always hold left out).
    std::vector<std::string> inside;
    if (chunks % split != 0) inside.push_back(fmt::format("c < {}", chunks));
    if (g.k % step != 0) inside.push_back("k < K");
    const std::string in_k = inside.empty() ? "" : fmt::format("{}", fmt::join(inside, " && "));
    if (early > 0) {
      s += fmt::format("  constexpr int EARLY = {};\n  V held[EARLY][RP];\n", early);
      s += "  #pragma unroll\n  for (int i = 0; i < EARLY; ++i) {\n    const int c = slice * PER + i, k = c * 32 * VEC + lane * VEC;\n";
      s += fmt::format("    const bool in = {};\n    (void)c, (void)k;\n", in_k.empty() ? "true" : in_k);
      s += "    #pragma unroll\n    for (int r = 0; r < RP; ++r) held[i][r] = in ? coil_rt::load_once(reinterpret_cast<const V*>(w[r] + k)) : V{};\n  }\n";
    }
    s += wait;
    s += "  float acc[RP][M];\n  #pragma unroll\n  for (int r = 0; r < RP; ++r)\n    #pragma unroll\n    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;\n";
    // A step over K: its weight pieces (held, or loaded), then A's rows one at a time (the loop as
    // measured; the compiler keeps 4 steps' weight reads in flight).
    auto as_float = [&](const std::string& e) { return widened(e, in); };
    auto steps = [&](const std::string& from, const std::string& to, const char* unroll, bool held) {
      s += fmt::format("  #pragma unroll{}\n  for (int i = {}; i < {}; ++i) {{\n    const int c = slice * PER + i, k = c * 32 * VEC + lane * VEC;\n",
                       unroll, from, to);
      const std::string in2 = in_k.empty() ? "    " : "      ";
      if (!in_k.empty()) s += fmt::format("    if ({}) {{\n", in_k);
      if (vec > 1) {
        if (!held)
          s += fmt::format("{0}V wv[RP];\n{0}#pragma unroll\n{0}for (int r = 0; r < RP; ++r) wv[r] = coil_rt::load_once(reinterpret_cast<const V*>(w[r] + k));\n", in2);
        s += fmt::format("{0}#pragma unroll\n{0}for (int m = 0; m < M; ++m) {{\n", in2);
        s += fmt::format("{}  const V xv = {};\n", in2, a_load(fmt::format("{} + m * {} + k", a_at, a_rs)));
        s += fmt::format("{0}  #pragma unroll\n{0}  for (int v = 0; v < VEC; ++v) {{\n", in2);
        s += fmt::format("{}    const float x = {};\n", in2, as_float("xv.v[v]"));
        s += fmt::format("{0}    #pragma unroll\n{0}    for (int r = 0; r < RP; ++r) acc[r][m] += x * {1};\n", in2,
                         as_float(held ? "held[i][r].v[v]" : "wv[r].v[v]"));
        s += fmt::format("{0}  }}\n{0}}}\n", in2);
      } else {
        s += fmt::format("{0}float wf[RP];\n{0}#pragma unroll\n{0}for (int r = 0; r < RP; ++r) wf[r] = {1};\n", in2, as_float("w[r][k]"));
        s += fmt::format("{0}#pragma unroll\n{0}for (int m = 0; m < M; ++m) {{\n", in2);
        s += fmt::format("{}  const float x = {};\n", in2, as_float(fmt::format("({})[m * int64_t({}) + k * int64_t({})]", a_at, a_rs, a_cs)));
        s += fmt::format("{0}  #pragma unroll\n{0}  for (int r = 0; r < RP; ++r) acc[r][m] += x * wf[r];\n{0}}}\n", in2);
      }
      if (!in_k.empty()) s += "    }\n";
      s += "  }\n";
    };
    if (early > 0) steps("0", "EARLY", "", true);
    if (early < per) steps(early > 0 ? "EARLY" : "0", "PER", " 4", false);
    s += "  #pragma unroll\n  for (int r = 0; r < RP; ++r)\n    #pragma unroll\n    for (int m = 0; m < M; ++m) {\n";
    s += "      float v = acc[r][m];\n      #pragma unroll\n      for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);\n";
    s += "      if (lane == 0) part[slice][group][r][m] = v;\n    }\n";
  }
  // The slices' sums; threads in turn over the block's (group, output, row).
  s += "  __syncthreads();\n";
  s += fmt::format("  for (int t = static_cast<int>(threadIdx.x); t < GROUPS * OUT * M; t += {}) {{\n", kThreads);
  s += "    const int og = t / (OUT * M), j = t / M % OUT, m = t % M, n = (static_cast<int>(blockIdx.x) * GROUPS + og) * OUT + j;\n";
  s += "    if (n >= N) continue;\n";
  s += "    float v = 0.f;\n    #pragma unroll\n    for (int sl = 0; sl < SPLIT; ++sl) v += part[sl][og][j][m];\n";
  if (call.gate) s += "    float v2 = 0.f;\n    #pragma unroll\n    for (int sl = 0; sl < SPLIT; ++sl) v2 += part[sl][og][OUT + j][m];\n";
  if (g.alpha != 1) s += fmt::format("    v *= {:.9e}f;\n", g.alpha);
  auto element = [&](const loop::View& v, const std::string& at) {
    return widened(fmt::format("b{}[{} + {}]", v.buffer, offset_of(&v), at), program.buffers[static_cast<size_t>(v.buffer)].dtype);
  };
  if (views.bias) s += fmt::format("    v += {};\n", element(*views.bias, fmt::format("n * int64_t({})", *views.bias->strides.back().constant())));
  if (views.c) s += fmt::format("    v += {};\n", element(*views.c, fmt::format("m * int64_t({}) + n * int64_t({})", g.c_rs, g.c_cs)));
  switch (call.activation) {
    case loop::Activation::none: break;
    case loop::Activation::relu: s += "    v = coil_rt::maximum(v, 0.f);\n"; break;
    case loop::Activation::gelu_tanh:
      s += "    v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));\n";
      break;
  }
  if (call.epilogue) return s + epilogue_code(program, call, g.n) + "  }\n}\n";
  s += fmt::format("    b{}[{} + m * int64_t({}) + n * int64_t({})] = {};\n  }}\n}}\n", call.output, d_off, g.d_rs, g.d_cs, narrowed("v", out));
  return s;
}

}  // namespace coil::codegen
