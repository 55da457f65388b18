#include "build/failure.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "coil/io.h"

namespace coil::build {

namespace {

constexpr size_t kMaxLogLines = 60;
constexpr size_t kMaxLogChars = 8000;

}  // namespace

std::string trim_log(const std::string& log, const std::string& full_log_path) {
  size_t end = 0, lines = 0;
  while (end < log.size() && lines < kMaxLogLines && end < kMaxLogChars) {
    size_t newline = log.find('\n', end);
    end = newline == std::string::npos ? log.size() : newline + 1;
    ++lines;
  }
  end = std::min(end, kMaxLogChars);
  if (end >= log.size()) return log;
  return log.substr(0, end) + fmt::format("\n... (log trimmed; all of it is in {})\n", full_log_path);
}

KeptFailure keep_failure(const ArtifactCache& cache, const std::string& key, const std::string& extension,
                         const std::string& source, const std::string& log) {
  std::string folder = cache.dir() + "/failed";
  KeptFailure kept{folder + "/" + key + extension, folder + "/" + key + ".log"};
  try {
    std::filesystem::create_directories(folder);
    write_file_atomic(kept.source, source);
    write_file_atomic(kept.log, log);
  } catch (const std::exception& e) {
    kept.source = kept.log = fmt::format("(could not be kept: {})", e.what());
  }
  return kept;
}

}  // namespace coil::build
