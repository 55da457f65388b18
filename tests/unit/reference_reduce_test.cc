// Hand-computed cases for reductions and scans: dims, keepdim, dim=None / dim=[], accumulation
// dtypes (ints sum into i64), empty reductions (identities), NaN handling and tie-breaking.
// Most cases use X = [[1, 2, 3], [4, 5, 6]]; the transposed-buffer variant reads the same X
// through permute, so every op is also checked on a non-contiguous input.
#include "test_util.h"

namespace coil::testing {
namespace {

const Values kX = {1, 2, 3, 4, 5, 6};
const Values kXt = {1, 4, 2, 5, 3, 6};  // X^T, row-major

// Builds `op(x, positional..., kw)` for an input x of `sizes` and returns all outputs, run on
// `values`. With `transposed`, the graph input is the [cols, rows] transpose buffer and a
// permute node turns it back into `sizes` (a non-contiguous value).
std::vector<Tensor> reduce(OpKind op, DType dt, const Shape& sizes, const Values& values, std::vector<Arg> args = {},
                           const Kw& kw = {}, bool transposed = false) {
  Graph g;
  ValueRef x;
  Values buf = values;
  if (transposed) {
    x = g.add_input("x", dt, {sizes[1], sizes[0]});
    x = g.call1(OpKind::Permute, {x, IntList{1, 0}});
    buf.clear();
    for (int64_t c = 0; c < sizes[1]; ++c)
      for (int64_t r = 0; r < sizes[0]; ++r) buf.push_back(values[static_cast<size_t>(r * sizes[1] + c)]);
  } else {
    x = g.add_input("x", dt, SymShape(sizes.begin(), sizes.end()));
  }
  args.insert(args.begin(), x);
  auto outs = g.call(op, args, kw);
  g.outputs = outs;
  Shape in_shape = transposed ? Shape{sizes[1], sizes[0]} : sizes;
  return run(g, {{"x", make(dt, in_shape, buf)}});
}
Tensor reduce1(OpKind op, DType dt, const Shape& sizes, const Values& values, std::vector<Arg> args = {}, const Kw& kw = {},
               bool transposed = false) {
  auto out = reduce(op, dt, sizes, values, std::move(args), kw, transposed);
  return out.empty() ? Tensor() : out[0];
}

REF_TEST(Sum, AllElementsAndDtypes) {
  expect_tensor(reduce1(OpKind::Sum, DType::f32, {2, 3}, kX), DType::f32, {}, {21});
  expect_tensor(reduce1(OpKind::Sum, DType::f32, {2, 3}, kX, {}, {}, true), DType::f32, {}, {21});
  // Integers and bools accumulate in i64: u8 200 + 100 = 300 does not wrap.
  expect_tensor(reduce1(OpKind::Sum, DType::u8, {2}, {200, 100}), DType::i64, {}, {300});
  expect_tensor(reduce1(OpKind::Sum, DType::b8, {3}, {1, 1, 0}), DType::i64, {}, {2});
  // dtype=: elements are cast first (1.5 -> 1, 2.5 -> 2), then summed; u8 sums wrap in u8.
  expect_tensor(reduce1(OpKind::Sum, DType::f32, {2}, {1.5, 2.5}, {}, {{"dtype", DType::i32}}), DType::i32, {}, {3});
  expect_tensor(reduce1(OpKind::Sum, DType::u8, {2}, {200, 100}, {}, {{"dtype", DType::u8}}), DType::u8, {}, {44});
  expect_tensor(reduce1(OpKind::Sum, DType::f32, {0, 3}, {}), DType::f32, {}, {0});  // empty sum is 0
  expect_tensor(reduce1(OpKind::Sum, DType::f32, {}, {2.5}), DType::f32, {}, {2.5});
  expect_tensor(reduce1(OpKind::Sum, DType::f32, {1, 1}, {kInf}), DType::f32, {}, {kInf});
  expect_tensor(reduce1(OpKind::Sum, DType::f16, {3}, {1, 2, 4}, {}, {{"dtype", DType::f32}}), DType::f32, {}, {7});
  // f16 accumulates wider than f16: 2048 + 1 + 1 = 2050 (exact in f16), not 2048 + 1 -> 2048 twice.
  expect_tensor(reduce1(OpKind::Sum, DType::f16, {3}, {2048, 1, 1}), DType::f16, {}, {2050}, 0, 0);
}

REF_TEST(SumDimIntList, DimsAndKeepdim) {
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {IntList{0}}), DType::f32, {3}, {5, 7, 9});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {IntList{1}, true}), DType::f32, {2, 1}, {6, 15});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {IntList{-1}}, {}, true), DType::f32, {2}, {6, 15});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {IntList{0, 1}, true}), DType::f32, {1, 1}, {21});
  // dim=None and dim=[] both reduce everything.
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {std::nullopt}), DType::f32, {}, {21});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {IntList{}}), DType::f32, {}, {21});
  // Empty reduced dims give 0; an empty kept dim gives an empty result.
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {0, 3}, {}, {IntList{0}}), DType::f32, {3}, {0, 0, 0});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {0, 3}, {}, {IntList{1}}), DType::f32, {0}, {});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::i32, {2, 3}, kX, {IntList{0}}), DType::i64, {3}, {5, 7, 9});
  expect_tensor(reduce1(OpKind::SumDimIntList, DType::f32, {2, 3}, kX, {IntList{1}}, {{"dtype", DType::f64}}), DType::f64,
                {2}, {6, 15});
}

