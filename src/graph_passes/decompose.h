// Decomposition of composite ops the compiler has no kernel for into ops it lowers:
// scaled_dot_product_attention -> bmm + masked softmax + bmm, 2-D pooling
// (decompose_pooling.h) and batch norm with batch statistics (decompose_batch_norm.h). Pure: returns a new graph
// computing the same outputs; value names of the original nodes are kept.
#pragma once
#include "coil/graph.h"

namespace coil {

// A fused attention kernel takes scaled_dot_product_attention with f16/bf16 operands of static
// sizes, a head size of 16 to 128 (a multiple of 16) shared by value, the same batch dims for
// all three (no grouped-query repeat), unit stride along the head dim, no attn_mask and no
// dropout. Others are decomposed.
bool fused_attention_applies(const Graph& graph, const Node& node);

// fused_attention: keep the attention nodes a fused kernel takes (the CUDA target).
Graph decompose(const Graph& graph, bool fused_attention = false);

}  // namespace coil
