// Hand-computed cases for matrix products, convolution and attention.
// A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]]: A @ B = [[19, 22], [43, 50]].
#include "test_util.h"

namespace coil::testing {
namespace {

const Values kA = {1, 2, 3, 4};
const Values kB = {5, 6, 7, 8};
const Values kBt = {5, 7, 6, 8};  // B^T, row-major: permuting it back gives a non-contiguous B

REF_TEST(Mm, ProductsLayoutsAndEmptyK) {
  Graph g;
  auto a = g.add_input("a", DType::f32, {2, 2});
  auto b = g.add_input("b", DType::f32, {2, 2});
  auto bt = g.add_input("bt", DType::f32, {2, 2});
  auto r0 = g.call1(OpKind::Mm, {a, b});
  auto r1 = g.call1(OpKind::Mm, {a, g.call1(OpKind::Permute, {bt, IntList{1, 0}})});  // the same B, strided
  auto row = g.call1(OpKind::SliceTensor, {a, 0, 1, 2});                                // [[3, 4]] @ B
  auto r2 = g.call1(OpKind::Mm, {row, b});
  auto k0a = g.add_input("k0a", DType::f32, {2, 0});
  auto k0b = g.add_input("k0b", DType::f32, {0, 3});
  auto r3 = g.call1(OpKind::Mm, {k0a, k0b});  // K = 0: a [2, 3] of zeros
  auto r4 = g.call1(OpKind::Mm, {k0b, g.add_input("c", DType::f32, {3, 1})});  // M = 0
  auto ia = g.add_input("ia", DType::i64, {2, 2});
  auto r5 = g.call1(OpKind::Mm, {ia, ia});  // integers stay integers: A @ A = [[7, 10], [15, 22]]
  g.outputs = {r0, r1, r2, r3, r4, r5};
  auto out = run(g, {{"a", f32({2, 2}, kA)},
                     {"b", f32({2, 2}, kB)},
                     {"bt", f32({2, 2}, kBt)},
                     {"k0a", f32({2, 0}, {})},
                     {"k0b", f32({0, 3}, {})},
                     {"c", f32({3, 1}, {1, 2, 3})},
                     {"ia", i64({2, 2}, kA)}});
  expect_tensor(out[0], DType::f32, {2, 2}, {19, 22, 43, 50});
  expect_tensor(out[1], DType::f32, {2, 2}, {19, 22, 43, 50});
  expect_tensor(out[2], DType::f32, {1, 2}, {43, 50});
  expect_tensor(out[3], DType::f32, {2, 3}, {0, 0, 0, 0, 0, 0});
  expect_tensor(out[4], DType::f32, {0, 1}, {});
  expect_tensor(out[5], DType::i64, {2, 2}, {7, 10, 15, 22});
}

REF_TEST(Bmm, BatchesAndStrides) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2, 2});
  auto y = g.add_input("y", DType::f32, {2, 2, 1});
  auto r0 = g.call1(OpKind::Bmm, {x, y});
  // Batch 1 of x is the identity; batch-expanded y (stride 0 on the batch dim).
  auto ye = g.call1(OpKind::Expand, {g.add_input("y1", DType::f32, {1, 2, 2}), IntList{2, 2, 2}});
  auto r1 = g.call1(OpKind::Bmm, {x, ye});
  auto r2 = g.call1(OpKind::Bmm, {g.add_input("z", DType::f32, {0, 2, 2}), g.add_input("w", DType::f32, {0, 2, 3})});
  g.outputs = {r0, r1, r2};
  auto out = run(g, {{"x", f32({2, 2, 2}, {1, 2, 3, 4, 1, 0, 0, 1})},
                     {"y", f32({2, 2, 1}, {1, 1, 2, 3})},
                     {"y1", f32({1, 2, 2}, kB)},
                     {"z", f32({0, 2, 2}, {})},
                     {"w", f32({0, 2, 3}, {})}});
  // Batch 0: A @ [1, 1]^T = [3, 7]; batch 1: I @ [2, 3]^T = [2, 3].
  expect_tensor(out[0], DType::f32, {2, 2, 1}, {3, 7, 2, 3});
  expect_tensor(out[1], DType::f32, {2, 2, 2}, {19, 22, 43, 50, 5, 6, 7, 8});
  expect_tensor(out[2], DType::f32, {0, 2, 3}, {});
}

