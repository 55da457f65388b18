// The memory plan of a compiled program: which buffers each step reads and writes, and so the
// step range in which each temporary is live. The executor allocates a temporary before its
// first step and hands its memory back to a per-run pool after its last, so a later temporary
// of at most that size reuses it instead of growing the peak; an elementwise result may also
// take over a dying operand's memory in place.
#pragma once
#include <string>
#include <vector>

#include "lower/lower.h"

namespace coil {

struct MemoryPlan {
  std::vector<std::vector<int>> reads, writes;  // per step (program kernel), buffer ids
  std::vector<int> first_use, last_use;         // per buffer: step indices, -1 when unused
  std::vector<std::vector<int>> release_after;  // per step: temporaries dead after it
  // per buffer: the temporary whose memory it takes over in place, or -1. A pointwise kernel
  // with a single store may write its result over an operand that dies with it, when it reads
  // that operand only at the element it writes (same layout, same offset).
  std::vector<int> in_place_of;
};

MemoryPlan plan_memory(const LoweredGraph& lowered);

// Per graph output, the graph input whose memory it may be computed in (`wanted`: per output,
// an input index or -1): an input the graph updates (an optimizer step's parameters, BatchNorm's
// running statistics) then takes its new values with no copy. An output qualifies when its
// buffer has the input's dtype and layout, is no other output's, and no step reads the input
// after the first step that writes the output, except that step itself where it is a pointwise
// kernel reading the input only at the element it writes, and only for the stores up to the
// output's (an optimizer's one kernel per parameter stores the parameter and its moments; an
// index_put's copy of the input, which its scatter then writes into: a KV cache updated in place).
// Returns `wanted` with -1 where that does not hold.
std::vector<int> outputs_over_inputs(const LoweredGraph& lowered, const MemoryPlan& plan, const std::vector<int>& wanted);

// Per step, the graph outputs it only copies out of the inputs they are computed over
// (`output_over_input`, as outputs_over_inputs grants): a loop kernel each of whose stores is the
// load of the same element of that output's input (index_put's copy of a KV cache before its
// scatter). Where every such output is its input's memory, the step has nothing to do. Empty
// for the other steps.
std::vector<std::vector<size_t>> copies_onto_inputs(const LoweredGraph& lowered, const std::vector<int>& output_over_input);

// The steps with what they read, write and release (`coil compile --emit plan`).
std::string describe_plan(const LoweredGraph& lowered);

}  // namespace coil
