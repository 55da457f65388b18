#include "schedule/fuse_gemv_epilogues.h"

#include <algorithm>
#include <map>
#include <optional>

#include "arith/simplify.h"

namespace coil::schedule {

namespace {

bool same_view(const loop::View& a, const loop::View& b) {
  return a.buffer == b.buffer && a.sizes == b.sizes && a.strides == b.strides && a.offset == b.offset;
}


void index_symbols(const loop::ExprRef& e, std::vector<std::string>& out) {
  if (e->kind() == loop::Expr::Kind::load || e->kind() == loop::Expr::Kind::index) e->offset().collect_symbols(out);
  for (const auto& o : e->operands()) index_symbols(o, out);
}

// A pointwise kernel of static sizes with one plain store, indexed by its loop variables alone,
// that never fails and never reads what it writes: its points, else nothing.
std::optional<int64_t> pointwise_points(const loop::LoopKernel& k, const loop::Access& access) {
  if (!k.reductions.empty() || !k.inner.empty() || k.stores.size() != 1 || k.stores[0].dynamic || k.stores[0].inner || loop::may_fail(k) ||
      access.reads.count(k.stores[0].buffer))
    return std::nullopt;
  std::vector<std::string> symbols;
  k.stores[0].offset.collect_symbols(symbols);
  index_symbols(k.stores[0].value, symbols);
  for (const auto& v : symbols)
    if (v.size() < 2 || v[0] != 'x' || v.find_first_not_of("0123456789", 1) != std::string::npos) return std::nullopt;
  int64_t n = 1;
  for (const auto& d : k.outer) {
    auto c = d.constant();
    if (!c) return std::nullopt;
    n *= *c;
  }
  return n;
}

// Whether every load of `buffer` in P reads P's own element: offset the row-major index of P's
// loop variables, no data-dependent part.
bool loads_elementwise(const loop::LoopKernel& p, int buffer) {
  SymInt linear = 0;
  RangeEnv env;
  for (size_t d = 0; d < p.outer.size(); ++d) {
    const std::string var = loop::loop_var(static_cast<int>(d));
    linear = linear * p.outer[d] + SymInt::symbol(var);
    env[var] = Range{0, *p.outer[d].constant() - 1};
  }
  std::vector<loop::ExprRef> loads;
  loop::loads_of(p.stores[0].value, buffer, loads);
  if (loads.empty()) return false;
  return std::all_of(loads.begin(), loads.end(), [&](const loop::ExprRef& l) {
    return !l->dynamic() && simplify(l->offset() - linear, env) == SymInt(0);
  });
}

bool contiguous_matrix(const loop::Buffer& b, int64_t m, int64_t n) {
  return b.role == loop::Buffer::Role::temporary && b.sizes.size() == 2 && b.sizes[0] == SymInt(m) && b.sizes[1] == SymInt(n) &&
         b.strides[0] == SymInt(n) && b.strides[1] == SymInt(1) && b.offset == SymInt(0);
}

}  // namespace

StepAccess step_access(const loop::Program& program) {
  StepAccess a;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    a.steps.push_back(loop::access(program.kernels[k]));
    for (int b : a.steps[k].reads) a.readers[b].push_back(k);
    for (int b : a.steps[k].writes) a.writers[b].push_back(k);
  }
  return a;
}

loop::Program with_steps(const loop::Program& program, std::vector<std::optional<loop::Kernel>> kept) {
  loop::Program result;
  result.buffers = program.buffers;
  for (auto& k : kept)
    if (k) result.kernels.push_back(std::move(*k));
  return result;
}