REF_TEST(Addmm, BetaAlphaAndBiasBroadcast) {
  Graph g;
  auto bias = g.add_input("bias", DType::f32, {2});
  auto a = g.add_input("a", DType::f32, {2, 2});
  auto b = g.add_input("b", DType::f32, {2, 2});
  auto r0 = g.call1(OpKind::Addmm, {bias, a, b}, {{"beta", 0.5}, {"alpha", 2}});
  auto r1 = g.call1(OpKind::Addmm, {bias, a, b});
  // beta = 0 ignores the bias, even a NaN one.
  auto nb = g.add_input("nb", DType::f32, {2, 1});
  auto r2 = g.call1(OpKind::Addmm, {nb, a, b}, {{"beta", 0}});
  auto r3 = g.call1(OpKind::Addmm, {bias, g.add_input("k0a", DType::f32, {2, 0}), g.add_input("k0b", DType::f32, {0, 2})});
  g.outputs = {r0, r1, r2, r3};
  auto out = run(g, {{"bias", f32({2}, {1, 2})},
                     {"a", f32({2, 2}, kA)},
                     {"b", f32({2, 2}, kB)},
                     {"nb", f32({2, 1}, {kNan, 1})},
                     {"k0a", f32({2, 0}, {})},
                     {"k0b", f32({0, 2}, {})}});
  // 0.5 * [1, 2] + 2 * [[19, 22], [43, 50]].
  expect_tensor(out[0], DType::f32, {2, 2}, {38.5, 45, 86.5, 101});
  expect_tensor(out[1], DType::f32, {2, 2}, {20, 24, 44, 52});
  expect_tensor(out[2], DType::f32, {2, 2}, {19, 22, 43, 50});
  expect_tensor(out[3], DType::f32, {2, 2}, {1, 2, 1, 2});  // K = 0: just the bias
}

REF_TEST(Addmm, StridedOperandsAndScalarBias) {
  Graph g;
  auto bias = g.add_input("bias", DType::f32, {});
  auto at = g.call1(OpKind::Permute, {g.add_input("at", DType::f32, {2, 2}), IntList{1, 0}});  // A from A^T
  auto bt = g.call1(OpKind::Permute, {g.add_input("bt", DType::f32, {2, 2}), IntList{1, 0}});  // B from B^T
  g.outputs = {g.call1(OpKind::Addmm, {bias, at, bt}, {{"alpha", -1}})};
  auto out = run(g, {{"bias", f32({}, {100})}, {"at", f32({2, 2}, {1, 3, 2, 4})}, {"bt", f32({2, 2}, kBt)}});
  // 100 - [[19, 22], [43, 50]].
  expect_tensor(out[0], DType::f32, {2, 2}, {81, 78, 57, 50});
}

// 1-d convolution of [1, 2, 3, 4] with the kernel [1, -1] (cross-correlation: x[i] - x[i+1]).
Tensor conv1d(const IntList& stride, const IntList& padding, const IntList& dilation, bool with_bias) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 1, 4});
  auto w = g.add_input("w", DType::f32, {1, 1, 2});
  Arg bias = std::nullopt;
  if (with_bias) bias = g.add_input("b", DType::f32, {1});
  g.outputs = {g.call1(OpKind::Convolution, {x, w, bias, stride, padding, dilation, false, IntList{0}, 1})};
  TensorMap in = {{"x", f32({1, 1, 4}, {1, 2, 3, 4})}, {"w", f32({1, 1, 2}, {1, -1})}};
  if (with_bias) in["b"] = f32({1}, {10});
  return run1(g, in);
}

