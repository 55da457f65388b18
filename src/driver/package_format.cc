#include "driver/package_format.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <type_traits>

#include "build/cache.h"
#include "support/check.h"
#include "support/json_depth.h"

namespace coil::driver {

namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "coilpkg";
constexpr int kVersion = 2;  // 2: every entry's size and hash, and the toolchain, in the manifest
constexpr const char* kRoot = "coilpkg/";
constexpr size_t kMaxManifestBytes = size_t{64} << 20;

std::string entry(const std::string& rel) { return std::string(kRoot) + rel; }

// A manifest field of the type coil wrote, or `fallback` where it is absent; a field of another
// type is a broken package, named as such (not a JSON library's internal error).
template <typename T>
T manifest_field(const json& manifest, const std::string& path, const char* key, T fallback) {
  auto it = manifest.find(key);
  if (it == manifest.end()) return fallback;
  bool fits = std::is_same_v<T, std::string> ? it->is_string() : std::is_same_v<T, bool> ? it->is_boolean()
                                                                                         : it->is_number_integer();
  if (!fits) fail("{}: bad manifest: \"{}\" is a {}, not a {}", path, key, it->type_name(),
                  std::is_same_v<T, std::string> ? "string" : std::is_same_v<T, bool> ? "boolean" : "whole number");
  if constexpr (std::is_same_v<T, int>) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() > 65536) fail("{}: bad manifest: \"{}\" is out of range", path, key);
  }
  return it->get<T>();
}

// Every entry of the archive, checked against the manifest before any is used: each must be
// listed, each listed one must be there, with its listed size and hash. A listed size bounds
// what is read (an entry that inflates past it is refused without reading on).
std::map<std::string, std::string> verified_entries(const frontend::ZipReader& zip, const json& manifest,
                                                    const std::string& path) {
  auto listed = manifest.find("entries");
  if (listed == manifest.end() || !listed->is_object()) fail("{}: bad manifest: no \"entries\" object", path);
  for (const auto& name : zip.names())
    if (name != entry("manifest.json") && !name.ends_with("/") && !listed->contains(name))
      fail("{}: entry '{}' is not listed in the manifest (the package was changed after it was written)", path, name);
  std::map<std::string, std::string> out;
  for (const auto& [name, info] : listed->items()) {
    std::string where = fmt::format("{}: manifest entry '{}'", path, name);
    if (!info.is_object()) fail("{}: not an object", where);
    auto bytes = info.find("bytes");
    auto hash = info.find("hash");
    if (bytes == info.end() || !bytes->is_number_unsigned() || hash == info.end() || !hash->is_string())
      fail("{}: needs \"bytes\" (a whole number) and \"hash\" (a string)", where);
    if (!zip.contains(name)) fail("{}: the package has no such entry", where);
    std::string data = zip.read(name, bytes->get<uint64_t>());
    if (data.size() != bytes->get<uint64_t>() || package_entry_hash(data) != hash->get<std::string>())
      fail("{}: the entry's bytes do not match the manifest (the package is corrupt or was changed)", where);
    out.emplace(name, std::move(data));
  }
  return out;
}

// A kernel's path in the cache folder, as the archive names it: relative, no "..", no empty part.
bool inside_cache(const std::string& rel) {
  if (rel.empty() || rel.starts_with("/") || rel.ends_with("/")) return false;
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    std::string_view part(rel.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return rel.find('\0') == std::string::npos && rel.find('\\') == std::string::npos;
}

}  // namespace

std::string package_entry_hash(std::string_view bytes) { return build::ArtifactCache::key({bytes}); }

frontend::ZipEntries package_entries(const PackageContents& contents) {
  frontend::ZipEntries entries;
  entries.emplace_back(entry("graph.coil"), print_graph(contents.graph));
  entries.emplace_back(entry("weights.safetensors"), safetensors_bytes(contents.weights));
  for (const auto& [rel, bytes] : contents.kernels) {
    COIL_CHECK(inside_cache(rel)) << "kernel path " << rel;
    entries.emplace_back(entry("cache/" + rel), bytes);
  }
  json listed = json::object();
  for (const auto& [name, bytes] : entries) listed[name] = {{"bytes", bytes.size()}, {"hash", package_entry_hash(bytes)}};
  json manifest = {{"format", kFormat},          {"version", kVersion},
                   {"device", contents.device},  {"build_threads", contents.build_threads},
                   {"allow_tf32", contents.allow_tf32}, {"compiled_on", contents.compiled_on},
                   {"toolchain", contents.toolchain},   {"entries", listed}};
  entries.emplace(entries.begin(), entry("manifest.json"), manifest.dump(1));
  return entries;
}

PackageContents read_package(const frontend::ZipReader& zip, const std::string& path) {
  if (!zip.contains(entry("manifest.json"))) fail("{}: not a coil package (no {}manifest.json)", path, kRoot);
  std::string manifest_text = zip.read(entry("manifest.json"), kMaxManifestBytes);
  check_json_depth(manifest_text, fmt::format("{}: the manifest", path));
  json manifest = json::parse(manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || manifest_field<std::string>(manifest, path, "format", "") != kFormat)
    fail("{}: not a coil package (bad manifest)", path);
  int version = manifest_field<int>(manifest, path, "version", 0);
  if (version != kVersion)
    fail("{}: package format version {} is not supported (this coil reads version {}{})", path, version, kVersion,
         version < kVersion ? "; write the package again with this coil" : "");

  PackageContents p;
  p.device = manifest_field<std::string>(manifest, path, "device", "cpu");
  if (p.device != "cpu" && p.device != "cuda") fail("{}: bad manifest: device \"{}\" (\"cpu\" or \"cuda\")", path, p.device);
  p.build_threads = std::max(1, manifest_field<int>(manifest, path, "build_threads", 1));
  p.allow_tf32 = manifest_field<bool>(manifest, path, "allow_tf32", false);
  p.compiled_on = manifest_field<std::string>(manifest, path, "compiled_on", "");
  p.toolchain = manifest_field<std::string>(manifest, path, "toolchain", "");
  if (p.toolchain.empty()) fail("{}: bad manifest: no \"toolchain\"", path);

  std::map<std::string, std::string> entries = verified_entries(zip, manifest, path);
  auto take = [&](const std::string& rel) {
    auto it = entries.find(entry(rel));
    if (it == entries.end()) fail("{}: the package has no {}", path, entry(rel));
    std::string bytes = std::move(it->second);
    entries.erase(it);
    return bytes;
  };
  p.graph = parse_graph(take("graph.coil"), path + ":graph.coil");
  p.weights = parse_safetensors(take("weights.safetensors"), path + ":weights.safetensors");
  const std::string prefix = entry("cache/");
  for (auto& [name, bytes] : entries) {
    if (!name.starts_with(prefix)) fail("{}: entry '{}' is not part of a coil package", path, name);
    std::string rel = name.substr(prefix.size());
    if (!inside_cache(rel)) fail("{}: entry '{}' leaves the cache folder", path, name);
    p.kernels.emplace_back(rel, std::move(bytes));
  }
  // A kernel file where another kernel's path needs a folder ("a" and "a/b") cannot be laid out.
  std::set<std::string_view> folders;
  for (const auto& [rel, bytes] : p.kernels)
    for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1))
      folders.insert(std::string_view(rel).substr(0, slash));
  for (const auto& [rel, bytes] : p.kernels)
    if (folders.count(rel)) fail("{}: entry '{}' is both a file and a folder", path, entry("cache/" + rel));
  return p;
}

}  // namespace coil::driver
