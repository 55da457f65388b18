// Hand-computed cases for shape ops that make new tensors (cat, pad, flip, repeat) and the
// indexing ops (gather/scatter family, index.Tensor, embedding).
#include "test_util.h"

namespace coil::testing {
namespace {

const Values kX = {1, 2, 3, 4, 5, 6};  // [[1, 2, 3], [4, 5, 6]]

REF_TEST(Cat, DimsPromotionAndEmpties) {
  Graph g;
  auto a = g.add_input("a", DType::i32, {1, 2});
  auto b = g.add_input("b", DType::f32, {2, 2});
  auto r0 = g.call1(OpKind::Cat, {std::vector<ValueRef>{a, b}});      // [3, 2], promoted to f32
  auto bt = g.call1(OpKind::Permute, {b, IntList{1, 0}});
  auto r1 = g.call1(OpKind::Cat, {std::vector<ValueRef>{b, bt}, -1});  // [2, 4]
  auto e = g.add_input("e", DType::f32, {0, 2});
  auto r2 = g.call1(OpKind::Cat, {std::vector<ValueRef>{e, b, e}});   // zero-size parts add nothing
  auto legacy = g.add_input("l", DType::f32, {0});
  auto r3 = g.call1(OpKind::Cat, {std::vector<ValueRef>{b, legacy}, 1});  // a 1-d [0] tensor is skipped
  auto r4 = g.call1(OpKind::Cat, {std::vector<ValueRef>{e, e}});
  g.outputs = {r0, r1, r2, r3, r4};
  auto out = run(g, {{"a", make(DType::i32, {1, 2}, {1, 2})},
                     {"b", f32({2, 2}, {3.5, 4, 5, 6})},
                     {"e", f32({0, 2}, {})},
                     {"l", f32({0}, {})}});
  expect_tensor(out[0], DType::f32, {3, 2}, {1, 2, 3.5, 4, 5, 6});
  // b = [[3.5, 4], [5, 6]], b^T = [[3.5, 5], [4, 6]].
  expect_tensor(out[1], DType::f32, {2, 4}, {3.5, 4, 3.5, 5, 5, 6, 4, 6});
  expect_tensor(out[2], DType::f32, {2, 2}, {3.5, 4, 5, 6});
  expect_tensor(out[3], DType::f32, {2, 2}, {3.5, 4, 5, 6});
  expect_tensor(out[4], DType::f32, {0, 2}, {});
}

REF_TEST(ConstantPadNd, PadsFromTheLastDim) {
  Graph g;
  auto x = g.add_input("x", DType::i64, {2, 2});
  auto a = g.call1(OpKind::ConstantPadNd, {x, IntList{1, 0}, 9});        // one column on the left
  auto b = g.call1(OpKind::ConstantPadNd, {x, IntList{0, 1, 1, 0}, 2.5});  // right 1, top 1; 2.5 -> 2 in i64
  auto c = g.call1(OpKind::ConstantPadNd, {x, IntList{-1, 0}});          // a negative pad crops
  auto xt = g.call1(OpKind::Permute, {g.add_input("y", DType::f32, {2, 2}), IntList{1, 0}});
  auto d = g.call1(OpKind::ConstantPadNd, {xt, IntList{0, 0, 0, 1}, -1.5});  // a row at the bottom
  auto z = g.call1(OpKind::ConstantPadNd, {g.add_input("z", DType::f32, {0, 2}), IntList{1, 1}});
  g.outputs = {a, b, c, d, z};
  auto out = run(g, {{"x", i64({2, 2}, {1, 2, 3, 4})}, {"y", f32({2, 2}, {1, 3, 2, 4})}, {"z", f32({0, 2}, {})}});
  expect_tensor(out[0], DType::i64, {2, 3}, {9, 1, 2, 9, 3, 4});
  expect_tensor(out[1], DType::i64, {3, 3}, {2, 2, 2, 1, 2, 2, 3, 4, 2});
  expect_tensor(out[2], DType::i64, {2, 1}, {2, 4});
  expect_tensor(out[3], DType::f32, {3, 2}, {1, 2, 3, 4, -1.5, -1.5});
  expect_tensor(out[4], DType::f32, {0, 4}, {});
}

REF_TEST(Flip, ReversesListedDims) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto a = g.call1(OpKind::Flip, {x, IntList{1}});
  auto b = g.call1(OpKind::Flip, {x, IntList{0, -1}});
  auto c = g.call1(OpKind::Flip, {g.call1(OpKind::Permute, {x, IntList{1, 0}}), IntList{0}});
  auto z = g.call1(OpKind::Flip, {g.add_input("z", DType::b8, {0, 2}), IntList{0}});
  g.outputs = {a, b, c, z, g.call1(OpKind::Flip, {x, IntList{}})};
  auto out = run(g, {{"x", f32({2, 3}, kX)}, {"z", b8({0, 2}, {})}});
  expect_tensor(out[0], DType::f32, {2, 3}, {3, 2, 1, 6, 5, 4});
  expect_tensor(out[1], DType::f32, {2, 3}, {6, 5, 4, 3, 2, 1});
  expect_tensor(out[2], DType::f32, {3, 2}, {3, 6, 2, 5, 1, 4});  // rows of X^T in reverse
  expect_tensor(out[3], DType::b8, {0, 2}, {});
  expect_tensor(out[4], DType::f32, {2, 3}, kX);
}

REF_TEST(Repeat, TilesAndAddsLeadingDims) {
  Graph g;
  auto v = g.add_input("v", DType::i32, {2});
  auto a = g.call1(OpKind::Repeat, {v, IntList{2}});
  auto b = g.call1(OpKind::Repeat, {v, IntList{2, 2}});
  auto c = g.call1(OpKind::Repeat, {v, IntList{0, 1}});
  auto col = g.call1(OpKind::SliceTensor, {g.add_input("x", DType::f32, {2, 3}), 1, 1, 2});  // X[:, 1:2]
  auto d = g.call1(OpKind::Repeat, {col, IntList{1, 3}});
  auto e = g.call1(OpKind::Repeat, {g.add_input("s", DType::f32, {}), IntList{2}});  // 0-d -> [2]
  g.outputs = {a, b, c, d, e};
  auto out = run(g, {{"v", make(DType::i32, {2}, {1, 2})}, {"x", f32({2, 3}, kX)}, {"s", f32({}, {5})}});
  expect_tensor(out[0], DType::i32, {4}, {1, 2, 1, 2});
  expect_tensor(out[1], DType::i32, {2, 4}, {1, 2, 1, 2, 1, 2, 1, 2});
  expect_tensor(out[2], DType::i32, {0, 2}, {});
  expect_tensor(out[3], DType::f32, {2, 3}, {2, 2, 2, 5, 5, 5});
  expect_tensor(out[4], DType::f32, {2}, {5, 5});
}

// ---- indexing

REF_TEST(IndexSelect, RowsColumnsAndEmptyIndex) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {3, 2});  // [[1, 2], [3, 4], [5, 6]]
  auto i = g.add_input("i", DType::i64, {3});
  auto a = g.call1(OpKind::IndexSelect, {x, 0, i});
  auto j = g.add_input("j", DType::i32, {1});
  auto b = g.call1(OpKind::IndexSelect, {x, -1, j});
  auto e = g.add_input("e", DType::i64, {0});
  auto c = g.call1(OpKind::IndexSelect, {x, 0, e});
  auto s = g.add_input("s", DType::i64, {});
  auto d = g.call1(OpKind::IndexSelect, {g.call1(OpKind::Permute, {x, IntList{1, 0}}), 1, s});  // a 0-d index
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"x", f32({3, 2}, kX)},
                     {"i", i64({3}, {2, 0, 2})},
                     {"j", make(DType::i32, {1}, {1})},
                     {"e", i64({0}, {})},
                     {"s", i64({}, {1})}});
  expect_tensor(out[0], DType::f32, {3, 2}, {5, 6, 1, 2, 5, 6});
  expect_tensor(out[1], DType::f32, {3, 1}, {2, 4, 6});
  expect_tensor(out[2], DType::f32, {0, 2}, {});
  expect_tensor(out[3], DType::f32, {2, 1}, {3, 4});  // column 1 of X^T = row 1 of X
}

