// The coil command line: check and run graphs. Every failure is one line on stderr and a
// non-zero exit; output files are written atomically, so a failure never leaves one half-made.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <execinfo.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "coil/coil.h"
#include "frontend/fx.h"
#include "frontend/pt2.h"
#include "loop/conv_params.h"
#include "loop/kernel.h"
#include "lower/lower.h"
#include "codegen/cpu/cpu_codegen.h"
#include "schedule/fuse_epilogues.h"
#include "driver/compile.h"
#include "graph_passes/decompose.h"
#include "build/nvrtc.h"
#include "runtime/cuda/driver.h"

namespace {

struct RunOptions {
  std::string file;
  std::string inputs;
  std::string out;
  uint64_t seed = 0;
  std::vector<std::string> sizes;
  int preview = 6;
  bool interpret = false;  // the reference interpreter instead of compiled code
  bool check = false;      // compiled code, compared with the interpreter
  int repeat = 1;          // timed runs of the compiled code
  std::string cache_dir;   // the kernel cache (default $COIL_CACHE_DIR or ~/.cache/coil)
  std::string device = "cpu";
  bool tf32 = false;
  bool no_autotune = false;
  int candidate = -1;         // every CUDA kernel's i-th candidate configuration
  bool build_report = false;  // per-unit NVRTC times
  bool nchw = false;  // CPU: convolutions in the layouts the graph gives (not channels-last)
};

std::map<std::string, int64_t> parse_sizes(const std::vector<std::string>& items) {
  std::map<std::string, int64_t> out;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw coil::Error("--size expects NAME=VALUE, got '" + item + "'");
    try {
      size_t used = 0;
      int64_t v = std::stoll(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1 || v < 0) throw std::invalid_argument("bad");
      out[item.substr(0, eq)] = v;
    } catch (const std::exception&) {
      throw coil::Error("--size expects a non-negative integer value, got '" + item + "'");
    }
  }
  return out;
}

coil::TensorMap read_inputs(const coil::Graph& g, const std::string& path) {
  coil::TensorMap out;
  auto tensors = coil::read_safetensors(path);
  for (auto& [name, t] : tensors) out.emplace(name, std::move(t));
  for (int n : g.input_nodes()) {
    const auto& name = g.nodes[static_cast<size_t>(n)].name();
    if (!out.count(name)) {
      std::string have;
      for (const auto& [k, v] : out) have += (have.empty() ? "" : ", ") + k;
      throw coil::Error(fmt::format("{}: no tensor named '{}' for input %{} (the file has: {})", path, name, name,
                                    have.empty() ? "nothing" : have));
    }
  }
  return out;
}

std::string preview(const coil::Tensor& t, int count) {
  std::string s = "[";
  int64_t n = std::min<int64_t>(t.numel(), count);
  coil::Tensor c = t.contiguous_copy();
  for (int64_t i = 0; i < n; ++i) {
    double v = c.load(i);
    s += (i ? ", " : "") + (coil::is_float(t.dtype()) ? fmt::format("{:.6g}", v) : fmt::format("{}", static_cast<int64_t>(v)));
  }
  if (t.numel() > n) s += ", ...";
  s += "]";
  if (t.numel() > 0 && coil::is_float(t.dtype())) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < c.numel(); ++i) {
      double v = c.load(i);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    s += fmt::format("  min {:.6g} max {:.6g} mean {:.6g}", lo, hi, sum / static_cast<double>(c.numel()));
  }
  return s;
}

double max_abs_error(const coil::Tensor& a, const coil::Tensor& b) {
  coil::Tensor x = a.contiguous_copy(), y = b.contiguous_copy();
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double u = x.load(i), v = y.load(i);
    if ((std::isnan(u) && std::isnan(v)) || u == v) continue;  // equal infinities too
    worst = std::max(worst, std::isnan(u - v) ? INFINITY : std::fabs(u - v));
  }
  return worst;
}

// A program of the torch.compile adapter (fx JSON, as COIL_DUMP_DIR writes them): its graph.
coil::Graph load_fx_program(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw coil::Error("cannot read " + file);
  std::ostringstream text;
  text << in.rdbuf();
  return coil::graph_from_fx(text.str());
}

