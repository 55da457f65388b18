// Compiled packages (.coilpkg): a model compiled once, then loaded and run by a C++ program
// with no Python, no C++ compiler and no NVRTC. A package is a zip holding the graph (text
// form), its weights (.safetensors), the kernels built for it (CPU libraries or cubins, the
// content-addressed cache entries) and the CUDA tuning results, plus a manifest (format
// version, device, the toolchain that built the kernels, and the size and hash of every other
// entry). A package is code, like a shared library: coil loads one only when told to
// (Package::load, `coil run x.coilpkg`), checks every entry against the manifest before using
// any, and loads its kernels from a private scratch folder, never through the shared kernel
// cache. The Plan is rebuilt from the graph with compiling off, so the kernels the package
// holds are exactly the ones that run; a package made for another compiler, instruction set,
// GPU architecture or coil version is refused with that reason. docs/packages.md has the
// trust model.
#pragma once
#include <string>
#include <vector>

#include "coil/compile.h"
#include "coil/graph.h"
#include "coil/reference.h"
#include "coil/tensor.h"

namespace coil {

// Compiles `graph` with `options` (device "cpu" or "cuda") and writes the package to `path`
// (atomically). `weights` are the tensors its weight nodes name.
void write_package(const std::string& path, const Graph& graph, const TensorMap& weights, const CompileOptions& options = {});

class Package {
 public:
  // Runs the package's code in this process: load only packages you trust as you would a
  // shared library. Throws coil::Error for a file that is not a coil package, another package
  // format, an entry that does not match the manifest, or kernels this machine cannot use.
  static Package load(const std::string& path);

  // Inputs by name; returns the graph's outputs in order.
  std::vector<Tensor> run(const TensorMap& inputs) const { return executable_.run(inputs, weights_); }

  const Graph& graph() const { return graph_; }
  const TensorMap& weights() const { return weights_; }
  const std::string& device() const { return executable_.device; }
  const Executable& executable() const { return executable_; }

 private:
  Graph graph_;
  TensorMap weights_;
  Executable executable_;
};

}  // namespace coil
