#include "build/compiler.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "build/process.h"
#include "support/check.h"

namespace coil::build {

namespace {

// The absolute path posix_spawnp would run, so errors and stats name the real binary.
std::string resolve_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path_env = std::getenv("PATH");
  std::string_view dirs = path_env ? path_env : "";
  while (!dirs.empty()) {
    size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;  // let the spawn report "not found"
}

std::string first_line(const std::string& text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  size_t end = text.find_first_of("\r\n", start);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

}  // namespace

Compiler probe_compiler(const std::string& program) {
  Compiler compiler{.path = resolve_in_path(program), .id = ""};
  ProcessResult version = run_process({compiler.path, "--version"});
  if (!version.ok()) fail("'{} --version' failed ({}): {}", compiler.path, version.status_text(), first_line(version.err));
  compiler.id = first_line(version.out);
  if (compiler.id.empty()) fail("'{} --version' printed nothing", compiler.path);
  return compiler;
}

Compiler detect_compiler() {
  std::vector<std::pair<std::string, std::string>> candidates;  // (where from, program)
  for (const char* variable : {"COIL_CXX", "CXX"}) {
    const char* value = std::getenv(variable);
    if (value && *value) candidates.emplace_back(fmt::format("${}", variable), value);
  }
  candidates.emplace_back("default", "g++");
  candidates.emplace_back("default", "clang++");

  std::string tried;
  for (const auto& [origin, program] : candidates) {
    try {
      return probe_compiler(program);
    } catch (const Error& e) {
      tried += fmt::format("\n  {} ({}): {}", program, origin, e.what());
    }
  }
  fail("no C++ compiler found to build CPU kernels; tried:{}\nInstall g++ or clang++, or set COIL_CXX to a "
       "compiler's path.",
       tried);
}

}  // namespace coil::build
