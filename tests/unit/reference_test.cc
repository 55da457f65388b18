// Hand-computed cases for the reference interpreter: sources, creation and copy ops, plus the
// check that every op in ops.def has a reference test. The other families live in
// reference_*_test.cc. Every graph goes through testing::run, which also checks that verify()
// accepts it and that print -> parse -> print is a fixed point.
#include "test_util.h"

namespace coil::testing {
namespace {

// A declared size symbol that no input carries takes its hint; without one the error names it.
TEST(Reference, SymbolInNoInputTakesItsHint) {
  TensorMap inputs;
  inputs.emplace("x", Tensor::zeros(DType::f32, {2}));
  Graph g = parse_graph("graph t {\n  sym N = 3\n  %x = input() : f32[2]\n  %y = exp(%x)\n  return %y\n}\n");
  EXPECT_EQ(bind_symbols(g, inputs).at("N"), 3);
  Graph h = parse_graph("graph t {\n  sym M\n  %x = input() : f32[2]\n  %y = exp(%x)\n  return %y\n}\n");
  try {
    bind_symbols(h, inputs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size symbol M appears in no input"), std::string::npos) << e.what();
  }
}

TEST(Reference, EveryOpHasATest) {
  std::vector<std::string> missing;
  for (const OpSchema& s : all_op_schemas())
    if (!declared_ops().count(s.kind)) missing.push_back(s.name);
  EXPECT_TRUE(missing.empty()) << "ops with no REF_TEST: " << ::testing::PrintToString(missing);
}

// ---- sources

REF_TEST(Input, PassesThroughValuesAndStrides) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  g.outputs = {x};
  // A strided input (a transposed 3x2 buffer) is read through its strides: x[i][j] = buf[j*2 + i].
  Tensor t = strided(DType::f32, {2, 3}, {1, 2}, {1, 4, 2, 5, 3, 6});
  expect_tensor(run1(g, {{"x", t}}), DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
}

REF_TEST(Input, SymbolicSizesBindFromTheInputs) {
  Graph g;
  SymInt n = g.add_symbol("N", 2);
  auto x = g.add_input("x", DType::i64, {n, 2});
  auto y = g.add_input("y", DType::i64, {n});
  auto s = g.call1(OpKind::SumDimIntList, {x, IntList{1}});
  g.outputs = {g.call1(OpKind::AddTensor, {s, y})};
  // Row sums of [[1,2],[3,4],[5,6]] are [3,7,11]; plus y = [10,20,30].
  expect_tensor(run1(g, {{"x", i64({3, 2}, {1, 2, 3, 4, 5, 6})}, {"y", i64({3}, {10, 20, 30})}}), DType::i64, {3},
                {13, 27, 41});
  // N = 0: everything is empty.
  expect_tensor(run1(g, {{"x", i64({0, 2}, {})}, {"y", i64({0}, {})}}), DType::i64, {0}, {});
  EXPECT_EQ(bind_symbols(g, {{"x", i64({1, 2}, {0, 0})}, {"y", i64({1}, {0})}}).at("N"), 1);
  // Disagreeing sizes are a user error.
  EXPECT_THROW(evaluate_reference(g, {{"x", i64({3, 2}, {1, 2, 3, 4, 5, 6})}, {"y", i64({2}, {0, 0})}}), Error);
  EXPECT_THROW(evaluate_reference(g, {{"x", i64({3, 2}, {1, 2, 3, 4, 5, 6})}}), Error);
}

REF_TEST(Input, ZeroDimAndBool) {
  Graph g;
  auto x = g.add_input("x", DType::b8, {});
  auto y = g.add_input("y", DType::b8, {1, 0});
  g.outputs = {x, y};
  auto out = run(g, {{"x", b8({}, {1})}, {"y", b8({1, 0}, {})}});
  expect_tensor(out[0], DType::b8, {}, {1});
  expect_tensor(out[1], DType::b8, {1, 0}, {});
  // A wrong dtype is refused.
  EXPECT_THROW(evaluate_reference(g, {{"x", f32({}, {1})}, {"y", b8({1, 0}, {})}}), Error);
}

REF_TEST(Weight, ReadByKey) {
  Graph g;
  auto w = g.add_weight("w", "layer.0.weight", DType::f32, {2, 2});
  auto x = g.add_input("x", DType::f32, {2});
  g.outputs = {g.call1(OpKind::MulTensor, {w, x})};
  // [[1,2],[3,4]] * [10, 100] (broadcast over rows) = [[10,200],[30,400]].
  expect_tensor(run1(g, {{"x", f32({2}, {10, 100})}}, {{"layer.0.weight", f32({2, 2}, {1, 2, 3, 4})}}), DType::f32,
                {2, 2}, {10, 200, 30, 400});
  // A transposed weight buffer is read through its strides.
  Graph h;
  h.outputs = {h.add_weight("w", "k", DType::i64, {2, 2})};
  expect_tensor(run1(h, {}, {{"k", strided(DType::i64, {2, 2}, {1, 2}, {1, 3, 2, 4})}}), DType::i64, {2, 2},
                {1, 2, 3, 4});
  EXPECT_THROW(evaluate_reference(h, {}, {}), Error);
}

REF_TEST(Constant, LiteralValuesInEachDtype) {
  Graph g;
  auto a = g.add_constant("a", {1, 2.5, -3, kInf}, DType::f32, {2, 2});
  auto b = g.add_constant("b", {7, -2}, DType::i64, {2});
  auto c = g.add_constant("c", {0, 1, 2}, DType::b8, {3});
  auto d = g.add_constant("d", {0.5}, DType::f64, {});
  auto e = g.add_constant("e", {}, DType::f32, {0, 3});
  auto f = g.add_constant("f", {2.7}, DType::i32, {1});
  g.outputs = {a, b, c, d, e, f};
  auto out = run(g);
  expect_tensor(out[0], DType::f32, {2, 2}, {1, 2.5, -3, kInf});
  expect_tensor(out[1], DType::i64, {2}, {7, -2});
  expect_tensor(out[2], DType::b8, {3}, {0, 1, 1});  // bool is `!= 0`
  expect_tensor(out[3], DType::f64, {}, {0.5});
  expect_tensor(out[4], DType::f32, {0, 3}, {});
  expect_tensor(out[5], DType::i32, {1}, {2});  // a float literal in an int constant truncates
}

// ---- creation

REF_TEST(Full, FillValueDecidesTheDtype) {
  Graph g;
  auto a = g.call1(OpKind::Full, {IntList{2, 3}, 1.5});
  auto b = g.call1(OpKind::Full, {IntList{2}, 7});
  auto c = g.call1(OpKind::Full, {IntList{1, 2}, true});
  auto d = g.call1(OpKind::Full, {IntList{2}, 2.75}, {{"dtype", DType::i32}});
  auto e = g.call1(OpKind::Full, {IntList{0, 4}, 1.0});
  auto f = g.call1(OpKind::Full, {IntList{}, -1});
  g.outputs = {a, b, c, d, e, f};
  auto out = run(g);
  expect_tensor(out[0], DType::f32, {2, 3}, {1.5, 1.5, 1.5, 1.5, 1.5, 1.5});  // float scalar -> default f32
  expect_tensor(out[1], DType::i64, {2}, {7, 7});                              // int scalar -> i64
  expect_tensor(out[2], DType::b8, {1, 2}, {1, 1});                            // bool scalar -> bool
  expect_tensor(out[3], DType::i32, {2}, {2, 2});                              // cast truncates 2.75
  expect_tensor(out[4], DType::f32, {0, 4}, {});
  expect_tensor(out[5], DType::i64, {}, {-1});
}

REF_TEST(Full, SymbolicSize) {
  Graph g;
  SymInt n = g.add_symbol("N", 2);
  auto x = g.add_input("x", DType::f32, {n});
  auto f = g.call1(OpKind::Full, {IntList{n, 2}, 0.5});
  g.outputs = {g.call1(OpKind::AddTensor, {f, g.call1(OpKind::Unsqueeze, {x, 1})})};
  // [[.5,.5],[.5,.5],[.5,.5]] + [[1],[2],[3]] broadcast over columns.
  expect_tensor(run1(g, {{"x", f32({3}, {1, 2, 3})}}), DType::f32, {3, 2}, {1.5, 1.5, 2.5, 2.5, 3.5, 3.5});
}

REF_TEST(FullLike, KeepsShapeAndDtypeOfSelf) {
  Graph g;
  auto x = g.add_input("x", DType::i32, {2, 2});
  auto xt = g.call1(OpKind::Permute, {x, IntList{1, 0}});
  auto a = g.call1(OpKind::FullLike, {x, 2.7});                          // i32: 2.7 truncates to 2
  auto b = g.call1(OpKind::FullLike, {x, -2.7});                         // toward zero: -2
  auto c = g.call1(OpKind::FullLike, {xt, 0.25}, {{"dtype", DType::f64}});  // dtype override
  auto z = g.add_input("z", DType::f32, {0, 2});
  auto d = g.call1(OpKind::FullLike, {z, 1.0});
  g.outputs = {a, b, c, d};
  auto out = run(g, {{"x", make(DType::i32, {2, 2}, {9, 9, 9, 9})}, {"z", f32({0, 2}, {})}});
  expect_tensor(out[0], DType::i32, {2, 2}, {2, 2, 2, 2});
  expect_tensor(out[1], DType::i32, {2, 2}, {-2, -2, -2, -2});
  expect_tensor(out[2], DType::f64, {2, 2}, {0.25, 0.25, 0.25, 0.25});
  // preserve_format keeps the permuted (column-major) layout of a dense input.
  EXPECT_EQ(shape_to_string(out[2].strides()), "[1, 2]");
  expect_tensor(out[3], DType::f32, {0, 2}, {});
}

REF_TEST(ArangeStartStep, IntFloatAndNegativeSteps) {
  Graph g;
  auto a = g.call1(OpKind::ArangeStartStep, {0, 5});                   // [0, 5) step 1, i64
  auto b = g.call1(OpKind::ArangeStartStep, {0, 1, 0.25});              // float step -> f32
  auto c = g.call1(OpKind::ArangeStartStep, {5, 0, -2});                // 5, 3, 1
  auto d = g.call1(OpKind::ArangeStartStep, {1, 2.5}, {{"dtype", DType::f64}});  // 1, 2 (ceil(1.5) = 2)
  auto e = g.call1(OpKind::ArangeStartStep, {3, 3});                    // empty
  auto f = g.call1(OpKind::ArangeStartStep, {-1.5, 1});                 // -1.5, -0.5, 0.5
  g.outputs = {a, b, c, d, e, f};
  auto out = run(g);
  expect_tensor(out[0], DType::i64, {5}, {0, 1, 2, 3, 4});
  expect_tensor(out[1], DType::f32, {4}, {0, 0.25, 0.5, 0.75});
  expect_tensor(out[2], DType::i64, {3}, {5, 3, 1});
  expect_tensor(out[3], DType::f64, {2}, {1, 2});
  expect_tensor(out[4], DType::i64, {0}, {});
  expect_tensor(out[5], DType::f32, {3}, {-1.5, -0.5, 0.5});
}

REF_TEST(ArangeStartStep, SymbolicEnd) {
  Graph g;
  SymInt n = g.add_symbol("N", 4);
  auto x = g.add_input("x", DType::i64, {n});
  auto r = g.call1(OpKind::ArangeStartStep, {1, n + 1});  // 1..N
  g.outputs = {g.call1(OpKind::MulTensor, {x, r})};
  // [5, 6, 7] * [1, 2, 3].
  expect_tensor(run1(g, {{"x", i64({3}, {5, 6, 7})}}), DType::i64, {3}, {5, 12, 21});
  expect_tensor(run1(g, {{"x", i64({0}, {})}}), DType::i64, {0}, {});
}

REF_TEST(ScalarTensor, ZeroDim) {
  Graph g;
  auto a = g.call1(OpKind::ScalarTensor, {2.5});                            // default dtype f32
  auto b = g.call1(OpKind::ScalarTensor, {3}, {{"dtype", DType::i64}});
  auto c = g.call1(OpKind::ScalarTensor, {-1.5}, {{"dtype", DType::b8}});  // nonzero -> true
  auto d = g.call1(OpKind::ScalarTensor, {7});                              // an int scalar still gives f32
  g.outputs = {a, b, c, d};
  auto out = run(g);
  expect_tensor(out[0], DType::f32, {}, {2.5});
  expect_tensor(out[1], DType::i64, {}, {3});
  expect_tensor(out[2], DType::b8, {}, {1});
  expect_tensor(out[3], DType::f32, {}, {7});
}

REF_TEST(EmptyMemoryFormat, ShapeDtypeAndLayout) {
  Graph g;
  auto a = g.call1(OpKind::EmptyMemoryFormat, {IntList{2, 3}});
  auto b = g.call1(OpKind::EmptyMemoryFormat, {IntList{1, 2, 2, 3}}, {{"dtype", DType::i32}, {"memory_format", "channels_last"}});
  auto c = g.call1(OpKind::EmptyMemoryFormat, {IntList{0}});
  g.outputs = {a, b, c};
  auto out = run(g);
  // Contents are unspecified; only metadata is checked.
  EXPECT_EQ(out[0].dtype(), DType::f32);
  EXPECT_EQ(shape_to_string(out[0].sizes()), "[2, 3]");
  EXPECT_EQ(shape_to_string(out[0].strides()), "[3, 1]");
  EXPECT_EQ(out[1].dtype(), DType::i32);
  // NHWC for [N=1, C=2, H=2, W=3]: C stride 1, W stride C=2, H stride W*C=6, N stride 12.
  EXPECT_EQ(shape_to_string(out[1].strides()), "[12, 1, 6, 2]");
  expect_tensor(out[2], DType::f32, {0}, {});
}

REF_TEST(EmptyStrided, DeclaredStrides) {
  Graph g;
  auto a = g.call1(OpKind::EmptyStrided, {IntList{2, 3}, IntList{1, 2}}, {{"dtype", DType::f64}});
  g.outputs = {a};  // contents are unspecified; only metadata is checked
  auto out = run(g);
  EXPECT_EQ(out[0].dtype(), DType::f64);
  EXPECT_EQ(shape_to_string(out[0].sizes()), "[2, 3]");
  EXPECT_EQ(shape_to_string(out[0].strides()), "[1, 2]");
}

// ---- copies and casts

REF_TEST(Clone, KeepsDenseLayoutsAndValues) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 3});
  auto xt = g.call1(OpKind::Permute, {x, IntList{1, 0}});  // [3, 2], strides [1, 3]
  auto a = g.call1(OpKind::Clone, {xt});
  auto b = g.call1(OpKind::Clone, {xt}, {{"memory_format", "contiguous_format"}});
  auto s = g.call1(OpKind::SliceTensor, {x, 1, 0, 3, 2});  // columns 0 and 2: not dense
  auto c = g.call1(OpKind::Clone, {s});
  g.outputs = {a, b, c};
  auto out = run(g, {{"x", f32({2, 3}, {1, 2, 3, 4, 5, 6})}});
  expect_tensor(out[0], DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6});
  EXPECT_EQ(shape_to_string(out[0].strides()), "[1, 3]");  // preserve_format of a dense permutation
  expect_tensor(out[1], DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6});
  EXPECT_EQ(shape_to_string(out[1].strides()), "[2, 1]");
  expect_tensor(out[2], DType::f32, {2, 2}, {1, 3, 4, 6});
  EXPECT_EQ(shape_to_string(out[2].strides()), "[2, 1]");  // non-dense input -> contiguous
  // The clone does not alias the input.
  EXPECT_NE(out[0].storage(), out[2].storage());
}

