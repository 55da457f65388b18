// Per-family output inference, called by infer_outputs. Private to src/graph.
#pragma once
#include <vector>

#include "graph/infer_util.h"

namespace coil {

std::vector<TensorMeta> infer_creation(const ArgReader& args);       // creation and copy
std::vector<TensorMeta> infer_pointwise(const ArgReader& args);      // unary, binary, ternary
std::vector<TensorMeta> infer_reduction(const ArgReader& args);
std::vector<TensorMeta> infer_normalization(const ArgReader& args);
std::vector<TensorMeta> infer_view(const ArgReader& args);
std::vector<TensorMeta> infer_shape(const ArgReader& args);
std::vector<TensorMeta> infer_indexing(const ArgReader& args);
std::vector<TensorMeta> infer_linalg(const ArgReader& args);
std::vector<TensorMeta> infer_torch_call(const ArgReader& args);  // (a linalg op, declared outputs)

}  // namespace coil
