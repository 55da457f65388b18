// scaled_dot_product_attention for the fused kernel (CUDA): which nodes it takes, and grouped-query
// attention rewritten so that it reads each key/value head where it is, without the repeat.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "coil/graph.h"

namespace coil {

// A fused attention kernel takes scaled_dot_product_attention with f16/bf16 operands, a constant
// head size of 16 to 128 (a multiple of 16) shared by value, the same batch dims for all three
// (grouped_attention takes the grouped-query forms), unit stride along the head dim, no dropout,
// and no attn_mask or a bool one or one added (the query's dtype). Batch sizes and lengths may be
// symbolic. Others are decomposed.
bool fused_attention_applies(const Graph& graph, const Node& node);

// Grouped-query attention: each key/value head serves `rep` consecutive query heads, given by
// enable_gqa or spelled as a repeat (key = view(clone(expand(x [..., Hkv, 1, S, E] to
// [..., Hkv, rep, S, E])), [..., Hkv * rep, S, E]), Hugging Face's repeat_kv and gpt-fast's).
// Where node `n` of `source` is that and the fused kernel takes the result, appends to `g` an
// attention over the heads split as [..., Hkv, rep, ...] that reads the unrepeated key and
// value (an expand, stride 0 over rep), and returns its result viewed as n's. A single query
// row (decoding) puts the rep query heads of one key/value head in the rows of one attention,
// so one block reads that head's keys once. `mapped` gives a value of `source` (defined before `n`) as a value of `g`;
// `fresh` gives new value names. Otherwise nothing is appended and nullopt is returned.
std::optional<ValueRef> grouped_attention(Graph& g, const Graph& source, const Node& n, const std::function<ValueRef(ValueRef)>& mapped,
                                          const std::function<std::string(const std::string&)>& fresh);

}  // namespace coil