REF_TEST(Clone, ZeroSizeAndBool) {
  Graph g;
  auto x = g.add_input("x", DType::b8, {0, 2});
  auto y = g.add_input("y", DType::b8, {1, 2});
  g.outputs = {g.call1(OpKind::Clone, {x}), g.call1(OpKind::Clone, {y})};
  auto out = run(g, {{"x", b8({0, 2}, {})}, {"y", b8({1, 2}, {1, 0})}});
  expect_tensor(out[0], DType::b8, {0, 2}, {});
  expect_tensor(out[1], DType::b8, {1, 2}, {1, 0});
}

REF_TEST(ToCopy, CastsRoundLikePyTorch) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {5});
  auto to_i32 = g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::i32}});
  auto to_b8 = g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::b8}});
  auto to_f16 = g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::f16}});
  auto to_bf16 = g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::bf16}});
  auto same = g.call1(OpKind::ToCopy, {x});
  g.outputs = {to_i32, to_b8, to_f16, to_bf16, same};
  // 1.7 and -1.7 truncate toward zero; 0.0 is the only false value; 2049 is not an f16 (11-bit
  // significand): ties-to-even gives 2048; 1 + 2^-8 is exact in f16 but halfway between the
  // bf16 neighbours 1 and 1 + 2^-7 (8-bit significand), so ties-to-even gives 1 in bf16.
  auto out = run(g, {{"x", f32({5}, {1.7, -1.7, 0, 2049, 1.00390625})}});
  expect_tensor(out[0], DType::i32, {5}, {1, -1, 0, 2049, 1});
  expect_tensor(out[1], DType::b8, {5}, {1, 1, 0, 1, 1});
  expect_tensor(out[2], DType::f16, {5}, {1.7001953125, -1.7001953125, 0, 2048, 1.00390625}, 0, 0);
  expect_tensor(out[3], DType::bf16, {5}, {1.703125, -1.703125, 0, 2048, 1.0}, 0, 0);
  expect_tensor(out[4], DType::f32, {5}, {1.7, -1.7, 0, 2049, 1.00390625});
}

