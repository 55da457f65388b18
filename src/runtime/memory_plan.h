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

// The steps with what they read, write and release (`coil compile --emit plan`).
std::string describe_plan(const LoweredGraph& lowered);

}  // namespace coil
