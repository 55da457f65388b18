#include "coil/package.h"

#include <nlohmann/json.hpp>

#include <filesystem>
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
constexpr int kVersion = 1;

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
  json manifest = {{"format", kFormat}, {"version", kVersion}, {"device", options.device}, {"build_threads", o.build_threads},
                   {"allow_tf32", options.allow_tf32}, {"compiled_on", exe.device}};
  entries.emplace_back(std::string(kRoot) + "manifest.json", manifest.dump(1));
  entries.emplace_back(std::string(kRoot) + "graph.coil", print_graph(graph));
  entries.emplace_back(std::string(kRoot) + "weights.safetensors", safetensors_bytes(NamedTensors(weights.begin(), weights.end())));
  for (const auto& f : fs::recursive_directory_iterator(o.cache_dir)) {
    if (!f.is_regular_file()) continue;
    std::string rel = fs::relative(f.path(), o.cache_dir).generic_string();
    if (rel.rfind("failed/", 0) == 0) continue;
    entries.emplace_back(std::string(kRoot) + "cache/" + rel, read_file(f.path().string()));
  }
  frontend::write_zip(path, entries);
}

Package Package::load(const std::string& path, const std::string& cache_dir) {
  auto zip = frontend::ZipReader::open(path);
  auto entry = [](const std::string& rel) { return std::string(kRoot) + rel; };
  if (!zip.contains(entry("manifest.json"))) fail("{}: not a coil package (no {}manifest.json)", path, kRoot);
  std::string manifest_text = zip.read(entry("manifest.json"), 1 << 20);
  check_json_depth(manifest_text, fmt::format("{}: the manifest", path));
  json manifest = json::parse(manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || manifest_field<std::string>(manifest, path, "format", "") != kFormat)
    fail("{}: not a coil package (bad manifest)", path);
  int version = manifest_field<int>(manifest, path, "version", 0);
  if (version != kVersion)
    fail("{}: package format version {} is not supported (this coil reads version {})", path, version, kVersion);

  Package p;
  p.graph_ = parse_graph(zip.read(entry("graph.coil")), path + ":graph.coil");
  for (auto& [name, t] : parse_safetensors(zip.read(entry("weights.safetensors")), path + ":weights.safetensors")) p.weights_[name] = t;

  // The kernels join the cache (content-addressed: an entry already there is the same bytes).
  build::ArtifactCache cache = cache_dir.empty() ? build::ArtifactCache::from_environment() : build::ArtifactCache(cache_dir);
  const std::string prefix = entry("cache/");
  for (const auto& name : zip.names()) {
    if (name.rfind(prefix, 0) != 0 || name.ends_with("/")) continue;
    std::string rel = name.substr(prefix.size());
    if (rel.find("..") != std::string::npos || rel.starts_with("/")) fail("{}: entry '{}' leaves the cache folder", path, name);
    fs::path target = fs::path(cache.dir()) / rel;
    if (fs::exists(target)) continue;
    fs::create_directories(target.parent_path());
    write_file_atomic(target.string(), zip.read(name));
  }
  CompileOptions o;
  o.device = manifest_field<std::string>(manifest, path, "device", "cpu");
  o.build_threads = manifest_field<int>(manifest, path, "build_threads", 1);
  o.allow_tf32 = manifest_field<bool>(manifest, path, "allow_tf32", false);
  o.cache_dir = cache.dir();
  o.build = false;
  try {
    p.executable_ = compile(p.graph_, o);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return p;
}

}  // namespace coil
