#include "build/cpu_compile.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "build/failure.h"
#include "build/host_isa.h"
#include "build/parallel.h"
#include "build/process.h"
#include "coil/io.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace coil::build {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void write_plain_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail("cannot write '{}'", path);
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

[[noreturn]] void report_compile_failure(const std::string& source, const CpuBuildOptions& options,
                                         const std::string& key, const std::vector<std::string>& argv,
                                         const std::string& temp_source, const ProcessResult& result) {
  std::string folder = options.cache.dir() + "/failed";
  std::string kept_source = folder + "/" + key + ".cc";
  // The log should point at the file the user can open, not at the deleted scratch copy.
  std::string log = result.err + result.out;
  replace_all(log, temp_source, kept_source);
  // The command as the user can rerun it on the kept file.
  std::vector<std::string> rerun = argv;
  std::replace(rerun.begin(), rerun.end(), temp_source, kept_source);
  auto output = std::find(rerun.begin(), rerun.end(), std::string("-o"));
  if (output != rerun.end() && output + 1 != rerun.end()) *(output + 1) = folder + "/" + key + ".so";
  KeptFailure kept = keep_failure(options.cache, key, ".cc", source, command_line(rerun) + "\n" + log);
  fail("the C++ compiler failed on generated code ({})\n  compiler: {}\n  source kept at: {}\n  to rerun: {}\n{}",
       result.status_text(), options.compiler.id, kept.source, command_line(rerun), trim_log(log, kept.log));
}

std::shared_ptr<CompiledLibrary> compile_and_store(const std::string& source, const CpuBuildOptions& options,
                                                   const std::string& key, BuildStats& stats) {
  TempDir scratch("coil-build");
  std::string source_path = scratch.file("kernel.cc");
  std::string library_path = scratch.file("kernel.so");
  write_plain_file(source_path, source);

  std::vector<std::string> argv = {options.compiler.path};
  argv.insert(argv.end(), options.flags.begin(), options.flags.end());
  argv.insert(argv.end(), {source_path, "-o", library_path});
  argv.insert(argv.end(), options.libraries.begin(), options.libraries.end());
  auto start = std::chrono::steady_clock::now();
  ProcessResult result = run_process(argv);
  stats.compile_seconds = seconds_since(start);
  if (!result.ok()) report_compile_failure(source, options, key, argv, source_path, result);

  std::string stored = options.cache.store(key, "so", read_file(library_path));
  return CompiledLibrary::open(stored);
}

}  // namespace

std::shared_ptr<CompiledLibrary> CompiledLibrary::open(const std::string& path) {
  // RTLD_NODELETE: kernels run OpenMP, and unloading the library could unload libgomp under
  // its idle worker threads, which then crash.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) fail("cannot load compiled kernels '{}': {}", path, ::dlerror());
  return std::shared_ptr<CompiledLibrary>(new CompiledLibrary(handle, path));
}

CompiledLibrary::~CompiledLibrary() { ::dlclose(handle_); }

void* CompiledLibrary::symbol(const std::string& name) const {
  ::dlerror();  // clear a stale error so the check below is about this lookup
  void* address = ::dlsym(handle_, name.c_str());
  if (const char* error = ::dlerror()) fail("symbol '{}' is missing from compiled kernels '{}': {}", name, path_, error);
  if (!address) fail("symbol '{}' in compiled kernels '{}' is null", name, path_);
  return address;
}

std::vector<std::string> default_cpu_libraries() {
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
  return {"-lmvec"};  // glibc's vector math, which the prelude declares
#else
  return {};
#endif
}

std::vector<std::string> CpuBuildOptions::all_flags() const {
  std::vector<std::string> all = flags;
  all.insert(all.end(), libraries.begin(), libraries.end());
  return all;
}