REF_TEST(Convolution, OneDimensional) {
  expect_tensor(conv1d({1}, {0}, {1}, false), DType::f32, {1, 1, 3}, {-1, -1, -1});
  expect_tensor(conv1d({1}, {0}, {1}, true), DType::f32, {1, 1, 3}, {9, 9, 9});
  expect_tensor(conv1d({2}, {0}, {1}, true), DType::f32, {1, 1, 2}, {9, 9});  // positions 0 and 2
  // Padding 1: [0, 1, 2, 3, 4, 0] -> [0-1, 1-2, 2-3, 3-4, 4-0].
  expect_tensor(conv1d({1}, {1}, {1}, false), DType::f32, {1, 1, 5}, {-1, -1, -1, -1, 4});
  // Dilation 2: x[i] - x[i+2].
  expect_tensor(conv1d({1}, {0}, {2}, false), DType::f32, {1, 1, 2}, {-2, -2});
}

REF_TEST(Convolution, TwoDimensionalGroupsAndBatch) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 1, 3, 3});  // 1..9
  auto w = g.add_input("w", DType::f32, {1, 1, 2, 2});  // ones: 2x2 window sums
  auto r0 = g.call1(OpKind::Convolution, {x, w, std::nullopt, IntList{1, 1}, IntList{0, 0}, IntList{1, 1}, false, IntList{0, 0}, 1});
  // groups = 2: each of 2 input channels is scaled by its own 1x1 kernel (2 and 3).
  auto xc = g.add_input("xc", DType::f32, {2, 2, 2});
  auto wc = g.add_input("wc", DType::f32, {2, 1, 1});
  auto r1 = g.call1(OpKind::Convolution, {xc, wc, std::nullopt, IntList{1}, IntList{0}, IntList{1}, false, IntList{0}, 2});
  // A non-contiguous input: the transposed buffer of x (permute the spatial dims back).
  auto xt = g.call1(OpKind::Permute, {g.add_input("xt", DType::f32, {1, 1, 3, 3}), IntList{0, 1, 3, 2}});
  auto r2 = g.call1(OpKind::Convolution, {xt, w, std::nullopt, IntList{1, 1}, IntList{0, 0}, IntList{1, 1}, false, IntList{0, 0}, 1});
  auto r3 = g.call1(OpKind::Convolution, {g.add_input("z", DType::f32, {0, 1, 3, 3}), w, std::nullopt, IntList{1, 1},
                                          IntList{0, 0}, IntList{1, 1}, false, IntList{0, 0}, 1});
  g.outputs = {r0, r1, r2, r3};
  auto out = run(g, {{"x", f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})},
                     {"w", f32({1, 1, 2, 2}, {1, 1, 1, 1})},
                     {"xc", f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})},
                     {"wc", f32({2, 1, 1}, {2, 3})},
                     {"xt", f32({1, 1, 3, 3}, {1, 4, 7, 2, 5, 8, 3, 6, 9})},
                     {"z", f32({0, 1, 3, 3}, {})}});
  // 1+2+4+5 = 12, 2+3+5+6 = 16, 4+5+7+8 = 24, 5+6+8+9 = 28.
  expect_tensor(out[0], DType::f32, {1, 1, 2, 2}, {12, 16, 24, 28});
  // Batch 0: [2*[1, 2], 3*[3, 4]]; batch 1: [2*[5, 6], 3*[7, 8]].
  expect_tensor(out[1], DType::f32, {2, 2, 2}, {2, 4, 9, 12, 10, 12, 21, 24});
  expect_tensor(out[2], DType::f32, {1, 1, 2, 2}, {12, 16, 24, 28});
  expect_tensor(out[3], DType::f32, {0, 1, 2, 2}, {});
}