REF_TEST(Mean, AllElements) {
  expect_tensor(reduce1(OpKind::Mean, DType::f32, {2, 3}, kX), DType::f32, {}, {3.5});
  expect_tensor(reduce1(OpKind::Mean, DType::f32, {2, 3}, kX, {}, {}, true), DType::f32, {}, {3.5});
  expect_tensor(reduce1(OpKind::Mean, DType::i32, {2}, {1, 2}, {}, {{"dtype", DType::f64}}), DType::f64, {}, {1.5});
  expect_tensor(reduce1(OpKind::Mean, DType::f32, {0}, {}), DType::f32, {}, {kNan});  // 0 / 0
  expect_tensor(reduce1(OpKind::Mean, DType::f64, {1}, {0.1}), DType::f64, {}, {0.1});
  // bf16: 7/3 rounds to the nearest bf16 (spacing 2^-6 in [2, 4)): 149/64 = 2.328125.
  expect_tensor(reduce1(OpKind::Mean, DType::bf16, {3}, {1, 2, 4}), DType::bf16, {}, {2.328125}, 0, 0);
}

REF_TEST(MeanDim, DimsAndKeepdim) {
  expect_tensor(reduce1(OpKind::MeanDim, DType::f32, {2, 3}, kX, {IntList{0}}), DType::f32, {3}, {2.5, 3.5, 4.5});
  expect_tensor(reduce1(OpKind::MeanDim, DType::f32, {2, 3}, kX, {IntList{1}, true}, {}, true), DType::f32, {2, 1}, {2, 5});
  expect_tensor(reduce1(OpKind::MeanDim, DType::f32, {2, 3}, kX, {IntList{}}), DType::f32, {}, {3.5});
  expect_tensor(reduce1(OpKind::MeanDim, DType::f32, {0, 3}, {}, {IntList{0}}), DType::f32, {3}, {kNan, kNan, kNan});
  expect_tensor(reduce1(OpKind::MeanDim, DType::i64, {2, 3}, kX, {IntList{1}}, {{"dtype", DType::f32}}), DType::f32, {2},
                {2, 5});
}

REF_TEST(Prod, AllElements) {
  expect_tensor(reduce1(OpKind::Prod, DType::f32, {2, 3}, kX), DType::f32, {}, {720});  // 6!
  expect_tensor(reduce1(OpKind::Prod, DType::f32, {2, 3}, kX, {}, {}, true), DType::f32, {}, {720});
  expect_tensor(reduce1(OpKind::Prod, DType::i32, {2, 2}, {1, 2, 3, 4}), DType::i64, {}, {24});
  expect_tensor(reduce1(OpKind::Prod, DType::f32, {0}, {}), DType::f32, {}, {1});  // empty product is 1
  expect_tensor(reduce1(OpKind::Prod, DType::f32, {3}, {2, kInf, 0}), DType::f32, {}, {kNan});
}

