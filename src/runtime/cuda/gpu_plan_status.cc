// A run's status words (a kernel's failure: an index out of bounds, an integer division by zero),
// read back without waiting: each run copies its words to a page-locked slot after its kernels
// and records an event; a later call (or a synchronize) checks the runs that finished, in order,
// and raises the first failure, naming the values the failing kernel computed.
#include <fmt/ranges.h>

#include <algorithm>

#include "runtime/cuda/gpu_plan.h"
#include "support/check.h"

namespace coil {

void GpuPlan::defer_status(cuda::DevicePtr status, size_t bytes, cuda::Stream stream) const {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    if (!free_slots_.empty()) p = free_slots_.back(), free_slots_.pop_back();
  }
  if (!p.words) {  // a new slot; slots are reused, since pinning memory synchronizes
    p.words = static_cast<int64_t*>(context->allocate_host(bytes));
    p.event = context->create_event();
  }
  std::lock_guard<std::mutex> lock(pending_mutex_);
  try {
    context->copy_to_host(p.words, status, bytes, stream);
    context->record(p.event, stream);
  } catch (...) {
    free_slots_.push_back(p);
    throw;
  }
  pending_.push_back(p);
}

void GpuPlan::report_status(const int64_t* words) const {
  for (size_t k = 0; k < lowered.program.kernels.size(); ++k) {
    const int64_t* w = &words[k * 3];
    if (!w[0]) continue;
    const auto& lk = std::get<loop::LoopKernel>(lowered.program.kernels[k]);
    if (w[0] == 2) fail("integer division by zero (computing %{})", fmt::join(lk.origins, ", %"));
    fail("index {} is out of bounds for a dimension of size {} (computing %{})", w[1], w[2], fmt::join(lk.origins, ", %"));
  }
}

void GpuPlan::check_pending(bool wait) const {
  if (cuda_graphs_) cuda_graphs_->check(wait);
  check_runs(wait);
}

void GpuPlan::check_runs(bool wait) const {
  std::vector<Pending> finished;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    auto it = pending_.begin();
    for (; it != pending_.end(); ++it) {
      if (wait) context->wait_event(it->event);
      else if (!context->event_done(it->event)) break;  // runs on one stream finish in order
      finished.push_back(*it);
    }
    pending_.erase(pending_.begin(), it);
  }
  std::vector<int64_t> first_error;
  for (Pending& p : finished) {
    size_t n = std::max<size_t>(lowered.program.kernels.size(), 1) * 3;
    bool bad = false;
    for (size_t i = 0; i < n; i += 3) bad |= p.words[i] != 0;
    if (bad && first_error.empty()) first_error.assign(p.words, p.words + n);
  }
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    free_slots_.insert(free_slots_.end(), finished.begin(), finished.end());
  }
  if (!first_error.empty()) report_status(first_error.data());
}

}  // namespace coil