loop::Program fuse_gemv_epilogues(const loop::Program& program, const GemvTakes& takes) {
  const size_t nk = program.kernels.size();
  StepAccess found = step_access(program);
  const std::vector<loop::Access>& access = found.steps;
  std::map<int, std::vector<size_t>> &readers = found.readers, &writers = found.writers;
  // The product writing `buffer` that may join kernel `p`, else -1.
  auto product_for = [&](int buffer, size_t p, int64_t points) -> int {
    const auto& w = writers[buffer];
    if (w.size() != 1 || w[0] >= p || readers[buffer] != std::vector<size_t>{p}) return -1;
    const auto* call = std::get_if<loop::ExternCall>(&program.kernels[w[0]]);
    if (!call || (call->kind != loop::ExternKind::mm && call->kind != loop::ExternKind::addmm) || call->epilogue || call->output != buffer ||
        call->output_view || !takes(*call, program))
      return -1;
    const loop::Buffer& out = program.buffers[static_cast<size_t>(buffer)];
    auto m = out.sizes.size() == 2 ? out.sizes[0].constant() : std::nullopt, n = out.sizes.size() == 2 ? out.sizes[1].constant() : std::nullopt;
    if (!m || !n || *m * *n != points || !contiguous_matrix(out, *m, *n)) return -1;
    // What it reads stays as it was until p.
    for (size_t k = w[0] + 1; k < p; ++k)
      for (int b : access[k].writes)
        if (access[w[0]].reads.count(b)) return -1;
    return static_cast<int>(w[0]);
  };
  std::vector<std::optional<loop::Kernel>> out(program.kernels.begin(), program.kernels.end());
  for (size_t p = 0; p < nk; ++p) {
    const auto* pk = std::get_if<loop::LoopKernel>(&program.kernels[p]);
    if (!pk) continue;
    const auto points = pointwise_points(*pk, access[p]);
    if (!points) continue;
    std::vector<int> joined;  // product steps, in program order
    for (int b : access[p].reads) {
      const int e = product_for(b, p, *points);
      if (e >= 0 && out[static_cast<size_t>(e)] && loads_elementwise(*pk, b)) joined.push_back(e);
    }
    std::sort(joined.begin(), joined.end());
    if (joined.empty()) continue;
    const auto& first = std::get<loop::ExternCall>(program.kernels[static_cast<size_t>(joined[0])]);
    std::optional<int> second;
    for (size_t i = 1; i < joined.size() && !second; ++i) {
      const auto& c = std::get<loop::ExternCall>(program.kernels[static_cast<size_t>(joined[i])]);
      const loop::Buffer &b1 = program.buffers[static_cast<size_t>(first.output)], &b2 = program.buffers[static_cast<size_t>(c.output)];
      if (c.kind == loop::ExternKind::mm && c.activation == loop::Activation::none && !c.residual && same_view(a_of(c), a_of(first)) &&
          b_of(c).sizes == b_of(first).sizes && b_of(c).strides == b_of(first).strides &&
          program.buffers[static_cast<size_t>(b_of(c).buffer)].dtype == program.buffers[static_cast<size_t>(b_of(first).buffer)].dtype &&
          b1.dtype == b2.dtype)
        second = joined[i];
    }
    // (a product left out, not a pair with the first, runs as before; the call reads its result)
    loop::ExternCall fused = first;
    fused.epilogue = std::make_shared<const loop::LoopKernel>(*pk);
    fused.epilogue_inputs = {first.output};
    fused.output = pk->stores[0].buffer;
    if (second) {  // the pair as one call, where the kernel takes it; else the first alone
      const auto& c = std::get<loop::ExternCall>(program.kernels[static_cast<size_t>(*second)]);
      loop::ExternCall pair = fused;
      pair.gate = b_of(c);
      pair.epilogue_inputs.push_back(c.output);
      pair.origins.insert(pair.origins.end(), c.origins.begin(), c.origins.end());
      if (takes(pair, program)) fused = std::move(pair), out[static_cast<size_t>(*second)].reset();
    }
    if (!takes(fused, program)) continue;
    fused.origins.insert(fused.origins.end(), pk->origins.begin(), pk->origins.end());
    out[static_cast<size_t>(joined[0])].reset();
    out[p] = std::move(fused);
  }
  return with_steps(program, std::move(out));
}

}  // namespace coil::schedule