REF_TEST(ToCopy, IntegerWrapAndFloatWidening) {
  Graph g;
  auto x = g.add_input("x", DType::i64, {3});
  auto y = g.add_input("y", DType::f32, {1});
  auto u = g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::u8}});
  auto i8 = g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::i8}});
  auto d = g.call1(OpKind::ToCopy, {y}, {{"dtype", DType::f64}});
  g.outputs = {u, i8, d};
  // -1 -> 255 in u8; 300 -> 300 - 256 = 44; 128 -> -128 in i8.
  auto out = run(g, {{"x", i64({3}, {-1, 300, 128})}, {"y", f32({1}, {0.1})}});
  expect_tensor(out[0], DType::u8, {3}, {255, 44, 128});
  expect_tensor(out[1], DType::i8, {3}, {-1, 44, -128});
  // f32(0.1) widened exactly: 0.100000001490116119384765625.
  expect_tensor(out[2], DType::f64, {1}, {0.100000001490116119384765625}, 0, 0);
}

REF_TEST(ToCopy, NonContiguousAndZeroSize) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2});
  auto e = g.call1(OpKind::Expand, {g.call1(OpKind::SelectInt, {x, 1, 1}), IntList{3, 2}});  // column 1, repeated
  auto a = g.call1(OpKind::ToCopy, {e}, {{"dtype", DType::i64}});
  auto z = g.add_input("z", DType::f32, {2, 0});
  auto b = g.call1(OpKind::ToCopy, {z}, {{"dtype", DType::b8}});
  g.outputs = {a, b};
  // x = [[1.5, 2.5], [3.5, 4.5]]: x[:, 1] = [2.5, 4.5] -> i64 [2, 4], expanded to 3 rows.
  auto out = run(g, {{"x", f32({2, 2}, {1.5, 2.5, 3.5, 4.5})}, {"z", f32({2, 0}, {})}});
  expect_tensor(out[0], DType::i64, {3, 2}, {2, 4, 2, 4, 2, 4});
  expect_tensor(out[1], DType::b8, {2, 0}, {});
}

