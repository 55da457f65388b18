// Hand-computed cases for softmax, log_softmax and the normalizations. Inputs are chosen so
// the statistics are exact: rows [1, 3] and [0, 4] both have mean 2, with variances 1 and 4.
#include "test_util.h"

namespace coil::testing {
namespace {

Tensor softmax(OpKind op, const Shape& sizes, const Values& v, int64_t dim, bool transposed = false) {
  Graph g;
  ValueRef x;
  if (transposed) {  // the input buffer is the 2-d transpose; permute restores `sizes`
    x = g.call1(OpKind::Permute, {g.add_input("x", DType::f32, {sizes[1], sizes[0]}), IntList{1, 0}});
  } else {
    x = g.add_input("x", DType::f32, SymShape(sizes.begin(), sizes.end()));
  }
  g.outputs = {g.call1(op, {x, dim, false})};
  Values buf = v;
  Shape in_shape = sizes;
  if (transposed) {
    buf.clear();
    for (int64_t c = 0; c < sizes[1]; ++c)
      for (int64_t r = 0; r < sizes[0]; ++r) buf.push_back(v[static_cast<size_t>(r * sizes[1] + c)]);
    in_shape = {sizes[1], sizes[0]};
  }
  return run1(g, {{"x", f32(in_shape, buf)}});
}

REF_TEST(Softmax, Rows) {
  // softmax([0, ln 2]) = [1, 2] / 3; softmax([ln 3, 0]) = [3, 1] / 4 (shift-invariant:
  // [ln 3 + 5, 5] gives the same).
  const double l3 = std::log(3.0);
  expect_tensor(softmax(OpKind::Softmax, {2}, {0, kLn2}, 0), DType::f32, {2}, {1.0 / 3, 2.0 / 3});
  expect_tensor(softmax(OpKind::Softmax, {2, 2}, {l3, 0, l3 + 5, 5}, 1), DType::f32, {2, 2}, {0.75, 0.25, 0.75, 0.25});
  expect_tensor(softmax(OpKind::Softmax, {2, 2}, {l3, 0, l3 + 5, 5}, -1, true), DType::f32, {2, 2}, {0.75, 0.25, 0.75, 0.25});
  // Along dim 0: columns [0, ln 2] and [ln 3, 0].
  expect_tensor(softmax(OpKind::Softmax, {2, 2}, {0, l3, kLn2, 0}, 0), DType::f32, {2, 2}, {1.0 / 3, 0.75, 2.0 / 3, 0.25});
  // Large equal values do not overflow; -inf gets weight 0; an all -inf row is 0/0 = nan.
  expect_tensor(softmax(OpKind::Softmax, {2}, {1000, 1000}, 0), DType::f32, {2}, {0.5, 0.5});
  expect_tensor(softmax(OpKind::Softmax, {3}, {-kInf, 0, 0}, 0), DType::f32, {3}, {0, 0.5, 0.5});
  expect_tensor(softmax(OpKind::Softmax, {2}, {-kInf, -kInf}, 0), DType::f32, {2}, {kNan, kNan});
  expect_tensor(softmax(OpKind::Softmax, {1, 3}, {7, 8, 9}, 0), DType::f32, {1, 3}, {1, 1, 1});  // size-1 dim
  expect_tensor(softmax(OpKind::Softmax, {0, 3}, {}, 1), DType::f32, {0, 3}, {});
  expect_tensor(softmax(OpKind::Softmax, {}, {4}, 0), DType::f32, {}, {1});
}

REF_TEST(Softmax, HalfToFloat) {
  Graph g;
  g.outputs = {g.call1(OpKind::Softmax, {g.add_input("x", DType::f16, {2}), 0, true})};
  expect_tensor(run1(g, {{"x", make(DType::f16, {2}, {0, 0})}}), DType::f32, {2}, {0.5, 0.5});
}

REF_TEST(LogSoftmax, Rows) {
  // log_softmax([0, ln 2]) = [ln(1/3), ln(2/3)] = [-ln 3, ln 2 - ln 3].
  const double l3 = std::log(3.0);
  expect_tensor(softmax(OpKind::LogSoftmax, {2}, {0, kLn2}, 0), DType::f32, {2}, {-l3, kLn2 - l3});
  expect_tensor(softmax(OpKind::LogSoftmax, {2, 2}, {0, kLn2, 5, 5 + kLn2}, 1, true), DType::f32, {2, 2},
                {-l3, kLn2 - l3, -l3, kLn2 - l3});
  expect_tensor(softmax(OpKind::LogSoftmax, {3}, {0, -kInf, 0}, 0), DType::f32, {3}, {-kLn2, -kInf, -kLn2});
  expect_tensor(softmax(OpKind::LogSoftmax, {2}, {1000, 1000}, 0), DType::f32, {2}, {-kLn2, -kLn2});
  expect_tensor(softmax(OpKind::LogSoftmax, {2, 1}, {3, 4}, 1), DType::f32, {2, 1}, {0, 0});
  expect_tensor(softmax(OpKind::LogSoftmax, {2, 0}, {}, 0), DType::f32, {2, 0}, {});
}

REF_TEST(NativeLayerNorm, StatisticsAndAffine) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2});
  auto w = g.add_input("w", DType::f32, {2});
  auto b = g.add_input("b", DType::f32, {2});
  auto plain = g.call(OpKind::NativeLayerNorm, {x, IntList{2}, std::nullopt, std::nullopt, 0.0});
  auto affine = g.call(OpKind::NativeLayerNorm, {x, IntList{2}, w, b, 3.0});
  auto all = g.call(OpKind::NativeLayerNorm, {x, IntList{2, 2}, std::nullopt, std::nullopt, 0.0});
  g.outputs = {plain[0], plain[1], plain[2], affine[0], affine[2], all[0], all[1], all[2]};
  auto out = run(g, {{"x", f32({2, 2}, {1, 3, 0, 4})}, {"w", f32({2}, {1, 2})}, {"b", f32({2}, {0, 10})}});
  // Row [1, 3]: mean 2, var 1, rstd 1 -> [-1, 1]; row [0, 4]: mean 2, var 4, rstd 1/2 -> [-1, 1].
  // mean and rstd keep the normalized dims as size 1: [2, 1].
  expect_tensor(out[0], DType::f32, {2, 2}, {-1, 1, -1, 1});
  expect_tensor(out[1], DType::f32, {2, 1}, {2, 2});
  expect_tensor(out[2], DType::f32, {2, 1}, {1, 0.5});
  // eps = 3: rstd = 1/sqrt(1 + 3) = 1/2 and 1/sqrt(4 + 3); then * [1, 2] + [0, 10].
  const double r7 = 1 / std::sqrt(7.0);
  expect_tensor(out[3], DType::f32, {2, 2}, {-0.5, 10 + 2 * 0.5, -2 * r7, 10 + 2 * 2 * r7});
  expect_tensor(out[4], DType::f32, {2, 1}, {0.5, r7});
  // Over both dims: [1, 3, 0, 4] has mean 2, var (1 + 1 + 4 + 4)/4 = 2.5.
  const double r = 1 / std::sqrt(2.5);
  expect_tensor(out[5], DType::f32, {2, 2}, {-r, r, -2 * r, 2 * r});
  expect_tensor(out[6], DType::f32, {1, 1}, {2});
  expect_tensor(out[7], DType::f32, {1, 1}, {r});
}

