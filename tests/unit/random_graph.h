// A seeded generator of random valid graphs (chains and DAGs of pointwise, scalar, reduction,
// view, shape and matmul ops) for round-trip and differential fuzzing.
#pragma once
#include <random>

#include "coil/coil.h"

namespace coil::testing {

struct RandomGraphOptions {
  int steps = 8;
  bool symbolic_batch = false;  // a leading `B` dim on every input
};

inline Graph random_graph(uint64_t seed, RandomGraphOptions options = {}) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return n <= 0 ? 0 : static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  Graph g;
  g.name = "random_" + std::to_string(seed);
  SymShape lead;
  if (options.symbolic_batch) lead.push_back(g.add_symbol("B", 1 + pick(3)));
  auto random_shape = [&] {
    SymShape s = lead;
    int rank = 1 + pick(3);
    for (int i = 0; i < rank; ++i) s.push_back(1 + pick(5));
    return s;
  };
  std::vector<ValueRef> pool = {g.add_input("x", DType::f32, random_shape())};
  int inputs = 1;
  auto new_input = [&](SymShape shape, DType dt = DType::f32) {
    return g.add_input("in" + std::to_string(inputs++), dt, std::move(shape));
  };
  const OpKind unary[] = {OpKind::Exp, OpKind::Tanh, OpKind::Relu, OpKind::Sigmoid, OpKind::Neg, OpKind::Abs, OpKind::Gelu, OpKind::Silu};
  const OpKind binary[] = {OpKind::AddTensor, OpKind::MulTensor, OpKind::SubTensor, OpKind::Maximum, OpKind::DivTensor};
  for (int step = 0; step < options.steps; ++step) {
    ValueRef v = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
    const TensorMeta m = g.meta(v);
    int64_t rank = m.dim();
    if (rank == 0) {  // a full reduction: only pointwise ops apply
      pool.push_back(g.call1(unary[pick(8)], {v}));
      continue;
    }
    try {
      switch (pick(10)) {
        case 0: pool.push_back(g.call1(unary[pick(8)], {v})); break;
        case 1: {
          SymShape s = m.sizes;  // a broadcast partner: some dims become 1, maybe fewer dims
          for (auto& d : s)
            if (pick(3) == 0) d = 1;
          if (pick(3) == 0 && static_cast<size_t>(rank) > lead.size() + 1) s.erase(s.begin());
          ValueRef w = pick(2) ? new_input(s) : pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
          pool.push_back(g.call1(binary[pick(5)], {v, w}));
          break;
        }
        case 2: {
          Arg scalar = pick(2) ? Arg(static_cast<double>(pick(7)) / 4.0 - 0.5) : Arg(pick(5) - 2);
          pool.push_back(g.call1(pick(2) ? OpKind::AddScalar : OpKind::MulScalar, {v, scalar}));
          break;
        }
        case 3: {
          IntList dims = {static_cast<int64_t>(pick(static_cast<int>(rank))) - rank};
          pool.push_back(g.call1(pick(2) ? OpKind::SumDimIntList : OpKind::Amax, {v, dims, static_cast<bool>(pick(2))}));
          break;
        }
        case 4: {
          IntList perm;
          std::vector<int64_t> p(static_cast<size_t>(rank));
          for (int64_t i = 0; i < rank; ++i) p[static_cast<size_t>(i)] = i;
          std::shuffle(p.begin() + static_cast<std::ptrdiff_t>(lead.size()), p.end(), rng);
          for (int64_t i : p) perm.push_back(i);
          pool.push_back(g.call1(OpKind::Permute, {v, perm}));
          break;
        }
        case 5: {
          int64_t d = pick(static_cast<int>(rank));
          if (static_cast<size_t>(d) < lead.size()) break;
          pool.push_back(g.call1(OpKind::SliceTensor, {v, d, pick(2), 100, 1 + pick(2)}));
          break;
        }
        case 6: pool.push_back(g.call1(OpKind::Unsqueeze, {v, pick(static_cast<int>(rank) + 1)})); break;
        case 7: pool.push_back(g.call1(OpKind::Softmax, {v, -1, false})); break;
        case 8: {
          SymShape k = {m.sizes.back(), 1 + pick(4)};
          ValueRef flat = rank == 2 ? v : g.call1(OpKind::View, {g.call1(OpKind::Clone, {v}, {{"memory_format", "contiguous_format"}}), IntList{-1, m.sizes.back()}});
          pool.push_back(g.call1(OpKind::Mm, {flat, new_input(k)}));
          break;
        }
        default: pool.push_back(g.call1(OpKind::Cat, {std::vector<ValueRef>{v, v}, -1})); break;
      }
    } catch (const Error&) {
      // An invalid combination for this op (e.g. a non-viewable layout): try another step.
    }
  }
  g.outputs = {pool.back()};
  if (pool.size() > 2) g.outputs.push_back(pool[pool.size() / 2]);
  return g;
}

}  // namespace coil::testing
