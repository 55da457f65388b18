// THE pipeline, top to bottom: decompose -> lower -> fuse -> CPU codegen -> build -> Plan;
// `compile()` is declared in include/coil/compile.h. COIL_DEBUG=graph,loop,fusion,code writes
// each stage to stderr.
#pragma once
#include <string>

#include "coil/compile.h"
#include "coil/graph.h"
#include "codegen/cpu/cpu_codegen.h"
#include "runtime/plan.h"

namespace coil {

// Everything before the system compiler: the decomposed graph, the fused loop program and the
// generated C++ (what `coil compile --emit` prints).
struct Generated {
  Graph graph;
  LoweredGraph lowered;
  codegen::CpuSource source;
  CompileStats stats;  // frontend and codegen times
};
Generated generate(const Graph& graph);


}  // namespace coil