REF_TEST(Gather, AlongADim) {
  Graph g;
  auto x = g.add_input("x", DType::i64, {2, 2});  // [[1, 2], [3, 4]]
  auto i = g.add_input("i", DType::i64, {2, 2});
  auto a = g.call1(OpKind::Gather, {x, 1, i});  // out[r][c] = x[r][i[r][c]]
  auto k = g.add_input("k", DType::i64, {1, 1});
  auto b = g.call1(OpKind::Gather, {x, 0, k});  // a smaller index: out[0][0] = x[k][0]
  auto e = g.add_input("e", DType::i64, {2, 0});
  auto c = g.call1(OpKind::Gather, {x, 1, e});
  auto d = g.call1(OpKind::Gather, {g.call1(OpKind::Permute, {x, IntList{1, 0}}), 1, i});
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"x", i64({2, 2}, {1, 2, 3, 4})},
                     {"i", i64({2, 2}, {0, 0, 1, 0})},
                     {"k", i64({1, 1}, {1})},
                     {"e", i64({2, 0}, {})}});
  expect_tensor(out[0], DType::i64, {2, 2}, {1, 1, 4, 3});
  expect_tensor(out[1], DType::i64, {1, 1}, {3});
  expect_tensor(out[2], DType::i64, {2, 0}, {});
  expect_tensor(out[3], DType::i64, {2, 2}, {1, 1, 4, 2});  // x^T = [[1, 3], [2, 4]]
}

