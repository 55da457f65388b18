#include "runtime/memory_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace coil {

namespace {

bool loads_only_at(const loop::ExprRef& e, int buffer, const SymInt& offset) {
  if (e->kind() == loop::Expr::Kind::load && e->buffer() == buffer && (e->dynamic() || !(e->offset() == offset))) return false;
  for (const auto& o : e->operands())
    if (!loads_only_at(o, buffer, offset)) return false;
  return true;
}

// The operand that step `s` may overwrite in place with its one result, or -1.
int in_place_candidate(const loop::Program& program, size_t s, const MemoryPlan& plan) {
  const auto* k = std::get_if<loop::LoopKernel>(&program.kernels[s]);
  if (!k || !k->reductions.empty() || k->stores.size() != 1 || k->stores[0].dynamic) return -1;
  const loop::StoreStep& st = k->stores[0];
  const loop::Buffer& out = program.buffers[static_cast<size_t>(st.buffer)];
  if (out.role != loop::Buffer::Role::temporary || plan.first_use[static_cast<size_t>(st.buffer)] != static_cast<int>(s)) return -1;
  for (int a : plan.reads[s]) {
    const loop::Buffer& in = program.buffers[static_cast<size_t>(a)];
    bool same_layout = in.dtype == out.dtype && in.sizes == out.sizes && in.strides == out.strides && in.offset == out.offset;
    if (in.role == loop::Buffer::Role::temporary && same_layout && plan.last_use[static_cast<size_t>(a)] == static_cast<int>(s) &&
        loads_only_at(st.value, a, st.offset))
      return a;
  }
  return -1;
}

}  // namespace

MemoryPlan plan_memory(const LoweredGraph& lowered) {
  const auto& program = lowered.program;
  MemoryPlan plan;
  size_t n = program.buffers.size();
  plan.first_use.assign(n, -1);
  plan.last_use.assign(n, -1);
  for (size_t s = 0; s < program.kernels.size(); ++s) {
    auto [reads, writes] = loop::access(program.kernels[s]);
    plan.reads.emplace_back(reads.begin(), reads.end());
    plan.writes.emplace_back(writes.begin(), writes.end());
    for (const std::set<int>* used : {&reads, &writes})
      for (int b : *used) {
        auto i = static_cast<size_t>(b);
        if (plan.first_use[i] < 0) plan.first_use[i] = static_cast<int>(s);
        plan.last_use[i] = static_cast<int>(s);
      }
  }
  plan.in_place_of.assign(n, -1);
  std::vector<bool> taken_over(n, false);  // its memory lives on in the buffer written over it
  for (size_t s = 0; s < program.kernels.size(); ++s) {
    int a = in_place_candidate(program, s, plan);
    if (a < 0) continue;
    plan.in_place_of[static_cast<size_t>(plan.writes[s][0])] = a;
    taken_over[static_cast<size_t>(a)] = true;
  }
  plan.release_after.resize(program.kernels.size());
  for (size_t b = 0; b < n; ++b)
    if (program.buffers[b].role == loop::Buffer::Role::temporary && plan.last_use[b] >= 0 && !taken_over[b])
      plan.release_after[static_cast<size_t>(plan.last_use[b])].push_back(static_cast<int>(b));
  return plan;
}

std::string describe_plan(const LoweredGraph& lowered) {
  const auto& program = lowered.program;
  MemoryPlan plan = plan_memory(lowered);
  std::string out;
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    const auto& buf = program.buffers[b];
    std::string life = plan.first_use[b] < 0 ? "unused"
                                             : fmt::format("steps {}..{}", plan.first_use[b], plan.last_use[b]);
    if (plan.in_place_of[b] >= 0) life += fmt::format(", in place of buf{}", plan.in_place_of[b]);
    out += fmt::format("buf{} {} {}: {}{} ({})\n", b, loop::role_name(buf.role), buf.name, dtype_name(buf.dtype),
                       shape_str(buf.sizes), life);
  }
  auto names = [](const std::vector<int>& ids) {
    std::vector<std::string> s;
    for (int b : ids) s.push_back("buf" + std::to_string(b));
    return fmt::format("{}", fmt::join(s, ", "));
  };
  for (size_t s = 0; s < program.kernels.size(); ++s) {
    const auto* e = std::get_if<loop::ExternCall>(&program.kernels[s]);
    std::string what = e ? fmt::format("extern {}", e->name) : "kernel " + std::get<loop::LoopKernel>(program.kernels[s]).name;
    out += fmt::format("step {}: {} reads [{}] writes [{}]", s, what, names(plan.reads[s]), names(plan.writes[s]));
    if (!plan.release_after[s].empty()) out += fmt::format(" then frees [{}]", names(plan.release_after[s]));
    out += "\n";
  }
  return out;
}

}  // namespace coil
