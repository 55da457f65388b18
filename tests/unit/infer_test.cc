// Shape, stride and dtype inference against PyTorch's documented rules: broadcasting, type
// promotion (dimensioned tensors > 0-d tensors > Python scalars, by category), int->float
// ops, reductions with keepdim and dim=None, and view strides.
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "frontend/export_nodes.h"
#include "frontend/fx.h"

namespace coil {
namespace {

using Kw = std::vector<std::pair<std::string, Arg>>;

struct Case {
  DType a;
  bool a_zero_dim;
  Arg b;  // a dtype-carrying tensor spec is encoded via b_dtype below when b is none
  std::optional<DType> b_dtype;
  bool b_zero_dim;
  DType want;
};

// Builds `add.Tensor(a, b)` or `add.Scalar(a, scalar)` and returns the result dtype.
DType add_result(const Case& c) {
  Graph g;
  SymShape sa = c.a_zero_dim ? SymShape{} : SymShape{3};
  ValueRef a = g.add_input("a", c.a, sa);
  if (c.b_dtype) {
    ValueRef b = g.add_input("b", *c.b_dtype, c.b_zero_dim ? SymShape{} : SymShape{3});
    return g.meta(g.call1(OpKind::AddTensor, {a, b})).dtype;
  }
  return g.meta(g.call1(OpKind::AddScalar, {a, c.b})).dtype;
}

TEST(Promotion, TableFromPyTorchRules) {
  const std::vector<Case> cases = {
      // Same category: the wider type; u8 with a signed type needs i16.
      {DType::f32, false, {}, DType::f64, false, DType::f64},
      {DType::u8, false, {}, DType::i8, false, DType::i16},
      {DType::u8, false, {}, DType::i32, false, DType::i32},
      {DType::f16, false, {}, DType::bf16, false, DType::f32},
      {DType::b8, false, {}, DType::b8, false, DType::b8},
      {DType::b8, false, {}, DType::u8, false, DType::u8},
      {DType::i64, false, {}, DType::f16, false, DType::f16},
      // A 0-d tensor does not widen a dimensioned one of the same category...
      {DType::f32, false, {}, DType::f64, true, DType::f32},
      {DType::i32, false, {}, DType::i64, true, DType::i32},
      {DType::u8, false, {}, DType::i8, true, DType::u8},
      {DType::f16, false, {}, DType::f64, true, DType::f16},
      // ...but a higher category wins.
      {DType::i32, false, {}, DType::f64, true, DType::f64},
      {DType::b8, false, {}, DType::i32, true, DType::i32},
      // Two 0-d tensors promote normally.
      {DType::i32, true, {}, DType::f64, true, DType::f64},
      // Python scalars: int -> i64 category, float -> default dtype f32, bool -> bool.
      {DType::i32, false, Arg(5), std::nullopt, false, DType::i32},
      {DType::i32, false, Arg(2.5), std::nullopt, false, DType::f32},
      {DType::i64, false, Arg(2.5), std::nullopt, false, DType::f32},
      {DType::f16, false, Arg(2.5), std::nullopt, false, DType::f16},
      {DType::b8, false, Arg(1), std::nullopt, false, DType::i64},
      {DType::b8, false, Arg(1.5), std::nullopt, false, DType::f32},
      {DType::b8, false, Arg(true), std::nullopt, false, DType::b8},
      {DType::u8, false, Arg(300), std::nullopt, false, DType::u8},
      {DType::i32, true, Arg(2.5), std::nullopt, false, DType::f32},
      {DType::f64, true, Arg(2.5), std::nullopt, false, DType::f64},
  };
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(add_result(cases[i]), cases[i].want) << "case " << i;
}

TEST(Promotion, PromoteTypesIsSymmetric) {
  for (int a = 0; a < kNumDTypes; ++a)
    for (int b = 0; b < kNumDTypes; ++b)
      EXPECT_EQ(promote_types(static_cast<DType>(a), static_cast<DType>(b)),
                promote_types(static_cast<DType>(b), static_cast<DType>(a)));
}

DType unary_result(OpKind op, DType in) {
  Graph g;
  return g.meta(g.call1(op, {g.add_input("x", in, {2})})).dtype;
}

TEST(Promotion, OpSpecificRules) {
  EXPECT_EQ(unary_result(OpKind::Exp, DType::i32), DType::f32);
  EXPECT_EQ(unary_result(OpKind::Sqrt, DType::b8), DType::f32);
  EXPECT_EQ(unary_result(OpKind::Exp, DType::f16), DType::f16);
  EXPECT_EQ(unary_result(OpKind::Abs, DType::i8), DType::i8);
  EXPECT_EQ(unary_result(OpKind::Floor, DType::i64), DType::i64);
  EXPECT_EQ(unary_result(OpKind::Isnan, DType::f32), DType::b8);
  EXPECT_EQ(unary_result(OpKind::LogicalNot, DType::i32), DType::b8);
  EXPECT_EQ(unary_result(OpKind::Sum, DType::b8), DType::i64);
  EXPECT_EQ(unary_result(OpKind::Sum, DType::i16), DType::i64);
  EXPECT_EQ(unary_result(OpKind::Sum, DType::bf16), DType::bf16);
  EXPECT_EQ(unary_result(OpKind::Argmax, DType::f32), DType::i64);
  EXPECT_EQ(unary_result(OpKind::Any, DType::f32), DType::b8);
  EXPECT_EQ(unary_result(OpKind::Any, DType::u8), DType::u8);
  EXPECT_THROW(unary_result(OpKind::Mean, DType::i64), Error);
  EXPECT_THROW(unary_result(OpKind::Gelu, DType::i64), Error);
  EXPECT_THROW(unary_result(OpKind::BitwiseNot, DType::f32), Error);
  EXPECT_THROW(unary_result(OpKind::Neg, DType::b8), Error);

  Graph g;
  ValueRef i = g.add_input("i", DType::i32, {3});
  ValueRef j = g.add_input("j", DType::i64, {3});
  EXPECT_EQ(g.meta(g.call1(OpKind::DivTensor, {i, j})).dtype, DType::f32);
  EXPECT_EQ(g.meta(g.call1(OpKind::DivTensorMode, {i, j}, {{"rounding_mode", "floor"}})).dtype, DType::i64);
  EXPECT_EQ(g.meta(g.call1(OpKind::DivTensorMode, {i, j}, {{"rounding_mode", std::nullopt}})).dtype, DType::f32);
  EXPECT_EQ(g.meta(g.call1(OpKind::Atan2, {i, i})).dtype, DType::f32);
  EXPECT_EQ(g.meta(g.call1(OpKind::LtScalar, {i, 2.5})).dtype, DType::b8);
  EXPECT_EQ(g.meta(g.call1(OpKind::MeanDim, {i, IntList{0}}, {{"dtype", DType::f64}})).dtype, DType::f64);
  EXPECT_EQ(g.meta(g.call1(OpKind::PowScalar, {2.5, i})).dtype, DType::f32);
  EXPECT_EQ(g.meta(g.call1(OpKind::Clamp, {i}, {{"min", 0.5}})).dtype, DType::f32);
  ValueRef c = g.add_input("c", DType::b8, {3});
  EXPECT_EQ(g.meta(g.call1(OpKind::WhereScalar, {c, 1, 0})).dtype, DType::i64);
  EXPECT_EQ(g.meta(g.call1(OpKind::WhereScalar, {c, 1.0, 0})).dtype, DType::f32);
  EXPECT_EQ(g.meta(g.call1(OpKind::WhereScalarOther, {c, i, 2.5})).dtype, DType::f32);
  EXPECT_THROW(g.call1(OpKind::WhereSelf, {i, i, i}), Error);  // condition must be bool
  EXPECT_THROW(g.call1(OpKind::AddTensor, {i, j}, {{"alpha", 1.5}}), Error);
  EXPECT_THROW(g.call1(OpKind::SubTensor, {c, c}), Error);
  ValueRef f = g.add_input("f", DType::f32, {3});
  EXPECT_EQ(g.meta(g.call1(OpKind::Cat, {std::vector<ValueRef>{i, f}})).dtype, DType::f32);
  EXPECT_THROW(g.call1(OpKind::BitwiseAndTensor, {f, f}), Error);
}

SymShape shape_of(const Graph& g, ValueRef v) { return g.meta(v).sizes; }

TEST(Shapes, Broadcasting) {
  Graph g;
  SymInt b = g.add_symbol("B");
  ValueRef x = g.add_input("x", DType::f32, {3, 1, 5});
  ValueRef y = g.add_input("y", DType::f32, {4, 5});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::AddTensor, {x, y})), (SymShape{3, 4, 5}));
  ValueRef s = g.add_input("s", DType::f32, {b, 4});
  ValueRef t = g.add_input("t", DType::f32, {1, 4});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::MulTensor, {s, t})), (SymShape{b, 4}));
  ValueRef z = g.add_input("z", DType::f32, {});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::AddTensor, {z, y})), (SymShape{4, 5}));
  ValueRef bad = g.add_input("bad", DType::f32, {3, 5});
  EXPECT_THROW(g.call1(OpKind::AddTensor, {bad, y}), Error);
  ValueRef e = g.add_input("e", DType::f32, {0, 5});
  ValueRef row = g.add_input("row", DType::f32, {1, 5});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::AddTensor, {e, row})), (SymShape{0, 5})) << "0 broadcasts against 1";
  EXPECT_THROW(g.call1(OpKind::AddTensor, {e, y}), Error) << "0 does not broadcast against 4";
  ValueRef e1 = g.add_input("e1", DType::f32, {0, 1});
  EXPECT_THROW(g.call1(OpKind::AddTensor, {e1, y}), Error) << "0 does not broadcast against 4";
}

