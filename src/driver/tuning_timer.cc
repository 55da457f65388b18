#include "driver/tuning_timer.h"

#include <algorithm>
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
  double once = context.time_ms(stream, [&] { run(0, 1); });
  int repeats = static_cast<int>(std::clamp(options.sample_ms / std::max(once, 1e-3), 1.0, double(options.max_repeats)));
  std::vector<std::vector<double>> samples(count);
  for (int round = 0; round < options.rounds; ++round)
    for (size_t i = 0; i < count; ++i)
      if (usable[i]) samples[i].push_back(context.time_ms(stream, [&] { run(i, repeats); }) / repeats);
  std::vector<double> ms(count);
  for (size_t i = 0; i < count; ++i) ms[i] = usable[i] ? median(samples[i]) : std::numeric_limits<double>::infinity();
  return ms;
}

}  // namespace coil