REF_TEST(Convolution, Transposed) {
  // Transposed convolution scatters each input element times the kernel: [1, 2] with [1, 1]
  // gives [1, 1 + 2, 2]; with stride 2 and output_padding 1, [1, 10] gives
  // [1*1, 1*10, 2*1, 2*10, 0]. The weight is [C_in, C_out / groups, k].
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 1, 2});
  auto w = g.add_input("w", DType::f32, {1, 1, 2});
  auto w2 = g.add_input("w2", DType::f32, {1, 1, 2});
  auto r0 = g.call1(OpKind::Convolution, {x, w, std::nullopt, IntList{1}, IntList{0}, IntList{1}, true, IntList{0}, 1});
  auto r1 = g.call1(OpKind::Convolution, {x, w2, std::nullopt, IntList{2}, IntList{0}, IntList{1}, true, IntList{1}, 1});
  g.outputs = {r0, r1};
  ASSERT_EQ(shape_str(g.meta(r0).sizes), "[1, 1, 3]");
  ASSERT_EQ(shape_str(g.meta(r1).sizes), "[1, 1, 5]");
  auto out = run(g, {{"x", f32({1, 1, 2}, {1, 2})}, {"w", f32({1, 1, 2}, {1, 1})}, {"w2", f32({1, 1, 2}, {1, 10})}});
  expect_tensor(out[0], DType::f32, {1, 1, 3}, {1, 3, 2});
  expect_tensor(out[1], DType::f32, {1, 1, 5}, {1, 10, 2, 20, 0});
}

REF_TEST(ScaledDotProductAttention, ScaleMasksAndCausal) {
  // One query [1, 0] against keys [1, 0] and [0, 1] with scale ln 3: scores [ln 3, 0],
  // softmax [3/4, 1/4]; values [4, 0] and [0, 8] give [3, 2].
  Graph g;
  auto q = g.add_input("q", DType::f32, {1, 1, 2});
  auto k = g.add_input("k", DType::f32, {1, 2, 2});
  auto v = g.add_input("v", DType::f32, {1, 2, 2});
  auto r0 = g.call1(OpKind::ScaledDotProductAttention, {q, k, v}, {{"scale", std::log(3.0)}});
  // A boolean mask hiding key 0 leaves only value 1; an additive mask of -ln 3 on key 0
  // cancels the score difference: weights [1/2, 1/2].
  auto bm = g.add_input("bm", DType::b8, {1, 2});
  auto r1 = g.call1(OpKind::ScaledDotProductAttention, {q, k, v, bm}, {{"scale", std::log(3.0)}});
  auto fm = g.add_input("fm", DType::f32, {1, 1, 2});
  auto r2 = g.call1(OpKind::ScaledDotProductAttention, {q, k, v, fm}, {{"scale", std::log(3.0)}});
  // Causal with L = S = 2 and equal scores: row 0 sees key 0 only; row 1 averages both.
  auto q2 = g.add_input("q2", DType::f32, {1, 2, 2});
  auto r3 = g.call1(OpKind::ScaledDotProductAttention, {q2, k, v}, {{"is_causal", true}});
  // Causal with L = 1 < S = 2 is aligned top-left: the one query sees key 0 only.
  auto r4 = g.call1(OpKind::ScaledDotProductAttention, {q, k, v}, {{"is_causal", true}});
  g.outputs = {r0, r1, r2, r3, r4};
  auto out = run(g, {{"q", f32({1, 1, 2}, {1, 0})},
                     {"k", f32({1, 2, 2}, {1, 0, 0, 1})},
                     {"v", f32({1, 2, 2}, {4, 0, 0, 8})},
                     {"bm", b8({1, 2}, {0, 1})},
                     {"fm", f32({1, 1, 2}, {-std::log(3.0), 0})},
                     {"q2", f32({1, 2, 2}, {0, 0, 0, 0})}});
  expect_tensor(out[0], DType::f32, {1, 1, 2}, {3, 2});
  expect_tensor(out[1], DType::f32, {1, 1, 2}, {0, 8});
  expect_tensor(out[2], DType::f32, {1, 1, 2}, {2, 4});
  expect_tensor(out[3], DType::f32, {1, 2, 2}, {4, 0, 2, 4});
  expect_tensor(out[4], DType::f32, {1, 1, 2}, {4, 0});
}