std::vector<std::string> default_cpu_flags() {
  // -ffp-contract=off: no fused multiply-add unless the code asks for one, so results round
  //   like the reference interpreter and PyTorch eager do, whatever FMA units the host has.
  // -fno-math-errno: generated kernels never read errno; with it on, gcc must call libm's
  //   sqrt (to set errno on negative inputs) instead of emitting the sqrt instruction, which
  //   also blocks vectorizing any loop with a sqrt. It changes no computed value (unlike
  //   -ffast-math), so it is on.
  return {"-O3", "-march=native", "-fPIC", "-shared", "-fopenmp", "-std=c++17", "-ffp-contract=off", "-fno-math-errno"};
}

CpuBuildOptions CpuBuildOptions::detect(ArtifactCache cache) {
  Compiler compiler = detect_compiler();
  std::string isa = host_isa_fingerprint(compiler);
  return CpuBuildOptions{.cache = std::move(cache), .compiler = std::move(compiler), .host_isa = std::move(isa)};
}

CpuBuildOptions CpuBuildOptions::prebuilt(ArtifactCache cache, std::string compiler_id) {
  Compiler compiler{.path = "", .id = std::move(compiler_id)};
  std::string isa = host_isa_fingerprint(compiler);
  return CpuBuildOptions{.cache = std::move(cache), .compiler = std::move(compiler), .host_isa = std::move(isa), .compile = false};
}

std::string cpu_build_key(const std::string& source, const CpuBuildOptions& options) {
  std::string flags;
  bool native = false;
  for (const auto& flag : options.all_flags()) {
    flags += flag;
    flags += '\0';  // cannot occur inside an argument, so the join is unambiguous
    native = native || flag.find("native") != std::string::npos;
  }
  // Without a native flag the output does not depend on the host, and the entry can be shared.
  std::string_view isa = native ? std::string_view(options.host_isa) : std::string_view();
  return ArtifactCache::key({"coil-cpu-so-v1", source, options.compiler.id, flags, isa});
}

std::shared_ptr<CompiledLibrary> compile_cpu_library(const std::string& source, const CpuBuildOptions& options,
                                                     BuildStats* stats) {
  auto start = std::chrono::steady_clock::now();
  BuildStats local;
  BuildStats& s = stats ? *stats : local;
  s = BuildStats{.key = cpu_build_key(source, options)};

  std::shared_ptr<CompiledLibrary> library;
  if (std::optional<std::string> path = options.cache.lookup(s.key, "so")) {
    try {
      library = CompiledLibrary::open(*path);
      s.cache_hit = true;
    } catch (const Error&) {
      // A verified entry that does not load (e.g. built against a runtime library that has
      // since changed) is rebuilt like a miss; a fresh build that fails to load does throw.
    }
  }
  if (!library && !options.compile)
    fail("kernel library {} is not in the cache {} and compiling is off: the package was built for another compiler, "
         "instruction set or coil version; compile the model again on this machine", s.key, options.cache.dir());
  if (!library) library = compile_and_store(source, options, s.key, s);
  s.total_seconds = seconds_since(start);
  return library;
}

std::vector<std::shared_ptr<CompiledLibrary>> compile_cpu_libraries(const std::vector<std::string>& sources,
                                                                    const CpuBuildOptions& options,
                                                                    std::vector<BuildStats>* stats) {
  // Identical sources are built once; `unique` holds the index of each first occurrence.
  std::vector<size_t> unique, slot_of(sources.size());
  std::unordered_map<std::string_view, size_t> slot_by_source;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto [it, inserted] = slot_by_source.try_emplace(sources[i], unique.size());
    if (inserted) unique.push_back(i);
    slot_of[i] = it->second;
  }

  std::vector<std::shared_ptr<CompiledLibrary>> built(unique.size());
  std::vector<BuildStats> built_stats(unique.size());
  run_parallel(unique.size(), [&](size_t slot) {
    built[slot] = compile_cpu_library(sources[unique[slot]], options, &built_stats[slot]);
  });

  std::vector<std::shared_ptr<CompiledLibrary>> libraries(sources.size());
  if (stats) stats->assign(sources.size(), BuildStats{});
  for (size_t i = 0; i < sources.size(); ++i) {
    libraries[i] = built[slot_of[i]];
    if (stats) (*stats)[i] = built_stats[slot_of[i]];
  }
  return libraries;
}

}  // namespace coil::build
