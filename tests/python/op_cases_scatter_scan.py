"""Op cases (see op_cases.py) of the scans beside cumsum (cumprod, cummax, cummin,
logcumsumexp) and the scatters beside scatter/scatter_add (scatter.value, scatter.reduce,
scatter.value_reduce, scatter_reduce.two with every reduction and include_self, index_put with
integer indices and with a boolean mask, accumulating or not): every dtype PyTorch takes (where
it raises, coil must reject the graph), layouts, 0-d and empty operands, NaN, ties, repeated
indices and integer wrap-around."""
import math

import torch

from op_cases import ALL, BF16, BOOL, F16, F32, F64, FLOATS, I32, I64, I8, U8, add, dt_tag, idx, unique_idx

NAN, INF = math.nan, math.inf
R3 = (2, 5, 3)

# ----------------------------------------------------------------------------------------------
# Scans along one dim: every dtype, layouts and shapes, then NaN / ties / infinities.

SCANS = ["cumprod", "cummax", "cummin", "logcumsumexp"]
N_OUT = {"cummax": 2, "cummin": 2}
for op in SCANS:
    for dt in ALL:
        low, high = (-2, 3) if op == "cumprod" else (None, None)
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(R3, dt, low=low, high=high, special=op != "cumprod"), 1,
                                             n_out=N_OUT.get(op, 1)))
    for tag, shape, layout, dim in [("0d", (), "contig", 0), ("0d-neg", (), "contig", -1), ("zero", (0, 4), "contig", 1),
                                    ("zero-scanned", (4, 0), "contig", 1), ("size1", (1, 4, 1), "contig", 2),
                                    ("T", (4, 5), "T", 1), ("T-dim0", (4, 5), "T", 0), ("step2", (4, 5), "step2", -1),
                                    ("expand", (4, 5), "expand", 0), ("long", (3, 300), "contig", 1),
                                    ("dim-out-of-range", (4, 5), "contig", 2)]:
        add(op, tag, lambda g: g.call(op, g.t(shape, F32, layout, low=0.5, high=1.5) if op == "cumprod"
                                      else g.t(shape, F32, layout), dim, n_out=N_OUT.get(op, 1)))
add("cumprod", "dtype=f64", lambda g: g.call("cumprod", g.t(R3, F32, low=-2, high=2), 2, dtype=F64))
add("cumprod", "i32-dtype=i32", lambda g: g.call("cumprod", g.t(R3, I32), 1, dtype=I32))
add("cumprod", "i64-wraps", lambda g: g.call("cumprod", g.t((5,), I64, values=[1 << 40, 1 << 30, 3, -1, 2]), 0))
add("cumprod", "bf16-long", lambda g: g.call("cumprod", g.t((2, 64), BF16, low=0.9, high=1.1), 1))
TIES = [1.0, 3.0, 3.0, NAN, 3.0, -1.0, NAN, 2.0, 2.0, -1.0, 0.0, -0.0]
for op in ["cummax", "cummin"]:
    add(op, "ties-nan", lambda g: g.call(op, g.t((3, 4), F32, values=TIES), 1, n_out=2))
    add(op, "ties-nan-dim0", lambda g: g.call(op, g.t((3, 4), F32, values=TIES), 0, n_out=2))
    add(op, "inf", lambda g: g.call(op, g.t((5,), F32, values=[-INF, INF, 1.0, INF, -INF]), 0, n_out=2))
    add(op, "ties-int", lambda g: g.call(op, g.t((2, 4), I32, values=[5, 1, 5, 0, -2, -2, 7, 7]), 1, n_out=2))
    add(op, "i64-extremes", lambda g: g.call(op, g.t((4,), I64, values=[-(1 << 63), (1 << 63) - 1, 0, (1 << 63) - 1]), 0,
                                             n_out=2))
    add(op, "bool", lambda g: g.call(op, g.t((2, 3), BOOL, values=[False, True, True, True, False, False]), 1, n_out=2))
add("logcumsumexp", "inf-nan", lambda g: g.call("logcumsumexp", g.t((8,), F32, values=[-INF, -INF, 0.0, INF, 1.0, NAN, 2.0, -INF]), 0))
add("logcumsumexp", "neg-inf-row", lambda g: g.call("logcumsumexp", g.t((2, 3), F32, values=[-INF] * 6), 1))
add("logcumsumexp", "far-apart", lambda g: g.call("logcumsumexp", g.t((4,), F32, values=[-1000.0, 0.0, -1000.0, 80.0]), 0))
add("logcumsumexp", "f16-long", lambda g: g.call("logcumsumexp", g.t((3, 200), F16), 1))