REF_TEST(NativeLayerNorm, NonContiguousAndZeroSize) {
  Graph g;
  auto xt = g.call1(OpKind::Permute, {g.add_input("x", DType::f32, {2, 2}), IntList{1, 0}});
  auto a = g.call(OpKind::NativeLayerNorm, {xt, IntList{2}, std::nullopt, std::nullopt, 0.0});
  auto z = g.call(OpKind::NativeLayerNorm, {g.add_input("z", DType::f32, {0, 2}), IntList{2}, std::nullopt, std::nullopt, 1e-5});
  g.outputs = {a[0], z[0], z[1]};
  // The buffer [[1, 0], [3, 4]] transposed is [[1, 3], [0, 4]].
  auto out = run(g, {{"x", f32({2, 2}, {1, 0, 3, 4})}, {"z", f32({0, 2}, {})}});
  expect_tensor(out[0], DType::f32, {2, 2}, {-1, 1, -1, 1});
  expect_tensor(out[1], DType::f32, {0, 2}, {});
  expect_tensor(out[2], DType::f32, {0, 1}, {});
}

REF_TEST(NativeLayerNorm, Bf16StatisticsStayBf16OnCpu) {
  Graph g;
  auto r = g.call(OpKind::NativeLayerNorm, {g.add_input("x", DType::bf16, {1, 2}), IntList{2}, std::nullopt, std::nullopt, 0.0});
  g.outputs = {r[0], r[1], r[2]};
  auto out = run(g, {{"x", make(DType::bf16, {1, 2}, {1, 3})}});
  expect_tensor(out[0], DType::bf16, {1, 2}, {-1, 1}, 0, 0);
  expect_tensor(out[1], DType::bf16, {1, 1}, {2}, 0, 0);
  expect_tensor(out[2], DType::bf16, {1, 1}, {1}, 0, 0);
}