REF_TEST(Embedding, RowsOfTheTable) {
  Graph g;
  auto w = g.add_input("w", DType::f32, {3, 2});  // row r = [r, r + 0.5]
  auto idx = g.add_input("idx", DType::i64, {2, 2});
  auto a = g.call1(OpKind::Embedding, {w, idx});
  auto s = g.add_input("s", DType::i64, {});
  auto b = g.call1(OpKind::Embedding, {w, s});
  auto e = g.add_input("e", DType::i32, {0});
  auto c = g.call1(OpKind::Embedding, {w, e});
  g.outputs = {a, b, c};
  auto out = run(g, {{"w", f32({3, 2}, {0, 0.5, 1, 1.5, 2, 2.5})},
                     {"idx", i64({2, 2}, {2, 0, 1, 1})},
                     {"s", i64({}, {1})},
                     {"e", make(DType::i32, {0}, {})}});
  expect_tensor(out[0], DType::f32, {2, 2, 2}, {2, 2.5, 0, 0.5, 1, 1.5, 1, 1.5});
  expect_tensor(out[1], DType::f32, {2}, {1, 1.5});
  expect_tensor(out[2], DType::f32, {0, 2}, {});
}

REF_TEST(Embedding, StridedTableAndIndices) {
  Graph g;
  auto wt = g.call1(OpKind::Permute, {g.add_input("w", DType::f32, {2, 3}), IntList{1, 0}});  // [3, 2]
  auto idx = g.call1(OpKind::SliceTensor, {g.add_input("idx", DType::i64, {4}), 0, 0, 4, 2});  // positions 0, 2
  g.outputs = {g.call1(OpKind::Embedding, {wt, idx})};
  // w^T of [[0, 1, 2], [10, 11, 12]] has rows [0, 10], [1, 11], [2, 12]; idx = [2, 1].
  auto out = run(g, {{"w", f32({2, 3}, {0, 1, 2, 10, 11, 12})}, {"idx", i64({4}, {2, 9, 1, 9})}});
  expect_tensor(out[0], DType::f32, {2, 2}, {2, 12, 1, 11});
}