TEST(Shapes, Reductions) {
  Graph g;
  ValueRef x = g.add_input("x", DType::f32, {2, 3, 4});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::SumDimIntList, {x, IntList{1}})), (SymShape{2, 4}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::SumDimIntList, {x, IntList{-1, 0}, true})), (SymShape{1, 3, 1}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::SumDimIntList, {x, std::nullopt})), (SymShape{}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::SumDimIntList, {x, IntList{}})), (SymShape{})) << "[] means all dims";
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Amax, {x})), (SymShape{}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Argmax, {x}, {{"keepdim", true}})), (SymShape{1, 1, 1}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Argmax, {x, 1})), (SymShape{2, 4}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::VarCorrection, {x, IntList{2}}, {{"correction", 0}, {"keepdim", true}})), (SymShape{2, 3, 1}));
  auto maxes = g.call(OpKind::MaxDim, {x, 2});
  ASSERT_EQ(maxes.size(), 2u);
  EXPECT_EQ(g.meta(maxes[1]).dtype, DType::i64);
  EXPECT_THROW(g.call1(OpKind::SumDimIntList, {x, IntList{3}}), Error);
  EXPECT_THROW(g.call1(OpKind::SumDimIntList, {x, IntList{1, 1}}), Error);
  ValueRef empty = g.add_input("empty", DType::f32, {0, 3});
  EXPECT_THROW(g.call1(OpKind::Amax, {empty, IntList{0}}), Error);
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Amax, {empty, IntList{1}})), (SymShape{0}));
}

