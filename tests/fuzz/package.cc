// libFuzzer target: reading a .coilpkg package (driver::read_package: the zip, the manifest's
// JSON and fields, every entry checked against its listed size and hash, the kernels' paths in
// the cache folder, then the graph text and the weights). Nothing is compiled or loaded: that is
// Package::load's next step, after everything here has been checked. What is accepted must write
// out again and read back as the same package.
//
// Every entry is listed in the manifest with its size and hash, so nearly any change to an entry
// is refused at that check. The custom mutator mutates the archive's entries (zip_mutator.h) and
// then, half the time, lists the entries in the manifest again with their new sizes and hashes,
// as someone changing a package on purpose would; one time in eight it also renames an entry to a
// hostile path first. That reaches the checks behind the hashes: the kernels' paths, the graph
// and the weights.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>

#include "driver/package_format.h"
#include "fuzz_util.h"
#include "zip_mutator.h"

namespace {

using coil::driver::PackageContents;

bool same(const PackageContents& a, const PackageContents& b) {
  if (coil::print_graph(a.graph) != coil::print_graph(b.graph) || a.kernels != b.kernels || a.device != b.device ||
      a.toolchain != b.toolchain || a.compiled_on != b.compiled_on || a.build_threads != b.build_threads ||
      a.allow_tf32 != b.allow_tf32 || a.weights.size() != b.weights.size())
    return false;
  for (size_t i = 0; i < a.weights.size(); ++i)
    if (a.weights[i].first != b.weights[i].first || !coil::fuzz::same_tensor(a.weights[i].second, b.weights[i].second))
      return false;
  return true;
}

constexpr const char* kManifest = "coilpkg/manifest.json";

// Lists every entry but the manifest again, with its current size and hash.
void relist(coil::frontend::ZipEntries& entries) {
  for (auto& [name, bytes] : entries) {
    if (name != kManifest) continue;
    coil::fuzz::json manifest = coil::fuzz::json::parse(bytes, nullptr, false);
    if (manifest.is_discarded() || !manifest.is_object()) return;
    coil::fuzz::json listed = coil::fuzz::json::object();
    for (const auto& [other, data] : entries)
      if (other != kManifest) listed[other] = {{"bytes", data.size()}, {"hash", coil::driver::package_entry_hash(data)}};
    manifest["entries"] = std::move(listed);
    bytes = manifest.dump(1);
    return;
  }
}

void rename_one(coil::frontend::ZipEntries& entries, std::minstd_rand& rng) {
  static const char* hostile[] = {"coilpkg/cache/../escape.so", "coilpkg/cache//x.so", "coilpkg/cache/./x.so", "coilpkg/cache/",
                                  "coilpkg/cache/a", "coilpkg/cache/a/b", "coilpkg/cache/\\x.so", "coilpkg/other",
                                  "/coilpkg/cache/x.so", "coilpkg/graph.coil", "coilpkg/weights.safetensors"};
  auto& entry = entries[rng() % entries.size()];
  if (entry.first != kManifest) entry.first = hostile[rng() % std::size(hostile)];
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return coil::fuzz::mutate_archive(data, size, max_size, seed, [](coil::frontend::ZipEntries& entries, std::minstd_rand& rng) {
    if (rng() % 8 == 0) rename_one(entries, rng);
    if (rng() % 2 == 0) relist(entries);
  });
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using coil::frontend::ZipReader;
  PackageContents contents;
  if (!coil::fuzz::accepted([&] {
        auto zip = ZipReader::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.coilpkg");
        contents = coil::driver::read_package(zip, "fuzz.coilpkg");
      }))
    return 0;
  coil::fuzz::check_graph(contents.graph);
  PackageContents again;
  coil::fuzz::must_pass("an accepted package does not write and read back", [&] {
    auto zip = ZipReader::from_bytes(coil::frontend::zip_bytes(coil::driver::package_entries(contents)), "rewritten.coilpkg");
    again = coil::driver::read_package(zip, "rewritten.coilpkg");
  });
  if (!same(contents, again)) coil::fuzz::finding("the package changed in the round trip", coil::print_graph(contents.graph));
  return 0;
}
