#include "runtime/memory_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace coil {

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
  plan.release_after.resize(program.kernels.size());
  for (size_t b = 0; b < n; ++b)
    if (program.buffers[b].role == loop::Buffer::Role::temporary && plan.last_use[b] >= 0)
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
