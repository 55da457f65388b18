// Hand-computed cases for view ops: values, the strides PyTorch gives the view, and aliasing
// (a view shares its input's storage). X = [[0, 1, 2], [3, 4, 5]] throughout.
#include "test_util.h"

namespace coil::testing {
namespace {

const Values kX = {0, 1, 2, 3, 4, 5};

std::string strides_of(const Tensor& t) { return shape_to_string(t.strides()); }

REF_TEST(Alias, SharesStorage) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto xt = g.call1(OpKind::Permute, {x, IntList{1, 0}});
  g.outputs = {g.call1(OpKind::Alias, {x}), g.call1(OpKind::Alias, {xt})};
  Tensor in = f32({2, 3}, kX);
  auto out = run(g, {{"x", in}});
  expect_tensor(out[0], DType::f32, {2, 3}, kX);
  EXPECT_EQ(out[0].storage(), in.storage());
  expect_tensor(out[1], DType::f32, {3, 2}, {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(strides_of(out[1]), "[1, 3]");
}

REF_TEST(View, ReshapesContiguousAndCompatibleStrides) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto a = g.call1(OpKind::View, {x, IntList{3, 2}});
  auto b = g.call1(OpKind::View, {x, IntList{6}});
  auto c = g.call1(OpKind::View, {x, IntList{-1, 2}});  // -1 is inferred: 3
  auto xt = g.call1(OpKind::Permute, {x, IntList{1, 0}});  // [3, 2] strides [1, 3]
  auto d = g.call1(OpKind::View, {xt, IntList{3, 2, 1}});  // adding a size-1 dim keeps it viewable
  auto zin = g.add_input("z", DType::i64, {0, 3});
  auto z = g.call1(OpKind::View, {zin, IntList{3, 0}});
  auto z1 = g.call1(OpKind::View, {zin, IntList{-1}});  // -1 with zero elements: [0]
  g.outputs = {a, b, c, d, z, z1};
  Tensor in = f32({2, 3}, kX);
  auto out = run(g, {{"x", in}, {"z", i64({0, 3}, {})}});
  expect_tensor(out[0], DType::f32, {3, 2}, kX);
  EXPECT_EQ(strides_of(out[0]), "[2, 1]");
  EXPECT_EQ(out[0].storage(), in.storage());
  expect_tensor(out[1], DType::f32, {6}, kX);
  expect_tensor(out[2], DType::f32, {3, 2}, kX);
  expect_tensor(out[3], DType::f32, {3, 2, 1}, {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(out[3].strides()[0], 1);
  EXPECT_EQ(out[3].strides()[1], 3);
  expect_tensor(out[4], DType::i64, {3, 0}, {});
  expect_tensor(out[5], DType::i64, {0}, {});
}

REF_TEST(View, SymbolicSizes) {
  Graph g;
  SymInt n = g.add_symbol("N", 2);
  auto x = g.add_input("x", DType::f32, {n, 4});
  auto v = g.call1(OpKind::View, {x, IntList{n * 2, 2}});
  auto s = g.call1(OpKind::SliceTensor, {v, 0, 1, n * 2, 2});  // odd rows: N of them
  g.outputs = {s};
  // x = [[0..3], [4..7], [8..11]] -> v rows [0,1], [2,3], ..., [10,11]; odd rows 1, 3, 5.
  Values xv;
  for (int i = 0; i < 12; ++i) xv.push_back(i);
  expect_tensor(run1(g, {{"x", f32({3, 4}, xv)}}), DType::f32, {3, 2}, {2, 3, 6, 7, 10, 11});
}

REF_TEST(View, SplitsAndMergesDims) {
  Graph g;
  auto x = g.add_input("x", DType::i32, {2, 2, 2});
  auto merged = g.call1(OpKind::View, {x, IntList{4, 2}});
  auto split = g.call1(OpKind::View, {x, IntList{2, 4}});
  auto sel = g.call1(OpKind::SelectInt, {x, 2, 1});             // x[..., 1]: [2, 2] strides [4, 2]
  auto merged_sel = g.call1(OpKind::View, {sel, IntList{4}});  // strides 4, 2 merge to a single stride 2
  g.outputs = {merged, split, merged_sel};
  auto out = run(g, {{"x", make(DType::i32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})}});
  expect_tensor(out[0], DType::i32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_tensor(out[1], DType::i32, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_tensor(out[2], DType::i32, {4}, {1, 3, 5, 7});
  EXPECT_EQ(strides_of(out[2]), "[2]");
}

REF_TEST(UnsafeView, SameAsView) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto a = g.call1(OpKind::UnsafeView, {x, IntList{3, 2}});
  auto b = g.call1(OpKind::UnsafeView, {g.call1(OpKind::Unsqueeze, {x, 0}), IntList{6}});
  auto z = g.call1(OpKind::UnsafeView, {g.add_input("z", DType::f32, {2, 0}), IntList{0}});
  g.outputs = {a, b, z};
  auto out = run(g, {{"x", f32({2, 3}, kX)}, {"z", f32({2, 0}, {})}});
  expect_tensor(out[0], DType::f32, {3, 2}, kX);
  expect_tensor(out[1], DType::f32, {6}, kX);
  expect_tensor(out[2], DType::f32, {0}, {});
}

REF_TEST(Permute, ReordersDimsAndStrides) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3, 1});
  auto a = g.call1(OpKind::Permute, {x, IntList{1, 0, 2}});
  auto b = g.call1(OpKind::Permute, {x, IntList{-1, -3, -2}});  // [1, 2, 3]
  auto c = g.call1(OpKind::Permute, {a, IntList{1, 0, 2}});     // back to X
  auto z = g.call1(OpKind::Permute, {g.add_input("z", DType::b8, {0, 2}), IntList{1, 0}});
  auto s = g.call1(OpKind::Permute, {g.add_input("s", DType::f32, {}), IntList{}});
  g.outputs = {a, b, c, z, s};
  auto out = run(g, {{"x", f32({2, 3, 1}, kX)}, {"z", b8({0, 2}, {})}, {"s", f32({}, {9})}});
  expect_tensor(out[0], DType::f32, {3, 2, 1}, {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(strides_of(out[0]), "[1, 3, 1]");
  expect_tensor(out[1], DType::f32, {1, 2, 3}, kX);
  expect_tensor(out[2], DType::f32, {2, 3, 1}, kX);
  expect_tensor(out[3], DType::b8, {2, 0}, {});
  expect_tensor(out[4], DType::f32, {}, {9});
}

REF_TEST(Expand, StrideZeroOnBroadcastDims) {
  Graph g;
  auto col = g.add_input("col", DType::f32, {2, 1});
  auto a = g.call1(OpKind::Expand, {col, IntList{-1, 3}});  // -1 keeps the size
  auto b = g.call1(OpKind::Expand, {col, IntList{2, 2, 3}});  // a new leading dim
  auto row = g.add_input("row", DType::i64, {3});
  auto c = g.call1(OpKind::Expand, {row, IntList{0, 3}});  // to zero rows
  auto s = g.call1(OpKind::Expand, {g.add_input("s", DType::f32, {}), IntList{2}});
  g.outputs = {a, b, c, s};
  auto out = run(g, {{"col", f32({2, 1}, {1, 2})}, {"row", i64({3}, {7, 8, 9})}, {"s", f32({}, {4})}});
  expect_tensor(out[0], DType::f32, {2, 3}, {1, 1, 1, 2, 2, 2});
  EXPECT_EQ(strides_of(out[0]), "[1, 0]");
  expect_tensor(out[1], DType::f32, {2, 2, 3}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  EXPECT_EQ(out[1].strides()[0], 0);
  expect_tensor(out[2], DType::i64, {0, 3}, {});
  expect_tensor(out[3], DType::f32, {2}, {4, 4});
}

REF_TEST(SliceTensor, BoundsAndSteps) {
  Graph g;
  auto v = g.add_input("v", DType::i64, {5});  // [0, 1, 2, 3, 4]
  auto a = g.call1(OpKind::SliceTensor, {v, 0, 1, 4});           // [1, 2, 3]
  auto b = g.call1(OpKind::SliceTensor, {v, 0, -3, 100, 2});     // from 2, end clamps to 5: [2, 4]
  auto c = g.call1(OpKind::SliceTensor, {v, 0, 4, 1});           // end before start: empty
  auto d = g.call1(OpKind::SliceTensor, {v});                    // all
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto e = g.call1(OpKind::SliceTensor, {x, 1, 1, std::nullopt});  // X[:, 1:]
  auto f = g.call1(OpKind::SliceTensor, {e, 0, 1, 2});             // X[1:2, 1:], offset 4
  auto h = g.call1(OpKind::SliceTensor, {v, 0, 0, INT64_MAX});     // exported graphs use end = 2^63 - 1
  g.outputs = {a, b, c, d, e, f, h};
  auto out = run(g, {{"v", i64({5}, {0, 1, 2, 3, 4})}, {"x", f32({2, 3}, kX)}});
  expect_tensor(out[0], DType::i64, {3}, {1, 2, 3});
  expect_tensor(out[1], DType::i64, {2}, {2, 4});
  EXPECT_EQ(strides_of(out[1]), "[2]");
  expect_tensor(out[2], DType::i64, {0}, {});
  expect_tensor(out[3], DType::i64, {5}, {0, 1, 2, 3, 4});
  expect_tensor(out[4], DType::f32, {2, 2}, {1, 2, 4, 5});
  EXPECT_EQ(strides_of(out[4]), "[3, 1]");
  expect_tensor(out[5], DType::f32, {1, 2}, {4, 5});
  EXPECT_EQ(out[5].offset(), 4);
  expect_tensor(out[6], DType::i64, {5}, {0, 1, 2, 3, 4});
}

REF_TEST(SelectInt, DropsTheDim) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto a = g.call1(OpKind::SelectInt, {x, 0, 1});    // row 1
  auto b = g.call1(OpKind::SelectInt, {x, 1, -1});   // last column: [2, 5], stride 3
  auto c = g.call1(OpKind::SelectInt, {a, 0, 2});    // 0-d: X[1][2]
  auto z = g.call1(OpKind::SelectInt, {g.add_input("z", DType::f32, {0, 2}), 1, 0});
  g.outputs = {a, b, c, z};
  auto out = run(g, {{"x", f32({2, 3}, kX)}, {"z", f32({0, 2}, {})}});
  expect_tensor(out[0], DType::f32, {3}, {3, 4, 5});
  expect_tensor(out[1], DType::f32, {2}, {2, 5});
  EXPECT_EQ(strides_of(out[1]), "[3]");
  expect_tensor(out[2], DType::f32, {}, {5});
  expect_tensor(out[3], DType::f32, {0}, {});
}

REF_TEST(Diagonal, OffsetsDimsAndEmpty) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto a = g.call1(OpKind::Diagonal, {x});            // [0, 4]
  auto b = g.call1(OpKind::Diagonal, {x, 1});         // [1, 5], offset 1
  auto c = g.call1(OpKind::Diagonal, {x, -1});        // [3], offset 3
  auto d = g.call1(OpKind::Diagonal, {x, 1, 1, 0});   // dims swapped: below the diagonal, [3]
  auto e = g.call1(OpKind::Diagonal, {x, 5});         // empty, offset unchanged
  g.outputs = {a, b, c, d, e};
  auto out = run(g, {{"x", f32({2, 3}, kX)}});
  expect_tensor(out[0], DType::f32, {2}, {0, 4});
  EXPECT_EQ(strides_of(out[0]), "[4]");
  expect_tensor(out[1], DType::f32, {2}, {1, 5});
  EXPECT_EQ(out[1].offset(), 1);
  expect_tensor(out[2], DType::f32, {1}, {3});
  expect_tensor(out[3], DType::f32, {1}, {3});
  expect_tensor(out[4], DType::f32, {0}, {});
  EXPECT_EQ(out[4].offset(), 0);
}

REF_TEST(Squeeze, AllSizeOneDims) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 3, 1});
  auto z = g.add_input("z", DType::f32, {1, 0, 1});
  g.outputs = {g.call1(OpKind::Squeeze, {x}), g.call1(OpKind::Squeeze, {z})};
  auto out = run(g, {{"x", f32({1, 3, 1}, {1, 2, 3})}, {"z", f32({1, 0, 1}, {})}});
  expect_tensor(out[0], DType::f32, {3}, {1, 2, 3});
  expect_tensor(out[1], DType::f32, {0}, {});  // size 0 is not size 1
}