REF_TEST(ProdDimInt, DimAndKeepdim) {
  expect_tensor(reduce1(OpKind::ProdDimInt, DType::f32, {2, 3}, kX, {1, true}), DType::f32, {2, 1}, {6, 120});
  expect_tensor(reduce1(OpKind::ProdDimInt, DType::f32, {2, 3}, kX, {0}, {}, true), DType::f32, {3}, {4, 10, 18});
  expect_tensor(reduce1(OpKind::ProdDimInt, DType::b8, {2, 2}, {1, 1, 1, 0}, {-1}), DType::i64, {2}, {1, 0});
  expect_tensor(reduce1(OpKind::ProdDimInt, DType::f32, {2, 0}, {}, {1}), DType::f32, {2}, {1, 1});
}

REF_TEST(Amax, DimsNanAndDtype) {
  expect_tensor(reduce1(OpKind::Amax, DType::f32, {2, 3}, kX, {IntList{1}}), DType::f32, {2}, {3, 6});
  expect_tensor(reduce1(OpKind::Amax, DType::f32, {2, 3}, kX, {IntList{0}, true}, {}, true), DType::f32, {1, 3}, {4, 5, 6});
  expect_tensor(reduce1(OpKind::Amax, DType::f32, {2, 3}, kX), DType::f32, {}, {6});  // dim=[] reduces all
  expect_tensor(reduce1(OpKind::Amax, DType::f32, {3}, {1, kNan, 3}, {IntList{0}}), DType::f32, {}, {kNan});
  expect_tensor(reduce1(OpKind::Amax, DType::i32, {2, 2}, {1, -2, -3, 4}, {IntList{0}}), DType::i32, {2}, {1, 4});
  expect_tensor(reduce1(OpKind::Amax, DType::f32, {0, 2}, {}, {IntList{1}}), DType::f32, {0}, {});
}

REF_TEST(Max, WholeTensor) {
  expect_tensor(reduce1(OpKind::Max, DType::f32, {2, 3}, kX), DType::f32, {}, {6});
  expect_tensor(reduce1(OpKind::Max, DType::f32, {2, 3}, kX, {}, {}, true), DType::f32, {}, {6});
  expect_tensor(reduce1(OpKind::Max, DType::f32, {3}, {1, kNan, 3}), DType::f32, {}, {kNan});
  expect_tensor(reduce1(OpKind::Max, DType::i8, {2, 2}, {-1, -2, -3, -4}), DType::i8, {}, {-1});
  expect_tensor(reduce1(OpKind::Max, DType::b8, {2}, {0, 1}), DType::b8, {}, {1});
  expect_tensor(reduce1(OpKind::Max, DType::f32, {}, {2.5}), DType::f32, {}, {2.5});
  Graph g;  // no dim to reduce along in an empty tensor
  EXPECT_THROW(g.call1(OpKind::Max, {g.add_input("x", DType::f32, {0, 2})}), Error);
}

REF_TEST(Min, WholeTensor) {
  expect_tensor(reduce1(OpKind::Min, DType::f32, {2, 3}, kX), DType::f32, {}, {1});
  expect_tensor(reduce1(OpKind::Min, DType::f32, {3}, {kNan, -kInf, 3}), DType::f32, {}, {kNan});
  expect_tensor(reduce1(OpKind::Min, DType::i64, {3}, {4, -7, 0}), DType::i64, {}, {-7});
  expect_tensor(reduce1(OpKind::Min, DType::b8, {2}, {1, 0}), DType::b8, {}, {0});
}

REF_TEST(Amin, DimsNanAndDtype) {
  expect_tensor(reduce1(OpKind::Amin, DType::f32, {2, 3}, kX, {IntList{1}}), DType::f32, {2}, {1, 4});
  expect_tensor(reduce1(OpKind::Amin, DType::f32, {2, 3}, kX, {IntList{-2}}, {}, true), DType::f32, {3}, {1, 2, 3});
  expect_tensor(reduce1(OpKind::Amin, DType::f32, {3}, {kNan, -kInf, 3}, {IntList{0}}), DType::f32, {}, {kNan});
  expect_tensor(reduce1(OpKind::Amin, DType::b8, {2}, {1, 0}, {IntList{0}}), DType::b8, {}, {0});
  expect_tensor(reduce1(OpKind::Amin, DType::f32, {2, 0}, {}, {IntList{0}}), DType::f32, {0}, {});
  expect_tensor(reduce1(OpKind::Amin, DType::f32, {1, 3}, {3, 1, 2}, {IntList{0}}), DType::f32, {3}, {3, 1, 2});
}

