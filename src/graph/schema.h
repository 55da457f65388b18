// Parses an ATen schema string ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) ->
// Tensor") into an OpSchema. Used once per op at start-up, and by the pt2 reader later.
#pragma once
#include <string_view>

#include "coil/graph.h"

namespace coil {

OpSchema parse_op_schema(std::string_view text, OpKind kind, OpFamily family);

}  // namespace coil