REF_TEST(SqueezeDim, OnlyTheNamedDim) {
  Graph g;
  auto x = g.add_input("x", DType::i32, {1, 3, 1});
  auto a = g.call1(OpKind::SqueezeDim, {x, 0});
  auto b = g.call1(OpKind::SqueezeDim, {x, -1});
  auto c = g.call1(OpKind::SqueezeDim, {x, 1});  // size 3: unchanged
  auto s = g.call1(OpKind::SqueezeDim, {g.add_input("s", DType::i32, {}), 0});  // a 0-d tensor accepts dim 0
  g.outputs = {a, b, c, s};
  auto out = run(g, {{"x", make(DType::i32, {1, 3, 1}, {1, 2, 3})}, {"s", make(DType::i32, {}, {4})}});
  expect_tensor(out[0], DType::i32, {3, 1}, {1, 2, 3});
  expect_tensor(out[1], DType::i32, {1, 3}, {1, 2, 3});
  expect_tensor(out[2], DType::i32, {1, 3, 1}, {1, 2, 3});
  expect_tensor(out[3], DType::i32, {}, {4});
}

REF_TEST(SqueezeDims, ListedSizeOneDims) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 2, 1});
  auto a = g.call1(OpKind::SqueezeDims, {x, IntList{0, 1}});  // dim 1 has size 2: kept
  auto b = g.call1(OpKind::SqueezeDims, {x, IntList{0, -1}});
  g.outputs = {a, b};
  auto out = run(g, {{"x", f32({1, 2, 1}, {5, 6})}});
  expect_tensor(out[0], DType::f32, {2, 1}, {5, 6});
  expect_tensor(out[1], DType::f32, {2}, {5, 6});
}

