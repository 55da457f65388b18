#include "driver/compile.h"

#include <fcntl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "codegen/cpu/cpu_codegen.h"
#include "coil/io.h"
#include "graph_passes/decompose.h"
#include "loop/kernel.h"
#include "lower/lower.h"
#include "schedule/fuse_epilogues.h"
#include "support/check.h"

extern char** environ;

namespace coil {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

bool debug_enabled(std::string_view stage) {
  const char* env = std::getenv("COIL_DEBUG");
  if (!env) return false;
  std::string_view v(env);
  return v == "all" || ("," + std::string(v) + ",").find("," + std::string(stage) + ",") != std::string::npos;
}

void dump(std::string_view stage, const std::string& text) {
  if (debug_enabled(stage)) std::cerr << "=== coil " << stage << " ===\n" << text << "\n";
}

std::string cache_root(const CompileOptions& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  if (const char* d = std::getenv("COIL_CACHE_DIR")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/coil";
}

// Runs the system compiler; returns its exit status and fills `log` with its stderr.
int run_compiler(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) fail("cannot run the C++ compiler '{}': {}", argv[0], std::strerror(rc));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// A shared object for `source`, from the content-addressed cache or freshly compiled.
std::shared_ptr<void> build_library(const std::string& source, const CompileOptions& o, bool& hit) {
  const std::string compiler = std::getenv("CXX") ? std::getenv("CXX") : "g++";
  const std::vector<std::string> flags = {"-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17", "-fno-math-errno"};
  std::string key_text = source + "\n" + compiler + "\n" + fmt::format("{}", fmt::join(flags, " "));
  XXH128_hash_t h = XXH3_128bits(key_text.data(), key_text.size());
  std::string key = fmt::format("{:016x}{:016x}", h.high64, h.low64);
  std::filesystem::path dir = std::filesystem::path(cache_root(o)) / "cpu";
  std::filesystem::create_directories(dir);
  std::filesystem::path so = dir / (key + ".so");
  hit = std::filesystem::exists(so);
  if (!hit) {
    std::filesystem::path src = dir / (key + ".cc");
    write_file_atomic(src.string(), source);
    std::string tmp = so.string() + fmt::format(".tmp.{}", getpid());
    std::vector<std::string> argv = {compiler};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {src.string(), "-o", tmp});
    std::string log = dir / (key + ".log");
    if (run_compiler(argv, log) != 0) {
      std::string text = read_file(log);
      if (text.size() > 4000) text = text.substr(0, 4000) + "\n...";
      fail("the C++ compiler failed on generated code (kept at {}):\n{}", src.string(), text);
    }
    std::filesystem::rename(tmp, so);
  }
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail("cannot load compiled kernels {}: {}", so.string(), dlerror());
  return std::shared_ptr<void>(handle, [](void* p) { dlclose(p); });
}

}  // namespace

Executable compile(const Graph& graph, const CompileOptions& options) {
  Executable exe;
  auto t0 = std::chrono::steady_clock::now();
  dump("graph", print_graph(graph));
  Graph decomposed = decompose(graph);
  LoweredGraph lowered = lower(decomposed);
  dump("loop", loop::to_string(lowered.program));
  lowered.program = schedule::fuse_epilogues(lowered.program);
  dump("fusion", loop::to_string(lowered.program));
  exe.stats.frontend_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> symbols;
  for (const auto& s : graph.symbols) symbols.push_back(s.name);
  codegen::CpuSource src = codegen::generate_cpu(lowered.program, symbols);
  exe.source = src.code;
  dump("code", src.code);
  exe.stats.codegen_ms = ms_since(t1);

  auto t2 = std::chrono::steady_clock::now();
  exe.plan.library = build_library(src.code, options, exe.stats.cache_hit);
  exe.stats.build_ms = ms_since(t2);

  for (const auto& k : lowered.program.kernels) {
    const auto* lk = std::get_if<loop::LoopKernel>(&k);
    if (!lk) {
      exe.plan.kernels.push_back(nullptr);
      ++exe.stats.extern_calls;
      continue;
    }
    void* fn = dlsym(exe.plan.library.get(), lk->name.c_str());
    COIL_CHECK(fn) << "kernel " << lk->name << " is missing from the compiled library";
    exe.plan.kernels.push_back(reinterpret_cast<KernelFn>(fn));
    ++exe.stats.loop_kernels;
  }
  exe.plan.graph = std::move(decomposed);
  exe.plan.lowered = std::move(lowered);
  return exe;
}

}  // namespace coil