# ----------------------------------------------------------------------------------------------
# Scatters: scatter.value and the reduce overloads, every dtype, repeated indices where the
# result does not depend on their order, include_self both ways, errors.

for dt in ALL:
    value = True if dt == BOOL else 3 if not dt.is_floating_point else -1.5
    add("scatter.value", dt_tag(dt), lambda g: g.call("scatter.value", g.t((4, 5), dt), 0, unique_idx(g, (3, 4), 0, 4), value))
    for reduce in ["add", "multiply"]:
        lo, hi = (-2, 3) if reduce == "multiply" else (None, None)
        add("scatter.reduce", f"{reduce}-{dt_tag(dt)}", lambda g: g.call(
            "scatter.reduce", g.t((4, 5), dt, low=lo, high=hi), 1, idx(g, (4, 7), 5), g.t((4, 7), dt, low=lo, high=hi),
            reduce=reduce))
        add("scatter.value_reduce", f"{reduce}-{dt_tag(dt)}", lambda g: g.call(
            "scatter.value_reduce", g.t((4, 5), dt, low=lo, high=hi), 1, idx(g, (4, 7), 5), value, reduce=reduce))
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            lo, hi = (-2, 3) if reduce == "prod" else (None, None)
            add("scatter_reduce.two", f"{reduce}-self={include_self}-{dt_tag(dt)}", lambda g: g.call(
                "scatter_reduce.two", g.t((4, 5), dt, low=lo, high=hi), 1, idx(g, (4, 6), 5),
                g.t((4, 6), dt, low=lo, high=hi, special=reduce in ("amax", "amin")), reduce, include_self=include_self))
for reduce in ["sum", "mean", "amax"]:
    for tag, shape, dim, ishape, sshape in [("0d", (), 0, (), ()), ("empty-index", (4, 5), 0, (0, 5), (3, 5)),
                                            ("3d", (2, 4, 3), 1, (2, 6, 2), (2, 6, 3)), ("dim0", (4, 5), 0, (7, 5), (7, 5))]:
        n = shape[dim] if shape else 1
        add("scatter_reduce.two", f"{reduce}-{tag}", lambda g: g.call(
            "scatter_reduce.two", g.t(shape), dim, idx(g, ishape, n), g.t(sshape), reduce, include_self=False))
    add("scatter_reduce.two", f"{reduce}-T-self-step2-src", lambda g: g.call(
        "scatter_reduce.two", g.t((5, 4), F32, "T"), 1, idx(g, (5, 3), 4), g.t((5, 3), F32, "step2"), reduce))
add("scatter_reduce.two", "mean-i64-floor", lambda g: g.call(
    "scatter_reduce.two", g.t((3,), I64, values=[-5, 7, 9]), 0, g.t((3,), I64, values=[0, 0, 1]),
    g.t((3,), I64, values=[2, 3, 4]), "mean"))
add("scatter_reduce.two", "sum-i8-wraps", lambda g: g.call(
    "scatter_reduce.two", g.t((2,), I8, values=[100, -100]), 0, g.t((4,), I64, values=[0, 0, 1, 1]),
    g.t((4,), I8, values=[20, 10, -20, -10]), "sum"))
add("scatter_reduce.two", "amin-i64-extremes", lambda g: g.call(
    "scatter_reduce.two", g.t((3,), I64, values=[0, 0, 0]), 0, g.t((2,), I64, values=[0, 1]),
    g.t((2,), I64, values=[(1 << 63) - 1, -(1 << 63)]), "amin", include_self=False))
add("scatter_reduce.two", "bad-reduce", lambda g: g.call(
    "scatter_reduce.two", g.t((4, 5)), 1, idx(g, (4, 6), 5), g.t((4, 6)), "add"))
for reduce in ["max", "min"]:  # ATen's other names of amax and amin
    add("scatter_reduce.two", f"{reduce}-alias", lambda g: g.call(
        "scatter_reduce.two", g.t((4, 5)), 1, idx(g, (4, 6), 5), g.t((4, 6), special=True), reduce, include_self=False))
add("scatter_reduce.two", "mean-bool", lambda g: g.call(
    "scatter_reduce.two", g.t((4, 5), BOOL), 1, idx(g, (4, 6), 5), g.t((4, 6), BOOL), "mean"))
add("scatter_reduce.two", "src-dtype", lambda g: g.call(
    "scatter_reduce.two", g.t((4, 5)), 1, idx(g, (4, 6), 5), g.t((4, 6), F64), "sum"))
add("scatter.reduce", "bad-reduce", lambda g: g.call(
    "scatter.reduce", g.t((4, 5)), 1, idx(g, (4, 6), 5), g.t((4, 6)), reduce="sum"))
