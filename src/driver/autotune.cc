#include "driver/autotune.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/cuda/launch.h"
#include "driver/tuning_timer.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"
#include "support/check.h"

namespace coil {

namespace {

// Kernels moving less than this are launch-bound: any candidate does.
constexpr int64_t kMinTunedBytes = int64_t{1} << 20;
// Each timing sample runs about this long (launches repeated); the candidates take turns. Those
// within 3% of the fastest take turns again on samples of 2 ms: with one call a sample, x + yT
// (bf16 16384x8192 on the H100) timed its 128x64 and 128x128 tiles alike (0.275 ms) and picked
// either, while the yardstick, calls queued back to back, measured 0.2711 and 0.2694.
constexpr TurnsOptions kTurns{.sample_ms = 0.3, .rounds = 5, .max_repeats = 64, .runoff_within = 0.03, .runoff_sample_ms = 2.0};
// The candidates run on this many sets of the kernel's buffers, launch after launch, as a
// model's calls take new inputs (and the yardstick's): a kernel reading more than L2 holds would
// otherwise find the tail of its input still in L2 from its previous launch, which real inputs do
// not give, and a kernel whose loads keep fewer lines gains more from it (max-autotune's
// evict-first column sum, bf16 16384x8192 on the H100: 0.087 ms right after another kernel read
// the same tensor, 0.10-0.12 after its own launch). The column sum's own candidates, plain
// loads, time within 0.3% either way.
constexpr size_t kSets = 2;
// The tuning cache's word for "the library's call won".
constexpr const char* kLibraryWinner = "library";

// A symbolic kernel's cache entry: a line per size bucket, "<bucket> <configuration>", the bucket
// its values joined by commas.
std::string bucket_text(const std::vector<int64_t>& bucket) { return fmt::format("{}", fmt::join(bucket, ",")); }

std::map<std::vector<int64_t>, std::string> bucket_entries(const std::optional<std::string>& text) {
  std::map<std::vector<int64_t>, std::string> out;
  if (!text) return out;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    std::vector<int64_t> bucket;
    std::istringstream values(line.substr(0, space));
    for (std::string v; std::getline(values, v, ',');) {
      try {
        bucket.push_back(std::stoll(v));
      } catch (const std::exception&) {  // not an entry of this format: ignored
        bucket.clear();
        break;
      }
    }
    if (!bucket.empty()) out[bucket] = line.substr(space + 1);
  }
  return out;
}

}  // namespace

std::vector<TuningUnit> tuning_units(const loop::Program& program, const codegen::CudaSource& source,
                                     const std::vector<SymbolDecl>& symbol_decls, const cuda::DeviceInfo& device,
                                     const build::ArtifactCache& cache) {
  // Symbolic kernels are timed at the hints, where every symbol has one.
  std::vector<std::string> symbols;
  std::map<std::string, int64_t> hints;
  std::vector<int64_t> hint_values;
  for (const SymbolDecl& d : symbol_decls) {
    symbols.push_back(d.name);
    if (d.hint) hints[d.name] = *d.hint, hint_values.push_back(*d.hint);
  }
  const bool hinted = hints.size() == symbol_decls.size();
  std::vector<TuningUnit> units;
  for (size_t i = 0; i < source.kernels.size(); ++i) {
    const codegen::CudaKernel& info = source.kernels[i];
    const bool symbolic = !info.symbols.empty();
    if (symbolic && !hinted) continue;
    const auto* lk = std::get_if<loop::LoopKernel>(&program.kernels[info.program_index]);
    const auto* call = std::get_if<loop::ExternCall>(&program.kernels[info.program_index]);
    const bool gemv = call && loop::is_product(call->kind);
    if (!lk && !gemv) continue;  // fused attention: one configuration
    auto configs = gemv ? codegen::gemv_configs(program, *call, device) : codegen::candidate_configs(program, *lk, device);
    if (configs.size() < 2) continue;
    // (a buffer of symbolic size, read at data-dependent places, and no hints: no sizes to time on)
    int64_t traffic = 0;
    bool sized = true;
    for (int b : info.buffers) {
      const loop::Buffer& buf = program.buffers[static_cast<size_t>(b)];
      auto n = hinted ? std::optional<int64_t>(buffer_elements(buf, hints)) : static_buffer_elements(buf);
      sized = sized && n.has_value();
      traffic += n.value_or(0) * static_cast<int64_t>(dtype_size(buf.dtype));
    }
    if (!sized || traffic < kMinTunedBytes) continue;
    TuningUnit unit;
    unit.kernel = i;
    auto emit = [&](const std::string& name, const codegen::CudaConfig& config, codegen::CudaKernel& out) {
      return codegen::emit_tunable_kernel(program, info.program_index, name, symbols, device, config, out);
    };
    // The structural key: the heuristic's code under a neutral name, and the device.
    codegen::CudaKernel ignored;
    // Buffer names made generic too, so a model's repeated layers share one entry.
    std::string text = codegen::canonical_kernel_text(emit("k", configs[0], ignored), "k");
    unit.key = symbolic ? build::ArtifactCache::key({"coil-tune-2", text, device.key(), "per-bucket"})
                        : build::ArtifactCache::key({"coil-tune-2", text, device.key()});
    auto cached = cache.read(unit.key, "tune");
    if (symbolic) unit.sizes = hints, unit.symbol_values = hint_values, unit.bucket = codegen::size_bucket(info, hint_values);
    const auto buckets = symbolic ? bucket_entries(cached) : std::map<std::vector<int64_t>, std::string>{};
    const std::string& base = gemv ? call->name : lk->name;
    for (size_t c = 0; c < configs.size(); ++c) {
      codegen::CudaKernel candidate;
      candidate.program_index = info.program_index;
      unit.bodies.push_back(emit(base + "_c" + std::to_string(c), configs[c], candidate));
      unit.candidates.push_back(std::move(candidate));
      const std::string config = codegen::to_string(configs[c]);
      if (!symbolic && cached && *cached == config) unit.winner = static_cast<int>(c);
      for (const auto& [bucket, chosen] : buckets) {
        if (chosen != config) continue;
        if (bucket == unit.bucket) unit.winner = static_cast<int>(c);
        else unit.others.emplace_back(bucket, static_cast<int>(c));
      }
    }
    if (!symbolic && cached && *cached == kLibraryWinner && !(call && loop::fused_with_loops(*call))) unit.winner = 0, unit.library = true;
    units.push_back(std::move(unit));
  }
  return units;
}

