// Lowering: graph IR -> loop IR. Pointwise ops and views become expressions over the index of
// the value they define and are inlined into their consumers (vertical fusion by
// construction); reductions, normalizations, externs and graph outputs are realized into
// buffers. A value with several consumers is realized unless it is as cheap as a load.
#pragma once
#include <vector>

#include "coil/graph.h"
#include "loop/kernel.h"

namespace coil {

struct LoweredGraph {
  loop::Program program;
  std::vector<int> input_buffers;   // per graph input node, in order
  std::vector<int> weight_buffers;  // per graph weight node, in order
  std::vector<int> output_buffers;  // per graph output
};

// Throws coil::Error naming the node for ops the compiler does not lower yet.
LoweredGraph lower(const Graph& graph);

}  // namespace coil