REF_TEST(Copy, BroadcastsAndCastsIntoSelf) {
  Graph g;
  auto self = g.add_input("self", DType::f32, {2, 3});
  auto src = g.add_input("src", DType::i64, {3});
  auto a = g.call1(OpKind::Copy, {self, src});
  auto self_t = g.call1(OpKind::Permute, {self, IntList{1, 0}});  // [3, 2]
  auto col = g.add_input("col", DType::f64, {3, 1});
  auto b = g.call1(OpKind::Copy, {self_t, col});
  g.outputs = {a, b};
  auto out = run(g, {{"self", f32({2, 3}, {9, 9, 9, 9, 9, 9})},
                     {"src", i64({3}, {1, 2, 3})},
                     {"col", make(DType::f64, {3, 1}, {0.5, 1.5, 2.5})}});
  // Rows of self become src; the result keeps self's dtype.
  expect_tensor(out[0], DType::f32, {2, 3}, {1, 2, 3, 1, 2, 3});
  // A [3, 1] column broadcast along dim 1 of the transposed self.
  expect_tensor(out[1], DType::f32, {3, 2}, {0.5, 0.5, 1.5, 1.5, 2.5, 2.5});
}

REF_TEST(Copy, ZeroSize) {
  Graph g;
  auto self = g.add_input("self", DType::i32, {0, 3});
  auto src = g.add_input("src", DType::f32, {1, 3});
  g.outputs = {g.call1(OpKind::Copy, {self, src})};
  expect_tensor(run1(g, {{"self", make(DType::i32, {0, 3}, {})}, {"src", f32({1, 3}, {1, 2, 3})}}), DType::i32, {0, 3}, {});
}

}  // namespace
}  // namespace coil::testing