TEST(Shapes, ViewsCarryStrides) {
  Graph g;
  SymInt b = g.add_symbol("B");
  ValueRef x = g.add_input("x", DType::f32, {b, 784});
  TensorMeta v = g.meta(g.call1(OpKind::View, {x, IntList{-1, 28, 28}}));
  EXPECT_EQ(v.sizes, (SymShape{b, 28, 28}));
  EXPECT_EQ(v.strides, (SymShape{784, 28, 1}));

  ValueRef y = g.add_input("y", DType::f32, {2, 3, 4});
  TensorMeta p = g.meta(g.call1(OpKind::Permute, {y, IntList{2, 0, 1}}));
  EXPECT_EQ(p.sizes, (SymShape{4, 2, 3}));
  EXPECT_EQ(p.strides, (SymShape{1, 12, 4}));
  TensorMeta e = g.meta(g.call1(OpKind::Expand, {g.add_input("c", DType::f32, {3, 1}), IntList{2, -1, 5}}));
  EXPECT_EQ(e.sizes, (SymShape{2, 3, 5}));
  EXPECT_EQ(e.strides, (SymShape{0, 1, 0}));
  TensorMeta s = g.meta(g.call1(OpKind::SliceTensor, {y, 2, 1, 100, 2}));
  EXPECT_EQ(s.sizes, (SymShape{2, 3, 2}));
  EXPECT_EQ(s.strides, (SymShape{12, 4, 2}));
  EXPECT_EQ(s.offset, SymInt(1));
  TensorMeta neg = g.meta(g.call1(OpKind::SliceTensor, {y, 1, -2}));
  EXPECT_EQ(neg.sizes, (SymShape{2, 2, 4}));
  EXPECT_EQ(neg.offset, SymInt(4));
  TensorMeta sel = g.meta(g.call1(OpKind::SelectInt, {y, 1, -1}));
  EXPECT_EQ(sel.sizes, (SymShape{2, 4}));
  EXPECT_EQ(sel.offset, SymInt(8));
  TensorMeta u = g.meta(g.call1(OpKind::Unsqueeze, {y, -1}));
  EXPECT_EQ(u.sizes, (SymShape{2, 3, 4, 1}));
  EXPECT_EQ(u.strides, (SymShape{12, 4, 1, 1}));
  // A transposed tensor can be viewed only where chunks stay contiguous.
  ValueRef t = g.call1(OpKind::Permute, {y, IntList{0, 2, 1}});
  EXPECT_THROW(g.call1(OpKind::View, {t, IntList{2, 12}}), Error);
  TensorMeta split = g.meta(g.call1(OpKind::View, {t, IntList{2, 2, 2, 3}}));
  EXPECT_EQ(split.strides, (SymShape{12, 2, 1, 4}));
  auto parts = g.call(OpKind::SplitWithSizes, {y, IntList{1, 2}, 1});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(g.meta(parts[1]).sizes, (SymShape{2, 2, 4}));
  EXPECT_EQ(g.meta(parts[1]).offset, SymInt(4));
  EXPECT_THROW(g.call(OpKind::SplitWithSizes, {y, IntList{1, 1}, 1}), Error);
}