REF_TEST(ScaledDotProductAttention, StridedAndZeroLength) {
  Graph g;
  // k given as the transpose of its buffer; q with zero queries gives an empty output.
  auto q = g.add_input("q", DType::f32, {1, 1, 2});
  auto kt = g.call1(OpKind::Permute, {g.add_input("kt", DType::f32, {1, 2, 2}), IntList{0, 2, 1}});
  auto v = g.add_input("v", DType::f32, {1, 2, 2});
  auto a = g.call1(OpKind::ScaledDotProductAttention, {q, kt, v}, {{"scale", std::log(3.0)}});
  auto b = g.call1(OpKind::ScaledDotProductAttention, {g.add_input("q0", DType::f32, {1, 0, 2}), kt, v});
  g.outputs = {a, b};
  // Keys [[1, 0], [1, 1]] (the buffer holds their transpose); q = [0, 1] scores [0, ln 3],
  // weights [1/4, 3/4]: 1/4 [4, 0] + 3/4 [0, 8] = [1, 6].
  auto out = run(g, {{"q", f32({1, 1, 2}, {0, 1})},
                     {"kt", f32({1, 2, 2}, {1, 1, 0, 1})},
                     {"v", f32({1, 2, 2}, {4, 0, 0, 8})},
                     {"q0", f32({1, 0, 2}, {})}});
  expect_tensor(out[0], DType::f32, {1, 1, 2}, {1, 6});
  expect_tensor(out[1], DType::f32, {1, 0, 2}, {});
}

REF_TEST(ScaledDotProductAttention, DefaultScaleAndGroupedQuery) {
  // E = 4: the default scale is 1/sqrt(4) = 1/2. q . k = [2 ln 3, 0] -> scores [ln 3, 0].
  const double l3 = std::log(3.0);
  Graph g;
  auto q = g.add_input("q", DType::f32, {1, 1, 4});
  auto k = g.add_input("k", DType::f32, {1, 2, 4});
  auto v = g.add_input("v", DType::f32, {1, 2, 1});
  auto r0 = g.call1(OpKind::ScaledDotProductAttention, {q, k, v});
  // GQA: 2 query heads share 1 key/value head; head 0 has the query above, head 1 a zero query
  // (uniform weights). Layout [B=1, H, L=1, E].
  auto qh = g.add_input("qh", DType::f32, {1, 2, 1, 4});
  auto kh = g.call1(OpKind::Unsqueeze, {k, 0});
  auto vh = g.call1(OpKind::Unsqueeze, {v, 0});
  auto r1 = g.call1(OpKind::ScaledDotProductAttention, {qh, kh, vh}, {{"enable_gqa", true}});
  g.outputs = {r0, r1};
  auto out = run(g, {{"q", f32({1, 1, 4}, {2 * l3, 0, 0, 0})},
                     {"k", f32({1, 2, 4}, {1, 0, 0, 0, 0, 1, 0, 0})},
                     {"v", f32({1, 2, 1}, {4, 8})},
                     {"qh", f32({1, 2, 1, 4}, {2 * l3, 0, 0, 0, 0, 0, 0, 0})}});
  // 3/4 * 4 + 1/4 * 8 = 5; uniform: 6.
  expect_tensor(out[0], DType::f32, {1, 1, 1}, {5});
  expect_tensor(out[1], DType::f32, {1, 2, 1, 1}, {5, 6});
}

// Pooling over x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]] (one plane), 3x3 windows 2 apart with
// padding 1: the windows hold {1, 2, 4, 5}, {2, 3, 5, 6}, {4, 5, 7, 8}, {5, 6, 8, 9}.
const Values kNine = {1, 2, 3, 4, 5, 6, 7, 8, 9};