add("scatter.value", "value-does-not-fit", lambda g: g.call("scatter.value", g.t((4, 5), U8), 0, idx(g, (3, 4), 4), 300))

# ----------------------------------------------------------------------------------------------
# index_put: integer indices (None entries, broadcasting, adjacent or not, negative, i32),
# accumulating (repeats add up) or not (no repeats: which write wins is unspecified); one
# boolean mask with values broadcast over the selected rows.


def perm(g, n, k, dt=I64):
    """k distinct indices in [0, n), as an index operand."""
    return g.input(torch.randperm(n, generator=g.gen)[:k].to(dt))


X3 = (4, 5, 6)
for dt in ALL:
    for accumulate in [False, True]:
        add("index_put", f"{dt_tag(dt)}-acc={accumulate}", lambda g: g.call(
            "index_put", g.t((5, 4), dt), [idx(g, (7,), 5) if accumulate else perm(g, 5, 3)],
            g.t((7 if accumulate else 3, 4), dt, special=not accumulate), accumulate))
    add("index_put", f"mask-{dt_tag(dt)}", lambda g: g.call(
        "index_put", g.t((5, 4), dt), [g.t((5,), BOOL)], g.t((4,), dt)))
# (tag, indices given as (shape, bound) or None, values shape); accumulate so repeats are defined
INDEX_PUTS = [("middle", [None, ((3,), 5)], (4, 3, 6)), ("two-adjacent", [((2, 3), 4), ((3,), 5)], (2, 3, 6)),
              ("apart", [((3,), 4), None, ((3,), 6)], (3, 5)), ("bcast-values", [None, ((2,), 5)], (6,)),
              ("scalar-values", [((4,), 4)], ()), ("empty", [((0,), 4)], (0, 5, 6)), ("0d-index", [((), 4)], (5, 6))]
for tag, spec, vshape in INDEX_PUTS:
    for accumulate in [True, False] if tag in ("empty", "0d-index", "scalar-values") else [True]:
        add("index_put", f"{tag}-acc={accumulate}", lambda g: g.call(
            "index_put", g.t(X3), [None if s is None else idx(g, *s) for s in spec], g.t(vshape), accumulate))
add("index_put", "negative", lambda g: g.call("index_put", g.t(X3), [None, g.t((3,), I64, values=[-1, -5, 2])], g.t((3,)), True))
add("index_put", "out-of-range", lambda g: g.call("index_put", g.t(X3), [g.t((2,), I64, values=[4, 1])], g.t((5, 6)), True))
add("index_put", "index-i32", lambda g: g.call("index_put", g.t(X3), [None, idx(g, (3,), 5, I32)], g.t((6,)), True))
add("index_put", "T-self", lambda g: g.call("index_put", g.t((5, 4), F32, "T"), [idx(g, (6,), 5)], g.t((6, 4)), True))
add("index_put", "f16-repeats", lambda g: g.call("index_put", g.t((3, 4), F16), [idx(g, (9,), 3)], g.t((9, 4), F16), True))
add("index_put", "bf16-repeats", lambda g: g.call("index_put", g.t((3, 4), BF16), [idx(g, (9,), 3)], g.t((9, 4), BF16), True))
add("index_put", "i8-wraps", lambda g: g.call("index_put", g.t((2,), I8, values=[100, -100]), [g.t((4,), I64, values=[0, 0, 1, 1])],
                                                g.t((4,), I8, values=[20, 10, -20, -10]), True))
add("index_put", "values-dtype", lambda g: g.call("index_put", g.t((5, 4)), [idx(g, (3,), 5)], g.t((3, 4), F64)))
add("index_put", "values-shape", lambda g: g.call("index_put", g.t((5, 4)), [idx(g, (3,), 5)], g.t((2, 4))))
add("index_put", "mask-2d", lambda g: g.call("index_put", g.t(X3), [g.t((4, 5), BOOL)], g.t((6,)), True))
add("index_put", "mask-middle", lambda g: g.call("index_put", g.t(X3), [None, g.t((5,), BOOL)], g.t((4, 1, 6))))
add("index_put", "mask-scalar", lambda g: g.call("index_put", g.t(X3), [g.t((4, 5, 6), BOOL)], g.t(())))
add("index_put", "mask-u8", lambda g: g.call("index_put", g.t((5, 4)), [g.t((5,), U8, low=0, high=2)], g.t((1, 4))))
add("index_put", "mask-shape", lambda g: g.call("index_put", g.t((5, 4)), [g.t((4,), BOOL)], g.t((4,))))
for dt in FLOATS:
    add("index_put", f"mask-acc-{dt_tag(dt)}", lambda g: g.call("index_put", g.t((5, 4), dt), [g.t((5,), BOOL)], g.t((4,), dt), True))