REF_TEST(Argmax, FirstOccurrenceAndFlattening) {
  const Values v = {1, 5, 5, 7, 2, 7};  // [[1, 5, 5], [7, 2, 7]]
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {2, 3}, v, {1}), DType::i64, {2}, {1, 0});  // ties: first index
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {2, 3}, v, {0, true}, {}, true), DType::i64, {1, 3}, {1, 0, 1});
  // dim=None: the index into the row-major flattening (7 first appears at 3), also for a
  // non-contiguous input.
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {2, 3}, v), DType::i64, {}, {3});
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {2, 3}, v, {}, {}, true), DType::i64, {}, {3});
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {2, 3}, v, {std::nullopt, true}), DType::i64, {1, 1}, {3});
  // NaN is the maximum; the first NaN wins.
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {4}, {1, kNan, 3, kNan}), DType::i64, {}, {1});
  expect_tensor(reduce1(OpKind::Argmax, DType::i32, {3}, {-1, -3, 0}, {0}), DType::i64, {}, {2});
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {}, {5}, {0, true}), DType::i64, {}, {0});
  expect_tensor(reduce1(OpKind::Argmax, DType::f32, {0, 2}, {}, {1}), DType::i64, {0}, {});
}

REF_TEST(Argmin, FirstOccurrenceAndNan) {
  const Values v = {1, 5, 1, 7, 0, 0};  // [[1, 5, 1], [7, 0, 0]]
  expect_tensor(reduce1(OpKind::Argmin, DType::f32, {2, 3}, v, {1}), DType::i64, {2}, {0, 1});
  expect_tensor(reduce1(OpKind::Argmin, DType::f32, {2, 3}, v, {-2}, {}, true), DType::i64, {3}, {0, 1, 1});
  expect_tensor(reduce1(OpKind::Argmin, DType::f32, {2, 3}, v), DType::i64, {}, {4});
  expect_tensor(reduce1(OpKind::Argmin, DType::f32, {3}, {1, kNan, -3}), DType::i64, {}, {1});
}

REF_TEST(VarCorrection, BesselAndPopulation) {
  // [1, 2, 3, 4]: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5.
  const Values r = {1, 2, 3, 4};
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {1, 4}, r, {IntList{1}}), DType::f32, {1}, {5.0 / 3});
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {1, 4}, r, {IntList{1}}, {{"correction", 0}, {"keepdim", true}}),
                DType::f32, {1, 1}, {1.25});
  // dim=None over [[1, 2], [3, 4]] with correction 2: 5 / (4 - 2).
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {2, 2}, r, {}, {{"correction", 2}}), DType::f32, {}, {2.5});
  // A fractional correction: 5 / (4 - 0.5).
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {4}, r, {}, {{"correction", 0.5}}), DType::f32, {}, {5 / 3.5});
  // Per column of X: [1, 4] -> 4.5 (deviations 1.5^2 * 2 / 1), same for every column.
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {2, 3}, kX, {IntList{0}}, {}, true), DType::f32, {3},
                {4.5, 4.5, 4.5});
  // dim=[] reduces everything: var of 1..6 = 17.5 / 5 = 3.5.
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {2, 3}, kX, {IntList{}}), DType::f32, {}, {3.5});
  // One element with correction 1: 0 / 0.
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f64, {1}, {7}), DType::f64, {}, {kNan});
  expect_tensor(reduce1(OpKind::VarCorrection, DType::f32, {0, 2}, {}, {IntList{1}}), DType::f32, {0}, {});
}

REF_TEST(Any, AllElements) {
  expect_tensor(reduce1(OpKind::Any, DType::f32, {3}, {0, 0, 1}), DType::b8, {}, {1});
  expect_tensor(reduce1(OpKind::Any, DType::f32, {2}, {0, kNan}), DType::b8, {}, {1});  // nan is nonzero
  expect_tensor(reduce1(OpKind::Any, DType::f32, {2, 3}, {0, 0, 0, 0, 0, 0}, {}, {}, true), DType::b8, {}, {0});
  expect_tensor(reduce1(OpKind::Any, DType::b8, {0}, {}), DType::b8, {}, {0});  // empty: false
  expect_tensor(reduce1(OpKind::Any, DType::u8, {2}, {0, 2}), DType::u8, {}, {1});  // u8 in, u8 0/1 out
}