REF_TEST(MaxPool2dWithIndices, PaddingTiesNanAndCeilMode) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 1, 3, 3});
  auto r0 = g.call(OpKind::MaxPool2dWithIndices, {x, IntList{3, 3}, IntList{2, 2}, IntList{1, 1}, IntList{1, 1}, false});
  // [[1, 5, 2, 0], [4, 4, 9, 9], [7, nan, 3, 8]] in 2x2 windows, ceil_mode: the last row alone.
  auto y = g.add_input("y", DType::f32, {1, 3, 4});
  auto r1 = g.call(OpKind::MaxPool2dWithIndices, {y, IntList{2}, IntList{}, IntList{0}, IntList{1}, true});
  auto n = g.add_input("n", DType::i32, {1, 1, 3, 3});
  auto r2 = g.call(OpKind::MaxPool2dWithIndices, {n, IntList{2}, IntList{1}, IntList{0}, IntList{2}, false});  // dilation 2: corners
  g.outputs = {r0[0], r0[1], r1[0], r1[1], r2[0], r2[1]};
  auto out = run(g, {{"x", f32({1, 1, 3, 3}, kNine)},
                     {"y", f32({1, 3, 4}, {1, 5, 2, 0, 4, 4, 9, 9, 7, kNan, 3, 8})},
                     {"n", make(DType::i32, {1, 1, 3, 3}, {-1, 2, -3, 4, -5, 6, -7, 8, -9})}});
  expect_tensor(out[0], DType::f32, {1, 1, 2, 2}, {5, 6, 8, 9});
  expect_tensor(out[1], DType::i64, {1, 1, 2, 2}, {4, 5, 7, 8});  // h * W + w
  expect_tensor(out[2], DType::f32, {1, 2, 2}, {5, 9, kNan, 8});
  expect_tensor(out[3], DType::i64, {1, 2, 2}, {1, 6, 9, 11});  // the first of equal 9s
  expect_tensor(out[4], DType::i32, {1, 1, 1, 1}, {-1});       // max(-1, -3, -7, -9)
  expect_tensor(out[5], DType::i64, {1, 1, 1, 1}, {0});
}

REF_TEST(AvgPool2d, PaddingCountedOrNotAndDivisor) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 1, 3, 3});
  auto with_pad = g.call1(OpKind::AvgPool2d, {x, IntList{3}, IntList{2}, IntList{1}, false, true, std::nullopt});
  auto without = g.call1(OpKind::AvgPool2d, {x, IntList{3}, IntList{2}, IntList{1}, false, false, std::nullopt});
  auto divisor = g.call1(OpKind::AvgPool2d, {x, IntList{3}, IntList{2}, IntList{1}, false, true, 2});
  g.outputs = {with_pad, without, divisor};
  auto out = run(g, {{"x", f32({1, 1, 3, 3}, kNine)}});
  expect_tensor(out[0], DType::f32, {1, 1, 2, 2}, {12.0 / 9, 16.0 / 9, 24.0 / 9, 28.0 / 9});  // 9 places with the padding
  expect_tensor(out[1], DType::f32, {1, 1, 2, 2}, {3, 4, 6, 7});                                // 4 inside
  expect_tensor(out[2], DType::f32, {1, 1, 2, 2}, {6, 8, 12, 14});
}

REF_TEST(AdaptiveAvgPool2d, OverlappingWindowsAndGlobal) {
  // 3 -> 2 windows: [0, 2) and [1, 3), so the middle row and column count twice.
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 1, 3, 3});
  g.outputs = {g.call1(OpKind::AdaptiveAvgPool2d, {x, IntList{2, 2}}), g.call1(OpKind::AdaptiveAvgPool2d, {x, IntList{1, 1}})};
  auto out = run(g, {{"x", f32({1, 1, 3, 3}, kNine)}});
  expect_tensor(out[0], DType::f32, {1, 1, 2, 2}, {3, 4, 6, 7});
  expect_tensor(out[1], DType::f32, {1, 1, 1, 1}, {5});
}

}  // namespace
}  // namespace coil::testing
