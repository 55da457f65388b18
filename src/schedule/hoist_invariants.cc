#include "schedule/hoist_invariants.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;
using loop::LoopOp;

// Operations no dearer than a load of their result.
bool cheap(LoopOp op) {
  switch (op) {
    case LoopOp::Add: case LoopOp::Sub: case LoopOp::Mul: case LoopOp::Neg: case LoopOp::Abs: case LoopOp::Maximum:
    case LoopOp::Minimum: case LoopOp::Eq: case LoopOp::Ne: case LoopOp::Lt: case LoopOp::Le: case LoopOp::Gt: case LoopOp::Ge:
    case LoopOp::LogicalAnd: case LoopOp::LogicalOr: case LoopOp::LogicalXor: case LoopOp::LogicalNot: case LoopOp::BitwiseAnd:
    case LoopOp::BitwiseOr: case LoopOp::BitwiseXor: case LoopOp::Where: case LoopOp::CopySign: case LoopOp::SignBit:
      return true;
    default: return false;
  }
}

bool fixed(const SymInt& offset) {
  std::vector<std::string> symbols;
  offset.collect_symbols(symbols);
  return symbols.empty();
}

class Hoister {
 public:
  explicit Hoister(std::set<int> written) : written_(std::move(written)) {}

  // `e` with its hoisted subexpressions read from `buffer(expr)`.
  ExprRef rewrite(const ExprRef& e, const std::function<int(const ExprRef&)>& buffer) {
    if (invariant(e) && dear(e) && e->kind() != Expr::Kind::load && e->dtype() != DType::f16 && e->dtype() != DType::bf16)
      return Expr::load(buffer(e), SymInt(0), e->dtype());
    if (e->kind() == Expr::Kind::load) return e;  // (a data-dependent index stays as it is)
    return loop::map_operands(e, [&](const ExprRef& o) { return rewrite(o, buffer); });
  }

 private:
  bool invariant(const ExprRef& e) {
    if (auto it = invariant_.find(e.get()); it != invariant_.end()) return it->second;
    bool out = false;
    switch (e->kind()) {
      case Expr::Kind::constant: out = true; break;
      case Expr::Kind::index: out = fixed(e->offset()); break;
      case Expr::Kind::load: out = !e->dynamic() && fixed(e->offset()) && !written_.count(e->buffer()); break;
      case Expr::Kind::reduced: out = false; break;
      case Expr::Kind::op:
        if (e->op() == LoopOp::CheckIndex) break;
        [[fallthrough]];
      case Expr::Kind::cast:
        out = true;
        for (const auto& o : e->operands()) out = out && invariant(o);
        break;
    }
    return invariant_[e.get()] = out;
  }

  bool dear(const ExprRef& e) {
    if (auto it = dear_.find(e.get()); it != dear_.end()) return it->second;
    bool out = e->kind() == Expr::Kind::op && !cheap(e->op());
    if (e->kind() != Expr::Kind::load)
      for (const auto& o : e->operands()) out = out || dear(o);
    return dear_[e.get()] = out;
  }

  std::set<int> written_;
  std::map<const Expr*, bool> invariant_, dear_;
};

}  // namespace

loop::Program hoist_invariants(const loop::Program& program, int64_t min_points) {
  loop::Program out;
  out.buffers = program.buffers;
  for (const auto& kernel : program.kernels) {
    const auto* k = std::get_if<loop::LoopKernel>(&kernel);
    const auto points = k ? product(k->outer).constant() : std::nullopt;
    if (!k || !k->reductions.empty() || !k->inner.empty() || loop::has_dynamic_stores(*k) || (points && *points < min_points)) {
      out.kernels.push_back(kernel);
      continue;
    }
    std::set<int> written;
    for (const auto& s : k->stores) written.insert(s.buffer);
    Hoister hoister(std::move(written));
    loop::LoopKernel scalars;
    scalars.name = k->name + "_invariants";
    scalars.origins = k->origins;
    auto buffer = [&](const ExprRef& e) {
      for (const auto& s : scalars.stores)
        if (loop::same(s.value, e)) return s.buffer;
      const int b = static_cast<int>(out.buffers.size());
      out.buffers.push_back(loop::Buffer{.name = fmt::format("{}_invariant{}", k->name, scalars.stores.size()),
                                         .role = loop::Buffer::Role::temporary, .dtype = e->dtype(), .sizes = {}, .strides = {}});
      scalars.stores.push_back({b, SymInt(0), e, false});
      return b;
    };
    loop::LoopKernel rewritten = *k;
    for (auto& s : rewritten.stores) s.value = hoister.rewrite(s.value, buffer);
    if (!scalars.stores.empty()) out.kernels.push_back(std::move(scalars));
    out.kernels.push_back(std::move(rewritten));
  }
  return out;
}

}  // namespace coil::schedule