REF_TEST(AnyDim, DimAndKeepdim) {
  const Values v = {0, 1, 0, 0};  // [[0, 1], [0, 0]]
  expect_tensor(reduce1(OpKind::AnyDim, DType::i64, {2, 2}, v, {1}), DType::b8, {2}, {1, 0});
  expect_tensor(reduce1(OpKind::AnyDim, DType::i64, {2, 2}, v, {0, true}, {}, true), DType::b8, {1, 2}, {0, 1});
  expect_tensor(reduce1(OpKind::AnyDim, DType::b8, {2, 0}, {}, {1}), DType::b8, {2}, {0, 0});
}

REF_TEST(AnyDims, DimsAndNone) {
  const Values v = {0, 1, 0, 0};
  expect_tensor(reduce1(OpKind::AnyDims, DType::f32, {2, 2}, v, {IntList{0}}), DType::b8, {2}, {0, 1});
  expect_tensor(reduce1(OpKind::AnyDims, DType::f32, {2, 2}, v, {std::nullopt, true}), DType::b8, {1, 1}, {1});
  expect_tensor(reduce1(OpKind::AnyDims, DType::f32, {2, 2}, v, {IntList{0, 1}}), DType::b8, {}, {1});
}

REF_TEST(AnyDims, EmptyDimListReducesNothing) {
  // Unlike sum/amax, PyTorch's any.dims with dim=[] reduces no dims: it is `x != 0`
  // (torch.ops.aten.any.dims(t, [], False) keeps the shape).
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2});
  g.outputs = {g.call1(OpKind::AnyDims, {x, IntList{}})};
  expect_tensor(run1(g, {{"x", f32({2, 2}, {0, 1, 0, 0})}}), DType::b8, {2, 2}, {0, 1, 0, 0});
}

REF_TEST(MaxDim, ValuesAndIndices) {
  const Values v = {1, 5, 5, 7, 2, 7};  // [[1, 5, 5], [7, 2, 7]]
  auto out = reduce(OpKind::MaxDim, DType::f32, {2, 3}, v, {1});
  expect_tensor(out[0], DType::f32, {2}, {5, 7});
  expect_tensor(out[1], DType::i64, {2}, {1, 0});  // the first of equal maxima
  out = reduce(OpKind::MaxDim, DType::i32, {2, 3}, v, {0, true}, {}, true);
  expect_tensor(out[0], DType::i32, {1, 3}, {7, 5, 7});
  expect_tensor(out[1], DType::i64, {1, 3}, {1, 0, 1});
  out = reduce(OpKind::MaxDim, DType::f32, {1, 3}, {1, kNan, 5}, {1});
  expect_tensor(out[0], DType::f32, {1}, {kNan});
  expect_tensor(out[1], DType::i64, {1}, {1});
  out = reduce(OpKind::MaxDim, DType::f32, {0, 3}, {}, {1});
  expect_tensor(out[0], DType::f32, {0}, {});
  expect_tensor(out[1], DType::i64, {0}, {});
}

REF_TEST(MinDim, ValuesAndIndices) {
  const Values v = {1, 5, 1, 7, 0, 0};  // [[1, 5, 1], [7, 0, 0]]
  auto out = reduce(OpKind::MinDim, DType::f32, {2, 3}, v, {-1, true});
  expect_tensor(out[0], DType::f32, {2, 1}, {1, 0});
  expect_tensor(out[1], DType::i64, {2, 1}, {0, 1});
  out = reduce(OpKind::MinDim, DType::f32, {2, 3}, v, {0}, {}, true);
  expect_tensor(out[0], DType::f32, {3}, {1, 0, 0});
  expect_tensor(out[1], DType::i64, {3}, {0, 1, 1});
  out = reduce(OpKind::MinDim, DType::i64, {2, 0}, {}, {0});  // reducing a non-empty dim of an empty tensor
  expect_tensor(out[0], DType::i64, {0}, {});
  expect_tensor(out[1], DType::i64, {0}, {});
  out = reduce(OpKind::MinDim, DType::f32, {1, 2}, {4, 3}, {0});  // a size-1 reduced dim: index 0
  expect_tensor(out[0], DType::f32, {2}, {4, 3});
  expect_tensor(out[1], DType::i64, {2}, {0, 0});
}

