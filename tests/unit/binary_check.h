// Shared drivers for binary pointwise op tests: one table of element-wise expectations is
// checked in several layouts (contiguous, size-1 dims, broadcasting, strided inputs,
// non-contiguous graph values, zero-size).
#pragma once
#include "test_util.h"

namespace coil::testing {

struct Operand {
  DType dtype;
  Values values;
};

inline Values repeat_values(const Values& v, int times) {
  Values out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// A buffer of 2n values where position 2i+1 holds v[i]: read through stride 2 and offset 1
// (as a strided input) or as column 1 of an [n, 2] tensor.
inline Values interleave(const Values& v) {
  Values buf(2 * v.size(), 0.0);
  for (size_t i = 0; i < v.size(); ++i) buf[2 * i + 1] = v[i];
  return buf;
}

// op(a, b) element-wise must equal `want` (same length n), in these layouts:
//   1. [n] op [n];   2. [n, 1] op [n, 1] (size-1 dims);
//   3. [2, n] op [n] and [n] op [2, n] (broadcast of one side);
//   4. [2, 1, n] op [2, n] -> [2, 2, n] (both sides broadcast);
//   5. a strided input buffer op column 1 of an [n, 2] input (select: stride 2);
//   6. zero-size: [0, n] op [n] and [n] op [0, 1].
inline void check_binary(OpKind op, const Operand& a, const Operand& b, DType out_dt, const Values& want, const Kw& kw = {},
                         double rtol = 2e-6) {
  const int64_t n = static_cast<int64_t>(want.size());
  ASSERT_EQ(a.values.size(), want.size());
  ASSERT_EQ(b.values.size(), want.size());
  const std::string name(op_schema(op).name);
  auto one = [&](const std::string& what, const Shape& sa, const Values& va, const Shape& sb, const Values& vb,
                 const Shape& so, const Values& w) {
    SCOPED_TRACE(name + " " + what);
    Graph g;
    auto x = g.add_input("a", a.dtype, SymShape(sa.begin(), sa.end()));
    auto y = g.add_input("b", b.dtype, SymShape(sb.begin(), sb.end()));
    g.outputs = {g.call1(op, {x, y}, kw)};
    expect_tensor(run1(g, {{"a", make(a.dtype, sa, va)}, {"b", make(b.dtype, sb, vb)}}), out_dt, so, w, rtol);
  };
  one("contiguous", {n}, a.values, {n}, b.values, {n}, want);
  one("size-1 dims", {n, 1}, a.values, {n, 1}, b.values, {n, 1}, want);
  one("broadcast b", {2, n}, repeat_values(a.values, 2), {n}, b.values, {2, n}, repeat_values(want, 2));
  one("broadcast a", {n}, a.values, {2, n}, repeat_values(b.values, 2), {2, n}, repeat_values(want, 2));
  one("broadcast both", {2, 1, n}, repeat_values(a.values, 2), {2, n}, repeat_values(b.values, 2), {2, 2, n},
      repeat_values(want, 4));
  one("zero-size a", {0, n}, {}, {n}, b.values, {0, n}, {});
  one("zero-size b", {n}, a.values, {0, 1}, {}, {0, n}, {});
  {
    SCOPED_TRACE(name + " strided a, selected b");
    Graph g;
    auto x = g.add_input("a", a.dtype, {n});
    auto y = g.call1(OpKind::SelectInt, {g.add_input("b", b.dtype, {n, 2}), 1, 1});
    g.outputs = {g.call1(op, {x, y}, kw)};
    Tensor ta = strided(a.dtype, {n}, {2}, interleave(a.values), 1);
    Tensor tb = make(b.dtype, {n, 2}, interleave(b.values));
    expect_tensor(run1(g, {{"a", ta}, {"b", tb}}), out_dt, {n}, want, rtol);
  }
}

// op(a, scalar) element-wise must equal `want`: contiguous [n], size-1 dims [1, n, 1], a
// strided input, select + expand to [2, n], and zero-size [0, 2].
inline void check_scalar(OpKind op, const Operand& a, Arg scalar, DType out_dt, const Values& want, const Kw& kw = {},
                         double rtol = 2e-6) {
  const int64_t n = static_cast<int64_t>(want.size());
  ASSERT_EQ(a.values.size(), want.size());
  const std::string name(op_schema(op).name);
  auto one = [&](const std::string& what, const Shape& sa, const Tensor& t, const Shape& so, const Values& w) {
    SCOPED_TRACE(name + " " + what);
    Graph g;
    g.outputs = {g.call1(op, {g.add_input("a", a.dtype, SymShape(sa.begin(), sa.end())), scalar}, kw)};
    expect_tensor(run1(g, {{"a", t}}), out_dt, so, w, rtol);
  };
  one("contiguous", {n}, make(a.dtype, {n}, a.values), {n}, want);
  one("size-1 dims", {1, n, 1}, make(a.dtype, {1, n, 1}, a.values), {1, n, 1}, want);
  one("strided", {n}, strided(a.dtype, {n}, {2}, interleave(a.values), 1), {n}, want);
  one("zero-size", {0, 2}, make(a.dtype, {0, 2}, {}), {0, 2}, {});
  {
    SCOPED_TRACE(name + " select + expand");
    Graph g;
    auto col = g.call1(OpKind::SelectInt, {g.add_input("a", a.dtype, {n, 2}), 1, 1});
    auto e = g.call1(OpKind::Expand, {col, IntList{2, n}});
    g.outputs = {g.call1(op, {e, scalar}, kw)};
    expect_tensor(run1(g, {{"a", make(a.dtype, {n, 2}, interleave(a.values))}}), out_dt, {2, n}, repeat_values(want, 2), rtol);
  }
}

}  // namespace coil::testing