REF_TEST(IndexTensor, AdvancedIndexing) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {3, 4});  // x[r][c] = 4r + c + 1
  auto i = g.add_input("i", DType::i64, {2});
  auto j = g.add_input("j", DType::i64, {2});
  auto a = g.call1(OpKind::IndexTensor, {x, TensorList{i}});                // x[i]
  auto b = g.call1(OpKind::IndexTensor, {x, TensorList{std::nullopt, j}});  // x[:, j]
  auto c = g.call1(OpKind::IndexTensor, {x, TensorList{i, j}});             // x[i, j], paired
  auto n = g.add_input("n", DType::i64, {1});
  auto d = g.call1(OpKind::IndexTensor, {x, TensorList{n}});                // negative: x[-1]
  auto s = g.add_input("s", DType::i64, {});
  auto e = g.call1(OpKind::IndexTensor, {x, TensorList{s}});                // a 0-d index: x[1], shape [4]
  auto i32 = g.add_input("i32", DType::i32, {2});
  auto f = g.call1(OpKind::IndexTensor, {x, TensorList{std::nullopt, i32}});  // int32 indices work too
  g.outputs = {a, b, c, d, e, f};
  Values xv;
  for (int v = 1; v <= 12; ++v) xv.push_back(v);
  auto out = run(g, {{"x", f32({3, 4}, xv)}, {"i", i64({2}, {2, 0})}, {"j", i64({2}, {1, 3})}, {"n", i64({1}, {-1})},
                     {"s", i64({}, {1})}, {"i32", make(DType::i32, {2}, {0, 2})}});
  expect_tensor(out[0], DType::f32, {2, 4}, {9, 10, 11, 12, 1, 2, 3, 4});
  expect_tensor(out[1], DType::f32, {3, 2}, {2, 4, 6, 8, 10, 12});
  expect_tensor(out[2], DType::f32, {2}, {10, 4});  // x[2][1], x[0][3]
  expect_tensor(out[3], DType::f32, {1, 4}, {9, 10, 11, 12});
  expect_tensor(out[4], DType::f32, {4}, {5, 6, 7, 8});
  expect_tensor(out[5], DType::f32, {3, 2}, {1, 3, 5, 7, 9, 11});
}

REF_TEST(IndexTensor, BroadcastAndSeparatedIndices) {
  Graph g;
  auto y = g.add_input("y", DType::f32, {2, 3, 4});  // y[a][b][c] = 12a + 4b + c
  auto p = g.add_input("p", DType::i64, {2});
  auto q = g.add_input("q", DType::i64, {2});
  // Indexed dims 0 and 2 are separated by a slice: the broadcast dim goes first,
  // out[k][b] = y[p[k]][b][q[k]].
  auto a = g.call1(OpKind::IndexTensor, {y, TensorList{p, std::nullopt, q}});
  // Adjacent dims 1 and 2 with indices [[0], [2]] and [1, 3] broadcast to [2, 2], in place:
  // out[a][k][l] = y[a][r[k][0]][q2[l]].
  auto r = g.add_input("r", DType::i64, {2, 1});
  auto q2 = g.add_input("q2", DType::i64, {2});
  auto b = g.call1(OpKind::IndexTensor, {y, TensorList{std::nullopt, r, q2}});
  auto z = g.add_input("z", DType::i64, {0});
  auto c = g.call1(OpKind::IndexTensor, {y, TensorList{z}});
  g.outputs = {a, b, c};
  Values yv;
  for (int v = 0; v < 24; ++v) yv.push_back(v);
  auto out = run(g, {{"y", f32({2, 3, 4}, yv)},
                     {"p", i64({2}, {0, 1})},
                     {"q", i64({2}, {3, 0})},
                     {"r", i64({2, 1}, {0, 2})},
                     {"q2", i64({2}, {1, 3})},
                     {"z", i64({0}, {})}});
  expect_tensor(out[0], DType::f32, {2, 3}, {3, 7, 11, 12, 16, 20});
  expect_tensor(out[1], DType::f32, {2, 2, 2}, {1, 3, 9, 11, 13, 15, 21, 23});
  expect_tensor(out[2], DType::f32, {0, 3, 4}, {});
}

