#include "schedule/fuse_gemv_prologues.h"

#include <map>

#include "arith/simplify.h"

namespace coil::schedule {

namespace {

// e's factors through multiplications and casts between float types.
void factors(const loop::ExprRef& e, std::vector<loop::ExprRef>& out) {
  if (e->kind() == loop::Expr::Kind::cast && is_float(e->dtype()) && is_float(e->operands()[0]->dtype()))
    return factors(e->operands()[0], out);
  if (e->kind() == loop::Expr::Kind::op && e->op() == loop::LoopOp::Mul && is_float(e->dtype())) {
    factors(e->operands()[0], out);
    factors(e->operands()[1], out);
    return;
  }
  out.push_back(e);
}

bool uses_reduction(const loop::ExprRef& e) {
  if (e->kind() == loop::Expr::Kind::reduced) return true;
  for (const auto& o : e->operands())
    if (uses_reduction(o)) return true;
  return false;
}

// Reads nothing along the row: no loads, no index mentioning r0.
bool row_constant(const loop::ExprRef& e) {
  if (e->kind() == loop::Expr::Kind::load) return false;
  if (e->kind() == loop::Expr::Kind::index) {
    std::vector<std::string> vars;
    e->offset().collect_symbols(vars);
    for (const auto& v : vars)
      if (v == loop::reduce_var(0)) return false;
  }
  for (const auto& o : e->operands())
    if (!row_constant(o)) return false;
  return true;
}

}  // namespace

std::optional<RowFactors> row_factors(const loop::LoopKernel& k) {
  if (k.reductions.size() != 1 || k.reductions[0].kind != loop::ReduceKind::sum || k.reductions[0].scan || k.stores.size() != 1 ||
      !k.stores[0].inner || k.stores[0].dynamic || k.inner.size() != 1 || uses_reduction(k.reductions[0].value))
    return std::nullopt;
  std::vector<loop::ExprRef> all;
  factors(k.stores[0].value, all);
  RowFactors out;
  for (const auto& f : all) {
    if (!uses_reduction(f)) out.element.push_back(f);
    else if (row_constant(f)) out.scale.push_back(f);
    else return std::nullopt;
  }
  if (out.scale.empty()) return std::nullopt;
  return out;
}

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
    if (!call || (call->kind != loop::ExternKind::mm && call->kind != loop::ExternKind::addmm) || call->prologue) continue;
    const loop::View& a = call->inputs[call->kind == loop::ExternKind::addmm ? 1 : 0];
    const auto& w = writers[a.buffer];
    if (w.size() != 1 || w[0] >= c || readers[a.buffer] != std::vector<size_t>{c} || !out[w[0]]) continue;
    const auto* n = std::get_if<loop::LoopKernel>(&program.kernels[w[0]]);
    if (!n || loop::may_fail(*n) || !row_factors(*n)) continue;
    // A: a contiguous [M, K] temporary, N's rows over its outer points.
    const loop::Buffer& ab = program.buffers[static_cast<size_t>(a.buffer)];
    const auto m = a.sizes.size() == 2 ? a.sizes[0].constant() : std::nullopt, k = a.sizes.size() == 2 ? a.sizes[1].constant() : std::nullopt;
    if (!m || !k || ab.role != loop::Buffer::Role::temporary || a.strides != SymShape{SymInt(*k), SymInt(1)} || a.offset != SymInt(0) ||
        n->inner[0] != SymInt(*k) || n->stores[0].buffer != a.buffer)
      continue;
    SymInt row = 0;
    RangeEnv env;
    int64_t points = 1;
    bool fixed = true;
    for (size_t d = 0; d < n->outer.size(); ++d) {
      const auto extent = n->outer[d].constant();
      if (!extent) fixed = false;
      const std::string var = loop::loop_var(static_cast<int>(d));
      row = row * n->outer[d] + SymInt::symbol(var);
      env[var] = Range{0, extent.value_or(1) - 1};
      points *= extent.value_or(0);
    }
    env[loop::reduce_var(0)] = Range{0, *k - 1};
    if (!fixed || points != *m || simplify(n->stores[0].offset - (SymInt::symbol(loop::reduce_var(0)) + row * SymInt(*k)), env) != SymInt(0))
      continue;
    // What N reads stays as it was until the call.
    bool kept = true;
    for (size_t j = w[0] + 1; j < c && kept; ++j)
      for (int b : access[j].writes) kept = kept && !access[w[0]].reads.count(b);
    if (!kept) continue;
    loop::ExternCall fused = *call;
    fused.prologue = std::make_shared<const loop::LoopKernel>(*n);
    if (!takes(fused, program)) continue;
    fused.origins.insert(fused.origins.begin(), n->origins.begin(), n->origins.end());
    out[w[0]].reset();
    out[c] = std::move(fused);
  }
  loop::Program result;
  result.buffers = program.buffers;
  for (auto& kernel : out)
    if (kernel) result.kernels.push_back(std::move(*kernel));
  return result;
}

}  // namespace coil::schedule
