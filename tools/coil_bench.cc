// coil-bench: the coil side of bench/gpu.py. Compiles one graph for the GPU (timing the
// compile), puts its inputs on the device, runs it on device tensors (outputs stay there) and
// times each run with CUDA events around the whole call (launch overhead included); prints one
// JSON object and optionally writes the outputs for the caller's correctness check.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "coil/coil.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"

namespace {

struct Options {
  std::string file, inputs, out, cache_dir;
  int repeat = 50, warmup = 5;
  bool tf32 = false, no_autotune = false;
};

int bench(const Options& o) {
  coil::Graph g = coil::parse_graph_file(o.file);
  coil::TensorMap host;
  for (auto& [name, t] : coil::read_safetensors(o.inputs)) host.emplace(name, std::move(t));

  auto t0 = std::chrono::steady_clock::now();
  coil::Executable exe = coil::compile(g, {.cache_dir = o.cache_dir, .device = "cuda", .allow_tf32 = o.tf32, .autotune = !o.no_autotune});
  double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const coil::cuda::Context& ctx = *exe.gpu_plan->context;

  // Inputs on the device, in their own (contiguous) layout.
  std::vector<coil::cuda::DevicePtr> owned;
  coil::TensorMap inputs;
  for (const auto& [name, t] : host) {
    coil::Tensor c = t.contiguous_copy();
    size_t bytes = static_cast<size_t>(c.numel()) * coil::dtype_size(c.dtype());
    owned.push_back(ctx.allocate(std::max<size_t>(bytes, 16)));
    ctx.copy_to_device(owned.back(), c.data(), bytes, nullptr);
    inputs.emplace(name, coil::Tensor::borrow(reinterpret_cast<void*>(owned.back()), c.dtype(), c.sizes(), c.strides(), 0,
                                              coil::Device{coil::Device::Kind::cuda, ctx.ordinal()}));
  }
  ctx.synchronize(nullptr);
  for (int i = 0; i < o.warmup; ++i) exe.run(inputs);
  exe.synchronize();
  std::vector<double> times;
  for (int i = 0; i < o.repeat; ++i) times.push_back(ctx.time_ms(nullptr, [&] { exe.run(inputs); }));
  exe.synchronize();
  std::sort(times.begin(), times.end());

  if (!o.out.empty()) {
    auto outs = exe.run(inputs);
    exe.synchronize();
    coil::NamedTensors named;
    for (size_t i = 0; i < outs.size(); ++i) {
      const coil::Tensor& d = outs[i];
      coil::Tensor h = coil::Tensor::empty_strided(d.dtype(), d.sizes(), d.strides());
      size_t span = d.numel() ? static_cast<size_t>(coil::span_of(d.sizes(), d.strides(), 0)) : 0;
      ctx.copy_to_host(h.data(), reinterpret_cast<coil::cuda::DevicePtr>(d.data()), span * coil::dtype_size(d.dtype()), nullptr);
      named.emplace_back(g.value_name(g.outputs[i]), h);
    }
    ctx.synchronize(nullptr);
    coil::write_safetensors(o.out, named);
  }
  for (auto p : owned) ctx.release(p);

  const auto& st = exe.stats;
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : st.units) units.push_back({{"kernels", u.kernels}, {"ms", u.ms}, {"cached", u.cache_hit}});
  nlohmann::json j = {{"compile_ms", compile_ms},
                      {"build_ms", st.build_ms},
                      {"frontend_ms", st.frontend_ms},
                      {"codegen_ms", st.codegen_ms},
                      {"cache_hit", st.cache_hit},
                      {"tuned_kernels", st.tuned_kernels},
                      {"tuning_cache_hits", st.tuning_cache_hits},
                      {"tune_ms", st.tune_ms},
                      {"loop_kernels", st.loop_kernels},
                      {"extern_calls", st.extern_calls},
                      {"units", units},
                      {"median_ms", times[times.size() / 2]},
                      {"min_ms", times.front()},
                      {"device", exe.device}};
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"coil-bench: compile a graph for the GPU and time its runs on device tensors"};
  Options o;
  app.add_option("FILE", o.file, "graph file (.coil)")->required();
  app.add_option("--inputs", o.inputs, "a .safetensors file with one tensor per graph input")->required();
  app.add_option("--out", o.out, "write the outputs of one more run to this .safetensors file");
  app.add_option("--cache-dir", o.cache_dir, "kernel cache folder (an empty one measures a cold compile)");
  app.add_option("--repeat", o.repeat, "timed runs")->default_val(50)->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed runs first")->default_val(5);
  app.add_flag("--tf32", o.tf32, "f32 matrix products may use TF32");
  app.add_flag("--no-autotune", o.no_autotune, "heuristic launch configurations only");
  CLI11_PARSE(app, argc, argv);
  try {
    return bench(o);
  } catch (const coil::Error& e) {
    std::cerr << "coil-bench: error: " << e.what() << "\n";
    return 1;
  }
}
