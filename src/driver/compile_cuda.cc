// The CUDA half of the pipeline's end: generate for the GPU at hand, build the kernels with
// NVRTC (untuned kernels and every candidate of the tuned ones spread over units compiled in
// parallel, cached by content), measure the candidates (and cuBLASLt's algorithms for the matrix
// products) the tuning cache does not know, load the modules into the primary context and
// assemble the GPU plan. Kernels that differ only in
// their names and which buffers they take (a model's repeated layers) compile and tune once.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>

#include "build/nvrtc.h"
#include "driver/autotune.h"
#include "driver/autotune_conv.h"
#include "driver/autotune_gemm.h"
#include "driver/compile.h"
#include "driver/conv_choice.h"
#include "driver/horizontal_groups.h"
#include "codegen/cuda/horizontal.h"
#include "coil/error.h"
#include "loop/conv_params.h"
#include "runtime/cuda/gpu_plan.h"

namespace coil {

namespace {

// Whether cuDNN offers a plan for convolution `call` (forward or transposed, f32/f16/bf16, static non-empty
// sizes, packed NCHW or channels-last operands), as the GPU plan will run it: without its bias
// (split off into a kernel writing the output), so into a contiguous temporary when it has one.
bool cudnn_takes(const loop::ExternCall& call, const loop::Program& program, const cuda::Cudnn& cudnn, bool tf32) {
  const loop::ConvParams c = loop::conv_params(call.params);
  const DType t = program.buffers[static_cast<size_t>(call.output)].dtype;
  if (c.k < 1 || c.k > 3 || (t != DType::f32 && t != DType::f16 && t != DType::bf16)) return false;
  // Grouped (depthwise) convolutions stay coil's direct loop kernels: on the H100 the best plan
  // cuDNN's heuristic and fallback lists gave ConvNeXt-T's first 7x7 depthwise convolution (bf16,
  // batch 32) took 1.0 ms, where eager's (a runtime-compiled cuDNN kernel these lists do not
  // reach) takes 0.076 ms and coil's loop kernel, channels-last in flat columns, 0.107 ms.
  if (c.groups != 1) return false;
  for (const auto& v : call.inputs)
    if (program.buffers[static_cast<size_t>(v.buffer)].dtype != t) return false;
  const loop::ExternCall plain = without_bias(call, program);
  const loop::View y = result_view(plain, program);
  for (const loop::View* v : {&std::as_const(plain.inputs[0]), &std::as_const(plain.inputs[1]), &y}) {
    for (const SymInt& d : v->sizes)
      if (!d.constant() || *d.constant() <= 0) return false;
    for (const SymInt& s : v->strides)
      if (!s.constant()) return false;
  }
  // Packed NCHW or channels-last operands only (cuda::packed_conv_strides).
  const cuda::ConvProblem p = static_conv_problem(plain, program, tf32);
  for (auto [dims, strides] : {std::pair{&p.x_dims, &p.x_strides}, {&p.w_dims, &p.w_strides}, {&p.y_dims, &p.y_strides}})
    if (!cuda::packed_conv_strides(*dims, *strides)) return false;
  return cudnn.engines(p) > 0;
}

// What a tuned product of a few rows is timed against: cuBLASLt's call of the heuristic's
// algorithm on the candidates' buffers (none for a loop kernel, or where no workspace fits).
template <typename Workspace>
LibraryRival library_rival(const loop::Program& program, const TuningUnit& unit, bool tf32, const cuda::CublasLt* library,
                           Workspace&& workspace) {
  const auto* call = std::get_if<loop::ExternCall>(&program.kernels[unit.candidates.front().program_index]);
  if (!call || !library || loop::fused_with_loops(*call)) return {};  // (cuBLASLt has no such prologue or epilogue)
  const cuda::DevicePtr w = workspace();
  if (!w) return {};
  const cuda::GemmProblem g = gemm_problem(*call, program, {}, tf32);
  // Prepared once and run as the plan runs a product of static sizes (GpuPlan::run_gemm), so
  // that the host's share of a call is the plan's.
  std::shared_ptr<cuda::GemmCall> prepared;
  const GemmPlaces where = gemm_places(*call, program);
  return [library, where, g, w, prepared](const std::vector<cuda::DevicePtr>& buffers) mutable {
    auto at = [&](const GemmPlace& p) -> void* {
      return p.buffer < 0 ? nullptr : reinterpret_cast<void*>(buffers[static_cast<size_t>(p.buffer)] + static_cast<cuda::DevicePtr>(p.byte_offset));
    };
    void *a = at(where.a), *b = at(where.b), *c = at(where.c), *d = at(where.d), *bias = at(where.bias);
    if (!prepared) prepared = library->prepare(g, a, b, c, d, bias, kGemmWorkspace);
    if (!library->run(*prepared, a, b, c, d, bias, reinterpret_cast<void*>(w), kGemmWorkspace, nullptr))
      library->gemm(g, a, b, c, d, bias, reinterpret_cast<void*>(w), kGemmWorkspace, nullptr);
  };
}

}  // namespace

Executable compile_cuda(const Graph& graph, const CompileOptions& options, std::shared_ptr<cuda::Context> context) {
  Target target;
  target.cuda = true;
  target.device = context->device();
  target.cuda_candidate = options.cuda_candidate;
  target.externs_as_loops = options.externs_as_loops;
  if (const char* prologues = std::getenv("COIL_GEMV_PROLOGUES")) target.gemv_prologues = std::string_view(prologues) != "0";
  // cuDNN, loaded when the graph has a convolution it may take; without it (not installed),
  // convolutions are im2col + cuBLASLt products or loop kernels.
  build::ArtifactCache cache = options.cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(options.cache_dir);
  // A fused epilogue's cuDNN plans compile kernels: kept in the artifact cache per device.
  auto plan_key = [device = context->device().key()](const std::string& name) {
    return build::ArtifactCache::key({"coil-cudnn-plans-1", name, device});
  };
  cuda::CudnnPlanStore plan_store;
  plan_store.read = [cache, plan_key](const std::string& name) { return cache.read(plan_key(name), "cudnn"); };
  plan_store.write = [cache, plan_key](const std::string& name, const std::string& bytes) {
    try {
      cache.store(plan_key(name), "cudnn", bytes);
    } catch (const Error&) {  // a cache that cannot be written costs the next compile time, nothing else
    }
  };
  std::shared_ptr<const cuda::Cudnn> cudnn;
  bool cudnn_tried = false;
  std::string exe_note_cudnn;
  target.library_convolution = [&](const loop::ExternCall& call, const loop::Program& program) {
    if (!cudnn_tried) {
      cudnn_tried = true;
      try {
        context->make_current();
        cudnn = cuda::Cudnn::load(plan_store);
      } catch (const Error& e) {
        exe_note_cudnn = e.what();
      }
    }
    return cudnn && cudnn_takes(call, program, *cudnn, options.allow_tf32);
  };
  // A convolution cuDNN takes with a short reduction per output: cuDNN's plans or a loop kernel,
  // whichever measured faster (driver/conv_choice.h), once per problem.
  std::map<std::string, ConvPathChoice> paths;
  std::vector<std::string> path_reports;
  auto loop_wins = [&](const loop::ExternCall& call, const loop::Program& program) {
    if (!options.autotune || !options.build || options.cuda_candidate >= 0 || !loop_convolution_candidate(call, program)) return false;
    const std::string key = conv_path_key(call, program, options.allow_tf32);
    auto it = paths.find(key);
    if (it == paths.end()) {
      // The measurement is an optimization: where it fails (no device memory for its operands,
      // the loop kernel's build), cuDNN keeps the convolution and the compile goes on.
      try {
        it = paths.emplace(key, choose_conv_path(call, program, options, *cudnn, context, cache)).first;
        path_reports.push_back(conv_path_report(call.name, it->second));
      } catch (const Error& e) {
        it = paths.emplace(key, ConvPathChoice{}).first;
        path_reports.push_back(fmt::format("{}: cuDNN (not measured against a loop kernel: {})", call.name, e.what()));
      }
    }
    return it->second.loop;
  };
  // Epilogue fusion's candidates, their cuDNN plans built on a thread a core (the answers are
  // cached in cudnn; each thread binds the context).
  target.prefetch_convolutions = [&](const std::vector<std::pair<loop::ExternCall, loop::Program>>& calls) {
    if (!cudnn) return;
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    const size_t workers = std::min<size_t>(calls.size(), std::max(1u, std::thread::hardware_concurrency()));
    for (size_t w = 0; w < workers; ++w)
      threads.emplace_back([&] {
        context->make_current();
        for (size_t i; (i = next++) < calls.size();) {
          try {
            cudnn_takes(calls[i].first, calls[i].second, *cudnn, options.allow_tf32);
          } catch (const Error&) {  // asked again, one at a time, where it counts
          }
        }
      });
    for (auto& t : threads) t.join();
  };
  auto cudnn_may_take = target.library_convolution;
  target.library_convolution = [&, cudnn_may_take](const loop::ExternCall& call, const loop::Program& program) {
    return cudnn_may_take(call, program) && !loop_wins(call, program);
  };
  target.loop_convolution = [&, cudnn_may_take](const loop::ExternCall& call, const loop::Program& program) {
    return cudnn_may_take(call, program) && loop_wins(call, program);
  };
  Generated gen = generate(graph, target);
  Executable exe;
  exe.stats = gen.stats;
  exe.stats.tuning = path_reports;
  exe.device = context->device().str();
  auto gpu = std::make_shared<GpuPlan>();

  auto t0 = std::chrono::steady_clock::now();
  auto build_options = options.build || options.toolchain.empty()
                           ? build::CudaBuildOptions::detect(cache, context->device().arch())
                           : build::CudaBuildOptions::prebuilt(cache, context->device().arch(), options.toolchain);
  build_options.compile = options.build;
  exe.toolchain = build_options.nvrtc_version;
  std::vector<std::string> symbols;
  for (const auto& s : gen.graph.symbols) symbols.push_back(s.name);
  std::vector<TuningUnit> tuning;
  if (options.autotune && options.cuda_candidate < 0)
    tuning = tuning_units(gen.lowered.program, gen.cuda, gen.graph.symbols, context->device(), cache);
  // Every function to build: the untuned kernels and every candidate of the tuned ones, spread
  // over units of about equal size that NVRTC compiles in parallel.
  std::set<size_t> tuned;
  for (const auto& t : tuning) tuned.insert(t.kernel);
  std::vector<std::string> bodies, names;
  std::vector<int> shared, cluster;  // dynamic shared memory and cluster blocks per body
  std::vector<size_t> plain;  // CudaSource::kernels index per untuned body
  auto add = [&](const std::string& body, const codegen::CudaKernel& k) {
    bodies.push_back(body), names.push_back(k.name), shared.push_back(k.launch.shared_bytes), cluster.push_back(k.launch.cluster);
  };
  for (size_t i = 0; i < gen.cuda.kernels.size(); ++i)
    if (!tuned.count(i)) plain.push_back(i), add(gen.cuda.bodies[i], gen.cuda.kernels[i]);
  for (const auto& t : tuning)
    for (size_t c = 0; c < t.bodies.size(); ++c) add(t.bodies[c], t.candidates[c]);
  // Horizontal groups of small untuned kernels, built beside their members (which run alone
  // where outputs computed over inputs turn a group off).
  MemoryPlan memory = plan_memory(gen.lowered);
  std::vector<const codegen::CudaKernel*> plain_of(gen.lowered.program.kernels.size(), nullptr);
  std::vector<size_t> body_of(gen.lowered.program.kernels.size(), 0);
  for (size_t i : plain) plain_of[gen.cuda.kernels[i].program_index] = &gen.cuda.kernels[i], body_of[gen.cuda.kernels[i].program_index] = i;
  const auto groups = horizontal_groups(gen.lowered.program, plain_of, memory);
  const size_t group_first = bodies.size();
  std::vector<codegen::CudaKernel> group_infos(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::string> member_bodies;
    std::vector<codegen::CudaKernel> members;
    std::vector<int64_t> grids;
    for (size_t k : groups[g]) {
      member_bodies.push_back(gen.cuda.bodies[body_of[k]]);
      members.push_back(*plain_of[k]);
      grids.push_back(codegen::static_grid(*plain_of[k]));
    }
    const std::string name = fmt::format("k{}_horizontal", groups[g].front());
    add(codegen::emit_horizontal_kernel(name, member_bodies, members, grids, group_infos[g]), group_infos[g]);
  }
  // Each distinct body is built once, under its content name (content_named_kernel); a repeat uses the
  // function of its first occurrence.
  std::vector<size_t> first_of(bodies.size());
  std::vector<std::string> distinct;
  std::vector<size_t> distinct_index;  // body index per distinct body
  std::vector<std::string> built_names(bodies.size());
  {
    std::map<std::string, size_t> seen;
    for (size_t b = 0; b < bodies.size(); ++b) {
      std::string canonical = codegen::canonical_kernel_text(bodies[b], names[b]);
      auto [it, fresh] = seen.try_emplace(canonical, b);
      first_of[b] = it->second;
      if (!fresh) continue;
      std::tie(built_names[b], bodies[b]) = codegen::content_named_kernel(canonical, names[b]);
      distinct.push_back(bodies[b]), distinct_index.push_back(b);
    }
  }
  size_t threads = options.build_threads > 0 ? static_cast<size_t>(options.build_threads) : std::thread::hardware_concurrency();
  // Up to twice as many units as threads, taken from a queue: NVRTC's time follows a kernel's
  // text size only loosely (an attention kernel takes 0.5 s), so smaller units even out the
  // threads where equal shares of text did not (GPT-2, ~100 bodies: the slowest of 16 units took
  // 2.4 s, of 22 2.2 s, of 32 1.7 s). Each unit also parses the prelude again, so units keep 2
  // bodies or more (a GPT-2 block built slower in 32 units than in 16: 0.95 s against 0.75-0.84).
  const size_t parts = std::clamp<size_t>(distinct.size() / 2, threads, 2 * threads);
  auto units = codegen::partition_bodies(distinct, parts);
  for (auto& u : units)
    for (size_t& b : u) b = distinct_index[b];
  std::vector<std::string> sources;
  for (const auto& u : units) {
    sources.push_back(gen.cuda.prelude);
    for (size_t b : u) sources.back() += bodies[b] + "\n";
  }
  // cuBLASLt's algorithms are timed on the GPU while NVRTC builds on the CPU (the GPT-2 block's
  // four products: about 0.35 s, less than its build); joined before the loop kernels' timing,
  // which must not share the GPU with it.
  const size_t nk = gen.lowered.program.kernels.size();
  // (products of a few rows: coil's kernel, unless cuBLASLt times faster)
  const bool gemv = std::any_of(gen.cuda.kernels.begin(), gen.cuda.kernels.end(),
                                [](const codegen::CudaKernel& k) { return k.config.form == codegen::CudaConfig::Form::gemv; });
  if (nk > gen.cuda.kernels.size() || gemv) gpu->cublas = cuda::CublasLt::load();
  const bool has_convolutions = std::any_of(gen.lowered.program.kernels.begin(), gen.lowered.program.kernels.end(), [](const loop::Kernel& k) {
    const auto* call = std::get_if<loop::ExternCall>(&k);
    return call && call->kind == loop::ExternKind::convolution;
  });
  if (has_convolutions) gpu->cudnn = cudnn;
  // One tuner on the GPU at a time: the products', then the convolutions'.
  struct LibraryTunings {
    std::vector<GemmTuning> gemms;
    std::vector<ConvTuning> convs;
  };
  std::future<LibraryTunings> library_tuning;
  // (a graph of symbolic sizes: its products tuned at the hints; its convolutions not tuned)
  if (options.autotune && (gpu->cublas || (gpu->cudnn && symbols.empty())))
    library_tuning = std::async(std::launch::async, [&] {
      LibraryTunings t;
      if (gpu->cublas) t.gemms = tune_gemms(gen.lowered.program, gen.graph.symbols, options.allow_tf32, *gpu->cublas, *context, cache);
      if (gpu->cudnn && symbols.empty())
        t.convs = tune_convolutions(gen.lowered.program, options.allow_tf32, *gpu->cudnn, *context, cache);
      return t;
    });
  std::vector<build::BuildStats> stats;
  auto cubins = build::compile_cubins(sources, build_options, &stats);
  auto gemm_wait = std::chrono::steady_clock::now();  // the libraries' tuning
  LibraryTunings library_tunings = library_tuning.valid() ? library_tuning.get() : LibraryTunings{};
  std::vector<GemmTuning>& gemm_tunings = library_tunings.gemms;
  std::vector<ConvTuning>& conv_tunings = library_tunings.convs;
  const double gemm_wait_ms = ms_since(gemm_wait);
  std::vector<void*> function_of(bodies.size(), nullptr);
  for (size_t u = 0; u < units.size(); ++u) {
    auto module = context->load_module(cubins[u]);
    UnitBuild report{{}, stats[u].total_seconds * 1e3, stats[u].cache_hit};
    for (size_t b : units[u]) {
      function_of[b] = context->function(*module, built_names[b]);
      if (shared[b] > 0) context->allow_shared(function_of[b], shared[b]);
      if (cluster[b] > 0) context->allow_cluster(function_of[b], cluster[b]);
      report.kernels.push_back(names[b]);
    }
    gpu->modules.push_back(std::move(module));
    exe.stats.units.push_back(std::move(report));
  }
  for (size_t b = 0; b < bodies.size(); ++b) function_of[b] = function_of[first_of[b]];

  gpu->functions.assign(nk, nullptr);
  gpu->kernels.resize(nk);
  std::vector<std::string> built_as(nk);  // the content name each loop kernel runs under
  for (size_t p = 0; p < plain.size(); ++p) {
    const codegen::CudaKernel& k = gen.cuda.kernels[plain[p]];
    gpu->functions[k.program_index] = function_of[p];
    gpu->kernels[k.program_index] = k;
    built_as[k.program_index] = built_names[first_of[p]];
  }
  std::vector<std::string> chosen_bodies = gen.cuda.bodies;
  // cuBLASLt's workspace for the products timed against it, taken at the first.
  cuda::DeviceScratch scratch(*context);
  cuda::DevicePtr gemm_workspace_ptr = 0;
  auto gemm_workspace = [&] {
    if (!gemm_workspace_ptr) gemm_workspace_ptr = scratch.try_take(kGemmWorkspace);
    return gemm_workspace_ptr;
  };
  auto tune0 = std::chrono::steady_clock::now();
  std::map<std::string, int> measured;  // tuning key -> winner, for repeats of a kernel in this graph
  for (size_t t = 0, first = plain.size(); t < tuning.size(); first += tuning[t].bodies.size(), ++t) {
    TuningUnit& unit = tuning[t];
    std::vector<void*> candidates(function_of.begin() + static_cast<std::ptrdiff_t>(first),
                                  function_of.begin() + static_cast<std::ptrdiff_t>(first + unit.bodies.size()));
    if (unit.winner < 0 && measured.count(unit.key)) {
      unit.winner = measured.at(unit.key);
      ++exe.stats.tuning_cache_hits;
    } else if (unit.winner < 0) {
      measure_candidates(unit, candidates, gen.lowered.program, *context, cache,
                         library_rival(gen.lowered.program, unit, options.allow_tf32, gpu->cublas.get(), gemm_workspace));
      measured[unit.key] = unit.winner;
      if (!unit.ms.empty()) ++exe.stats.tuned_kernels;
      exe.stats.tuning.push_back(tuning_report(unit));
    } else {
      ++exe.stats.tuning_cache_hits;
    }
    if (unit.library) {  // cuBLASLt runs the product
      const size_t p = unit.candidates.front().program_index;
      gpu->functions[p] = nullptr;
      chosen_bodies[unit.kernel] = fmt::format("// {}: cuBLASLt (faster than coil's candidates)\n", gen.cuda.kernels[unit.kernel].name);
      continue;
    }
    const codegen::CudaKernel& k = unit.candidates[static_cast<size_t>(unit.winner)];
    gpu->functions[k.program_index] = candidates[static_cast<size_t>(unit.winner)];
    gpu->kernels[k.program_index] = k;
    // A symbolic kernel's winners of other size buckets, where the tuning cache has them (and
    // they need no split scratch other than the hints' winner's).
    for (const auto& [bucket, c] : unit.others) {
      const codegen::CudaKernel& v = unit.candidates[static_cast<size_t>(c)];
      if (v.launch.scratch_bytes != k.launch.scratch_bytes) continue;
      gpu->variants.resize(nk);
      gpu->variants[k.program_index].push_back({bucket, candidates[static_cast<size_t>(c)], v});
      ++exe.stats.size_variants;
    }
    built_as[k.program_index] = built_names[first_of[first + static_cast<size_t>(unit.winner)]];
    // What --emit code and Executable::source show: the winner, under the kernel's own name.
    codegen::CudaKernel ignored;
    chosen_bodies[unit.kernel] = codegen::emit_tunable_kernel(gen.lowered.program, k.program_index, gen.cuda.kernels[unit.kernel].name,
                                                              symbols, context->device(), k.config, ignored);
  }
  // COIL_DEBUG=kernels: which kernel of the program runs under which content name (the names a
  // profiler shows), in which configuration.
  if (debug_enabled("kernels")) {
    std::string text = "=== coil kernels ===\n";
    for (size_t i = 0; i < nk; ++i)
      if (!built_as[i].empty()) text += fmt::format("{} {} {}\n", built_as[i], gpu->kernels[i].name, codegen::to_string(gpu->kernels[i].config));
    std::cerr << text;
  }
  // A library tuning in the stats: measured now, not measured (why), or from the cache.
  auto count = [&](const auto& t) {
    if (t.measured || !t.note.empty()) exe.stats.tuning.push_back(tuning_report(t));
    if (t.measured) ++exe.stats.tuned_kernels;
    else if (t.note.empty()) ++exe.stats.tuning_cache_hits;
  };
  gpu->gemm_algos.assign(nk, std::nullopt);
  for (const auto& s : gen.graph.symbols)  // (tune_gemms tuned at the hints where it tuned at all)
    if (s.hint) gpu->gemm_bucket.push_back(*s.hint);
  gpu->gemm_bucket = codegen::size_bucket(gpu->gemm_bucket);
  for (auto& t : gemm_tunings) {
    gpu->gemm_algos[t.kernel] = t.winner;
    count(t);
  }
  gpu->conv_plans.assign(nk, 0);
  for (auto& t : conv_tunings) {
    gpu->conv_plans[t.kernel] = t.plan;
    count(t);
  }
  // What tuning added to the compile: the loop kernels' timing, and the wait for the products'.
  exe.stats.tune_ms = exe.stats.tuned_kernels ? ms_since(tune0) + gemm_wait_ms : 0;
  exe.stats.cache_hit = std::all_of(stats.begin(), stats.end(), [](const build::BuildStats& s) { return s.cache_hit; });
  exe.stats.translation_units = static_cast<int>(sources.size());
  exe.stats.loop_kernels = static_cast<int>(gen.cuda.kernels.size());
  exe.stats.extern_calls = static_cast<int>(nk - gen.cuda.kernels.size());
  exe.stats.build_ms = ms_since(t0);

  gpu->context = context;
  gpu->allocator = options.device_memory ? options.device_memory : std::make_shared<cuda::DeviceAllocator>(context);
  gpu->tf32 = options.allow_tf32;
  gpu->host_calls = options.host_calls;
  gpu->scratch_layout = split_scratch_layout(gpu->kernels);
  gpu->status_words = std::any_of(gen.lowered.program.kernels.begin(), gen.lowered.program.kernels.end(), [](const loop::Kernel& k) {
    const auto* lk = std::get_if<loop::LoopKernel>(&k);
    return lk && loop::may_fail(*lk);
  });
  for (size_t g = 0; g < groups.size(); ++g)
    gpu->horizontals.push_back({groups[g], function_of[group_first + g], group_infos[g], true});
  gpu->memory = std::move(memory);
  gpu->graph = std::move(gen.graph);
  gpu->lowered = std::move(gen.lowered);
  exe.source = gen.cuda.prelude;
  for (const auto& b : chosen_bodies) exe.source += b + "\n";
  for (size_t g = 0; g < groups.size(); ++g) exe.source += bodies[group_first + g] + "\n";
  if (!exe_note_cudnn.empty()) exe.device_note = "convolutions without cuDNN: " + exe_note_cudnn;
  exe.gpu_plan = std::move(gpu);
  return exe;
}

}  // namespace coil
