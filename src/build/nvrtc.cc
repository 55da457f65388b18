#include "build/nvrtc.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "build/failure.h"
#include "build/parallel.h"
#include "support/check.h"
#include "support/foreign_library.h"

namespace coil::build {

// NVRTC's C API as function pointers (the types are NVRTC's, written out so that no CUDA header
// is needed to build coil).
struct Nvrtc::Api {
  using Program = void*;
  int (*version)(int*, int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
};

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::shared_ptr<const Nvrtc> Nvrtc::load() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("COIL_NVRTC"); env && *env) candidates.emplace_back(env);
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"}) candidates.emplace_back(name);
  std::string tried;
  for (const auto& path : candidates) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      tried += fmt::format("\n  {}: {}", path, ::dlerror());
      continue;
    }
    std::shared_ptr<Nvrtc> n(new Nvrtc());
    n->handle_ = handle;
    n->path_ = path;
    n->api_ = std::make_unique<Api>();
    Api& a = *n->api_;
    bind_symbol(handle, "nvrtcVersion", a.version, path, "NVRTC");
    bind_symbol(handle, "nvrtcGetErrorString", a.error_string, path, "NVRTC");
    bind_symbol(handle, "nvrtcCreateProgram", a.create, path, "NVRTC");
    bind_symbol(handle, "nvrtcDestroyProgram", a.destroy, path, "NVRTC");
    bind_symbol(handle, "nvrtcCompileProgram", a.compile, path, "NVRTC");
    bind_symbol(handle, "nvrtcGetProgramLogSize", a.log_size, path, "NVRTC");
    bind_symbol(handle, "nvrtcGetProgramLog", a.log, path, "NVRTC");
    bind_symbol(handle, "nvrtcGetCUBINSize", a.cubin_size, path, "NVRTC");
    bind_symbol(handle, "nvrtcGetCUBIN", a.cubin, path, "NVRTC");
    int major = 0, minor = 0;
    if (a.version(&major, &minor) != 0) fail("nvrtcVersion failed in '{}'", path);
    n->version_ = fmt::format("{}.{}", major, minor);
    return n;
  }
  fail("cannot load NVRTC to compile CUDA kernels; tried:{}\nInstall the CUDA toolkit or set COIL_NVRTC to libnvrtc's path.",
       tried);
}

Nvrtc::~Nvrtc() {
  close_foreign_library(handle_);
}

std::string Nvrtc::compile(const std::string& source, const std::vector<std::string>& options, std::string& log) const {
  const Api& a = *api_;
  auto check = [&](int rc, const char* call) {
    if (rc != 0) fail("{} failed: {}", call, a.error_string(rc));
  };
  Api::Program program = nullptr;
  check(a.create(&program, source.c_str(), "coil_kernels.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  struct Destroy {
    const Api& a;
    Api::Program& p;
    ~Destroy() { a.destroy(&p); }
  } destroy{a, program};
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  int rc = a.compile(program, static_cast<int>(argv.size()), argv.data());
  size_t size = 0;
  check(a.log_size(program, &size), "nvrtcGetProgramLogSize");
  log.assign(size, '\0');
  if (size) check(a.log(program, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (rc != 0) fail("{}", a.error_string(rc));
  check(a.cubin_size(program, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(a.cubin(program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

std::vector<std::string> CudaBuildOptions::all_flags() const {
  std::vector<std::string> all = {"--gpu-architecture=" + arch};
  all.insert(all.end(), flags.begin(), flags.end());
  return all;
}

CudaBuildOptions CudaBuildOptions::prebuilt(ArtifactCache cache, std::string arch, std::string nvrtc_version) {
  return CudaBuildOptions{.cache = std::move(cache), .nvrtc = nullptr, .nvrtc_version = std::move(nvrtc_version),
                          .arch = std::move(arch), .compile = false};
}

CudaBuildOptions CudaBuildOptions::detect(ArtifactCache cache, std::string arch) {
  CudaBuildOptions options{.cache = std::move(cache), .nvrtc = Nvrtc::load(), .arch = std::move(arch)};
  options.nvrtc_version = options.nvrtc->version();
  // Experiments (compile time against kernel speed): extra NVRTC flags, space-separated; they
  // are part of every cubin's cache key like the others.
  if (const char* extra = std::getenv("COIL_NVRTC_FLAGS")) {
    std::istringstream words(extra);
    for (std::string flag; words >> flag;) options.flags.push_back(flag);
  }
  return options;
}

std::string cubin_key(const std::string& source, const CudaBuildOptions& options) {
  std::string flags;
  for (const auto& f : options.all_flags()) {
    flags += f;
    flags += '\0';
  }
  return ArtifactCache::key({"coil-cubin-v1", source, options.nvrtc_version, options.arch, flags});
}

std::string compile_cubin(const std::string& source, const CudaBuildOptions& options, BuildStats* stats) {
  auto start = std::chrono::steady_clock::now();
  BuildStats local;
  BuildStats& s = stats ? *stats : local;
  s = BuildStats{.key = cubin_key(source, options)};
  if (auto cached = options.cache.read(s.key, "cubin")) {
    s.cache_hit = true;
    s.total_seconds = seconds_since(start);
    return *cached;
  }
  if (!options.compile)
    fail("cubin {} is not in the cache {} and compiling is off: the package was built for another GPU architecture, "
         "NVRTC or coil version; compile the model again for this GPU", s.key, options.cache.dir());
  std::string log, cubin;
  try {
    cubin = options.nvrtc->compile(source, options.all_flags(), log);
  } catch (const Error& e) {
    KeptFailure kept = keep_failure(options.cache, s.key, ".cu", source, log);
    fail("NVRTC {} failed to compile kernels for {} ({})\n  source kept at: {}\n{}", options.nvrtc->version(), options.arch,
         e.what(), kept.source, trim_log(log, kept.log));
  }
  s.compile_seconds = seconds_since(start);
  options.cache.store(s.key, "cubin", cubin);
  s.total_seconds = seconds_since(start);
  return cubin;
}

std::vector<std::string> compile_cubins(const std::vector<std::string>& sources, const CudaBuildOptions& options,
                                        std::vector<BuildStats>* stats) {
  std::vector<std::string> cubins(sources.size());
  std::vector<BuildStats> all(sources.size());
  run_parallel(sources.size(), [&](size_t i) { cubins[i] = compile_cubin(sources[i], options, &all[i]); });
  if (stats) *stats = std::move(all);
  return cubins;
}

}  // namespace coil::build
