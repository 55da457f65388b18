// The cost model behind one lowering decision: a value with several consumers is either
// realized (stored once, loaded by each consumer) or inlined (recomputed in each consumer).
// Costs are per element, in units of one simple arithmetic operation (add, mul, compare,
// select: 1; division, sqrt: 4; exp, log, erf, tanh, pow, trig: 10). A load inside the
// recomputed body costs 1 (its operands are read by the consumer's loop anyway, so mostly from
// cache); storing the value and loading it back costs 8 per access (a round trip to memory
// that, for a large tensor, is slower than several vectorized transcendentals).
// Recomputing is bounded: (uses - 1) * compute cost may not exceed the round trip (one store
// plus one load per use). So a decomposed softmax's exp(x - max), read by the sum and by the
// division, stays inline (one kernel), while gelu(x) read by four consumers is computed once.
// Memory is bounded too: a body reading `reads` tensors as large as itself makes each consumer
// read them all, uses * reads tensor passes, against reads + 1 + uses when stored once; it is
// stored when that is less. So a residual stream (x + f(x), read by the next norm and the next
// residual add) is stored instead of growing into a chain every later layer recomputes.
#pragma once
#include <functional>

#include "loop/expr.h"

namespace coil::lowering {

double compute_cost(const loop::ExprRef& body);  // shared subexpressions counted once
// Distinct buffers the body loads for which `large` holds.
int large_reads(const loop::ExprRef& body, const std::function<bool(int buffer)>& large);
bool should_realize(const loop::ExprRef& body, int uses, int reads = 0);

}  // namespace coil::lowering
