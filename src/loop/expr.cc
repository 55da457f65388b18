#include "loop/expr.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "support/check.h"

namespace coil::loop {

namespace {
struct OpInfo {
  int arity;
  const char* name;
};
constexpr OpInfo kOps[] = {
#define COIL_LOOP_OP(id, arity, name) {arity, name},
#include "loop/ops.def"
#undef COIL_LOOP_OP
};

size_t mix(size_t seed, size_t v) { return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }

size_t hash_double(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return std::hash<uint64_t>()(bits);
}
}  // namespace

int arity(LoopOp op) { return kOps[static_cast<size_t>(op)].arity; }
const char* op_name(LoopOp op) { return kOps[static_cast<size_t>(op)].name; }

bool is_comparison(LoopOp op) {
  switch (op) {
    case LoopOp::Eq: case LoopOp::Ne: case LoopOp::Lt: case LoopOp::Le: case LoopOp::Gt: case LoopOp::Ge:
    case LoopOp::LogicalAnd: case LoopOp::LogicalOr: case LoopOp::LogicalXor: case LoopOp::LogicalNot:
    case LoopOp::IsNan: case LoopOp::IsInf: case LoopOp::SignBit:
      return true;
    default:
      return false;
  }
}

ExprRef Expr::make(Expr e) {
  size_t h = mix(static_cast<size_t>(e.kind_), static_cast<size_t>(e.dtype_));
  h = mix(h, hash_double(e.value_));
  h = mix(h, e.offset_.hash());
  h = mix(h, static_cast<size_t>(e.slot_));
  h = mix(h, static_cast<size_t>(e.op_));
  for (const auto& o : e.operands_) h = mix(h, o->hash());
  e.hash_ = h;
  for (const auto& o : e.operands_) e.depth_ = std::max(e.depth_, o->depth() + 1);
  return std::shared_ptr<const Expr>(new Expr(std::move(e)));
}

bool Expr::equals(const Expr& o) const {
  if (this == &o) return true;
  if (hash_ != o.hash_ || kind_ != o.kind_ || dtype_ != o.dtype_ || slot_ != o.slot_ || op_ != o.op_ ||
      operands_.size() != o.operands_.size() || !(offset_ == o.offset_))
    return false;
  if (std::memcmp(&value_, &o.value_, sizeof value_) != 0) return false;
  for (size_t i = 0; i < operands_.size(); ++i)
    if (!operands_[i]->equals(*o.operands_[i])) return false;
  return true;
}

bool same(const ExprRef& a, const ExprRef& b) { return a == b || a->equals(*b); }

ExprRef Expr::constant(double value, DType dtype) {
  Expr e;
  e.kind_ = Kind::constant;
  e.dtype_ = dtype;
  e.value_ = value;
  return make(std::move(e));
}

ExprRef Expr::index(SymInt offset) {
  Expr e;
  e.kind_ = Kind::index;
  e.dtype_ = DType::i64;
  e.offset_ = std::move(offset);
  return make(std::move(e));
}

ExprRef Expr::load(int buffer, SymInt offset, DType dtype, ExprRef dynamic) {
  COIL_CHECK(buffer >= 0) << "load from a negative buffer id";
  Expr e;
  e.kind_ = Kind::load;
  e.dtype_ = dtype;
  e.slot_ = buffer;
  e.offset_ = std::move(offset);
  if (dynamic) {
    COIL_CHECK(dynamic->dtype() == DType::i64) << "a data-dependent offset must be i64";
    e.operands_ = {std::move(dynamic)};
  }
  return make(std::move(e));
}

const ExprRef& Expr::dynamic() const {
  static const ExprRef none;
  return kind_ == Kind::load && !operands_.empty() ? operands_[0] : none;
}

ExprRef Expr::apply(LoopOp op, std::vector<ExprRef> operands) {
  COIL_CHECK(static_cast<int>(operands.size()) == arity(op))
      << op_name(op) << " takes " << arity(op) << " operands, got " << operands.size();
  // Where: the condition is bool and the two branches share a dtype; otherwise all operands do.
  size_t first = op == LoopOp::Where ? 1 : 0;
  if (op == LoopOp::Where) {
    COIL_CHECK(operands[0]->dtype() == DType::b8) << "where needs a bool condition";
  }
  if (op == LoopOp::PhiloxUniform) {
    COIL_CHECK(operands[0]->dtype() == DType::i64) << "philox_uniform takes i64 operands";
  }
  for (size_t i = first + 1; i < operands.size(); ++i)
    COIL_CHECK(operands[i]->dtype() == operands[first]->dtype())
        << op_name(op) << " operands differ in dtype: " << dtype_name(operands[first]->dtype()) << " and "
        << dtype_name(operands[i]->dtype());
  Expr e;
  e.kind_ = Kind::op;
  e.op_ = op;
  e.dtype_ = is_comparison(op) ? DType::b8 : op == LoopOp::PhiloxUniform ? DType::f64 : operands[first]->dtype();
  e.operands_ = std::move(operands);
  return make(std::move(e));
}

ExprRef Expr::cast(ExprRef value, DType dtype) {
  if (value->dtype() == dtype) return value;
  Expr e;
  e.kind_ = Kind::cast;
  e.dtype_ = dtype;
  e.operands_ = {std::move(value)};
  return make(std::move(e));
}

ExprRef Expr::reduced(int slot, DType dtype) {
  Expr e;
  e.kind_ = Kind::reduced;
  e.dtype_ = dtype;
  e.slot_ = slot;
  return make(std::move(e));
}

ExprRef map_indices(const ExprRef& e, const std::function<SymInt(const SymInt&)>& fn) {
  switch (e->kind()) {
    case Expr::Kind::constant:
    case Expr::Kind::reduced: return e;
    case Expr::Kind::index: return Expr::index(fn(e->offset()));
    case Expr::Kind::load:
      return Expr::load(e->buffer(), fn(e->offset()), e->dtype(), e->dynamic() ? map_indices(e->dynamic(), fn) : nullptr);
    case Expr::Kind::cast: return Expr::cast(map_indices(e->operands()[0], fn), e->dtype());
    case Expr::Kind::op: {
      std::vector<ExprRef> ops;
      for (const auto& o : e->operands()) ops.push_back(map_indices(o, fn));
      return Expr::apply(e->op(), std::move(ops));
    }
  }
  return e;
}

ExprRef map_operands(const ExprRef& e, const std::function<ExprRef(const ExprRef&)>& fn) {
  switch (e->kind()) {
    case Expr::Kind::constant:
    case Expr::Kind::index:
    case Expr::Kind::reduced: return e;
    case Expr::Kind::load: return e->dynamic() ? Expr::load(e->buffer(), e->offset(), e->dtype(), fn(e->dynamic())) : e;
    case Expr::Kind::cast: return Expr::cast(fn(e->operands()[0]), e->dtype());
    case Expr::Kind::op: {
      std::vector<ExprRef> ops;
      for (const auto& o : e->operands()) ops.push_back(fn(o));
      return Expr::apply(e->op(), std::move(ops));
    }
  }
  return e;
}

ExprRef substitute(const ExprRef& e, const std::map<std::string, SymInt>& r) {
  return map_indices(e, [&](const SymInt& s) { return coil::substitute(s, r); });
}

std::string to_string(const ExprRef& e) {
  switch (e->kind()) {
    case Expr::Kind::constant: {
      double v = e->value();
      std::string s = std::isnan(v) ? "nan" : std::isinf(v) ? (v < 0 ? "-inf" : "inf") : fmt::format("{}", v);
      return s + ":" + std::string(dtype_name(e->dtype()));
    }
    case Expr::Kind::index: return "index(" + e->offset().str() + ")";
    case Expr::Kind::load:
      if (e->dynamic()) return fmt::format("load(buf{}, {} + {})", e->buffer(), e->offset().str(), to_string(e->dynamic()));
      return fmt::format("load(buf{}, {})", e->buffer(), e->offset().str());
    case Expr::Kind::reduced: return fmt::format("reduced{}", e->slot());
    case Expr::Kind::cast: return fmt::format("cast<{}>({})", dtype_name(e->dtype()), to_string(e->operands()[0]));
    case Expr::Kind::op: {
      std::string s = std::string(op_name(e->op())) + "(";
      for (size_t i = 0; i < e->operands().size(); ++i) s += (i ? ", " : "") + to_string(e->operands()[i]);
      return s + ")";
    }
  }
  return "?";
}

}  // namespace coil::loop