REF_TEST(NativeGroupNorm, TwoGroups) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {1, 4, 1});
  auto w = g.add_input("w", DType::f32, {4});
  auto b = g.add_input("b", DType::f32, {4});
  auto r = g.call(OpKind::NativeGroupNorm, {x, w, b, 1, 4, 1, 2, 0.0});
  auto p = g.call(OpKind::NativeGroupNorm, {x, std::nullopt, std::nullopt, 1, 4, 1, 1, 0.0});
  g.outputs = {r[0], r[1], r[2], p[0], p[1], p[2]};
  auto out = run(g, {{"x", f32({1, 4, 1}, {1, 3, 0, 4})}, {"w", f32({4}, {1, 2, 3, 4})}, {"b", f32({4}, {0, 0, 1, 1})}});
  // Group 0 = channels [1, 3] -> [-1, 1]; group 1 = [0, 4] -> [-1, 1]; then * w + b.
  expect_tensor(out[0], DType::f32, {1, 4, 1}, {-1, 2, -2, 5});
  expect_tensor(out[1], DType::f32, {1, 2}, {2, 2});
  expect_tensor(out[2], DType::f32, {1, 2}, {1, 0.5});
  // One group over all four: mean 2, var 2.5.
  const double rs = 1 / std::sqrt(2.5);
  expect_tensor(out[3], DType::f32, {1, 4, 1}, {-rs, rs, -2 * rs, 2 * rs});
  expect_tensor(out[4], DType::f32, {1, 1}, {2});
  expect_tensor(out[5], DType::f32, {1, 1}, {rs});
}

REF_TEST(NativeGroupNorm, SpatialAndBatch) {
  Graph g;
  // N = 2, C = 2, H x W = 1 x 2, one channel per group: each (n, c) row of 2 is normalized.
  auto x = g.add_input("x", DType::f32, {2, 2, 1, 2});
  auto r = g.call(OpKind::NativeGroupNorm, {x, std::nullopt, std::nullopt, 2, 2, 2, 2, 0.0});
  g.outputs = {r[0], r[1], r[2]};
  auto out = run(g, {{"x", f32({2, 2, 1, 2}, {1, 3, 0, 4, 5, 7, 10, 10})}});
  // [5, 7]: mean 6, var 1; [10, 10]: var 0, rstd = 1/sqrt(0) = inf, (x - mean) * rstd = 0 * inf = nan.
  expect_tensor(out[0], DType::f32, {2, 2, 1, 2}, {-1, 1, -1, 1, -1, 1, kNan, kNan});
  expect_tensor(out[1], DType::f32, {2, 2}, {2, 2, 6, 10});
  expect_tensor(out[2], DType::f32, {2, 2}, {1, 0.5, 1, kInf});
}