int measure_candidates(TuningUnit& unit, const std::vector<void*>& functions, const loop::Program& program,
                       const cuda::Context& context, const build::ArtifactCache& cache, const LibraryRival& rival) {
  cuda::DeviceScratch memory(context);
  // As many sets of the kernel's buffers as the device has room for, up to kSets: a model that
  // holds most of the device's memory leaves less, and with no room for one set the heuristic's
  // candidate stands, untuned and not cached, so that a compile with room tunes it.
  auto bytes_of = [&](int b) { return buffer_bytes(program.buffers[static_cast<size_t>(b)], unit.sizes); };
  std::vector<std::vector<cuda::DevicePtr>> sets;
  while (sets.size() < kSets) {
    std::vector<cuda::DevicePtr> ptrs(program.buffers.size(), 0);
    bool room = true;
    for (int b : unit.candidates.front().buffers)
      if (!(ptrs[static_cast<size_t>(b)] = memory.try_take(bytes_of(b)))) room = false;
    if (!room) break;
    sets.push_back(std::move(ptrs));
  }
  const SplitScratchLayout layout = split_scratch_layout(unit.candidates);
  cuda::DevicePtr status = memory.try_take(3 * sizeof(int64_t));
  cuda::DevicePtr scratch = layout.bytes > 0 ? memory.try_take(static_cast<size_t>(layout.bytes)) : 0;
  if (sets.empty() || !status || (layout.bytes > 0 && !scratch)) {
    unit.note = "not tuned: no device memory for its buffers";
    unit.winner = 0;
    return 0;
  }
  if (sets.size() < kSets) unit.note = fmt::format("on {} buffer set(s): no device memory for more", sets.size());
  {
    RandomFill fill(context);
    for (auto& ptrs : sets)
      for (int b : unit.candidates.front().buffers) fill(ptrs[static_cast<size_t>(b)], bytes_of(b), program.buffers[static_cast<size_t>(b)].dtype);
  }
  context.fill_zero(status, 3 * sizeof(int64_t), nullptr);
  // Each candidate's scratch a region of its own (the candidates take turns, and one's partials
  // must not lie where another keeps its tickets), zeroed once.
  if (scratch) context.fill_zero(scratch, static_cast<size_t>(layout.bytes), nullptr);

  size_t launches = 0;
  auto run = [&](size_t c, int times) {
    if (c == unit.candidates.size()) {
      for (int i = 0; i < times; ++i) rival(sets[launches++ % sets.size()]);
      return;
    }
    const codegen::CudaKernel& info = unit.candidates[c];
    cuda::DevicePtr own_scratch = layout.offsets[c] >= 0 ? scratch + static_cast<cuda::DevicePtr>(layout.offsets[c]) : 0;
    for (int i = 0; i < times; ++i)
      launch_loop_kernel(context, functions[c], info, sets[launches++ % sets.size()], unit.symbol_values, info.launch.units.eval(unit.sizes),
                         status, own_scratch, nullptr, false);
  };
  // A candidate the device cannot launch (resources) is left out; the heuristic's must work.
  unit.ms = time_in_turns(context, unit.candidates.size() + (rival ? 1 : 0), run, kTurns);
  auto winner = static_cast<int>(std::min_element(unit.ms.begin(), unit.ms.end()) - unit.ms.begin());
  unit.library = static_cast<size_t>(winner) == unit.candidates.size();
  if (unit.library) winner = 0;
  // The cache names the winner by its configuration, so a changed candidate list cannot
  // misread it; a symbolic kernel's entry adds this bucket's line to the others'.
  const std::string config = unit.library ? kLibraryWinner : codegen::to_string(unit.candidates[static_cast<size_t>(winner)].config);
  if (unit.bucket.empty()) {
    cache.store(unit.key, "tune", config);
  } else {
    auto buckets = bucket_entries(cache.read(unit.key, "tune"));
    buckets[unit.bucket] = config;
    std::string entry;
    for (const auto& [bucket, chosen] : buckets) entry += bucket_text(bucket) + " " + chosen + "\n";
    cache.store(unit.key, "tune", entry);
  }
  unit.winner = winner;
  return winner;
}

std::string tuning_report(const TuningUnit& unit) {
  if (unit.ms.empty())
    return fmt::format("{}: {}; the heuristic's {}", unit.candidates.front().name, unit.note,
                       codegen::to_string(unit.candidates.front().config));
  std::vector<size_t> order(unit.ms.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return unit.ms[a] < unit.ms[b]; });
  std::string out = unit.candidates.front().name + (unit.bucket.empty() ? ":" : " (size bucket " + bucket_text(unit.bucket) + "):");
  for (size_t c : order)
    out += fmt::format("{} {:.3f} ms {}", c == order.front() ? "" : ",", unit.ms[c],
                       c < unit.candidates.size() ? codegen::to_string(unit.candidates[c].config) : "cuBLASLt");
  return unit.note.empty() ? out : out + "; " + unit.note;
}

}  // namespace coil
