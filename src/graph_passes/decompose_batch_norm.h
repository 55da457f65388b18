// Batch normalization with batch statistics (_native_batch_norm_legit_functional, what
// AOTAutograd's training-mode batch_norm and instance_norm become, and
// _native_batch_norm_legit.no_stats) as ops the compiler lowers: a mean and a biased variance
// per channel over the batch and spatial dims, computed in f32 for f16/bf16 inputs, the
// normalized output rounded once to the input's dtype, and the new running statistics
// (momentum * batch statistic + (1 - momentum) * running statistic, the variance unbiased)
// computed in the computation dtype, as PyTorch's CPU and CUDA kernels do. Eval mode normalizes
// with the running statistics. Output dtypes and shapes are the node's (graph/infer_reduce.cc).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coil/graph.h"

namespace coil {

bool is_batch_norm(OpKind op);

// The values of `node`'s outputs, built into `g`; `tensor(name)` is the node's tensor argument
// `name` already in `g` (nullopt for none), `fresh(stem)` names new values. The outputs keep the
// node's value names.
std::vector<ValueRef> decompose_batch_norm(Graph& g, const Node& node,
                                           const std::function<std::optional<ValueRef>(std::string_view)>& tensor,
                                           const std::function<std::string(const std::string&)>& fresh);

}  // namespace coil
