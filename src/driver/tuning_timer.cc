#include "driver/tuning_timer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "support/check.h"

namespace coil {

RandomFill::~RandomFill() { context_.synchronize(nullptr); }  // the copies from the blocks have run

void RandomFill::operator()(cuda::DevicePtr p, size_t bytes, DType dtype) {
  const size_t size = dtype_size(dtype);
  if (!is_float(dtype) || bytes < size) {
    context_.fill_bytes(p, 0, bytes, nullptr);
    return;
  }
  auto [it, fresh] = blocks_.try_emplace(dtype);
  if (fresh) {
    const auto count = static_cast<int64_t>((size_t{64} << 10) / size);
    it->second = Tensor::empty_strided(dtype, {count}, {1});
    uint32_t state = 12345;
    for (int64_t i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;
      it->second.store(i, (state >> 8) * (2.0 / 16777216.0) - 1.0);
    }
  }
  size_t done = std::min(bytes, static_cast<size_t>(it->second.numel()) * size);
  context_.copy_to_device(p, it->second.data(), done, nullptr);
  for (size_t n = 0; done < bytes; done += n) {  // doubling copies of what is there
    n = std::min(done, bytes - done);
    context_.copy_on_device(p + done, p, n, nullptr);
  }
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? std::numeric_limits<double>::infinity() : v[v.size() / 2];
}

}  // namespace

std::vector<size_t> runoff_candidates(const std::vector<double>& ms, double within) {
  const double best = ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end());
  std::vector<size_t> taken;
  if (!std::isfinite(best) || within <= 0) return taken;
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i] <= best * (1 + within)) taken.push_back(i);
  std::stable_sort(taken.begin(), taken.end(), [&](size_t a, size_t b) { return ms[a] < ms[b]; });
  if (taken.size() < 2) taken.clear();
  return taken;
}

std::vector<double> time_in_turns(const cuda::Context& context, size_t count,
                                  const std::function<void(size_t candidate, int calls)>& run,
                                  const TurnsOptions& options) {
  COIL_CHECK(count > 0) << "no candidate to time";
  cuda::Stream stream = nullptr;
  std::vector<bool> usable(count, true);
  for (size_t i = 0; i < count; ++i) {
    try {
      run(i, 1);
      context.synchronize(stream);
    } catch (const Error&) {
      if (i == 0) throw;  // the heuristic's choice must run
      usable[i] = false;
    }
  }
  const double once = std::max(context.time_ms(stream, [&] { run(0, 1); }), 1e-3);
  std::vector<double> ms(count, std::numeric_limits<double>::infinity());
  // The candidates `who` taking turns with samples of about `sample_ms`; their medians into ms.
  auto turns = [&](const std::vector<size_t>& who, double sample_ms) {
    const int repeats = static_cast<int>(std::clamp(sample_ms / once, 1.0, double(options.max_repeats)));
    std::vector<std::vector<double>> samples(count);
    for (int round = 0; round < options.rounds; ++round)
      for (size_t i : who) samples[i].push_back(context.time_ms(stream, [&] { run(i, repeats); }) / repeats);
    for (size_t i : who) ms[i] = median(samples[i]);
  };
  std::vector<size_t> all;
  for (size_t i = 0; i < count; ++i)
    if (usable[i]) all.push_back(i);
  turns(all, options.sample_ms);
  std::vector<size_t> close = runoff_candidates(ms, options.runoff_within);
  if (!close.empty()) turns(close, options.runoff_sample_ms);
  return ms;
}

std::string turns_report(const std::string& name, const std::string& library, const std::vector<double>& ms, size_t kept) {
  std::vector<size_t> order(ms.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] < ms[b]; });
  std::string out = name + " (" + library + "):";
  for (size_t i : order) out += fmt::format("{} {:.4f} ms #{}", i == order.front() ? "" : ",", ms[i], i);
  return out + fmt::format("; kept #{}", kept);
}

}  // namespace coil
