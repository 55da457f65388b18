#include "driver/autotune_gemm.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "codegen/cuda/cuda_codegen.h"
#include "driver/tuning_timer.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"
#include "support/check.h"

namespace coil {

namespace {

// Products doing less are launch-bound: any algorithm does.
constexpr double kMinTunedFlops = double{1 << 28};
// Another algorithm replaces the heuristic's first only when at least this much faster: the
// rounds' medians of one algorithm still move by about a percent between compiles.
constexpr double kMargin = 0.02;
// Each sample runs about this long (calls repeated); the algorithms take turns.
constexpr TurnsOptions kTurns{.sample_ms = 0.3, .rounds = 5, .max_repeats = 32};

// The alignment cuBLASLt will see for an operand on scratch memory (whose bases are at least
// 256-byte aligned), 256 for an absent one as for a null pointer.
uint32_t alignment(const GemmPlace& p) {
  if (p.buffer < 0) return cuda::pointer_alignment(nullptr);
  return cuda::pointer_alignment(reinterpret_cast<const void*>(uintptr_t{256} + static_cast<uintptr_t>(p.byte_offset)));
}

// A product's operands on scratch device memory (the buffers at `sizes`): each buffer it
// touches, filled by `fill`, and the pointers into them.
struct Operands {
  const void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  void* d = nullptr;
};

// Nothing where the device has no memory for the operands.
std::optional<Operands> place(const GemmPlaces& where, const loop::Program& program, const std::map<std::string, int64_t>& sizes,
                              RandomFill& fill, cuda::DeviceScratch& memory) {
  std::map<int, cuda::DevicePtr> base;
  bool room = true;
  auto at = [&](const GemmPlace& p) -> void* {
    if (p.buffer < 0 || !room) return nullptr;
    auto [it, fresh] = base.try_emplace(p.buffer);
    if (fresh) {
      const loop::Buffer& buf = program.buffers[static_cast<size_t>(p.buffer)];
      size_t bytes = buffer_bytes(buf, sizes);
      it->second = memory.try_take(bytes);
      if (!it->second) {
        room = false;
        return nullptr;
      }
      fill(it->second, bytes, buf.dtype);
    }
    return reinterpret_cast<void*>(it->second + static_cast<cuda::DevicePtr>(p.byte_offset));
  };
  Operands ops{.a = at(where.a), .b = at(where.b), .c = at(where.c), .bias = at(where.bias), .d = at(where.d)};
  if (!room) return std::nullopt;
  return ops;
}

// Times each of `algos` on `ops`, the algorithms taking turns; fills t.ms.
void measure(GemmTuning& t, const cuda::GemmProblem& g, const Operands& ops, const std::vector<cuda::GemmAlgo>& algos,
             const cuda::CublasLt& cublas, const cuda::Context& context, void* workspace) {
  auto run = [&](size_t i, int times) {
    for (int r = 0; r < times; ++r)
      cublas.gemm(g, ops.a, ops.b, ops.c, ops.d, ops.bias, workspace, kGemmWorkspace, nullptr, &algos[i]);
  };
  t.ms = time_in_turns(context, algos.size(), run, kTurns);
  t.measured = true;
}

}  // namespace

size_t pick_algorithm(const std::vector<double>& ms, double margin) {
  COIL_CHECK(!ms.empty()) << "no algorithm timed";
  size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
  return ms[best] < ms[0] * (1 - margin) ? best : 0;
}

std::vector<GemmTuning> tune_gemms(const loop::Program& program, const std::vector<SymbolDecl>& symbols, bool tf32,
                                   const cuda::CublasLt& cublas, const cuda::Context& context, const build::ArtifactCache& cache) {
  context.make_current();  // on this thread (compile_cuda runs the tuning beside NVRTC)
  std::vector<GemmTuning> out;
  std::map<std::string, int64_t> sizes;  // the hints (a graph of static sizes: none)
  for (const SymbolDecl& s : symbols) {
    if (!s.hint) return out;
    sizes[s.name] = *s.hint;
  }
  std::map<std::string, std::optional<cuda::GemmAlgo>> done;  // key -> winner, for repeats in this graph
  cuda::DeviceScratch shared(context);
  cuda::DevicePtr workspace = 0;
  RandomFill fill(context);
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const auto* call = std::get_if<loop::ExternCall>(&program.kernels[k]);
    if (!call || !loop::is_product(call->kind)) continue;
    if (!codegen::gemv_configs(program, *call, context.device()).empty()) continue;  // coil's kernel, tuned with the loop kernels
    cuda::GemmProblem g = gemm_problem(*call, program, sizes, tf32);
    const double flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n) *
                         static_cast<double>(g.k);
    if (flops < kMinTunedFlops) continue;
    const GemmPlaces where = gemm_places(*call, program, sizes);
    GemmTuning t;
    t.kernel = k;
    t.name = call->name;
    t.key = build::ArtifactCache::key(
        {"coil-gemm-tune-1", cuda::str(g),
         fmt::format("align {} {} {} {} {}", alignment(where.a), alignment(where.b), alignment(where.c), alignment(where.d),
                     alignment(where.bias)),
         context.device().key(), cublas.version()});
    if (auto it = done.find(t.key); it != done.end()) {
      t.winner = it->second;
      out.push_back(std::move(t));
      continue;
    }
    if (auto cached = cache.read(t.key, "tune")) {
      t.winner = cuda::gemm_algo_from_hex(*cached);  // "first": the heuristic's
    } else {
      // Without device memory for the operands (and the workspace), the heuristic's algorithm
      // stands, untuned and not cached.
      cuda::DeviceScratch memory(context);
      std::optional<Operands> ops = place(where, program, sizes, fill, memory);
      if (ops && !workspace) workspace = shared.try_take(kGemmWorkspace);
      if (!ops || !workspace) {
        t.note = "not tuned: no device memory for its operands";
      } else {
        auto algos = cublas.algorithms(g, ops->a, ops->b, ops->c, ops->d, ops->bias, kGemmWorkspace);
        if (algos.size() > 1) {
          measure(t, g, *ops, algos, cublas, context, reinterpret_cast<void*>(workspace));
          t.kept = pick_algorithm(t.ms, kMargin);
          if (t.kept > 0) t.winner = algos[t.kept];
        }
        cache.store(t.key, "tune", t.winner ? cuda::to_hex(*t.winner) : "first");
      }
    }
    done[t.key] = t.winner;
    out.push_back(std::move(t));
  }
  return out;
}

std::string tuning_report(const GemmTuning& t) {
  if (!t.measured) return t.name + " (cuBLASLt): " + (t.note.empty() ? "from the tuning cache" : t.note);
  return turns_report(t.name, "cuBLASLt", t.ms, t.kept);
}

}  // namespace coil
