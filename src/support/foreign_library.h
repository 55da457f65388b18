// Loading and unloading the libraries coil opens with dlopen that it did not build: the CUDA
// driver, NVRTC, cuBLASLt and cuDNN. Under AddressSanitizer they stay loaded: once one is unloaded, the memory its
// own static constructors allocated is unreachable to LeakSanitizer's scan at exit and would be
// reported as a leak of the program that unloaded it (tests/device/sanitize.sh runs the unit
// tests that load them).
#pragma once
#include <dlfcn.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "support/check.h"

namespace coil {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kKeepForeignLibrariesLoaded = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kKeepForeignLibrariesLoaded = true;
#else
inline constexpr bool kKeepForeignLibrariesLoaded = false;
#endif
#else
inline constexpr bool kKeepForeignLibrariesLoaded = false;
#endif

inline void close_foreign_library(void* handle) {
  if (handle && !kKeepForeignLibrariesLoaded) ::dlclose(handle);
}

// The first of `candidates` that dlopen loads (local symbols, bound now), its name in `path`;
// nullptr when none does, `tried` then listing each with dlopen's reason ("\n  <name>: <why>").
inline void* open_first_library(const std::vector<std::string>& candidates, std::string& path, std::string& tried) {
  for (const auto& candidate : candidates) {
    if (void* library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = candidate;
      return library;
    }
    tried += fmt::format("\n  {}: {}", candidate, ::dlerror());
  }
  return nullptr;
}

// `fn` = the entry point `name` of `library` (at `path`, named with `what`: "cuDNN"); throws
// coil::Error where the library lacks it. (Named apart from std::bind, which argument-dependent
// lookup would otherwise find and prefer for these arguments, binding nothing.)
template <typename Fn>
void bind_symbol(void* library, const char* name, Fn& fn, const std::string& path, const char* what) {
  fn = reinterpret_cast<Fn>(::dlsym(library, name));
  if (!fn) fail("the {} library '{}' has no '{}'", what, path, name);
}

}  // namespace coil
