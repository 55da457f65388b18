// Common subexpressions: a node that computes what an earlier node computes — the same op of the
// same arguments, the same outputs — is dropped, and what read its outputs reads the earlier
// node's. The graphs torch.compile hands over repeat work per layer (each attention's mask
// converted from the same bool mask; the same unsqueeze of a rotary table), which would each be
// a kernel. Inputs, weights, constants and torch calls (which may act outside the graph) are
// never merged, nor a node whose outputs the graph returns. Pure: a new graph, the kept nodes'
// value names unchanged.
#pragma once
#include "coil/graph.h"

namespace coil {

Graph eliminate_common_subexpressions(const Graph& graph);

}  // namespace coil
