#include "runtime/memory_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
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

// Whether `step` is a pointwise kernel that may store `out` over `in`: every element of `in` read
// where its iteration writes `out`. The kernels compute and store the values of the stores in
// order, each distinct load once (codegen's ExprPrinter): a store after `out`'s may read `in`
// only through a load an earlier value made (an optimizer's kernel per parameter stores the
// parameter, then its moments, each recomputing what it needs from the old values).
bool pointwise_over(const loop::Kernel& step, int out, int in) {
  const auto* k = std::get_if<loop::LoopKernel>(&step);
  if (!k || !k->reductions.empty()) return false;
  auto at = std::find_if(k->stores.begin(), k->stores.end(), [&](const loop::StoreStep& st) { return st.buffer == out; });
  if (at == k->stores.end()) return false;
  std::vector<loop::ExprRef> made;  // the loads of `in` emitted before `out` is stored
  for (auto st = k->stores.begin(); st != k->stores.end(); ++st) {
    if (st->dynamic || (st != at && st->buffer == out) || !loads_only_at(st->value, in, at->offset)) return false;
    std::vector<loop::ExprRef> loads;
    loop::loads_of(st->value, in, loads);
    if (st <= at) {
      made.insert(made.end(), loads.begin(), loads.end());
      continue;
    }
    for (const auto& l : loads)
      if (std::none_of(made.begin(), made.end(), [&](const loop::ExprRef& m) { return loop::same(m, l); })) return false;
  }
  return true;
}

// Whether buffer `out` may be computed in the memory of buffer `in` (see outputs_over_inputs).
bool may_overwrite(const loop::Program& program, const MemoryPlan& plan, int out, int in) {
  const loop::Buffer& o = program.buffers[static_cast<size_t>(out)];
  const loop::Buffer& i = program.buffers[static_cast<size_t>(in)];
  if (o.dtype != i.dtype || !(o.sizes == i.sizes) || !(o.strides == i.strides) || !(o.offset == i.offset)) return false;
  std::vector<size_t> writers;
  for (size_t s = 0; s < plan.writes.size(); ++s)
    if (std::count(plan.writes[s].begin(), plan.writes[s].end(), out)) writers.push_back(s);
  if (writers.empty()) return false;
  for (size_t s : writers)  // a torch call's result is the embedder's memory, not the input's
    if (const auto* e = std::get_if<loop::ExternCall>(&program.kernels[s]); e && e->kind == loop::ExternKind::torch) return false;
  const size_t first = writers.front();
  for (size_t s = first; s < plan.reads.size(); ++s) {
    if (!std::count(plan.reads[s].begin(), plan.reads[s].end(), in)) continue;
    if (s != first || !pointwise_over(program.kernels[s], out, in)) return false;
  }
  return true;
}

}  // namespace

std::vector<int> outputs_over_inputs(const LoweredGraph& lowered, const MemoryPlan& plan, const std::vector<int>& wanted) {
  const auto& outs = lowered.output_buffers;
  std::vector<int> granted(outs.size(), -1);
  std::set<int> taken;  // inputs already given to an output
  for (size_t o = 0; o < outs.size() && o < wanted.size(); ++o) {
    int in = wanted[o];
    if (in < 0 || in >= static_cast<int>(lowered.input_buffers.size()) || taken.count(in)) continue;
    if (std::count(outs.begin(), outs.end(), outs[o]) != 1) continue;
    if (!may_overwrite(lowered.program, plan, outs[o], lowered.input_buffers[static_cast<size_t>(in)])) continue;
    granted[o] = in;
    taken.insert(in);
  }
  return granted;
}

std::vector<std::vector<size_t>> copies_onto_inputs(const LoweredGraph& lowered, const std::vector<int>& output_over_input) {
  const loop::Program& program = lowered.program;
  std::map<int, std::pair<size_t, int>> over;  // output buffer -> (output, its input's buffer)
  for (size_t o = 0; o < output_over_input.size(); ++o)
    if (int i = output_over_input[o]; i >= 0) over[lowered.output_buffers[o]] = {o, lowered.input_buffers[static_cast<size_t>(i)]};
  std::vector<std::vector<size_t>> copies(program.kernels.size());
  for (size_t s = 0; s < program.kernels.size() && !over.empty(); ++s) {
    const auto* k = std::get_if<loop::LoopKernel>(&program.kernels[s]);
    if (!k || !k->reductions.empty() || k->stores.empty()) continue;
    std::vector<size_t> outs;
    for (const loop::StoreStep& st : k->stores) {
      auto it = over.find(st.buffer);
      const loop::ExprRef& v = st.value;
      if (it == over.end() || st.dynamic || v->kind() != loop::Expr::Kind::load || v->buffer() != it->second.second || v->dynamic() ||
          !(v->offset() == st.offset)) {
        outs.clear();
        break;
      }
      outs.push_back(it->second.first);
    }
    copies[s] = std::move(outs);
  }
  return copies;
}

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