REF_TEST(SliceScatter, WritesASlice) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {4});
  auto src = g.add_input("src", DType::f32, {2});
  auto a = g.call1(OpKind::SliceScatter, {self, src, 0, 1, 3});                   // [_, s0, s1, _]
  auto b = g.call1(OpKind::SliceScatter, {self, src, 0, std::nullopt, std::nullopt, 2});  // even positions
  auto m = g.add_input("m", DType::i64, {2, 3});
  auto col = g.add_input("col", DType::f32, {2, 1});
  auto c = g.call1(OpKind::SliceScatter, {m, col, 1, 1, 2});  // column 1; f32 src cast to i64
  auto e = g.add_input("e", DType::f32, {0});
  auto d = g.call1(OpKind::SliceScatter, {self, e, 0, 4});   // an empty slice at the end
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"self", f32({4}, {9, 9, 9, 9})},
                     {"src", f32({2}, {1, 2})},
                     {"m", i64({2, 3}, {0, 0, 0, 0, 0, 0})},
                     {"col", f32({2, 1}, {1.5, 2.5})},
                     {"e", f32({0}, {})}});
  expect_tensor(out[0], DType::f32, {4}, {9, 1, 2, 9});
  expect_tensor(out[1], DType::f32, {4}, {1, 9, 2, 9});
  expect_tensor(out[2], DType::i64, {2, 3}, {0, 1, 0, 0, 2, 0});
  expect_tensor(out[3], DType::f32, {4}, {9, 9, 9, 9});
}

REF_TEST(SelectScatter, WritesARowOrColumn) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {2, 3});
  auto row = g.add_input("row", DType::f32, {3});
  auto col = g.add_input("col", DType::f32, {2});
  auto a = g.call1(OpKind::SelectScatter, {self, row, 0, -1});
  auto b = g.call1(OpKind::SelectScatter, {self, col, 1, 0});
  auto st = g.call1(OpKind::Permute, {g.add_input("t", DType::f32, {3, 2}), IntList{1, 0}});
  auto c = g.call1(OpKind::SelectScatter, {st, row, 0, 0});
  g.outputs = {a, b, c};
  auto out = run(g, {{"self", f32({2, 3}, {0, 0, 0, 0, 0, 0})},
                     {"row", f32({3}, {7, 8, 9})},
                     {"col", f32({2}, {5, 6})},
                     {"t", f32({3, 2}, {1, 4, 2, 5, 3, 6})}});  // transposed: X
  expect_tensor(out[0], DType::f32, {2, 3}, {0, 0, 0, 7, 8, 9});
  expect_tensor(out[1], DType::f32, {2, 3}, {5, 0, 0, 6, 0, 0});
  expect_tensor(out[2], DType::f32, {2, 3}, {7, 8, 9, 4, 5, 6});
}

REF_TEST(ScatterSrc, WritesAtIndices) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {2, 3});
  auto idx = g.add_input("idx", DType::i64, {1, 2});
  auto src = g.add_input("src", DType::f32, {1, 3});  // larger than idx: only src[:1, :2] is used
  auto a = g.call1(OpKind::ScatterSrc, {self, 1, idx, src});  // self[0][idx[0][c]] = src[0][c]
  auto idx0 = g.add_input("idx0", DType::i64, {2, 1});
  auto b = g.call1(OpKind::ScatterSrc, {self, 0, idx0, g.call1(OpKind::Permute, {src, IntList{1, 0}})});
  auto e = g.add_input("e", DType::i64, {0, 2});
  auto c = g.call1(OpKind::ScatterSrc, {self, 0, e, src});
  g.outputs = {a, b, c};
  auto out = run(g, {{"self", f32({2, 3}, {0, 0, 0, 0, 0, 0})},
                     {"idx", i64({1, 2}, {2, 0})},
                     {"src", f32({1, 3}, {5, 6, 7})},
                     {"idx0", i64({2, 1}, {1, 0})},
                     {"e", i64({0, 2}, {})}});
  expect_tensor(out[0], DType::f32, {2, 3}, {6, 0, 5, 0, 0, 0});
  // src^T = [[5], [6], [7]]: self[idx0[r][0]][0] = src^T[r][0] for r < 2.
  expect_tensor(out[1], DType::f32, {2, 3}, {6, 0, 0, 5, 0, 0});
  expect_tensor(out[2], DType::f32, {2, 3}, {0, 0, 0, 0, 0, 0});
}