TEST(Shapes, ShapeIndexingAndLinalg) {
  Graph g;
  ValueRef x = g.add_input("x", DType::f32, {2, 3, 4});
  ValueRef i = g.add_input("i", DType::i64, {5});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::IndexSelect, {x, 1, i})), (SymShape{2, 5, 4}));
  // Non-adjacent advanced indices move the broadcast dims to the front.
  TensorList idx = {i, std::nullopt, i};
  EXPECT_EQ(shape_of(g, g.call1(OpKind::IndexTensor, {x, idx})), (SymShape{5, 3}));
  TensorList adj = {std::nullopt, i};
  EXPECT_EQ(shape_of(g, g.call1(OpKind::IndexTensor, {x, adj})), (SymShape{2, 5, 4}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::ConstantPadNd, {x, IntList{1, 2, -1, 0}})), (SymShape{2, 2, 7}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Repeat, {x, IntList{2, 1, 1, 3}})), (SymShape{2, 2, 3, 12}));
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Cat, {std::vector<ValueRef>{x, x}, -1})), (SymShape{2, 3, 8}));
  ValueRef w = g.add_input("w", DType::f32, {4, 6});
  EXPECT_EQ(shape_of(g, g.call1(OpKind::Mm, {g.call1(OpKind::SelectInt, {x, 0, 0}), w})), (SymShape{3, 6}));
  EXPECT_THROW(g.call1(OpKind::Mm, {w, w}), Error);
  ValueRef img = g.add_input("img", DType::f32, {2, 4, 9, 9});
  ValueRef k = g.add_input("k", DType::f32, {8, 2, 3, 3});
  ValueRef conv = g.call1(OpKind::Convolution, {img, k, std::nullopt, IntList{2}, IntList{1}, IntList{1}, false, IntList{0}, 2});
  EXPECT_EQ(shape_of(g, conv), (SymShape{2, 8, 5, 5}));
  ValueRef q = g.add_input("q", DType::f32, {2, 8, 5, 16});
  ValueRef kv = g.add_input("kv", DType::f32, {2, 2, 7, 16});
  ValueRef att = g.call1(OpKind::ScaledDotProductAttention, {q, kv, kv}, {{"enable_gqa", true}});
  EXPECT_EQ(shape_of(g, att), (SymShape{2, 8, 5, 16}));
  EXPECT_THROW(g.call1(OpKind::ScaledDotProductAttention, {q, kv, kv}), Error);
  auto ln = g.call(OpKind::NativeLayerNorm, {x, IntList{3, 4}, std::nullopt, std::nullopt, 1e-5});
  EXPECT_EQ(g.meta(ln[1]).sizes, (SymShape{2, 1, 1}));
}

