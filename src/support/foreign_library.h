// Unloading the libraries coil opens with dlopen that it did not build: the CUDA driver, NVRTC
// and cuBLASLt. Under AddressSanitizer they stay loaded: once one is unloaded, the memory its
// own static constructors allocated is unreachable to LeakSanitizer's scan at exit and would be
// reported as a leak of the program that unloaded it (tests/device/sanitize.sh runs the unit
// tests that load them).
#pragma once
#include <dlfcn.h>

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

}  // namespace coil
