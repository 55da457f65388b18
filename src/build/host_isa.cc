#include "build/host_isa.h"

// Header-only (inlined): no libxxhash at run time, so the wheel carries one shared library fewer.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <array>
#include <fstream>
#include <string_view>

#include "build/process.h"
#include "support/check.h"

namespace coil::build {

namespace {

// Only fields that describe the instruction set and micro-architecture: the others (clock,
// bogomips, core ids, microcode, bugs) change between boots or processors of one machine and
// would make every process miss the cache.
constexpr std::array<std::string_view, 12> kIsaFields = {
    "vendor_id", "cpu family", "model",  "flags", "Features", "CPU implementer",
    "CPU architecture", "CPU variant", "CPU part", "isa", "uarch", "cpu"};

std::string hash_text(std::string_view source, const std::string& text) {
  return fmt::format("{}-{:016x}", source, XXH3_64bits(text.data(), text.size()));
}

std::string cpuinfo_isa_lines() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // end of the first processor's block; the rest repeat it
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string_view name = std::string_view(line).substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    for (std::string_view field : kIsaFields) {
      if (name == field) kept += line + "\n";
    }
  }
  return kept;
}

}  // namespace

std::string host_isa_fingerprint(const Compiler& compiler) {
  std::string lines = cpuinfo_isa_lines();
  if (!lines.empty()) return hash_text("cpuinfo", lines);
  ProcessResult macros = run_process({compiler.path, "-march=native", "-dM", "-E", "-x", "c++", "/dev/null"});
  if (!macros.ok()) {
    fail("cannot tell which instructions '-march=native' selects: /proc/cpuinfo is unreadable and '{}' failed "
         "({}): {}",
         command_line({compiler.path, "-march=native", "-dM", "-E", "-x", "c++", "/dev/null"}), macros.status_text(),
         macros.err.substr(0, 2000));
  }
  return hash_text("macros", macros.out);
}

}  // namespace coil::build
