#include "coil/package.h"

#include <filesystem>
#include <thread>

#include "coil/io.h"
#include "driver/package_format.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace coil {

namespace fs = std::filesystem;

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

  driver::PackageContents contents{.graph = graph,
                                   .weights = NamedTensors(weights.begin(), weights.end()),
                                   .kernels = {},
                                   .device = options.device,
                                   .toolchain = exe.toolchain,
                                   .compiled_on = exe.device,
                                   .build_threads = o.build_threads,
                                   .allow_tf32 = options.allow_tf32};
  for (const auto& f : fs::recursive_directory_iterator(o.cache_dir)) {
    if (!f.is_regular_file()) continue;
    std::string rel = fs::relative(f.path(), o.cache_dir).generic_string();
    if (rel.starts_with("failed/")) continue;
    contents.kernels.emplace_back(rel, read_file(f.path().string()));
  }
  frontend::write_zip(path, driver::package_entries(contents));
}

Package Package::load(const std::string& path) {
  driver::PackageContents contents = driver::read_package(frontend::ZipReader::open(path), path);
  Package p;
  p.graph_ = std::move(contents.graph);
  for (auto& [name, t] : contents.weights) p.weights_[name] = t;

  // The kernels are loaded from a private scratch cache that holds only this package's entries
  // and is gone when loading ends (the libraries stay mapped, the cubins are in the GPU's
  // modules): a package never adds code to the shared kernel cache.
  TempDir scratch("coil-package");
  for (const auto& [rel, bytes] : contents.kernels) {
    fs::path target = fs::path(scratch.path()) / "cache" / rel;
    fs::create_directories(target.parent_path());
    write_file_atomic(target.string(), bytes);
  }
  CompileOptions o;
  o.device = contents.device;
  o.build_threads = contents.build_threads;
  o.allow_tf32 = contents.allow_tf32;
  o.toolchain = contents.toolchain;
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
