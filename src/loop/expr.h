// Loop-IR expressions: the body of a kernel as data — a DAG of scalar operations over loads
// through index expressions (SymInt over the loop variables x0.., r0.. and the size symbols).
// Immutable and structurally hashed, so equal bodies compare equal (CSE, cache keys).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coil/dtype.h"
#include "coil/sym.h"

namespace coil::loop {

enum class LoopOp : uint8_t {
#define COIL_LOOP_OP(id, arity, name) id,
#include "loop/ops.def"
#undef COIL_LOOP_OP
};
int arity(LoopOp op);
const char* op_name(LoopOp op);
bool is_comparison(LoopOp op);  // and the logical ops and signbit: results are bool

class Expr;
using ExprRef = std::shared_ptr<const Expr>;

// The deepest expression lowering and fusion build: a deeper value is stored and read back
// instead of inlined. Every pass over an expression recurses through it, and inlining a long
// chain cost quadratic time and memory (5,000 relus: 81 s and 3.3 GB, then minutes of g++;
// 100,000 overflowed the stack). Real fused bodies are a few dozen deep.
constexpr int kMaxExprDepth = 256;

class Expr {
 public:
  enum class Kind : uint8_t {
    constant,  // a literal, `value` in `dtype`
    index,     // the integer value of `offset` (an index expression), i64
    load,      // buffer[`offset` + operands[0]], of the buffer's dtype; the i64 operand (a
               // data-dependent index: gather, embedding) is optional
    op,        // `op` applied to `operands`
    cast,      // operands[0] converted to `dtype`
    reduced,   // the result of reduction step `slot` of the enclosing kernel
  };

  Kind kind() const { return kind_; }
  DType dtype() const { return dtype_; }
  double value() const { return value_; }
  const SymInt& offset() const { return offset_; }
  int buffer() const { return slot_; }
  int slot() const { return slot_; }
  LoopOp op() const { return op_; }
  const std::vector<ExprRef>& operands() const { return operands_; }
  // A load's data-dependent part of the offset, or nullptr.
  const ExprRef& dynamic() const;
  size_t hash() const { return hash_; }
  // The longest path from this node to a leaf, counting nodes (a leaf is 1).
  int depth() const { return depth_; }
  bool equals(const Expr& other) const;

  static ExprRef constant(double value, DType dtype);
  static ExprRef index(SymInt offset);
  static ExprRef load(int buffer, SymInt offset, DType dtype, ExprRef dynamic = nullptr);
  // Operands of arithmetic share one dtype (casts are explicit); comparisons give bool.
  static ExprRef apply(LoopOp op, std::vector<ExprRef> operands);
  static ExprRef cast(ExprRef value, DType dtype);
  static ExprRef reduced(int slot, DType dtype);

 private:
  Expr() = default;
  static ExprRef make(Expr e);
  Kind kind_ = Kind::constant;
  DType dtype_ = DType::f32;
  double value_ = 0;
  SymInt offset_ = 0;
  int slot_ = 0;
  LoopOp op_ = LoopOp::Add;
  std::vector<ExprRef> operands_;
  size_t hash_ = 0;
  int depth_ = 1;
};

bool same(const ExprRef& a, const ExprRef& b);
// Rewrites every index expression (index values and load offsets) with `fn`.
ExprRef map_indices(const ExprRef& e, const std::function<SymInt(const SymInt&)>& fn);
// `e` rebuilt with `fn` applied to each operand (a load's data-dependent part included);
// constants, index values, `reduced` and plain loads come back as they are. The default case
// of a rewrite that changes some nodes and recurses through the rest.
ExprRef map_operands(const ExprRef& e, const std::function<ExprRef(const ExprRef&)>& fn);
// Replaces index symbols (loop variables) in every index and load offset.
ExprRef substitute(const ExprRef& e, const std::map<std::string, SymInt>& replacement);
// "add(load(buf3, 4*x0 + x1), 1.0:f32)"; shared subexpressions are printed in full.
std::string to_string(const ExprRef& e);

}  // namespace coil::loop
