#include "coil/package.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <thread>
#include <type_traits>

#include "build/cache.h"
#include "coil/io.h"
#include "frontend/zip_reader.h"
#include "support/check.h"
#include "support/json_depth.h"
#include "support/temp_dir.h"

namespace coil {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFormat = "coilpkg";
constexpr int kVersion = 2;  // 2: every entry's size and hash, and the toolchain, in the manifest

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
  return it->get<T>();
}
constexpr const char* kRoot = "coilpkg/";
constexpr size_t kMaxManifestBytes = size_t{64} << 20;

// What the manifest records of each entry: xxh3-128 of its bytes (integrity, not authenticity:
// whoever can change an entry can change the manifest too; see docs/packages.md).
std::string content_hash(std::string_view bytes) { return build::ArtifactCache::key({bytes}); }

// Every entry of the archive, checked against the manifest before any is used: each must be
// listed, each listed one must be there, with its listed size and hash. A listed size bounds
// what is read (an entry that inflates past it is refused without reading on).
std::map<std::string, std::string> verified_entries(const frontend::ZipReader& zip, const json& manifest,
                                                    const std::string& path, const std::string& manifest_name) {
  auto listed = manifest.find("entries");
  if (listed == manifest.end() || !listed->is_object()) fail("{}: bad manifest: no \"entries\" object", path);
  for (const auto& name : zip.names())
    if (name != manifest_name && !name.ends_with("/") && !listed->contains(name))
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
    if (data.size() != bytes->get<uint64_t>() || content_hash(data) != hash->get<std::string>())
      fail("{}: the entry's bytes do not match the manifest (the package is corrupt or was changed)", where);
    out.emplace(name, std::move(data));
  }
  return out;
}

}  // namespace

void write_package(const std::string& path, const Graph& graph, const TensorMap& weights, const CompileOptions& options) {
  if (options.device != "cpu" && options.device != "cuda") fail("a package is compiled for a device: \"cpu\" or \"cuda\", not \"{}\"", options.device);
  verify(graph);
  for (int n : graph.weight_nodes()) {
    const auto& key = std::get<std::string>(graph.nodes[static_cast<size_t>(n)].arg("key").value);
    if (!weights.count(key)) fail("weight '{}' (for %{}) was not given", key, graph.nodes[static_cast<size_t>(n)].name());
  }
  // Compiled into an empty cache, which then holds exactly this graph's kernels and tuning.
  TempDir temp("coil-package");
  CompileOptions o = options;
  o.cache_dir = temp.file("cache");
  o.build_threads = options.build_threads > 0 ? options.build_threads : static_cast<int>(std::thread::hardware_concurrency());
  Executable exe = compile(graph, o);

  std::vector<std::pair<std::string, std::string>> entries;
  entries.emplace_back(std::string(kRoot) + "graph.coil", print_graph(graph));
  entries.emplace_back(std::string(kRoot) + "weights.safetensors", safetensors_bytes(NamedTensors(weights.begin(), weights.end())));
  for (const auto& f : fs::recursive_directory_iterator(o.cache_dir)) {
    if (!f.is_regular_file()) continue;
    std::string rel = fs::relative(f.path(), o.cache_dir).generic_string();
    if (rel.rfind("failed/", 0) == 0) continue;
    entries.emplace_back(std::string(kRoot) + "cache/" + rel, read_file(f.path().string()));
  }
  json listed = json::object();
  for (const auto& [name, bytes] : entries) listed[name] = {{"bytes", bytes.size()}, {"hash", content_hash(bytes)}};
  json manifest = {{"format", kFormat}, {"version", kVersion}, {"device", options.device}, {"build_threads", o.build_threads},
                   {"allow_tf32", options.allow_tf32}, {"compiled_on", exe.device}, {"toolchain", exe.toolchain},
                   {"entries", listed}};
  entries.emplace(entries.begin(), std::string(kRoot) + "manifest.json", manifest.dump(1));
  frontend::write_zip(path, entries);
}

Package Package::load(const std::string& path) {
  auto zip = frontend::ZipReader::open(path);
  auto entry = [](const std::string& rel) { return std::string(kRoot) + rel; };
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
  std::map<std::string, std::string> entries = verified_entries(zip, manifest, path, entry("manifest.json"));
  auto take = [&](const std::string& rel) {
    auto it = entries.find(entry(rel));
    if (it == entries.end()) fail("{}: the package has no {}", path, entry(rel));
    return std::move(it->second);
  };

  Package p;
  p.graph_ = parse_graph(take("graph.coil"), path + ":graph.coil");
  for (auto& [name, t] : parse_safetensors(take("weights.safetensors"), path + ":weights.safetensors")) p.weights_[name] = t;

  // The kernels are loaded from a private scratch cache that holds only this package's entries
  // and is gone when loading ends (the libraries stay mapped, the cubins are in the GPU's
  // modules): a package never adds code to the shared kernel cache.
  TempDir scratch("coil-package");
  const std::string prefix = entry("cache/");
  for (auto& [name, bytes] : entries) {
    if (name.rfind(prefix, 0) != 0) continue;
    std::string rel = name.substr(prefix.size());
    if (rel.empty() || rel.find("..") != std::string::npos || rel.starts_with("/"))
      fail("{}: entry '{}' leaves the cache folder", path, name);
    fs::path target = fs::path(scratch.path()) / "cache" / rel;
    fs::create_directories(target.parent_path());
    write_file_atomic(target.string(), bytes);
  }
  CompileOptions o;
  o.device = manifest_field<std::string>(manifest, path, "device", "cpu");
  o.build_threads = manifest_field<int>(manifest, path, "build_threads", 1);
  o.allow_tf32 = manifest_field<bool>(manifest, path, "allow_tf32", false);
  o.toolchain = manifest_field<std::string>(manifest, path, "toolchain", "");
  if (o.toolchain.empty()) fail("{}: bad manifest: no \"toolchain\"", path);
  o.cache_dir = scratch.file("cache");
  o.build = false;
  try {
    p.executable_ = compile(p.graph_, o);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return p;
}

}  // namespace coil