REF_TEST(BatchNormNoTraining, RunningStatistics) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2});
  auto rm = g.add_input("rm", DType::f32, {2});
  auto rv = g.add_input("rv", DType::f32, {2});
  auto w = g.add_input("w", DType::f32, {2});
  auto b = g.add_input("b", DType::f32, {2});
  auto plain = g.call(OpKind::BatchNormNoTraining, {x, std::nullopt, std::nullopt, rm, rv, 0.1, 0.0});
  auto affine = g.call(OpKind::BatchNormNoTraining, {x, w, b, rm, rv, 0.1, 0.0});
  auto x4 = g.add_input("x4", DType::f32, {1, 2, 1, 2});
  auto spatial = g.call(OpKind::BatchNormNoTraining, {x4, std::nullopt, std::nullopt, rm, rv, 0.1, 0.0});
  g.outputs = {plain[0], plain[1], plain[2], affine[0], spatial[0]};
  auto out = run(g, {{"x", f32({2, 2}, {1, 3, 0, 4})},
                     {"rm", f32({2}, {1, 2})},
                     {"rv", f32({2}, {4, 0.25})},
                     {"w", f32({2}, {2, -1})},
                     {"b", f32({2}, {0.5, 0})},
                     {"x4", f32({1, 2, 1, 2}, {1, 5, 2, 3})}});
  // Channel 0: (x - 1) / sqrt(4) = (x - 1) / 2; channel 1: (x - 2) / sqrt(0.25) = 2 (x - 2).
  expect_tensor(out[0], DType::f32, {2, 2}, {0, 2, -0.5, 4});
  // The saved statistics are empty in inference mode.
  expect_tensor(out[1], DType::f32, {0}, {});
  expect_tensor(out[2], DType::f32, {0}, {});
  expect_tensor(out[3], DType::f32, {2, 2}, {0.5, -2, -0.5, -4});
  expect_tensor(out[4], DType::f32, {1, 2, 1, 2}, {0, 2, 0, 2});
}

// Batch statistics: per channel over the batch (and spatial dims). Channel 0 holds [1, 3] (mean
// 2, biased variance 1, unbiased 2), channel 1 [0, 4] (mean 2, variance 4, unbiased 8).
REF_TEST(BatchNormFunctional, BatchStatisticsAndRunningUpdate) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2});
  auto rm = g.add_input("rm", DType::f32, {2});
  auto rv = g.add_input("rv", DType::f32, {2});
  auto w = g.add_input("w", DType::f32, {2});
  auto b = g.add_input("b", DType::f32, {2});
  auto train = g.call(OpKind::BatchNormFunctional, {x, w, b, rm, rv, true, 0.25, 0.0});
  auto eval = g.call(OpKind::BatchNormFunctional, {x, std::nullopt, std::nullopt, rm, rv, false, 0.25, 0.0});
  g.outputs = {train[0], train[1], train[2], train[3], train[4], eval[0], eval[1], eval[3], eval[4]};
  auto out = run(g, {{"x", f32({2, 2}, {1, 0, 3, 4})},
                     {"rm", f32({2}, {6, -2})},
                     {"rv", f32({2}, {4, 0.25})},
                     {"w", f32({2}, {2, -1})},
                     {"b", f32({2}, {0.5, 0})}});
  // Normalized: channel 0 (x - 2) / 1 = [-1, 1], channel 1 (x - 2) / 2 = [-1, 1]; then * w + b.
  expect_tensor(out[0], DType::f32, {2, 2}, {-1.5, 1, 2.5, -1});
  expect_tensor(out[1], DType::f32, {2}, {2, 2});      // saved mean
  expect_tensor(out[2], DType::f32, {2}, {1, 0.5});    // saved invstd
  // 0.25 * batch + 0.75 * running: mean [0.5 + 4.5, 0.5 - 1.5], variance (unbiased) [0.5 + 3, 2 + 0.1875].
  expect_tensor(out[3], DType::f32, {2}, {5, -1});
  expect_tensor(out[4], DType::f32, {2}, {3.5, 2.1875});
  // Eval mode: the running statistics normalize ((x - 6) / 2, (x + 2) / 0.5) and pass through;
  // nothing is saved on the CPU.
  expect_tensor(out[5], DType::f32, {2, 2}, {-2.5, 4, -1.5, 12});
  expect_tensor(out[6], DType::f32, {0}, {});
  expect_tensor(out[7], DType::f32, {2}, {6, -2});
  expect_tensor(out[8], DType::f32, {2}, {4, 0.25});
}

