// A graph handed over by the torch.compile adapter (python/coil): the FX graph AOTAutograd
// traced, with its nodes written in torch.export's serialized node form (see export_nodes.h):
//   {"name": str,
//    "device": {"type": "cpu"|"cuda", "index": int},                    // where it runs (default cpu)
//    "inputs":  [{"name": str, "meta": {"dtype", "sizes", "strides"}}],   // per call, in order
//    "weights": [{"name": str, "key": str, "meta": {...}}],              // frozen parameters
//    "nodes":   [node, ...],   // outputs may carry "layout": {"sizes", "strides"} (export_layout.h)
//    "outputs": [str, ...],                                               // value names
//    "any_layout_outputs": [int, ...]}  // optional: outputs whose strides coil picks (Graph)
// Inputs keep their strides (non-contiguous tensors are read in place). Errors are
// coil::Error naming the node.
#pragma once
#include <string>

#include "coil/graph.h"

namespace coil {

Graph graph_from_fx(const std::string& json_text);

}  // namespace coil