REF_TEST(Unsqueeze, InsertsSizeOneDims) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto xt = g.call1(OpKind::Permute, {x, IntList{1, 0}});  // [3, 2] strides [1, 3]
  auto a = g.call1(OpKind::Unsqueeze, {xt, 0});   // stride = 3 * 1
  auto b = g.call1(OpKind::Unsqueeze, {xt, -1});  // at the end: stride 1
  auto c = g.call1(OpKind::Unsqueeze, {xt, 1});   // stride = size 2 * stride 3
  auto s = g.call1(OpKind::Unsqueeze, {g.add_input("s", DType::f32, {}), 0});
  g.outputs = {a, b, c, s};
  auto out = run(g, {{"x", f32({2, 3}, kX)}, {"s", f32({}, {7})}});
  const Values xt_values = {0, 3, 1, 4, 2, 5};
  expect_tensor(out[0], DType::f32, {1, 3, 2}, xt_values);
  EXPECT_EQ(strides_of(out[0]), "[3, 1, 3]");
  expect_tensor(out[1], DType::f32, {3, 2, 1}, xt_values);
  EXPECT_EQ(strides_of(out[1]), "[1, 3, 1]");
  expect_tensor(out[2], DType::f32, {3, 1, 2}, xt_values);
  EXPECT_EQ(strides_of(out[2]), "[1, 6, 3]");
  expect_tensor(out[3], DType::f32, {1}, {7});
}