REF_TEST(Cumsum, DimsAndDtypes) {
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {4}, {1, 2, 3, 4}, {0}), DType::f32, {4}, {1, 3, 6, 10});
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {2, 3}, kX, {1}), DType::f32, {2, 3}, {1, 3, 6, 4, 9, 15});
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {2, 3}, kX, {0}, {}, true), DType::f32, {2, 3}, {1, 2, 3, 5, 7, 9});
  expect_tensor(reduce1(OpKind::Cumsum, DType::i32, {2, 2}, {1, 2, 3, 4}, {-2}), DType::i64, {2, 2}, {1, 2, 4, 6});
  expect_tensor(reduce1(OpKind::Cumsum, DType::b8, {2}, {1, 1}, {0}), DType::i64, {2}, {1, 2});
  // dtype=i32: each element is cast first (1.5 -> 1, 2.5 -> 2).
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {2}, {1.5, 2.5}, {0}, {{"dtype", DType::i32}}), DType::i32, {2}, {1, 3});
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {}, {3}, {0}), DType::f32, {}, {3});
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {2, 0}, {}, {1}), DType::f32, {2, 0}, {});
  expect_tensor(reduce1(OpKind::Cumsum, DType::f32, {3}, {1, kInf, -kInf}, {0}), DType::f32, {3}, {1, kInf, kNan});
}

REF_TEST(Cumprod, DimsAndDtypes) {
  expect_tensor(reduce1(OpKind::Cumprod, DType::f32, {2, 3}, kX, {1}), DType::f32, {2, 3}, {1, 2, 6, 4, 20, 120});
  expect_tensor(reduce1(OpKind::Cumprod, DType::f32, {2, 3}, kX, {0}, {}, true), DType::f32, {2, 3}, {1, 2, 3, 4, 10, 18});
  expect_tensor(reduce1(OpKind::Cumprod, DType::i32, {3}, {2, -3, 4}, {0}), DType::i64, {3}, {2, -6, -24});
  expect_tensor(reduce1(OpKind::Cumprod, DType::f32, {}, {3}, {-1}), DType::f32, {}, {3});
  expect_tensor(reduce1(OpKind::Cumprod, DType::f32, {3}, {0, kInf, 2}, {0}), DType::f32, {3}, {0, kNan, kNan});
}

// The index is that of the last element that was >= the running max (<= the running min), or
// of a NaN, which then sticks.
REF_TEST(Cummax, LaterTiesAndNan) {
  auto out = reduce(OpKind::Cummax, DType::f32, {6}, {1, 3, 3, 2, kNan, 5}, {0});
  expect_tensor(out[0], DType::f32, {6}, {1, 3, 3, 3, kNan, kNan});
  expect_tensor(out[1], DType::i64, {6}, {0, 1, 2, 2, 4, 4});
  out = reduce(OpKind::Cummax, DType::b8, {3}, {0, 1, 0}, {0});
  expect_tensor(out[0], DType::b8, {3}, {0, 1, 1});
  expect_tensor(out[1], DType::i64, {3}, {0, 1, 1});
}

REF_TEST(Cummin, LaterTies) {
  auto out = reduce(OpKind::Cummin, DType::i32, {2, 3}, {3, 1, 1, 4, 5, 0}, {1});
  expect_tensor(out[0], DType::i32, {2, 3}, {3, 1, 1, 4, 4, 0});
  expect_tensor(out[1], DType::i64, {2, 3}, {0, 1, 2, 0, 0, 2});
}

REF_TEST(Logcumsumexp, InfinitiesAndNan) {
  double l2 = std::log(2.0);
  expect_tensor(reduce1(OpKind::Logcumsumexp, DType::f64, {3}, {0, 0, 0}, {0}), DType::f64, {3}, {0, l2, std::log(3.0)});
  expect_tensor(reduce1(OpKind::Logcumsumexp, DType::f64, {4}, {-kInf, -kInf, kInf, 1}, {0}), DType::f64, {4},
                {-kInf, -kInf, kInf, kInf});
  expect_tensor(reduce1(OpKind::Logcumsumexp, DType::f64, {3}, {1, kNan, 2}, {0}), DType::f64, {3}, {1, kNan, kNan});
  expect_tensor(reduce1(OpKind::Logcumsumexp, DType::f64, {2}, {-1000, 0}, {0}), DType::f64, {2}, {-1000, 0});
}

}  // namespace
}  // namespace coil::testing