TEST(Shapes, CreationOps) {
  Graph g;
  EXPECT_EQ(g.meta(g.call1(OpKind::ArangeStartStep, {0, 10, 3})).sizes, (SymShape{4}));
  EXPECT_EQ(g.meta(g.call1(OpKind::ArangeStartStep, {0, 10, 3})).dtype, DType::i64);
  EXPECT_EQ(g.meta(g.call1(OpKind::ArangeStartStep, {1.0, 0, -0.25})).sizes, (SymShape{4}));
  EXPECT_EQ(g.meta(g.call1(OpKind::ArangeStartStep, {1.0, 0, -0.25})).dtype, DType::f32);
  EXPECT_EQ(g.meta(g.call1(OpKind::Full, {IntList{2, 3}, true})).dtype, DType::b8);
  EXPECT_EQ(g.meta(g.call1(OpKind::Full, {IntList{2, 3}, 7})).dtype, DType::i64);
  EXPECT_EQ(g.meta(g.call1(OpKind::ScalarTensor, {7})).dtype, DType::f32);
  ValueRef x = g.add_input("x", DType::f32, {2, 3});
  ValueRef t = g.call1(OpKind::Permute, {x, IntList{1, 0}});
  // clone keeps a dense permuted layout (preserve_format).
  EXPECT_EQ(g.meta(g.call1(OpKind::Clone, {t})).strides, (SymShape{1, 3}));
  EXPECT_EQ(g.meta(g.call1(OpKind::Clone, {t}, {{"memory_format", "contiguous_format"}})).strides, (SymShape{2, 1}));
  EXPECT_EQ(g.meta(g.call1(OpKind::ToCopy, {x}, {{"dtype", DType::bf16}})).dtype, DType::bf16);
}

// torch.ops.aten.X.default is the default overload itself, never another overload that happens
// to be coil's only one of X (max.default is max(Tensor), not max.dim).
TEST(Ops, ExplicitDefaultOverload) {
  EXPECT_EQ(op_from_name("torch.ops.aten.max.default"), OpKind::Max);
  EXPECT_EQ(op_from_name("min.default"), OpKind::Min);
  EXPECT_EQ(op_from_name("max.dim"), OpKind::MaxDim);
  EXPECT_EQ(op_from_name("var"), OpKind::VarCorrection);  // a bare base name: its only overload
  EXPECT_EQ(op_from_name("torch.ops.aten.var.default"), std::nullopt);  // var(Tensor, bool unbiased)
  EXPECT_EQ(op_from_name("aten._native_batch_norm_legit.default"), std::nullopt);  // not .no_stats
  EXPECT_FALSE(frontend::export_target_supported("torch.ops.aten._native_batch_norm_legit.default"));
  EXPECT_TRUE(frontend::export_target_supported("torch.ops.aten._native_batch_norm_legit.no_stats"));
  EXPECT_TRUE(frontend::export_target_supported("torch.ops.aten.max.default"));
}

