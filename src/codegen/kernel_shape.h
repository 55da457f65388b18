// What both backends ask of a kernel's shape before choosing its loop structure: the stride of
// a loop variable in an index, alignment, the loads of a body, and the two layouts that get
// their own structure (column reductions, transposes).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "loop/kernel.h"

namespace coil::codegen {

// The constant stride of `var` in `offset` when `offset` is affine in it, else nullopt. Indices
// of a zero-size tensor can hold `% 0` (never evaluated), which substituting would fold: none.
std::optional<int64_t> affine_stride(const SymInt& offset, const std::string& var);
// The same where the stride may be an expression of size symbols (a dim after a symbolic one):
// the coefficient c, free of `var`, with offset == offset[var := 0] + c * var.
std::optional<SymInt> affine_coefficient(const SymInt& offset, const std::string& var);
// Whether `offset` is a multiple of `n` for every value of its variables.
bool multiple_of(const SymInt& offset, int64_t n);
// The loads of `e` (each distinct one once, in first-use order; data-dependent indices too).
void collect_loads(const loop::ExprRef& e, std::vector<loop::ExprRef>& out);
// Whether a load's index (or an index value) depends on the reduction variables (r*).
bool reads_row(const loop::ExprRef& load);
// A reduction whose rows run across memory (a sum over a leading dim): every load has unit
// stride along the last outer variable or none, never along the last inner one (a load not
// affine along the last inner one, such as a clamped window, has unit stride along the outer one).
bool is_column_reduction(const loop::LoopKernel& kernel);
// Whether a reduction's loads include one not affine along its last inner variable (a window
// clamped at the borders): such a column reduction is offered the row forms too.
bool reads_window(const loop::LoopKernel& kernel);
// A pointwise kernel with an access of unit stride along the second-to-last outer dim but not
// the last (a transpose).
bool is_transposing(const loop::LoopKernel& kernel);
// A transposing kernel's accesses of unit stride along the second-to-last outer dim and not the
// last (each distinct one once): the ones a tiled kernel stages through shared memory.
struct Access {
  int buffer = 0;
  SymInt offset;
};
struct TransposedAccesses {
  std::vector<Access> loads, stores;
};
TransposedAccesses transposed_accesses(const loop::LoopKernel& kernel);

}  // namespace coil::codegen
