// The reference interpreter: evaluates any verified graph on the CPU, computing every op in
// double precision and storing results in the declared dtypes. It honours strides, views,
// broadcasting and zero-size tensors. It is the oracle of the differential tests, so it is
// written to be obviously right, not fast.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "coil/graph.h"
#include "coil/tensor.h"

namespace coil {

using TensorMap = std::map<std::string, Tensor>;

// Values of the graph's size symbols, read from the input shapes. Throws coil::Error when an
// input is missing, has the wrong dtype or rank, or its sizes disagree with the declaration.
std::map<std::string, int64_t> bind_symbols(const Graph& graph, const TensorMap& inputs,
                                            const std::map<std::string, int64_t>& given = {});

// `inputs` by input value name (without %), `weights` by weight key. Returns the graph's
// outputs in order.
std::vector<Tensor> evaluate_reference(const Graph& graph, const TensorMap& inputs, const TensorMap& weights = {});

}  // namespace coil
