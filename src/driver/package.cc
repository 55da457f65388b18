#include "coil/package.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <thread>

#include "build/cache.h"
#include "coil/io.h"
#include "frontend/zip_reader.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace coil {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFormat = "coilpkg";
constexpr int kVersion = 1;
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
  json manifest = json::parse(zip.read(entry("manifest.json"), 1 << 20), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || manifest.value("format", "") != kFormat)
    fail("{}: not a coil package (bad manifest)", path);
  if (manifest.value("version", 0) != kVersion)
    fail("{}: package format version {} is not supported (this coil reads version {})", path, manifest.value("version", 0), kVersion);

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
  o.device = manifest.value("device", "cpu");
  o.build_threads = manifest.value("build_threads", 1);
  o.allow_tf32 = manifest.value("allow_tf32", false);
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
