// The public C++ API of coil, in one include.
#pragma once
#include "coil/dtype.h"
#include "coil/compile.h"
#include "coil/error.h"
#include "coil/graph.h"
#include "coil/io.h"
#include "coil/package.h"
#include "coil/reference.h"
#include "coil/sym.h"
#include "coil/tensor.h"

namespace coil {

// The tensors named by the graph's `weight(key=...)` nodes, read from its weights file
// (relative to `graph_dir`). Throws coil::Error for a missing file or key.
TensorMap load_weights(const Graph& graph, const std::string& graph_dir);

// Deterministic random inputs for every `input()` node. Symbol sizes come from `sizes`, else
// from the symbol's hint. Floats are uniform in [low, high) (default [-1, 1)), integers in
// [low, high) (default [0, 10)), bools 0 or 1.
TensorMap random_inputs(const Graph& graph, uint64_t seed, const std::map<std::string, int64_t>& sizes = {});

}  // namespace coil
