// Runs `count` independent jobs on a pool of threads (one per hardware thread, at most one per
// job). After a job throws, no new job starts; the exception of the earliest failed job (by
// index) is rethrown once all running ones are done.
#pragma once
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace coil::build {

template <typename Job>
void run_parallel(size_t count, Job&& job) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < count && !failed; i = next++) {
      try {
        job(i);
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
    }
  };
  size_t workers = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), count);
  if (workers <= 1) {
    work();
  } else {
    std::vector<std::jthread> pool;
    for (size_t i = 0; i < workers; ++i) pool.emplace_back(work);
  }  // the jthreads join here
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace coil::build
