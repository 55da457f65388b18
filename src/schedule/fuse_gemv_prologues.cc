#include "schedule/fuse_gemv_prologues.h"

#include <map>
#include <optional>
#include <string>

#include "arith/simplify.h"

namespace coil::schedule {

namespace {

void index_symbols(const loop::ExprRef& e, std::vector<std::string>& out) {
  if (e->kind() == loop::Expr::Kind::load || e->kind() == loop::Expr::Kind::index) e->offset().collect_symbols(out);
  for (const auto& o : e->operands()) index_symbols(o, out);
}

bool loop_variable(const std::string& v) {
  return v.size() >= 2 && (v[0] == 'x' || v[0] == 'r') && v.find_first_not_of("0123456789", 1) == std::string::npos;
}

// Whether R computes rows of `rows` x `k` elements into its one store, row-major, as a row
// kernel of static sizes that a block can run: the conditions of the header.
bool row_kernel(const loop::LoopKernel& r, int64_t rows, int64_t k) {
  if (r.inner.size() != 1 || r.inner[0] != SymInt(k) || r.stores.size() != 1 || !r.stores[0].inner || r.stores[0].dynamic || loop::may_fail(r))
    return false;
  for (size_t i = 0; i < r.reductions.size(); ++i) {
    const loop::ReduceStep& step = r.reductions[i];
    using loop::ReduceKind;
    const bool plain = step.kind == ReduceKind::sum || step.kind == ReduceKind::prod || step.kind == ReduceKind::max ||
                       step.kind == ReduceKind::min || step.kind == ReduceKind::welford_mean;
    if (step.scan || (step.acc != DType::f32 && step.acc != DType::f64) || (!plain && step.kind != ReduceKind::welford_m2)) return false;
    if (step.kind == ReduceKind::welford_m2 && loop::welford_mean_of(r, i) < 0) return false;
  }
  SymInt linear = 0;
  RangeEnv env;
  int64_t points = 1;
  for (size_t d = 0; d < r.outer.size(); ++d) {
    auto n = r.outer[d].constant();
    if (!n) return false;
    const std::string var = loop::loop_var(static_cast<int>(d));
    linear = linear * *n + SymInt::symbol(var);
    env[var] = Range{0, *n - 1};
    points *= *n;
  }
  if (points != rows) return false;
  env[loop::reduce_var(0)] = Range{0, k - 1};
  if (simplify(r.stores[0].offset - (linear * k + SymInt::symbol(loop::reduce_var(0))), env) != SymInt(0)) return false;
  std::vector<std::string> symbols;
  index_symbols(r.stores[0].value, symbols);
  for (const auto& step : r.reductions) index_symbols(step.value, symbols);
  for (const auto& v : symbols)
    if (!loop_variable(v)) return false;
  return true;
}

// Whether b holds `elements` elements row-major from its start.
bool dense(const loop::Buffer& b, int64_t elements) {
  int64_t stride = 1;
  for (size_t d = b.sizes.size(); d-- > 0;) {
    auto n = b.sizes[d].constant(), st = b.strides[d].constant();
    if (!n || !st || (*n > 1 && *st != stride)) return false;
    stride *= *n;
  }
  return b.offset == SymInt(0) && stride == elements;
}

}  // namespace

loop::Program fuse_gemv_prologues(const loop::Program& program, const GemvTakes& takes) {
  const size_t nk = program.kernels.size();
  std::vector<loop::Access> access;
  std::map<int, std::vector<size_t>> readers, writers;
  for (size_t k = 0; k < nk; ++k) {
    access.push_back(loop::access(program.kernels[k]));
    for (int b : access[k].reads) readers[b].push_back(k);
    for (int b : access[k].writes) writers[b].push_back(k);
  }
  std::vector<std::optional<loop::Kernel>> out(program.kernels.begin(), program.kernels.end());
  for (size_t c = 0; c < nk; ++c) {
    const auto* call = std::get_if<loop::ExternCall>(&program.kernels[c]);
    if (!call || (call->kind != loop::ExternKind::mm && call->kind != loop::ExternKind::addmm) || call->prologue || call->output_view ||
        !takes(*call, program))
      continue;
    const loop::View& a = call->inputs[call->kind == loop::ExternKind::addmm ? 1 : 0];
    const loop::Buffer& ab = program.buffers[static_cast<size_t>(a.buffer)];
    auto m = a.sizes.size() == 2 ? a.sizes[0].constant() : std::nullopt, k = a.sizes.size() == 2 ? a.sizes[1].constant() : std::nullopt;
    if (!m || !k || ab.role != loop::Buffer::Role::temporary || !dense(ab, *m * *k) || a.strides != SymShape{SymInt(*k), SymInt(1)} ||
        a.offset != SymInt(0) || *m * (*k * static_cast<int64_t>(dtype_size(ab.dtype)) + 1024) > kPrologueBytes)
      continue;
    // A is read by the call alone, as its A: not as a bias, residual or gate, nor by its epilogue.
    if (readers[a.buffer] != std::vector<size_t>{c} || writers[a.buffer].size() != 1 || writers[a.buffer][0] >= c) continue;
    int uses = 0;
    for (const auto& v : call->inputs) uses += v.buffer == a.buffer;
    for (const auto* v : {&call->residual, &call->gate}) uses += *v && (*v)->buffer == a.buffer;
    if (call->epilogue && loop::access(*call->epilogue).reads.count(a.buffer)) ++uses;
    const size_t r = writers[a.buffer][0];
    const auto* rk = std::get_if<loop::LoopKernel>(&program.kernels[r]);
    if (uses != 1 || !rk || !out[r] || !row_kernel(*rk, *m, *k) || rk->stores[0].buffer != a.buffer) continue;
    bool kept = true;  // what R reads, unchanged until the call
    for (size_t s = r + 1; s < c && kept; ++s)
      for (int b : access[s].writes) kept = kept && !access[r].reads.count(b);
    if (!kept) continue;
    loop::ExternCall fused = *call;
    fused.prologue = std::make_shared<const loop::LoopKernel>(*rk);
    fused.origins.insert(fused.origins.begin(), rk->origins.begin(), rk->origins.end());
    out[r].reset();
    out[c] = std::move(fused);
  }
  loop::Program result;
  result.buffers = program.buffers;
  for (auto& kernel : out)
    if (kernel) result.kernels.push_back(std::move(*kernel));
  return result;
}

}  // namespace coil::schedule
