#include "codegen/cuda/row_values.h"

#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "codegen/kernel_shape.h"

namespace coil::codegen {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopOp;

// Operations that cost more than a few instructions: transcendental functions, divisions,
// powers.
bool dear(LoopOp op) {
  switch (op) {
    case LoopOp::Abs:
    case LoopOp::Neg:
    case LoopOp::Floor:
    case LoopOp::Ceil:
    case LoopOp::Round:
    case LoopOp::Trunc:
    case LoopOp::Sign:
    case LoopOp::IsNan:
    case LoopOp::IsInf:
    case LoopOp::LogicalNot:
    case LoopOp::BitwiseNot:
    case LoopOp::Add:
    case LoopOp::Sub:
    case LoopOp::Mul:
    case LoopOp::Maximum:
    case LoopOp::Minimum:
    case LoopOp::Eq:
    case LoopOp::Ne:
    case LoopOp::Lt:
    case LoopOp::Le:
    case LoopOp::Gt:
    case LoopOp::Ge:
    case LoopOp::LogicalAnd:
    case LoopOp::LogicalOr:
    case LoopOp::LogicalXor:
    case LoopOp::BitwiseAnd:
    case LoopOp::BitwiseOr:
    case LoopOp::BitwiseXor:
    case LoopOp::CopySign:
    case LoopOp::SignBit:
    case LoopOp::ShiftLeft:
    case LoopOp::ShiftRight:
    case LoopOp::Where:
    case LoopOp::CheckIndex: return false;
    default: return true;
  }
}

// A property of a node that holds when it holds of the node itself or of any operand, memoized
// per node (bodies are DAGs).
class AnyBelow {
 public:
  explicit AnyBelow(std::function<bool(const ExprRef&)> self) : self_(std::move(self)) {}
  bool operator()(const ExprRef& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    bool v = self_(e) || std::any_of(e->operands().begin(), e->operands().end(), [&](const ExprRef& o) { return (*this)(o); });
    memo_[e.get()] = v;
    return v;
  }

 private:
  std::function<bool(const ExprRef&)> self_;
  std::unordered_map<const Expr*, bool> memo_;
};

// Every node of `e`, each once.
void collect_nodes(const ExprRef& e, std::unordered_set<const Expr*>& seen, std::vector<ExprRef>& out) {
  if (!seen.insert(e.get()).second) return;
  out.push_back(e);
  for (const auto& o : e->operands()) collect_nodes(o, seen, out);
}

const ExprRef* find_same(const std::vector<ExprRef>& nodes, const ExprRef& e) {
  for (const auto& n : nodes)
    if (n->hash() == e->hash() && loop::same(n, e)) return &n;
  return nullptr;
}

}  // namespace

std::vector<CarriedValue> carried_values(const loop::LoopKernel& k, size_t max_values) {
  std::vector<CarriedValue> out;
  if (max_values == 0) return out;
  AnyBelow per_element([](const ExprRef& e) { return (e->kind() == Expr::Kind::load || e->kind() == Expr::Kind::index) && reads_row(e); });
  AnyBelow costly([](const ExprRef& e) { return e->kind() == Expr::Kind::op && dear(e->op()); });
  auto carried = [&](const ExprRef& e) {
    return std::any_of(out.begin(), out.end(), [&](const CarriedValue& c) { return c.value->hash() == e->hash() && loop::same(c.value, e); });
  };
  for (size_t first = 0; first < k.reductions.size(); first = loop::pass_end(k, first)) {
    const size_t end = loop::pass_end(k, first);
    if (k.reductions[first].kind == loop::ReduceKind::welford_mean) continue;
    std::unordered_set<const Expr*> seen;
    std::vector<ExprRef> produced;
    for (size_t i = first; i < end; ++i) collect_nodes(k.reductions[i].value, seen, produced);
    // The later expressions, walked from their roots: a node found in `produced` is kept whole.
    std::unordered_set<const Expr*> visited;
    std::function<void(const ExprRef&)> walk = [&](const ExprRef& e) {
      if (out.size() >= max_values || !visited.insert(e.get()).second || carried(e)) return;
      if (e->kind() != Expr::Kind::load && per_element(e) && costly(e) && find_same(produced, e)) {
        out.push_back({e, first});
        return;
      }
      for (const auto& o : e->operands()) walk(o);
    };
    for (size_t i = end; i < k.reductions.size(); ++i) walk(k.reductions[i].value);
    for (const auto& s : k.stores)
      if (s.inner) walk(s.value);
  }
  return out;
}

std::set<int> reciprocal_slots(const loop::LoopKernel& k) {
  std::set<int> slots;
  std::unordered_set<const Expr*> seen;
  std::vector<ExprRef> nodes;
  for (const auto& r : k.reductions) collect_nodes(r.value, seen, nodes);
  for (const auto& s : k.stores) collect_nodes(s.value, seen, nodes);
  for (const auto& e : nodes) {
    if (e->kind() != Expr::Kind::op || e->op() != LoopOp::Div || e->dtype() != DType::f32) continue;
    const ExprRef& d = e->operands()[1];
    if (d->kind() == Expr::Kind::reduced && d->dtype() == DType::f32) slots.insert(d->slot());
  }
  return slots;
}

}  // namespace coil::codegen
