// What a failed build leaves for the user: the generated source and the full log, kept under
// `<cache>/failed/`, and a trimmed log for the error message.
#pragma once
#include <string>

#include "build/cache.h"

namespace coil::build {

// The first lines of a compiler log (a compiler's first error is the one that matters, and a
// template error can run to megabytes), pointing at `full_log_path` for the rest.
std::string trim_log(const std::string& log, const std::string& full_log_path);

struct KeptFailure {
  std::string source, log;  // paths, or the reason they could not be written
};
// Writes `<cache>/failed/<key><extension>` and `<key>.log`; never throws.
KeptFailure keep_failure(const ArtifactCache& cache, const std::string& key, const std::string& extension,
                         const std::string& source, const std::string& log);

}  // namespace coil::build
