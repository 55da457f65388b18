// Inputs and weights for running a graph: random inputs from a seed, weights from the
// graph's .safetensors file.
#include <filesystem>

#include "coil/coil.h"
#include "support/check.h"

namespace coil {

TensorMap load_weights(const Graph& graph, const std::string& graph_dir) {
  TensorMap weights;
  auto nodes = graph.weight_nodes();
  if (nodes.empty()) return weights;
  if (graph.weights_file.empty())
    fail("graph {} has weight() nodes but names no weights file (add `weights \"file.safetensors\"`)", graph.name);
  std::filesystem::path path = std::filesystem::path(graph_dir) / graph.weights_file;
  for (auto& [name, tensor] : read_safetensors(path.string())) weights.emplace(name, std::move(tensor));
  for (int n : nodes) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    const auto& key = std::get<std::string>(node.arg("key").value);
    if (!weights.count(key)) fail("weight '{}' (for %{}) is not in {}", key, node.name(), path.string());
  }
  return weights;
}

namespace {
// splitmix64: tiny, and the same stream on every platform and compiler.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double unit(uint64_t& state) { return static_cast<double>(next_random(state) >> 11) * 0x1.0p-53; }
}  // namespace

TensorMap random_inputs(const Graph& graph, uint64_t seed, const std::map<std::string, int64_t>& sizes) {
  std::map<std::string, int64_t> bound = sizes;
  for (const auto& s : graph.symbols) {
    if (bound.count(s.name)) continue;
    if (!s.hint) fail("size symbol '{}' has no value: give it with --size {}=N or a hint `sym {} = N`", s.name, s.name, s.name);
    bound[s.name] = *s.hint;
  }
  TensorMap out;
  uint64_t state = seed;
  for (int n : graph.input_nodes()) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    const TensorMeta& m = node.outputs[0].meta;
    Shape shape;
    for (const auto& d : m.sizes) shape.push_back(d.eval(bound));
    Tensor t = Tensor::zeros(m.dtype, shape);
    bool floating = is_float(m.dtype);
    auto bound_of = [&](std::string_view name, double fallback) {
      const Arg& a = node.arg(name);
      if (auto* d = std::get_if<double>(&a.value)) return *d;
      if (auto* s = std::get_if<SymInt>(&a.value)) return static_cast<double>(s->eval(bound));
      return fallback;
    };
    double low = bound_of("low", floating ? -1.0 : 0.0);
    double high = bound_of("high", floating ? 1.0 : (m.dtype == DType::b8 ? 2.0 : 10.0));
    if (!(high > low)) fail("input %{}: empty random range [{}, {})", node.name(), low, high);
    for (int64_t i = 0; i < t.numel(); ++i) {
      double u = low + unit(state) * (high - low);
      t.store(i, floating ? u : std::floor(u));
    }
    out.emplace(node.name(), std::move(t));
  }
  return out;
}

}  // namespace coil