// A graph file: the text format, a torch.export archive (.pt2) with its weights, or an adapter's
// program (.json; its inputs are all given per call, so it has no weights). `with_weights`
// false: the graph only (a .coil file's weights need not be there).
std::pair<coil::Graph, coil::TensorMap> load_graph(const std::string& file, bool with_weights = true) {
  if (file.ends_with(".pt2")) {
    coil::Pt2Program p = coil::load_pt2(file);
    return {std::move(p.graph), std::move(p.weights)};
  }
  if (file.ends_with(".json")) return {load_fx_program(file), {}};
  coil::Graph g = coil::parse_graph_file(file);
  if (!with_weights) return {std::move(g), {}};
  std::string dir = std::filesystem::path(file).parent_path().string();
  coil::TensorMap weights = coil::load_weights(g, dir.empty() ? "." : dir);
  return {std::move(g), std::move(weights)};
}

int check(const std::string& file) {
  std::cout << coil::print_graph(load_graph(file, false).first);
  return 0;
}

struct CompileCmd {
  std::vector<std::string> files;
  std::string emit = "loop", device = "cpu", arch, output, cache_dir;
  bool loops = false;
  bool library_convs = false;  // CUDA without a GPU: plan as if cuDNN took the ungrouped convolutions
  int candidate = -1;          // every CUDA kernel's i-th candidate configuration
};

// The CUDA device to generate for: a preset when --arch names one, else the GPU.
coil::cuda::DeviceInfo cuda_device(const std::string& arch) {
  if (!arch.empty()) return coil::cuda::preset_device(arch);
  try {
    return coil::cuda::Driver::load()->device_info(0);
  } catch (const coil::Error& e) {
    throw coil::Error(std::string(e.what()) + " (pass --arch sm_90a or sm_80 to generate code without a GPU)");
  }
}

// --emit cubin: every graph's CUDA code built with NVRTC, graphs bundled into units of a few
// dozen (kernels renamed apart) that compile in parallel; one summary line.
int build_cubins(const CompileCmd& c, const coil::Target& base) {
  constexpr size_t kGraphsPerUnit = 48;
  auto options = coil::build::CudaBuildOptions::detect(coil::build::ArtifactCache::from_environment(), base.device.arch());
  std::vector<std::string> preludes, units;
  size_t kernels = 0;
  for (size_t i = 0; i < c.files.size(); ++i) {
    coil::Target target = base;
    if (c.files.size() > 1) target.kernel_prefix = fmt::format("g{}_", i);
    coil::Generated gen = coil::generate(coil::parse_graph_file(c.files[i]), target);
    if (i % kGraphsPerUnit == 0) {
      preludes.push_back(gen.cuda.prelude);
      units.emplace_back();
    }
    // A graph calling special functions has the longer prelude (the base one plus them).
    if (gen.cuda.prelude.size() > preludes.back().size()) preludes.back() = gen.cuda.prelude;
    for (const auto& body : gen.cuda.bodies) units.back() += body + "\n";
    kernels += gen.cuda.kernels.size();
  }
  for (size_t u = 0; u < units.size(); ++u) units[u].insert(0, preludes[u]);
  std::vector<coil::build::BuildStats> stats;
  auto cubins = coil::build::compile_cubins(units, options, &stats);
  size_t bytes = 0, hits = 0;
  double seconds = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    bytes += cubins[u].size();
    seconds += stats[u].total_seconds;
    hits += stats[u].cache_hit;
  }
  fmt::print("{} graph{}, {} kernels for {} (NVRTC {}): {} units, {} bytes of cubin, {:.1f} ms of NVRTC ({} units cached)\n",
             c.files.size(), c.files.size() == 1 ? "" : "s", kernels, options.arch, options.nvrtc->version(), units.size(), bytes,
             seconds * 1e3, hits);
  return 0;
}

