// The .coilpkg format, apart from compiling and loading: what a package holds, the archive's
// entries written from it, and a package read back with every entry checked against the
// manifest. Reading runs no code and needs no compiler, so the fuzz target for packages
// (tests/fuzz/package.cc) covers all of it; Package::load (package.cc) then loads the kernels.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coil/graph.h"
#include "coil/io.h"
#include "frontend/zip_reader.h"

namespace coil::driver {

struct PackageContents {
  Graph graph;
  NamedTensors weights;
  // The kernel cache's entries (CPU libraries, cubins, tuning results) by their path in the
  // cache folder: relative, within it.
  std::vector<std::pair<std::string, std::string>> kernels;
  std::string device = "cpu";
  std::string toolchain;    // the compiler's version line or NVRTC's version: part of the kernels' keys
  std::string compiled_on;  // the device description of the compiling machine (informative)
  int build_threads = 1;
  bool allow_tf32 = false;
};

// What the manifest records of each entry: xxh3-128 of its bytes (integrity, not authenticity:
// whoever can change an entry can change the manifest too; see docs/packages.md).
std::string package_entry_hash(std::string_view bytes);

// The archive's entries: the manifest (format version, options, the size and xxh3-128 hash of
// every other entry) first, then the graph's text, the weights and the kernels.
frontend::ZipEntries package_entries(const PackageContents& contents);

// A package read from `zip` (`path` names it in errors). Throws coil::Error for an archive that
// is not a coil package, another format version, a manifest field of the wrong type, an entry
// that is unlisted, missing, longer than listed or changed, a kernel path leaving the cache
// folder, or a graph or weights file that does not parse.
PackageContents read_package(const frontend::ZipReader& zip, const std::string& path);

}  // namespace coil::driver
