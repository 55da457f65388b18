// 2-D pooling as ops the compiler lowers, so that a pooling layer fuses into the kernels around
// it: each window position is a strided slice of the (lazily) padded input, and the slices
// combine pointwise (max, or a sum over the window's size); adaptive average pooling with
// windows of one size is average pooling, otherwise a mean per window row and column.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "coil/graph.h"

namespace coil {

// The values of `node`'s outputs (max_pool2d_with_indices, avg_pool2d or _adaptive_avg_pool2d),
// built into `g` from `self` (the node's input, already in `g`); `fresh(stem)` names new values.
// The outputs keep the node's value names.
std::vector<ValueRef> decompose_pooling(Graph& g, const Node& node, ValueRef self, const std::function<std::string(const std::string&)>& fresh);

bool is_pooling(OpKind op);

}  // namespace coil