REF_TEST(ScatterAdd, AccumulatesDuplicates) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {3});
  auto idx = g.add_input("idx", DType::i64, {4});
  auto src = g.add_input("src", DType::f32, {4});
  auto a = g.call1(OpKind::ScatterAdd, {self, 0, idx, src});
  auto m = g.add_input("m", DType::i64, {2, 2});
  auto mi = g.add_input("mi", DType::i64, {2, 2});
  auto b = g.call1(OpKind::ScatterAdd, {m, 1, mi, m});
  g.outputs = {a, b};
  auto out = run(g, {{"self", f32({3}, {1, 1, 1})},
                     {"idx", i64({4}, {0, 0, 2, 0})},
                     {"src", f32({4}, {1, 2, 3, 4})},
                     {"m", i64({2, 2}, {1, 2, 3, 4})},
                     {"mi", i64({2, 2}, {1, 1, 0, 0})}});
  // Slot 0 gets 1 + 2 + 4, slot 2 gets 3, on top of the ones.
  expect_tensor(out[0], DType::f32, {3}, {8, 1, 4});
  // Row 0: m[0][1] += 1 + 2; row 1: m[1][0] += 3 + 4.
  expect_tensor(out[1], DType::i64, {2, 2}, {1, 5, 10, 4});
}

REF_TEST(ScatterAdd, StridedAndEmptyIndex) {
  Graph g;
  auto self = g.call1(OpKind::Permute, {g.add_input("self", DType::f32, {2, 2}), IntList{1, 0}});
  auto idx = g.add_input("idx", DType::i64, {1, 2});
  auto src = g.call1(OpKind::Expand, {g.add_input("src", DType::f32, {1, 1}), IntList{1, 2}});
  auto a = g.call1(OpKind::ScatterAdd, {self, 0, idx, src});
  auto b = g.call1(OpKind::ScatterAdd, {self, 1, g.add_input("e", DType::i64, {2, 0}), src});
  g.outputs = {a, b};
  // self = transpose of [[1, 2], [3, 4]] = [[1, 3], [2, 4]]; row idx[0][c] of column c gets +10.
  auto out = run(g, {{"self", f32({2, 2}, {1, 2, 3, 4})}, {"idx", i64({1, 2}, {1, 0})}, {"src", f32({1, 1}, {10})},
                     {"e", i64({2, 0}, {})}});
  expect_tensor(out[0], DType::f32, {2, 2}, {1, 13, 12, 4});
  expect_tensor(out[1], DType::f32, {2, 2}, {1, 3, 2, 4});
}

// scatter.value, scatter.reduce and scatter_reduce.two: repeats reduce, include_self=False
// starts a target from its first value, an untouched element keeps self, a mean counts self.
REF_TEST(ScatterReduceTwo, ReductionsAndIncludeSelf) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {3});
  auto idx = g.add_input("idx", DType::i64, {4});
  auto src = g.add_input("src", DType::f32, {4});
  std::vector<ValueRef> outs;
  for (const char* r : {"sum", "prod", "mean", "amax", "amin"})
    for (bool self_too : {true, false}) outs.push_back(g.call1(OpKind::ScatterReduceTwo, {self, 0, idx, src, r}, {{"include_self", self_too}}));
  auto m = g.add_input("m", DType::i64, {3});
  outs.push_back(g.call1(OpKind::ScatterReduceTwo, {m, 0, idx, g.call1(OpKind::Clone, {idx}), "mean"}));
  g.outputs = outs;
  auto out = run(g, {{"self", f32({3}, {1, 10, -2})}, {"idx", i64({4}, {0, 2, 0, 0})}, {"src", f32({4}, {2, 3, -4, 5})},
                     {"m", i64({3}, {-5, 7, 9})}});
  // Slot 0 takes 2, -4, 5; slot 2 takes 3; slot 1 nothing.
  expect_tensor(out[0], DType::f32, {3}, {4, 10, 1});
  expect_tensor(out[1], DType::f32, {3}, {3, 10, 3});
  expect_tensor(out[2], DType::f32, {3}, {-40, 10, -6});
  expect_tensor(out[3], DType::f32, {3}, {-40, 10, 3});
  expect_tensor(out[4], DType::f32, {3}, {1, 10, 0.5});
  expect_tensor(out[5], DType::f32, {3}, {1, 10, 3});
  expect_tensor(out[6], DType::f32, {3}, {5, 10, 3});
  expect_tensor(out[7], DType::f32, {3}, {5, 10, 3});
  expect_tensor(out[8], DType::f32, {3}, {-4, 10, -2});
  expect_tensor(out[9], DType::f32, {3}, {-4, 10, 3});
  // Integer mean rounds down: slot 0 (-5 + 0 + 0 + 0) / 4 = -1.25 -> -2; slot 2 (9 + 2) / 2.
  expect_tensor(out[10], DType::i64, {3}, {-2, 7, 5});
}

