// Non-core ATen ops that torch.export leaves in a program before run_decompositions(), written
// here as the Core ATen ops coil compiles: linear, t, layer_norm, batch_norm (inference),
// conv1d/2d/3d, matmul, reshape, split.Tensor, transpose.int, arange(end) and arange(start, end).
// The attention variants are ExportNodes' own (they need the file's output list).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "coil/graph.h"

namespace coil::frontend {

// Whether `op` ("layer_norm", "split.Tensor"; ".default" dropped) is one of the above.
bool export_decomposes(const std::string& op);

// Appends `op` applied to `args` (bound by the schema's argument names) to `g`, naming the
// results `names` (one per output of the op); returns them. Throws coil::Error for arguments
// coil cannot take (batch_norm in training mode, a matmul of two vectors).
std::vector<ValueRef> decompose_export_op(Graph& g, const std::string& op, const std::map<std::string, Arg>& args,
                                          const std::vector<std::string>& names);

}  // namespace coil::frontend