int compile(const CompileCmd& c) {
  coil::Target target;
  target.externs_as_loops = c.loops;
  target.channels_last = coil::CompileOptions{}.channels_last;  // the CPU compile's layouts
  if (c.device == "cuda") {
    target.cuda = true;
    target.device = cuda_device(c.arch);
    target.cuda_candidate = c.candidate;
    // What the GPU compile does where cuDNN has a plan, for reading that code without a GPU:
    // the convolutions stay library calls and the layout planning runs around them.
    if (c.library_convs)
      target.library_convolution = [](const coil::loop::ExternCall& call, const coil::loop::Program& p) {
        const coil::loop::ConvParams cp = coil::loop::conv_params(call.params);
        const coil::DType t = p.buffers[static_cast<size_t>(call.output)].dtype;
        return cp.groups == 1 && cp.k >= 1 && cp.k <= 3 && coil::is_float(t) && t != coil::DType::f64;
      };
  }
  if (c.emit == "cubin") {
    if (!target.cuda) throw coil::Error("--emit cubin needs --device cuda");
    return build_cubins(c, target);
  }
  if (c.files.size() != 1) throw coil::Error("only --emit cubin takes several graph files");
  if (!c.output.empty()) {  // a package: graph, weights, kernels
    auto [g, weights] = load_graph(c.files[0]);
    auto t0 = std::chrono::steady_clock::now();
    coil::write_package(c.output, g, weights, {.cache_dir = c.cache_dir, .device = c.device});
    fmt::print("wrote {} ({} bytes, {}) in {:.1f} ms\n", c.output, std::filesystem::file_size(c.output), c.device,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  coil::Generated gen = coil::generate(load_graph(c.files[0]).first, target);
  if (c.emit == "loop") std::cout << coil::loop::to_string(gen.lowered.program);
  if (c.emit == "code") std::cout << (target.cuda ? gen.cuda.code() : gen.source.code());
  if (c.emit == "plan") std::cout << coil::describe_plan(gen.lowered);
  return 0;
}


// Prints each output (a preview, the error vs the reference when there is one) and writes them.
void report_outputs(const coil::Graph& g, const std::vector<coil::Tensor>& outputs, const std::vector<coil::Tensor>& reference,
                    const RunOptions& o) {
  coil::NamedTensors named;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = g.value_name(g.outputs[i]);
    const coil::Tensor& t = outputs[i];
    fmt::print("%{}: {}{} = {}\n", name, coil::dtype_name(t.dtype()), coil::shape_to_string(t.sizes()), preview(t, o.preview));
    if (!reference.empty()) fmt::print("  max abs error vs reference: {:.3g}\n", max_abs_error(t, reference[i]));
    named.emplace_back(name, t);
  }
  if (!o.out.empty()) {
    coil::write_safetensors(o.out, named);
    fmt::print("wrote {} output{} to {}\n", named.size(), named.size() == 1 ? "" : "s", o.out);
  }
}

// A compiled package: no compiler runs; the kernels it holds are the ones that run.
int run_package(const RunOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  coil::Package p = coil::Package::load(o.file);
  fmt::print("loaded {} ({}) in {:.1f} ms\n", o.file, p.device(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  coil::TensorMap inputs = o.inputs.empty() ? coil::random_inputs(p.graph(), o.seed, parse_sizes(o.sizes)) : read_inputs(p.graph(), o.inputs);
  std::vector<coil::Tensor> outputs = p.run(inputs), reference;
  if (o.check) reference = coil::evaluate_reference(p.graph(), inputs, p.weights());
  report_outputs(p.graph(), outputs, reference, o);
  return 0;
}

int run(const RunOptions& o) {
  if (o.file.ends_with(".coilpkg")) return run_package(o);
  auto [g, weights] = load_graph(o.file);
  std::map<std::string, int64_t> sizes = parse_sizes(o.sizes);
  for (const auto& [name, value] : sizes) {  // a misspelled symbol would otherwise be ignored
    std::string known;
    for (const auto& s : g.symbols) known += (known.empty() ? "" : ", ") + s.name;
    if (std::none_of(g.symbols.begin(), g.symbols.end(), [&](const auto& s) { return s.name == name; }))
      throw coil::Error(fmt::format("--size {}={}: the graph has no size symbol '{}' (its symbols: {})", name, value, name,
                                    known.empty() ? "none" : known));
  }
  coil::TensorMap inputs = o.inputs.empty() ? coil::random_inputs(g, o.seed, sizes) : read_inputs(g, o.inputs);
  std::vector<coil::Tensor> outputs;
  std::vector<coil::Tensor> reference;
  if (o.interpret) {
    outputs = coil::evaluate_reference(g, inputs, weights);
  } else {
    coil::Executable exe = coil::compile(g, {.cache_dir = o.cache_dir,
                                             .device = o.device,
                                             .allow_tf32 = o.tf32,
                                             .channels_last = !o.nchw,
                                             .autotune = !o.no_autotune,
                                             .cuda_candidate = o.candidate});
    if (!exe.device_note.empty()) std::cerr << "coil: note: " << exe.device_note << "\n";
    if (o.device != "cpu") fmt::print("device: {}\n", exe.device);
    const auto& st = exe.stats;
    fmt::print("compiled {} kernel{} + {} extern call{} in {:.1f} ms ({}: frontend {:.1f} ms, codegen {:.1f} ms, build {:.1f} ms)\n",
               st.loop_kernels, st.loop_kernels == 1 ? "" : "s", st.extern_calls, st.extern_calls == 1 ? "" : "s",
               st.frontend_ms + st.codegen_ms + st.build_ms, st.cache_hit ? "cached" : "cold", st.frontend_ms, st.codegen_ms,
               st.build_ms);
    if (exe.gpu_plan && (st.tuned_kernels || st.tuning_cache_hits))
      fmt::print("autotuned {} kernel{} in {:.1f} ms, {} from the tuning cache\n", st.tuned_kernels, st.tuned_kernels == 1 ? "" : "s", st.tune_ms,
                 st.tuning_cache_hits);
    if (o.build_report)
      for (const auto& u : st.units)
        fmt::print("  unit {:>8.1f} ms {} {}\n", u.ms, u.cache_hit ? "cached" : "NVRTC ", fmt::join(u.kernels, " "));
    if (o.build_report)
      for (const auto& line : st.tuning) fmt::print("  tuned {}\n", line);
    outputs = exe.run(inputs, weights);
    if (o.repeat > 1) {
      std::vector<double> times;
      for (int i = 0; i < o.repeat; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        exe.run(inputs, weights);
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      fmt::print("run: {:.3f} ms median of {} (min {:.3f} ms)\n", times[times.size() / 2], times.size(), times.front());
    }
    if (o.check) reference = coil::evaluate_reference(g, inputs, weights);
  }
  report_outputs(g, outputs, reference, o);
  return 0;
}

}  // namespace

namespace {

// A crash is a bug in coil: say so and where (the frames' module offsets, which addr2line reads
// against the unstripped binary), then die of the signal as before.
void report_crash(int signal) {
  const char* what = signal == SIGSEGV ? "coil: internal error: segmentation fault; the stack (report it):\n"
                                       : "coil: internal error: fatal signal; the stack (report it):\n";
  ssize_t ignored = ::write(STDERR_FILENO, what, std::char_traits<char>::length(what));
  (void)ignored;
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

int main(int argc, char** argv) {
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) std::signal(s, report_crash);
  CLI::App app{"coil: a tensor compiler for PyTorch programs"};
  app.set_version_flag("--version", "coil " COIL_VERSION);
  app.require_subcommand(1);
  std::string check_file;
  auto* check_cmd = app.add_subcommand("check", "Verify a graph file and print it in normalized form");
  check_cmd->add_option("FILE", check_file, "graph file (.coil, a torch.export .pt2, or an adapter program .json)")->required();

  CompileCmd cc;
  auto* compile_cmd = app.add_subcommand("compile", "Compile a graph: print a stage of the pipeline, or write a package (-o)");
  compile_cmd->add_option("FILE", cc.files, "graph file (.coil, a torch.export .pt2, or an adapter program .json); several with --emit cubin")->required();
  compile_cmd->add_option("-o,--output", cc.output, "write a compiled package (.coilpkg: graph, weights, kernels) for --device");
  compile_cmd->add_option("--cache-dir", cc.cache_dir, "kernel cache folder while compiling a package");
  compile_cmd->add_option("--emit", cc.emit, "the stage to print (cubin: build the CUDA code with NVRTC and report)")
      ->check(CLI::IsMember({"loop", "code", "plan", "cubin"}))
      ->default_val("loop");
  compile_cmd->add_option("--device", cc.device, "the target")->check(CLI::IsMember({"cpu", "cuda"}))->default_val("cpu");
  compile_cmd->add_option("--arch", cc.arch, "CUDA architecture to generate for without a GPU (sm_90a, sm_80)");
  compile_cmd->add_flag("--externs-as-loops", cc.loops, "write matrix products and convolutions as loop kernels");
  compile_cmd->add_flag("--library-convolutions", cc.library_convs,
                        "CUDA: plan as if cuDNN took every ungrouped float convolution (to read that code without a GPU)");
  compile_cmd->add_option("--candidate", cc.candidate, "CUDA: every kernel takes its i-th candidate configuration (the last when it has fewer)");

  RunOptions run_options;
  auto* run_cmd = app.add_subcommand("run", "Run a graph on inputs (random from a seed unless --inputs is given)");
  run_cmd->add_option("FILE", run_options.file, "graph file (.coil, a torch.export .pt2, an adapter program .json, or a compiled .coilpkg)")->required();
  run_cmd->add_option("--inputs", run_options.inputs, "a .safetensors file with one tensor per graph input");
  run_cmd->add_option("--seed", run_options.seed, "seed for random inputs")->default_val(0);
  run_cmd->add_option("--size", run_options.sizes, "a size symbol's value for random inputs, NAME=VALUE (repeatable)");
  run_cmd->add_option("--out", run_options.out, "write the outputs to this .safetensors file");
  run_cmd->add_option("--preview", run_options.preview, "values printed per output")->default_val(6);
  run_cmd->add_option("--cache-dir", run_options.cache_dir, "kernel cache folder (default $COIL_CACHE_DIR or ~/.cache/coil)");
  run_cmd->add_option("--repeat", run_options.repeat, "time this many runs of the compiled code")->default_val(1);
  run_cmd->add_option("--device", run_options.device, "where the compiled code runs (auto: the GPU when there is one)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->default_val("cpu");
  run_cmd->add_flag("--tf32", run_options.tf32, "let f32 matrix products use TF32 tensor cores on the GPU");
  run_cmd->add_flag("--nchw", run_options.nchw, "CPU: keep convolutions in the graph's layouts instead of planning channels-last chains");
  run_cmd->add_flag("--no-autotune", run_options.no_autotune, "GPU: take the heuristic launch configurations without measuring");
  run_cmd->add_option("--candidate", run_options.candidate, "GPU: every kernel takes its i-th candidate configuration (tests)");
  run_cmd->add_flag("--build-report", run_options.build_report, "GPU: print each NVRTC unit's kernels and compile time, and each tuned kernel's candidates with their times");
  run_cmd->add_flag("--interpret", run_options.interpret, "run the reference interpreter instead of compiled code");
  run_cmd->add_flag("--check", run_options.check, "also run the interpreter and print each output's max error");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A usage mistake is one line too, naming the help of the subcommand it was in.
    std::string help = "coil --help";
    if (!app.get_subcommands().empty()) help = "coil " + app.get_subcommands().front()->get_name() + " --help";
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    if (app.get_subcommands().empty() && argc > 1 && argv[1][0] != '-')
      message = fmt::format("unknown command '{}' (expected check, compile or run)", argv[1]);
    std::cerr << "coil: error: " << message << " (see " << help << ")\n";
    return 2;
  }
  try {
    if (*check_cmd) return check(check_file);
    if (*run_cmd) return run(run_options);
    if (*compile_cmd) return compile(cc);
  } catch (const coil::Error& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    // "FILE:LINE:COL: error: what" would read "coil: error: FILE:LINE:COL: error: what".
    if (auto at = message.find(": error: "); at != std::string::npos) message.erase(at + 2, 7);
    std::cerr << "coil: error: " << message << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "coil: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
