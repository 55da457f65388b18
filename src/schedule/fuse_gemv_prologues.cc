#include "schedule/fuse_gemv_prologues.h"

#include <algorithm>
#include <map>
#include <optional>

#include "arith/simplify.h"

namespace coil::schedule {

namespace {

bool has_dynamic_load(const loop::ExprRef& e) {
  if (e->kind() == loop::Expr::Kind::load && e->dynamic()) return true;
  return std::any_of(e->operands().begin(), e->operands().end(), has_dynamic_load);
}

// Whether `e`'s indices mention only loop variables (no size symbols).
bool indexed_by_loops(const loop::ExprRef& e) {
  if (e->kind() == loop::Expr::Kind::load || e->kind() == loop::Expr::Kind::index) {
    std::vector<std::string> used;
    e->offset().collect_symbols(used);
    for (const auto& v : used)
      if (v.size() < 2 || (v[0] != 'x' && v[0] != 'r') || v.find_first_not_of("0123456789", 1) != std::string::npos) return false;
  }
  return std::all_of(e->operands().begin(), e->operands().end(), indexed_by_loops);
}

// A row kernel a product may run before itself: its rows' points M and row length K, else nothing.
struct Rows {
  int64_t m, k;
};
std::optional<Rows> row_kernel(const loop::LoopKernel& p, const loop::Access& access) {
  if (p.reductions.empty() || p.inner.size() != 1 || p.stores.size() != 1 || loop::may_fail(p) || !p.free_dims.empty()) return std::nullopt;
  const loop::StoreStep& st = p.stores[0];
  if (!st.inner || st.dynamic || access.reads.count(st.buffer) || has_dynamic_load(st.value) || !indexed_by_loops(st.value)) return std::nullopt;
  for (const auto& r : p.reductions) {
    const bool plain = r.kind == loop::ReduceKind::sum || r.kind == loop::ReduceKind::prod || r.kind == loop::ReduceKind::max ||
                       r.kind == loop::ReduceKind::min;
    if (!plain || r.scan || has_dynamic_load(r.value) || !indexed_by_loops(r.value)) return std::nullopt;
  }
  const auto k = p.inner[0].constant();
  if (!k || *k < 1) return std::nullopt;
  // The store's offset: the row-major index of the point, times K, plus r0.
  SymInt linear = 0;
  RangeEnv env;
  int64_t m = 1;
  for (size_t d = 0; d < p.outer.size(); ++d) {
    const auto extent = p.outer[d].constant();
    if (!extent || *extent < 1) return std::nullopt;
    const std::string var = loop::loop_var(static_cast<int>(d));
    linear = linear * *extent + SymInt::symbol(var);
    env[var] = Range{0, *extent - 1};
    m *= *extent;
  }
  env["r0"] = Range{0, *k - 1};
  if (simplify(st.offset - (linear * *k + SymInt::symbol("r0")), env) != SymInt(0)) return std::nullopt;
  return Rows{m, *k};
}

// Whether the call reads `buffer` as the whole row-major [m, k] matrix A and nowhere else.
bool reads_as_a(const loop::ExternCall& c, int buffer, const Rows& rows) {
  if (c.kind != loop::ExternKind::mm && c.kind != loop::ExternKind::addmm) return false;
  if (c.prologue || c.output == buffer) return false;
  const loop::View& a = a_of(c);
  if (a.buffer != buffer || a.sizes != SymShape{SymInt(rows.m), SymInt(rows.k)} || a.strides != SymShape{SymInt(rows.k), SymInt(1)} ||
      a.offset != SymInt(0))
    return false;
  // A's buffer nowhere else in the call
  int uses = 0;
  for (const auto& v : c.inputs) uses += v.buffer == buffer;
  for (const auto* v : {&c.residual, &c.scale, &c.shift, &c.residual_scale, &c.gate})
    if (*v && (*v)->buffer == buffer) return false;
  if (c.epilogue) {
    const loop::Access more = loop::access(*c.epilogue);
    if (more.reads.count(buffer)) return false;
  }
  return uses == 1;
}

}  // namespace

loop::Program fuse_gemv_prologues(const loop::Program& program, const GemvTakes& takes) {
  const size_t nk = program.kernels.size();
  StepAccess found = step_access(program);
  const std::vector<loop::Access>& access = found.steps;
  std::map<int, std::vector<size_t>> &readers = found.readers, &writers = found.writers;
  std::vector<std::optional<loop::Kernel>> out(program.kernels.begin(), program.kernels.end());
  for (size_t p = 0; p < nk; ++p) {
    const auto* pk = std::get_if<loop::LoopKernel>(&program.kernels[p]);
    if (!pk) continue;
    const auto rows = row_kernel(*pk, access[p]);
    if (!rows) continue;
    const int a = pk->stores[0].buffer;
    if (program.buffers[static_cast<size_t>(a)].role != loop::Buffer::Role::temporary || writers[a] != std::vector<size_t>{p}) continue;
    const auto& users = readers[a];
    if (users.empty()) continue;
    const auto prologue = std::make_shared<const loop::LoopKernel>(*pk);
    std::vector<loop::ExternCall> fused;
    for (size_t u : users) {
      const auto* call = std::get_if<loop::ExternCall>(&program.kernels[u]);
      if (u <= p || !out[u] || !call || !reads_as_a(*call, a, *rows)) break;
      // What P reads stays as it was until the reader, and the reader writes none of it (its
      // blocks write while others still read A's rows).
      bool kept = true;
      for (size_t k = p + 1; k <= u && kept; ++k)
        for (int b : access[k].writes) kept = kept && !access[p].reads.count(b);
      if (!kept) break;
      loop::ExternCall c = *call;
      c.prologue = prologue;
      if (!takes(c, program)) break;
      c.origins.insert(c.origins.begin(), pk->origins.begin(), pk->origins.end());
      fused.push_back(std::move(c));
    }
    if (fused.size() != users.size()) continue;
    for (size_t i = 0; i < users.size(); ++i) out[users[i]] = std::move(fused[i]);
    out[p].reset();
  }
  return with_steps(program, std::move(out));
}

}  // namespace coil::schedule
