#include "driver/horizontal_groups.h"

#include <algorithm>
#include <set>

#include "codegen/cuda/horizontal.h"
#include "runtime/plan.h"

namespace coil {

namespace {

bool small(const loop::Program& program, const loop::LoopKernel& lk, const codegen::CudaKernel& k) {
  std::set<int> scattered;  // stored at dynamic places: only the elements stored count (a KV cache's one position)
  for (const auto& s : lk.stores)
    if (s.dynamic) scattered.insert(s.buffer);
  int64_t bytes = 0;
  for (int b : k.buffers) {
    const loop::Buffer& buf = program.buffers[static_cast<size_t>(b)];
    auto n = scattered.count(b) ? product(lk.outer).constant() : static_buffer_elements(buf);
    if (!n) return false;
    bytes += *n * static_cast<int64_t>(dtype_size(buf.dtype));
  }
  return bytes < kHorizontalMemberBytes;
}

// What a step may write: its stores, and the graph inputs it reads that one of its graph outputs
// could be computed over (same dtype and size: an update of a parameter, a moment or a step
// count from its old value, which the adapter asks for as outputs_over_inputs). A group is formed
// as though those were so; GpuPlan::enable_horizontals checks what was asked.
std::set<int> may_write(const loop::Program& program, const MemoryPlan& memory, size_t k) {
  std::set<int> out(memory.writes[k].begin(), memory.writes[k].end());
  auto elements = [&](int b) { return static_buffer_elements(program.buffers[static_cast<size_t>(b)]); };
  for (int r : memory.reads[k]) {
    const loop::Buffer& in = program.buffers[static_cast<size_t>(r)];
    if (in.role != loop::Buffer::Role::input) continue;
    for (int w : memory.writes[k]) {
      const loop::Buffer& o = program.buffers[static_cast<size_t>(w)];
      // (symbolic sizes: possibly equal)
      if (o.role == loop::Buffer::Role::output && o.dtype == in.dtype && (!elements(w) || !elements(r) || elements(w) == elements(r)))
        out.insert(r);
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<size_t>> horizontal_groups(const loop::Program& program, const std::vector<const codegen::CudaKernel*>& plain,
                                                   const MemoryPlan& memory) {
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> run;
  std::set<int> read, written, buffers;
  auto close = [&] {
    if (run.size() > 1) groups.push_back(run);
    run.clear(), read.clear(), written.clear(), buffers.clear();
  };
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const auto* lk = std::get_if<loop::LoopKernel>(&program.kernels[k]);
    const codegen::CudaKernel* info = plain[k];
    if (!lk || !info || !codegen::horizontal_member(*lk, *info) || !small(program, *lk, *info)) {
      close();
      continue;
    }
    const std::set<int> writes = may_write(program, memory, k);
    auto joins = [&] {
      if (run.empty()) return true;
      if (run.size() >= kHorizontalMembers || info->launch.block_x != plain[run.front()]->launch.block_x) return false;
      std::set<int> more = buffers;
      more.insert(info->buffers.begin(), info->buffers.end());
      if (more.size() > kHorizontalBuffers) return false;
      for (int b : writes)
        if (read.count(b) || written.count(b)) return false;
      for (int b : memory.reads[k])
        if (written.count(b)) return false;
      // A result taking over a dying operand's memory: no other member may read that operand.
      for (int b : memory.writes[k])
        if (int a = memory.in_place_of[static_cast<size_t>(b)]; a >= 0 && read.count(a)) return false;
      return true;
    };
    if (!joins()) close();
    run.push_back(k);
    read.insert(memory.reads[k].begin(), memory.reads[k].end());
    written.insert(writes.begin(), writes.end());
    buffers.insert(info->buffers.begin(), info->buffers.end());
  }
  close();
  return groups;
}

}  // namespace coil
