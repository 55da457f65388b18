// The C-like printer shared by the CPU (C++) and CUDA emitters: index expressions and
// loop-IR expression DAGs as C expressions, with common subexpressions bound to temporaries.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "arith/bounds.h"
#include "loop/expr.h"
#include "loop/kernel.h"

namespace coil::codegen {

// The C type that holds values of `dtype` in registers (f16/bf16 compute as float).
const char* value_type(DType dtype);
// The C type of a buffer element (f16/bf16 are stored as uint16_t).
const char* storage_type(DType dtype);
// A stored element `raw` of dtype `t` as the float it computes in (f16/bf16 widened), and a
// float value as an element of dtype `t` to store (rounded to f16/bf16 once).
std::string widened(const std::string& raw, DType t);
std::string narrowed(const std::string& value, DType t);
// A size symbol's C name; loop variables keep their own names.
std::string symbol_name(const std::string& sym);
// How index arithmetic is printed. CPU code computes indices in int64 with the prelude's
// Python-style helpers; CUDA code may compute them in 32 bits (`narrow`: constants without the LL
// suffix) and, where `ranges` proves a floor division's operands non-negative, with C's / and %,
// which the compiler strength-reduces for constant divisors.
struct IndexStyle {
  bool narrow = false;
  const RangeEnv* ranges = nullptr;
};
std::string index_expr(const SymInt& e, const IndexStyle& style = {});
// The size symbols (and loop variables) a kernel's indices, values and extents mention.
std::vector<std::string> kernel_symbols(const loop::LoopKernel& k);
// A backend's prelude with the shared scalar helpers (codegen/scalar_prelude.h) put in at its
// `// @scalar-helpers` line.
std::string with_scalar_helpers(const char* prelude);
// Whether a kernel of `p` calls a special function (erfinv, the Bessel functions, gcd, shifts,
// ...: codegen/special_prelude.h and the backends' special headers). Only then does a unit's
// prelude carry them, so units without them compile as fast as before.
bool uses_special_functions(const loop::Program& p);
// A backend's special header with the shared special functions (codegen/special_prelude.h) put
// in at its `// @special-helpers` line.
std::string with_special_helpers(const char* special);
// The statement folding `v` into the accumulator `acc` of a sum, prod, max or min (max/min
// propagate NaN; over bool they are any/all).
std::string fold_statement(loop::ReduceKind k, DType acc_type, const std::string& acc, const std::string& v);
// The literal a reduction's accumulator starts from.
std::string reduce_init(loop::ReduceKind k, DType t);
// The largest or lowest value of an integer dtype, as a literal.
std::string integer_limit(DType t, bool largest);

class ExprPrinter;
// The storage-format value of `value` for a buffer of dtype `t`: an f32 value rounded to f16 or
// bf16 is stored with one rounding, not rounded, widened and rounded again.
std::string stored_value(ExprPrinter& printer, const loop::ExprRef& value, DType t, std::vector<std::string>& lines, const std::string& indent);

// Emits statements for expression DAGs, each distinct subexpression once.
class ExprPrinter {
 public:
  // Buffer names by id, e.g. "b3".
  explicit ExprPrinter(std::vector<std::string> buffer_names) : buffers_(std::move(buffer_names)) {}
  // Returns a C expression for `e`; statements it needs are appended to `lines` at `indent`.
  std::string emit(const loop::ExprRef& e, std::vector<std::string>& lines, const std::string& indent);
  // Values of reductions, by slot (set by the kernel emitter).
  std::map<int, std::string> reduced;
  // Forget temporaries (at the start of a new loop body).
  void reset() { cache_.clear(); }
  IndexStyle style;
  // Loads with a value of their own (registers, shared memory): the hook returns it, or "".
  std::function<std::string(const loop::ExprRef& load)> load_hook;
  // Values an earlier loop computed and kept (registers): the expression and its name.
  std::vector<std::pair<loop::ExprRef, std::string>> carried;
  // Divisions by these reduced values multiply by the named reciprocal instead (the emitter
  // names f32 ones only).
  std::map<int, std::string> reciprocals;

 private:
  std::string expr(const loop::ExprRef& e, std::vector<std::string>& lines, const std::string& indent);
  std::string reciprocal_of(const loop::ExprRef& e) const;
  std::vector<std::string> buffers_;
  std::multimap<size_t, std::pair<loop::ExprRef, std::string>> cache_;  // by structural hash
  int next_ = 0;
};

}  // namespace coil::codegen
