// Decomposition of composite ops the compiler has no kernel for into ops it lowers:
// scaled_dot_product_attention -> bmm + masked softmax + bmm, 2-D pooling
// (decompose_pooling.h) and batch norm with batch statistics (decompose_batch_norm.h). Pure: returns a new graph
// computing the same outputs; value names of the original nodes are kept.
#pragma once
#include "coil/graph.h"

namespace coil {

// fused_attention: keep the attention nodes a fused kernel takes (the CUDA target;
// decompose_attention.h), grouped-query ones as attention over the unrepeated keys and values.
Graph decompose(const Graph& graph, bool fused_attention = false);

}  // namespace coil
