// What the passes of a row reduction share beyond the row's loads. A persistent row keeps the
// per-element values a later pass reads again in registers (softmax's exp(x - max) is computed
// once, by the sum's pass, and read back by the stores), and a division by a row's reduced
// value becomes a multiplication by its reciprocal, computed once per row.
#pragma once
#include <cstddef>
#include <set>
#include <vector>

#include "loop/kernel.h"

namespace coil::codegen {

struct CarriedValue {
  loop::ExprRef value;
  size_t pass = 0;  // the first reduction step of the pass that computes it
};

// The largest per-element subexpressions of a later pass (a later reduction's value or an inner
// store) that an earlier reduction pass computes too and that are worth a register each: they
// depend on the row position and hold an operation dearer than add, multiply or compare.
// Welford passes are not producers. At most `max_values`, first computed first.
std::vector<CarriedValue> carried_values(const loop::LoopKernel& k, size_t max_values);

// The f32 reduction steps whose result some expression of the kernel divides an f32 value by.
std::set<int> reciprocal_slots(const loop::LoopKernel& k);

}  // namespace coil::codegen