REF_TEST(BatchNormFunctional, HalfInputsKeepF32RunningStatistics) {
  Graph g;
  auto x = g.add_input("x", DType::bf16, {2, 1, 2});
  auto rm = g.add_input("rm", DType::bf16, {1});
  auto rv = g.add_input("rv", DType::bf16, {1});
  auto out = g.call(OpKind::BatchNormFunctional, {x, std::nullopt, std::nullopt, rm, rv, true, 0.1, 0.0});
  g.outputs = {out[0], out[3], out[4]};
  // [1, 2, 3, 4]: mean 2.5, biased variance 1.25, unbiased 5/3; the update is not rounded to bf16.
  auto r = run(g, {{"x", make(DType::bf16, {2, 1, 2}, {1, 2, 3, 4})}, {"rm", make(DType::bf16, {1}, {1})}, {"rv", make(DType::bf16, {1}, {1})}});
  expect_tensor(r[1], DType::f32, {1}, {0.1 * 2.5 + 0.9});
  expect_tensor(r[2], DType::f32, {1}, {0.1 * 5.0 / 3.0 + 0.9});
  EXPECT_EQ(r[0].dtype(), DType::bf16);
}

REF_TEST(BatchNormNoStats, BatchStatistics) {
  Graph g;
  auto x = g.add_input("x", DType::f32, {2, 2, 1});
  auto out = g.call(OpKind::BatchNormNoStats, {x, std::nullopt, std::nullopt, true, 0.1, 0.0});
  g.outputs = {out[0], out[1], out[2]};
  auto r = run(g, {{"x", f32({2, 2, 1}, {1, 0, 3, 4})}});
  expect_tensor(r[0], DType::f32, {2, 2, 1}, {-1, -1, 1, 1});
  expect_tensor(r[1], DType::f32, {2}, {2, 2});
  expect_tensor(r[2], DType::f32, {2}, {1, 0.5});
}

REF_TEST(BatchNormNoTraining, StridedAndZeroBatch) {
  Graph g;
  auto xt = g.call1(OpKind::Permute, {g.add_input("x", DType::f32, {2, 2}), IntList{1, 0}});
  auto rm = g.add_input("rm", DType::f32, {2});
  auto rv = g.add_input("rv", DType::f32, {2});
  auto a = g.call(OpKind::BatchNormNoTraining, {xt, std::nullopt, std::nullopt, rm, rv, 0.1, 0.0});
  auto z = g.call(OpKind::BatchNormNoTraining, {g.add_input("z", DType::f32, {0, 2}), std::nullopt, std::nullopt, rm, rv, 0.1, 0.0});
  // eps is added to the variance: (x - 1) / sqrt(3 + 1).
  auto e = g.call(OpKind::BatchNormNoTraining, {xt, std::nullopt, std::nullopt, rm, rv, 0.1, 1.0});
  g.outputs = {a[0], z[0], e[0]};
  // The buffer [[1, 0], [3, 4]] transposed is [[1, 3], [0, 4]].
  auto out = run(g, {{"x", f32({2, 2}, {1, 0, 3, 4})}, {"rm", f32({2}, {1, 2})}, {"rv", f32({2}, {4, 0.25})}, {"z", f32({0, 2}, {})}});
  expect_tensor(out[0], DType::f32, {2, 2}, {0, 2, -0.5, 4});
  expect_tensor(out[1], DType::f32, {0, 2}, {});
  // Channel 0: (x - 1) / sqrt(5); channel 1: (x - 2) / sqrt(1.25).
  expect_tensor(out[2], DType::f32, {2, 2}, {0, 1 / std::sqrt(1.25), -1 / std::sqrt(5.0), 2 / std::sqrt(1.25)});
}

}  // namespace
}  // namespace coil::testing