// The older overloads: a scalar value, reduce "add" / "multiply".
Tensor scatter_old(OpKind op, std::vector<Arg> args, const Kw& kw = {}) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {3});
  auto idx = g.add_input("idx", DType::i64, {4});
  auto src = g.add_input("src", DType::f32, {4});
  args.insert(args.begin(), {self, 0, idx});
  for (auto& a : args)
    if (std::holds_alternative<std::string>(a.value) && std::get<std::string>(a.value) == "src") a = src;
  g.outputs = {g.call1(op, args, kw)};
  return run(g, {{"self", f32({3}, {1, 10, -2})}, {"idx", i64({4}, {0, 2, 0, 0})}, {"src", f32({4}, {2, 3, -4, 5})}})[0];
}
REF_TEST(ScatterValue, StoresTheScalar) { expect_tensor(scatter_old(OpKind::ScatterValue, {7.0}), DType::f32, {3}, {7, 10, 7}); }
REF_TEST(ScatterReduce, Multiplies) {
  expect_tensor(scatter_old(OpKind::ScatterReduce, {"src"}, {{"reduce", "multiply"}}), DType::f32, {3}, {-40, 10, -6});
}
REF_TEST(ScatterValueReduce, Adds) {
  expect_tensor(scatter_old(OpKind::ScatterValueReduce, {2.0}, {{"reduce", "add"}}), DType::f32, {3}, {7, 10, 0});
}

// index_put: integer indices store (accumulate: add up repeats) at self[indices]; one boolean
// mask selects rows that take values broadcast over them.
REF_TEST(IndexPut, IndicesAndMasks) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {3, 2});
  auto i = g.add_input("i", DType::i64, {3});
  auto v = g.add_input("v", DType::f32, {3, 2});
  auto a = g.call1(OpKind::IndexPut, {x, TensorList{i}, v, true});
  auto j = g.add_input("j", DType::i64, {2});
  auto s = g.add_input("s", DType::f32, {});
  auto b = g.call1(OpKind::IndexPut, {x, TensorList{std::nullopt, j}, s});  // x[:, j] = s
  auto mask = g.add_input("mask", DType::b8, {3});
  auto row = g.add_input("row", DType::f32, {2});
  auto c = g.call1(OpKind::IndexPut, {x, TensorList{mask}, row});        // x[mask] = row
  auto d = g.call1(OpKind::IndexPut, {x, TensorList{mask}, row, true});  // x[mask] += row
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"x", f32({3, 2}, {1, 2, 3, 4, 5, 6})}, {"i", i64({3}, {2, -3, 2})}, {"v", f32({3, 2}, {10, 20, 30, 40, 50, 60})},
                     {"j", i64({2}, {1, 1})}, {"s", f32({}, {9})}, {"mask", make(DType::b8, {3}, {1, 0, 1})},
                     {"row", f32({2}, {7, 8})}});
  expect_tensor(out[0], DType::f32, {3, 2}, {31, 42, 3, 4, 65, 86});
  expect_tensor(out[1], DType::f32, {3, 2}, {1, 9, 3, 9, 5, 9});
  expect_tensor(out[2], DType::f32, {3, 2}, {7, 8, 3, 4, 7, 8});
  expect_tensor(out[3], DType::f32, {3, 2}, {8, 10, 3, 4, 12, 14});
}

}  // namespace
}  // namespace coil::testing