REF_TEST(AsStrided, ExplicitLayout) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto a = g.call1(OpKind::AsStrided, {x, IntList{2, 2}, IntList{1, 2}, 1});  // storage[1 + i + 2j]
  auto b = g.call1(OpKind::AsStrided, {x, IntList{3}, IntList{0}});           // the first element, 3 times
  auto s = g.call1(OpKind::SliceTensor, {x, 0, 1});                           // X[1:], storage offset 3
  auto c = g.call1(OpKind::AsStrided, {s, IntList{2}, IntList{1}});           // offset None keeps 3
  auto d = g.call1(OpKind::AsStrided, {x, IntList{0, 2}, IntList{1, 1}});
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"x", f32({2, 3}, kX)}});
  expect_tensor(out[0], DType::f32, {2, 2}, {1, 3, 2, 4});
  expect_tensor(out[1], DType::f32, {3}, {0, 0, 0});
  expect_tensor(out[2], DType::f32, {2}, {3, 4});
  expect_tensor(out[3], DType::f32, {0, 2}, {});
}

REF_TEST(SplitWithSizes, PartsAlongADim) {
  Graph g;
  auto v = g.add_input("v", DType::i64, {5});
  auto parts = g.call(OpKind::SplitWithSizes, {v, IntList{2, 0, 3}});
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto cols = g.call(OpKind::SplitWithSizes, {x, IntList{1, 2}, 1});
  g.outputs = {parts[0], parts[1], parts[2], cols[0], cols[1]};
  auto out = run(g, {{"v", i64({5}, {0, 1, 2, 3, 4})}, {"x", f32({2, 3}, kX)}});
  ASSERT_EQ(out.size(), 5u);
  expect_tensor(out[0], DType::i64, {2}, {0, 1});
  expect_tensor(out[1], DType::i64, {0}, {});
  expect_tensor(out[2], DType::i64, {3}, {2, 3, 4});
  expect_tensor(out[3], DType::f32, {2, 1}, {0, 3});
  expect_tensor(out[4], DType::f32, {2, 2}, {1, 2, 4, 5});
  EXPECT_EQ(strides_of(out[4]), "[3, 1]");
  EXPECT_EQ(out[4].offset(), 1);
}

}  // namespace
}  // namespace coil::testing