// Normalization statistics of 16-bit inputs, as PyTorch's meta functions give them per device:
// native_layer_norm's mean and rstd are f32 on CUDA and the input's dtype on the CPU; batch
// norm with batch statistics saves them likewise, and its new running statistics are f32.
TEST(Dtypes, NormStatisticsFollowTheDevice) {
  for (Device device : {Device{}, Device{Device::Kind::cuda, 0}}) {
    bool cuda = device.kind == Device::Kind::cuda;
    for (DType t : {DType::bf16, DType::f16, DType::f32}) {
      Graph g;
      ValueRef x = g.add_input("x", t, {4, 3, 5}, device);
      DType stat = cuda ? DType::f32 : t;
      auto ln = g.call(OpKind::NativeLayerNorm, {x, IntList{5}, std::nullopt, std::nullopt, 1e-5});
      EXPECT_EQ(g.meta(ln[0]).dtype, t);
      EXPECT_EQ(g.meta(ln[1]).dtype, stat) << dtype_name(t) << (cuda ? " cuda" : " cpu");
      EXPECT_EQ(g.meta(ln[2]).dtype, stat);
      ValueRef rm = g.add_input("rm", t, {3}, device), rv = g.add_input("rv", t, {3}, device);
      for (bool training : {true, false}) {
        auto bn = g.call(OpKind::BatchNormFunctional, {x, std::nullopt, std::nullopt, rm, rv, training, 0.1, 1e-5});
        ASSERT_EQ(bn.size(), 5u);
        EXPECT_EQ(g.meta(bn[0]).dtype, t);
        EXPECT_EQ(g.meta(bn[1]).dtype, stat);
        EXPECT_EQ(g.meta(bn[1]).sizes, (training || cuda ? SymShape{3} : SymShape{0}));
        EXPECT_EQ(g.meta(bn[3]).dtype, DType::f32) << "running mean of " << dtype_name(t);
        EXPECT_EQ(g.meta(bn[4]).dtype, DType::f32);
      }
      auto no_stats = g.call(OpKind::BatchNormNoStats, {x, std::nullopt, std::nullopt, true, 0.1, 1e-5});
      EXPECT_EQ(g.meta(no_stats[1]).dtype, stat);
      EXPECT_THROW(g.call(OpKind::BatchNormNoStats, {x, std::nullopt, std::nullopt, false, 0.1, 1e-5}), Error);
    }
  }
}

// The torch.compile adapter's program names the device it runs on, and inference sees it.
TEST(Dtypes, FxProgramDeviceReachesInference) {
  auto program = [](const char* device) {
    return std::string(R"({"name": "fx", "device": {"type": ")") + device + R"(", "index": 0},
      "inputs": [{"name": "x", "meta": {"dtype": 13, "sizes": [2, 8], "strides": [8, 1]}}],
      "nodes": [{"target": "torch.ops.aten.native_layer_norm.default", "name": "ln",
                 "inputs": [{"name": "input", "arg": {"as_tensor": {"name": "x"}}},
                            {"name": "normalized_shape", "arg": {"as_ints": [8]}},
                            {"name": "weight", "arg": {"as_none": null}}, {"name": "bias", "arg": {"as_none": null}},
                            {"name": "eps", "arg": {"as_float": 1e-5}}],
                 "outputs": [{"as_tensor": {"name": "ln__0"}}, {"as_tensor": {"name": "ln__1"}}, {"as_tensor": {"name": "ln__2"}}]}],
      "outputs": ["ln__0", "ln__1", "ln__2"]})";
  };
  Graph cpu = graph_from_fx(program("cpu")), cuda = graph_from_fx(program("cuda"));
  EXPECT_EQ(cpu.meta(cpu.outputs[1]).dtype, DType::bf16);
  EXPECT_EQ(cuda.meta(cuda.outputs[1]).dtype, DType::f32);
  EXPECT_EQ(cuda.meta(cuda.outputs[2]).dtype, DType::f32);
}

// PyTorch's CPU flash attention (what sdpa(..., enable_gqa=True) becomes) takes grouped-query
// attention by its shapes alone: fewer key/value heads than query heads.
TEST(Frontend, AttentionVariantTakesGroupedQueryHeads) {
  const char* program = R"({"name": "fx",
    "inputs": [{"name": "q", "meta": {"dtype": 7, "sizes": [1, 4, 5, 8], "strides": [160, 40, 8, 1]}},
               {"name": "k", "meta": {"dtype": 7, "sizes": [1, 2, 5, 8], "strides": [80, 40, 8, 1]}}],
    "nodes": [{"target": "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default", "name": "a",
               "inputs": [{"name": "query", "arg": {"as_tensor": {"name": "q"}}}, {"name": "key", "arg": {"as_tensor": {"name": "k"}}},
                          {"name": "value", "arg": {"as_tensor": {"name": "k"}}}],
               "outputs": [{"as_tensor": {"name": "a__0"}}, {"as_tensor": {"name": "a__1"}}]}],
    "outputs": ["a__0"]})";
  Graph g = graph_from_fx(program);
  EXPECT_EQ(g.meta(g.outputs[0]).sizes, (SymShape{1, 4, 5, 8}));
}

}  // namespace
}  // namespace coil
