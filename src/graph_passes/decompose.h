// Decomposition of composite ops the compiler has no kernel for into ops it lowers:
// scaled_dot_product_attention -> bmm + masked softmax + bmm. Pure: returns a new graph
// computing the same outputs; value names of the original nodes are kept.
#pragma once
#include "coil/graph.h"

namespace coil {

Graph decompose(const Graph& graph);

}  // namespace coil
