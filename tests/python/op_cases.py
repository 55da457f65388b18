"""Case tables for test_ops.py: every op of ops.def against PyTorch eager.

A case is a small graph, described once (`Graph`), that is both printed in coil's text format
(with the output types left out, so coil infers them) and replayed with `torch.ops.aten.<op>.
<overload>` on the same inputs. The last node is the op under test; the nodes before it make
its operands non-contiguous (permute, slice with step 2, expand) the same way on both sides.

The tables below are generated: per family, a sweep over every dtype (PyTorch decides which
are accepted; where it raises, coil must reject the graph too), a sweep over layouts and
shapes (broadcasting across ranks, size-1 and zero-size dims, 0-d tensors, non-contiguous
operands), and the op-specific cases the brief asks for.
"""
import itertools
import math
import zlib
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

F64, F32, F16, BF16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
I64, I32, I16, I8, U8, BOOL = torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool
FLOATS = [F64, F32, F16, BF16]
INTS = [I64, I32, I16, I8, U8]
ALL = FLOATS + INTS + [BOOL]
NAME = {F64: "f64", F32: "f32", F16: "f16", BF16: "bf16", I64: "i64", I32: "i32", I16: "i16", I8: "i8",
        U8: "u8", BOOL: "bool"}
MEMORY_FORMATS = {torch.contiguous_format: "contiguous_format", torch.preserve_format: "preserve_format",
                  torch.channels_last: "channels_last"}

# ----------------------------------------------------------------------------------------------
# The graph description: printed as coil text, replayed with torch.ops.aten.


class Ref(str):
    """A value of the graph (printed as %name)."""


@dataclass
class Node:
    outs: list
    op: str
    args: tuple
    kwargs: dict


def aten(op):
    base, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def fmt_value(v):
    if isinstance(v, Ref):
        return f"%{v}"
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, torch.dtype):
        return NAME[v]
    if isinstance(v, torch.memory_format):
        return MEMORY_FORMATS[v]
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_value(x) for x in v) + "]"
    raise TypeError(f"cannot print {v!r}")


def random_values(shape, dtype, gen, low=None, high=None, special=False, nonzero=False):
    """Seeded random values: floats ~ N(0, 2) (or uniform in [low, high)), signed ints in
    [-9, 9], u8 in [0, 19], bools; `special` salts floats with nan, +-inf and +-0; `nonzero`
    replaces integer zeros by 3 and makes bools true (integer division by zero is an error,
    tested apart)."""
    if dtype.is_floating_point:
        if low is not None:
            t = torch.rand(shape, generator=gen, dtype=F64) * (high - low) + low
        else:
            t = torch.randn(shape, generator=gen, dtype=F64) * 2
        if special and t.numel():
            flat = t.view(-1)
            for i, v in zip(range(0, flat.numel(), 3), [math.nan, math.inf, -math.inf, 0.0, -0.0]):
                flat[i] = v
        return t.to(dtype)
    if dtype == BOOL:
        return torch.ones(shape, dtype=BOOL) if nonzero else torch.randint(0, 2, shape, generator=gen).bool()
    lo, hi = (low, high) if low is not None else ((0, 20) if dtype == U8 else (-9, 10))
    t = torch.randint(math.ceil(lo), math.ceil(hi), shape, generator=gen)
    if nonzero:
        t[t == 0] = 3
    return t.to(dtype)


class Graph:
    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)
        self.inputs = {}
        self.nodes = []
        self.shapes = {}  # the logical shape of each operand t() made
        self._count = itertools.count()

    def _name(self, prefix):
        return Ref(f"{prefix}{next(self._count)}")

    def input(self, tensor):
        name = self._name("x")
        self.inputs[name] = tensor
        return name

    def call(self, op, *args, n_out=1, **kwargs):
        outs = [self._name("v") for _ in range(n_out)]
        self.nodes.append(Node(outs, op, args, kwargs))
        return outs[0] if n_out == 1 else outs

    def t(self, shape, dtype=F32, layout="contig", values=None, **opts):
        """An operand of logical shape `shape`: a graph input, then views that give it
        `layout`: contig, T (permuted: the input is stored transposed), step2 (every other
        element of the last dim, from offset 1) or expand (the first dim > 1 broadcast)."""
        shape = tuple(shape)
        ref = self._operand(shape, dtype, layout, values, opts)
        self.shapes[ref] = shape
        return ref

    def _operand(self, shape, dtype, layout, values, opts):
        if values is not None:
            return self.input(torch.tensor(values, dtype=dtype).reshape(shape))
        if layout == "contig":
            return self.input(random_values(shape, dtype, self.gen, **opts))
        if layout == "T":
            assert len(shape) >= 2, "permuted layout needs rank >= 2"
            rank = len(shape)
            x = self.input(random_values(shape[::-1], dtype, self.gen, **opts))
            return self.call("permute", x, list(range(rank - 1, -1, -1)))
        if layout == "step2":
            assert len(shape) >= 1
            stored = shape[:-1] + (2 * shape[-1] + 1,)
            x = self.input(random_values(stored, dtype, self.gen, **opts))
            return self.call("slice.Tensor", x, -1, 1, None, 2)
        if layout == "expand":
            d = next(i for i, s in enumerate(shape) if s > 1)
            stored = shape[:d] + (1,) + shape[d + 1:]
            x = self.input(random_values(stored, dtype, self.gen, **opts))
            return self.call("expand", x, list(shape))
        raise ValueError(layout)

    # ---- the two readings of the graph
    def text(self, outputs):
        lines = ["graph t {"]
        for name, tensor in self.inputs.items():
            dims = ", ".join(str(s) for s in tensor.shape)
            lines.append(f"  %{name} = input() : {NAME[tensor.dtype]}[{dims}]")
        for n in self.nodes:
            args = [fmt_value(a) for a in n.args] + [f"{k}={fmt_value(v)}" for k, v in n.kwargs.items()]
            lines.append(f"  {', '.join('%' + o for o in n.outs)} = {n.op}({', '.join(args)})")
        lines.append(f"  return {', '.join('%' + o for o in outputs)}")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def replay(self, outputs, upcast=False, absolute=False):
        """Runs the graph with torch.ops.aten; `upcast` computes floats in float64; `absolute`
        takes the absolute value of every input and of the last op's number arguments (for a
        sum of products, each output is then the sum of the products' magnitudes)."""
        env = {}
        for name, t in self.inputs.items():
            env[name] = t.to(F64) if upcast and t.dtype.is_floating_point else t.clone()
            if absolute and t.dtype != BOOL:
                env[name] = env[name].abs()

        def resolve(v):
            if isinstance(v, Ref):
                return env[v]
            if isinstance(v, (list, tuple)):
                return [resolve(x) for x in v]
            return v

        def magnitude(v):
            return abs(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

        for n in self.nodes:
            fn = n.op if callable(n.op) else aten(n.op)
            args, kwargs = n.args, n.kwargs
            if absolute and n is self.nodes[-1]:
                args, kwargs = [magnitude(a) for a in args], {k: magnitude(v) for k, v in kwargs.items()}
            r = fn(*[resolve(a) for a in args], **{k: resolve(v) for k, v in kwargs.items()})
            if len(n.outs) == 1 and isinstance(r, torch.Tensor):
                env[n.outs[0]] = r
            else:
                assert len(r) == len(n.outs), f"{n.op} gave {len(r)} outputs, the graph names {len(n.outs)}"
                env.update(zip(n.outs, r))
        return [env[o] for o in outputs]


@dataclass
class Case:
    id: str
    op: str                      # the ops.def name under test
    graph: Graph
    outputs: list
    ref64: bool = False          # compare values with torch run in float64, then cast (why: at the case)
    values: bool = True          # False: contents are unspecified (empty*)
    strides: bool = False        # also compare strides and storage offset (views, memory formats)
    ref: Optional[Callable] = None  # replaces the torch replay (why: at the case)
    coil_rejects: str = ""       # coil rejects by design although PyTorch accepts (why)
    tol: Optional[tuple] = None  # (rtol, atol) instead of the dtype's default
    terms: int = 0               # products each output element sums (summed_terms): the tolerance grows with them


CASES = []


def seed_of(text):
    return zlib.crc32(text.encode())


def summed_terms(g):
    """How many products an output element of g's last node sums: K of a matrix product, the
    input channels of a group times the kernel's taps of a convolution; 0 for other ops. Such a
    sum in f32 (BLAS, blocked, in any order) is within about K * eps * sum(|products|) of the
    exact one."""
    last = g.nodes[-1]
    shape = lambda a: g.shapes.get(a) if isinstance(a, Ref) else None  # noqa: E731
    if last.op in ("mm", "bmm", "addmm"):
        a = shape(last.args[1 if last.op == "addmm" else 0])
        return a[-1] if a else 0
    if last.op == "convolution":
        w = shape(last.args[1])
        if not w or len(w) < 3:
            return 0
        transposed, groups = last.args[6], last.args[8]
        return (w[0] // max(groups, 1) if transposed else w[1]) * math.prod(w[2:])
    return 0


def add(op, tag, build, **opts):
    """Adds the case `op[tag]`: build(g) returns the output ref(s) of graph g."""
    cid = f"{op}[{tag}]"
    g = Graph(seed_of(cid))
    outs = build(g)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    opts.setdefault("terms", summed_terms(g))
    CASES.append(Case(cid, op, g, outs, **opts))


def dt_tag(*dtypes):
    return "-".join(NAME[d] for d in dtypes)


SHAPE = (3, 5)


# ----------------------------------------------------------------------------------------------
# Unary pointwise: every dtype (floats salted with nan/inf/-0), then shapes and layouts.

UNARY = ["abs", "neg", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "sin",
         "cos", "tan", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "sigmoid", "erf", "relu", "gelu", "silu", "leaky_relu", "elu", "hardtanh", "floor",
         "ceil", "round", "trunc", "sign", "isnan", "isinf", "logical_not", "bitwise_not"]
# (tag, logical shape, layout)
LAYOUTS = [("0d", (), "contig"), ("zero", (0, 3), "contig"), ("size1", (1, 4, 1), "contig"),
           ("T", (4, 3), "T"), ("step2", (3, 4), "step2"), ("expand", (3, 4), "expand")]

# torch's vectorized gelu in f32/f16/bf16 returns nan for +inf (float64 gives inf, as the
# formula does): values are compared with torch in float64.
REF64_UNARY = {"gelu"}

for op in UNARY:
    for dt in ALL:
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(SHAPE, dt, special=True)), ref64=op in REF64_UNARY)
    main = I32 if op == "bitwise_not" else F32
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: g.call(op, g.t(shape, main, layout)))

add("gelu", "tanh-f32", lambda g: g.call("gelu", g.t(SHAPE, F32), approximate="tanh"))
add("gelu", "tanh-bf16", lambda g: g.call("gelu", g.t(SHAPE, BF16), approximate="tanh"))
add("gelu", "bad-approximate", lambda g: g.call("gelu", g.t(SHAPE, F32), approximate="fast"))
for slope in [0.2, 2, -0.5]:
    add("leaky_relu", f"slope={slope}", lambda g: g.call("leaky_relu", g.t(SHAPE, F32), slope))
add("elu", "alpha-scale-input_scale", lambda g: g.call("elu", g.t(SHAPE, F32), 0.5, 2, 1.5))
add("elu", "f16-alpha", lambda g: g.call("elu", g.t(SHAPE, F16), alpha=1.7))
for lo, hi in [(-0.5, 2), (0, 6), (1.0, -1.0)]:
    for dt in [F32, I32, BF16]:
        add("hardtanh", f"{lo},{hi}-{dt_tag(dt)}", lambda g: g.call("hardtanh", g.t(SHAPE, dt), lo, hi))
add("round", "ties-to-even", lambda g: g.call("round", g.t((8,), F32, values=[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.0])))
add("abs", "i8-min", lambda g: g.call("abs", g.t((3,), I8, values=[-128, -1, 127])))
add("neg", "u8-wraps", lambda g: g.call("neg", g.t((3,), U8, values=[0, 1, 255])))
for op, values in [("asin", [-1.0, -0.5, -0.0, 0.3, 1.0]), ("acos", [-1.0, -0.5, 0.0, 0.3, 1.0]),
                  ("atan", [-math.inf, -2.0, 0.0, 0.7, 1e30]), ("asinh", [-1e30, -3.0, -0.0, 0.5, 40.0]),
                  ("acosh", [1.0, 1.5, 3.0, 1e30, 0.5]), ("atanh", [-1.0, -0.9, 0.0, 0.5, 1.0]),
                  ("sinh", [-100.0, -2.0, -0.0, 1e-3, 89.5]), ("cosh", [-100.0, -2.0, 0.0, 1e-3, 89.5])]:
    for dt in [F32, F64, BF16]:
        add(op, f"domain-{dt_tag(dt)}", lambda g: g.call(op, g.t((5,), dt, values=values)))
add("sign", "special", lambda g: g.call("sign", g.t((5,), F32, values=[math.nan, -0.0, 0.0, -math.inf, 3.0])))

# ----------------------------------------------------------------------------------------------
# Binary pointwise, Tensor overloads: same-dtype sweep, promotion pairs, 0-d operands,
# broadcasting across ranks, zero-size, non-contiguous operands.

BINARY = ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "pow.Tensor_Tensor", "remainder.Tensor",
          "fmod.Tensor", "maximum", "minimum", "atan2", "eq.Tensor", "ne.Tensor", "lt.Tensor", "le.Tensor",
          "gt.Tensor", "ge.Tensor", "logical_and", "logical_or", "logical_xor", "bitwise_and.Tensor",
          "bitwise_or.Tensor", "bitwise_xor.Tensor"]
DIVIDING = {"div.Tensor", "remainder.Tensor", "fmod.Tensor", "div.Tensor_mode"}
PAIRS = [(F32, F16), (F16, BF16), (F64, F32), (BF16, F32), (I32, I64), (I16, I8), (U8, I8), (U8, I16), (BOOL, I32),
         (I64, F16), (BOOL, F32), (U8, BOOL), (I8, BF16), (I32, F64)]
# (dimensioned dtype, 0-d dtype): a 0-d tensor only wins when it is of a higher category.
ZERO_DIM = [(F16, F64), (I32, F32), (I8, I64), (U8, I8), (BOOL, I64), (I64, BOOL), (BF16, F16)]
# (tag, shape a, shape b, layout a, layout b)
BROADCASTS = [("rank3-rank2", (4, 1, 5), (3, 1), "contig", "contig"), ("0d-2d", (), (3, 4), "contig", "contig"),
              ("2d-0d", (3, 4), (), "contig", "contig"), ("0d-0d", (), (), "contig", "contig"),
              ("zero", (0, 3), (1, 3), "contig", "contig"), ("zero-bcast", (2, 0), (2, 1), "contig", "contig"),
              ("size1", (1, 1), (1,), "contig", "contig"), ("T-contig", (4, 5), (4, 5), "T", "contig"),
              ("step2-expand", (4, 5), (4, 5), "step2", "expand"), ("expand-T", (4, 5), (5,), "expand", "contig"),
              ("T-bcast", (3, 4), (3, 1), "T", "contig")]


def second_operand_opts(op, dtype):
    """Integer divisors without zero; small integer exponents."""
    if dtype.is_floating_point:
        return {}
    if op in DIVIDING:
        return {"nonzero": True}
    if dtype == BOOL:
        return {}
    if op.startswith("pow"):
        return {"low": 0 if dtype == U8 else -3, "high": 4}
    return {}


def binary_operands(g, op, a_dt, b_dt, a_shape=SHAPE, b_shape=SHAPE, a_layout="contig", b_layout="contig"):
    return (g.t(a_shape, a_dt, a_layout, special=True),
            g.t(b_shape, b_dt, b_layout, **second_operand_opts(op, b_dt)))


def main_dtype(op):
    return I32 if op.startswith("bitwise") else F32


for op in BINARY:
    for dt in ALL:
        add(op, dt_tag(dt, dt), lambda g: g.call(op, *binary_operands(g, op, dt, dt)))
    for a, b in PAIRS:
        add(op, dt_tag(a, b), lambda g: g.call(op, *binary_operands(g, op, a, b)))
    for a, b in ZERO_DIM:
        add(op, f"{dt_tag(a)}-0d{dt_tag(b)}", lambda g: g.call(op, *binary_operands(g, op, a, b, b_shape=())))
        add(op, f"0d{dt_tag(b)}-{dt_tag(a)}", lambda g: g.call(op, *binary_operands(g, op, b, a, a_shape=())))
    for tag, sa, sb, la, lb in BROADCASTS:
        dt = main_dtype(op)
        add(op, tag, lambda g: g.call(op, *binary_operands(g, op, dt, dt, sa, sb, la, lb)))
add("add.Tensor", "mismatch", lambda g: g.call("add.Tensor", g.t((3, 4)), g.t((4, 3))))

for op in ["add.Tensor", "sub.Tensor"]:
    for alpha in [2, 0.5, True, -1]:
        for dt in [F32, I32, BOOL, F16]:
            add(op, f"alpha={alpha}-{dt_tag(dt)}", lambda g: g.call(op, g.t(SHAPE, dt), g.t(SHAPE, dt), alpha=alpha))

# Division: every rounding mode, negative numbers, ints and floats.
for mode in [None, "trunc", "floor"]:
    for dt in ALL:
        add("div.Tensor_mode", f"{mode}-{dt_tag(dt)}",
            lambda g: g.call("div.Tensor_mode", *binary_operands(g, "div.Tensor_mode", dt, dt), rounding_mode=mode))
    for a, b in [(I32, F32), (I64, I8), (U8, I16), (F16, BF16), (BOOL, I32)]:
        add("div.Tensor_mode", f"{mode}-{dt_tag(a, b)}",
            lambda g: g.call("div.Tensor_mode", *binary_operands(g, "div.Tensor_mode", a, b), rounding_mode=mode))
    add("div.Tensor_mode", f"{mode}-signs-i64", lambda g: g.call(
        "div.Tensor_mode", g.t((8,), I64, values=[7, -7, 7, -7, 0, 1, -1, 9]),
        g.t((8,), I64, values=[2, 2, -2, -2, 3, -4, 4, -9]), rounding_mode=mode))
    add("div.Tensor_mode", f"{mode}-signs-f32", lambda g: g.call(
        "div.Tensor_mode", g.t((8,), F32, values=[7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1.0, -3.0]),
        g.t((8,), F32, values=[2.0, 2.0, -2.0, -2.0, -3.0, 3.0, 0.0, 0.0]), rounding_mode=mode))
    add("div.Tensor_mode", f"{mode}-int-by-zero", lambda g: g.call(
        "div.Tensor_mode", g.t((3,), I32, values=[1, 0, -1]), g.t((3,), I32, values=[0, 0, 0]), rounding_mode=mode))
    add("div.Tensor_mode", f"{mode}-T-bcast",
        lambda g: g.call("div.Tensor_mode", g.t((3, 4), F32, "T"), g.t((4,), F32), rounding_mode=mode))
add("div.Tensor_mode", "bad-mode", lambda g: g.call("div.Tensor_mode", g.t(SHAPE), g.t(SHAPE), rounding_mode="round"))
add("div.Tensor", "int-by-zero", lambda g: g.call("div.Tensor", g.t((3,), I32, values=[1, 0, -1]), g.t((3,), I32, values=[0, 0, 0])))
for op in ["remainder.Tensor", "fmod.Tensor"]:
    add(op, "signs-i32", lambda g: g.call(op, g.t((8,), I32, values=[7, -7, 7, -7, 0, 6, -6, 1]),
                                          g.t((8,), I32, values=[3, 3, -3, -3, 5, 3, -3, 9])))
    add(op, "signs-f32", lambda g: g.call(op, g.t((8,), F32, values=[7.5, -7.5, 7.5, -7.5, 0.0, math.inf, 1.0, -1.0]),
                                          g.t((8,), F32, values=[2.0, 2.0, -2.0, -2.0, 3.0, 2.0, math.inf, math.inf])))
    add(op, "float-by-zero", lambda g: g.call(op, g.t((3,), F32, values=[1.0, 0.0, -1.0]), g.t((3,), F32, values=[0.0, 0.0, -0.0])))
    add(op, "int-by-zero", lambda g: g.call(op, g.t((3,), I64, values=[1, 0, -1]), g.t((3,), I64, values=[1, 0, 2])))
add("pow.Tensor_Tensor", "int-negative-exponents", lambda g: g.call(
    "pow.Tensor_Tensor", g.t((8,), I64, values=[2, -2, 1, -1, -1, 0, 3, 0]), g.t((8,), I64, values=[-1, -2, -5, -3, -4, -1, 0, 0])))
add("pow.Tensor_Tensor", "i8-wraps", lambda g: g.call(
    "pow.Tensor_Tensor", g.t((4,), I8, values=[3, -3, 2, 7]), g.t((4,), I8, values=[5, 5, 7, 3])))
add("pow.Tensor_Tensor", "f32-negative-base", lambda g: g.call(
    "pow.Tensor_Tensor", g.t((5,), F32, values=[-2.0, -2.0, 0.0, 0.0, math.nan]), g.t((5,), F32, values=[3.0, 0.5, -1.0, 0.0, 0.0])))
for op in ["maximum", "minimum"]:
    add(op, "nan", lambda g: g.call(op, g.t((4,), F32, values=[math.nan, 1.0, math.nan, -0.0]), g.t((4,), F32, values=[1.0, math.nan, math.nan, 0.0])))

# ----------------------------------------------------------------------------------------------
# Binary pointwise, Scalar overloads: every tensor dtype with an int, a float and a bool scalar
# (a wrapped Python scalar only decides the dtype when it is of a higher category).

SCALAR_BINARY = ["add.Scalar", "sub.Scalar", "rsub.Scalar", "mul.Scalar", "div.Scalar", "div.Scalar_mode", "pow.Tensor_Scalar",
                 "remainder.Scalar", "fmod.Scalar", "eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar",
                 "ge.Scalar", "bitwise_and.Scalar", "bitwise_or.Scalar", "bitwise_xor.Scalar"]
SCALARS = [-3, 2.5, True]
POW_SCALARS = [2, 0.5, True, -2, 0, -1.5, 3, -1]


def scalar_call(g, op, x, s, **kwargs):
    if op == "div.Scalar_mode":
        kwargs.setdefault("rounding_mode", "floor")
    return g.call(op, x, s, **kwargs)


for op in SCALAR_BINARY:
    for dt in ALL:
        for s in POW_SCALARS if op.startswith("pow") else SCALARS:
            # ATen computes pow(x, +-0.5) as sqrt/rsqrt (pow(-inf, 0.5) = nan) for every float
            # dtype but f16, which takes the generic pow (inf): f16 is compared with float64.
            add(op, f"{dt_tag(dt)}-{s!r}", lambda g: scalar_call(g, op, g.t(SHAPE, dt, special=True), s),
                ref64=op.startswith("pow") and dt == F16)
    main = main_dtype(op)
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: scalar_call(g, op, g.t(shape, main, layout), 3))
    for dt, s in [(F16, 2.5), (I32, 2.5), (BOOL, 2), (U8, -3), (BF16, True)]:
        add(op, f"0d{dt_tag(dt)}-{s!r}", lambda g: scalar_call(g, op, g.t((), dt), s))
for mode in [None, "trunc", "floor"]:
    for dt in [F32, I64, I8, U8, F16]:
        for s in [-3, 2, 2.5, -0.5]:
            add("div.Scalar_mode", f"{mode}-{dt_tag(dt)}-{s!r}",
                lambda g: g.call("div.Scalar_mode", g.t(SHAPE, dt), s, rounding_mode=mode))
    add("div.Scalar_mode", f"{mode}-int-by-zero", lambda g: g.call("div.Scalar_mode", g.t((3,), I32), 0, rounding_mode=mode))
add("div.Scalar", "int-by-zero", lambda g: g.call("div.Scalar", g.t((3,), I32, values=[1, 0, -1]), 0))
for op in ["remainder.Scalar", "fmod.Scalar"]:
    for s in [3, -3, 2.5, -2.5, 0.0]:
        add(op, f"signs-{s!r}", lambda g: g.call(op, g.t((8,), F32, values=[7.5, -7.5, 7.0, -7.0, 0.0, -0.0, math.inf, 1.0]), s))
        if isinstance(s, int):
            add(op, f"signs-i64-{s!r}", lambda g: g.call(op, g.t((6,), I64, values=[7, -7, 6, -6, 0, 1]), s))
    add(op, "int-by-zero", lambda g: g.call(op, g.t((3,), I64), 0))
for op, dt, s in [("add.Scalar", F16, 70000.0), ("mul.Scalar", BF16, 1e-3), ("lt.Scalar", U8, -1), ("eq.Scalar", I8, 300),
                  ("gt.Scalar", U8, 255.5), ("ge.Scalar", F16, 65519.0), ("eq.Scalar", F16, 0.1), ("add.Scalar", I8, 200),
                  ("mul.Scalar", U8, -1), ("lt.Scalar", I64, 2.5), ("eq.Scalar", BOOL, 2)]:
    add(op, f"edge-{dt_tag(dt)}-{s!r}", lambda g: g.call(op, g.t(SHAPE, dt), s))
for op in ["add.Scalar", "sub.Scalar", "rsub.Scalar"]:
    for alpha in [2, 0.5, True]:
        for dt in [F32, I32, BOOL]:
            add(op, f"alpha={alpha}-{dt_tag(dt)}", lambda g: g.call(op, g.t(SHAPE, dt), 3, alpha))

# pow.Scalar(Scalar self, Tensor exponent): the scalar is the base.
for dt in ALL:
    for base in [2, 2.5, True, 1, -1]:
        add("pow.Scalar", f"{base!r}-{dt_tag(dt)}",
            lambda g: g.call("pow.Scalar", base, g.t(SHAPE, dt, special=True, **second_operand_opts("pow", dt))))
for tag, shape, layout in LAYOUTS:
    add("pow.Scalar", tag, lambda g: g.call("pow.Scalar", 1.5, g.t(shape, F32, layout)))
add("pow.Scalar", "int-negative-exponents", lambda g: g.call("pow.Scalar", 3, g.t((4,), I64, values=[-1, -2, 0, 2])))
add("pow.Scalar", "0d-f16", lambda g: g.call("pow.Scalar", 3, g.t((), F16)))
add("pow.Tensor_Scalar", "int-by-negative-int", lambda g: g.call("pow.Tensor_Scalar", g.t((4,), I32, values=[1, -1, 2, 0]), -1))

# ----------------------------------------------------------------------------------------------
# Ternary pointwise: clamp (Scalar and Tensor bounds) and where (all four overloads).

CLAMP_BOUNDS = [(-1, 2), (-0.5, 1.5), (None, 0.5), (0, None), (True, None), (2, -1), (None, None)]
for dt in ALL:
    for lo, hi in CLAMP_BOUNDS:
        add("clamp", f"{dt_tag(dt)}-{lo!r},{hi!r}", lambda g: g.call("clamp", g.t(SHAPE, dt, special=True), lo, hi))
for tag, shape, layout in LAYOUTS:
    add("clamp", tag, lambda g: g.call("clamp", g.t(shape, F32, layout), -0.5, 0.5))
add("clamp", "0d-i32-float-bound", lambda g: g.call("clamp", g.t((), I32), 0.5))
add("clamp", "nan-bounds", lambda g: g.call("clamp", g.t(SHAPE, F32), math.nan, 1.0))

# addcmul and addcdiv: every dtype (addcdiv refuses integer division, both refuse bool); value
# is cast to the tensors' dtype (truncated for integers); f16/bf16 compute in f32, rounded once.
for op in ["addcmul", "addcdiv"]:
    for dt in ALL:
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(SHAPE, dt), g.t(SHAPE, dt), g.t(SHAPE, dt, nonzero=True), value=2))
    for value in [0.5, -1.25, True, 3]:
        add(op, f"value={value!r}", lambda g: g.call(op, g.t(SHAPE), g.t(SHAPE), g.t(SHAPE, nonzero=True), value=value))
        add(op, f"i64-value={value!r}", lambda g: g.call(op, g.t(SHAPE, I64), g.t(SHAPE, I64), g.t(SHAPE, I64, nonzero=True), value=value))
    add(op, "bcast-T", lambda g: g.call(op, g.t((4, 1)), g.t((4, 5), F32, "T"), g.t((5,), F32, "step2"), value=0.3))
    add(op, "0d-f32-with-f16", lambda g: g.call(op, g.t((3, 4), F16), g.t((), F32), g.t((3, 4), F16), value=0.1))
    add(op, "f16-i64-mixed", lambda g: g.call(op, g.t((3, 4), F16), g.t((3, 4), I64), g.t((3, 4), F16), value=1.5))
    add(op, "zero", lambda g: g.call(op, g.t((0, 4)), g.t((4,)), g.t((1, 4))))
    add(op, "bad-shapes", lambda g: g.call(op, g.t((3, 4)), g.t((3,)), g.t((3, 4))))
    for dt in [F16, BF16]:
        add(op, f"{dt_tag(dt)}-many", lambda g: g.call(op, g.t((64, 33), dt), g.t((64, 33), dt), g.t((64, 33), dt, low=0.5, high=2.0), value=0.3))
add("addcmul", "u8-wraps", lambda g: g.call("addcmul", g.t((2,), U8, values=[250, 1]), g.t((2,), U8, values=[10, 2]), g.t((2,), U8, values=[3, 3])))
add("addcdiv", "f32-by-i64", lambda g: g.call("addcdiv", g.t(SHAPE), g.t(SHAPE, I64), g.t(SHAPE, I64, nonzero=True)))

# (tag, (shape, dtype) of self, min and max; None leaves the bound out)
CLAMP_TENSOR = [
    ("bcast", ((3, 5), F32), ((3, 1), F32), ((5,), F32)),
    ("min-only", ((3, 5), F32), ((5,), F32), None),
    ("max-only", ((3, 5), F32), None, ((3, 1), F32)),
    ("neither", ((3, 5), F32), None, None),
    ("i32-f32-bound", ((3, 5), I32), ((5,), F32), None),
    ("f16-0df64-bound", ((3, 5), F16), ((), F64), ((), F64)),
    ("i64-i32-bounds", ((3, 5), I64), ((3, 5), I32), ((3, 5), I32)),
    ("u8-i8-bound", ((3, 5), U8), ((5,), I8), None),
    ("0d-self", ((), F32), ((3, 1), F32), ((4,), F32)),
    ("zero", ((0, 5), F32), ((5,), F32), ((1, 5), F32)),
    ("bool-bounds", ((3, 5), F32), ((5,), BOOL), None),
    # Bools clamp against one bound tensor (clamp_min/clamp_max: or/and); with both, torch raises.
    ("bool-min-only", ((3, 5), BOOL), ((5,), BOOL), None),
    ("bool-max-only", ((3, 5), BOOL), None, ((3, 1), BOOL)),
    ("bool-0d-min", ((3, 5), BOOL), ((), BOOL), None),
    ("bool-int-bound", ((3, 5), BOOL), ((5,), I64), ((5,), I64)),
]
for tag, (xs, xd), lo, hi in CLAMP_TENSOR:
    add("clamp.Tensor", tag, lambda g: g.call("clamp.Tensor", g.t(xs, xd, special=True),
                                                g.t(*lo) if lo else None, g.t(*hi) if hi else None))
for dt in ALL:
    add("clamp.Tensor", dt_tag(dt), lambda g: g.call("clamp.Tensor", g.t(SHAPE, dt), g.t((5,), dt), g.t((3, 1), dt)))
add("clamp.Tensor", "T-step2", lambda g: g.call("clamp.Tensor", g.t((4, 5), F32, "T"), g.t((4, 5), F32, "step2"), None))
add("clamp.Tensor", "nan-bounds", lambda g: g.call(
    "clamp.Tensor", g.t((4,), F32), g.t((4,), F32, values=[math.nan, 0.0, -1.0, math.nan]), g.t((4,), F32, values=[1.0, math.nan, 1.0, math.nan])))
add("clamp.Tensor", "min-above-max", lambda g: g.call(
    "clamp.Tensor", g.t((4,), F32, values=[-3.0, 0.0, 3.0, 9.0]), g.t((4,), F32, values=[2.0] * 4), g.t((4,), F32, values=[1.0] * 4)))


def cond(g, shape=SHAPE, layout="contig"):
    return g.t(shape, BOOL, layout)


for dt in ALL:
    add("where.self", dt_tag(dt), lambda g: g.call("where.self", cond(g), g.t(SHAPE, dt, special=True), g.t(SHAPE, dt)))
for a, b in PAIRS:
    add("where.self", dt_tag(a, b), lambda g: g.call("where.self", cond(g), g.t(SHAPE, a), g.t(SHAPE, b)))
for a, b in ZERO_DIM:
    add("where.self", f"{dt_tag(a)}-0d{dt_tag(b)}", lambda g: g.call("where.self", cond(g), g.t(SHAPE, a), g.t((), b)))
for tag, cs, xs, ys in [("bcast3", (4, 1, 1), (3, 1), (5,)), ("0d-cond", (), (3, 5), (3, 5)), ("all-0d", (), (), ()),
                        ("zero", (0, 1), (1, 5), (5,)), ("cond-bcast", (3, 5), (), (1, 5))]:
    add("where.self", tag, lambda g: g.call("where.self", cond(g, cs), g.t(xs), g.t(ys)))
add("where.self", "T-step2-expand", lambda g: g.call("where.self", cond(g, (4, 5), "T"), g.t((4, 5), F32, "step2"), g.t((4, 5), F32, "expand")))
add("where.self", "u8-condition", lambda g: g.call("where.self", g.t(SHAPE, U8), g.t(SHAPE), g.t(SHAPE)))
add("where.self", "f32-condition", lambda g: g.call("where.self", g.t(SHAPE, F32), g.t(SHAPE), g.t(SHAPE)))
for dt in ALL:
    for s in SCALARS:
        add("where.ScalarSelf", f"{s!r}-{dt_tag(dt)}", lambda g: g.call("where.ScalarSelf", cond(g), s, g.t(SHAPE, dt)))
        add("where.ScalarOther", f"{dt_tag(dt)}-{s!r}", lambda g: g.call("where.ScalarOther", cond(g), g.t(SHAPE, dt), s))
for dt in [F16, I32]:
    add("where.ScalarOther", f"0d{dt_tag(dt)}-2.5", lambda g: g.call("where.ScalarOther", cond(g), g.t((), dt), 2.5))
add("where.ScalarSelf", "T", lambda g: g.call("where.ScalarSelf", cond(g, (4, 5), "T"), -1.5, g.t((4, 5), F32, "step2")))
for s1, s2 in itertools.product([1, 2.5, True], [0, -0.5, False]):
    add("where.Scalar", f"{s1!r},{s2!r}", lambda g: g.call("where.Scalar", cond(g), s1, s2))
add("where.Scalar", "0d-cond", lambda g: g.call("where.Scalar", cond(g, ()), 1.5, 2))
add("where.Scalar", "zero", lambda g: g.call("where.Scalar", cond(g, (0, 4)), 1.5, 2))

# ----------------------------------------------------------------------------------------------
# Reductions and scans: every dtype, dim lists (None, [], negative, several), keepdim, dtype=,
# 0-d and zero-size inputs, non-contiguous inputs, NaN and ties.

R3 = (3, 4, 5)
for dt in ALL:
    add("sum", dt_tag(dt), lambda g: g.call("sum", g.t(R3, dt, special=True)))
    add("mean", dt_tag(dt), lambda g: g.call("mean", g.t(R3, dt)))
    add("prod", dt_tag(dt), lambda g: g.call("prod", g.t((2, 5), dt, low=-2, high=3)))
    add("any", dt_tag(dt), lambda g: g.call("any", g.t(R3, dt, low=0, high=2)))
    for keep in [False, True]:
        add("sum.dim_IntList", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("sum.dim_IntList", g.t(R3, dt), [1], keep))
        add("mean.dim", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("mean.dim", g.t(R3, dt), [-1], keep))
        add("prod.dim_int", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("prod.dim_int", g.t(R3, dt, low=-2, high=3), 1, keep))
        add("amax", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("amax", g.t(R3, dt, special=True), [0, 2], keep))
        add("amin", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("amin", g.t(R3, dt, special=True), [1], keep))
        add("argmax", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("argmax", g.t(R3, dt, low=0, high=3), 1, keep))
        add("argmin", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("argmin", g.t(R3, dt, low=0, high=3), -1, keep))
        add("var.correction", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("var.correction", g.t(R3, dt), [1], keepdim=keep))
        add("any.dim", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("any.dim", g.t(R3, dt, low=0, high=2), 1, keep))
        add("any.dims", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("any.dims", g.t(R3, dt, low=0, high=2), [0, 2], keep))
        add("max.dim", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("max.dim", g.t(R3, dt, low=0, high=3), 1, keep, n_out=2))
        add("min.dim", f"{dt_tag(dt)}-keep={keep}", lambda g: g.call("min.dim", g.t(R3, dt, low=0, high=3), -1, keep, n_out=2))
    add("cumsum", dt_tag(dt), lambda g: g.call("cumsum", g.t(R3, dt), 1))
    add("sum", f"{dt_tag(dt)}-dtype=f64", lambda g: g.call("sum", g.t(R3, dt), dtype=F64))
    add("sum.dim_IntList", f"{dt_tag(dt)}-dtype=i32", lambda g: g.call("sum.dim_IntList", g.t(R3, dt), [0], dtype=I32))
    add("mean", f"{dt_tag(dt)}-dtype=f32", lambda g: g.call("mean", g.t(R3, dt), dtype=F32))
    add("mean.dim", f"{dt_tag(dt)}-dtype=f64", lambda g: g.call("mean.dim", g.t(R3, dt), [1], dtype=F64))
    add("prod", f"{dt_tag(dt)}-dtype=f32", lambda g: g.call("prod", g.t((2, 3), dt), dtype=F32))
    add("prod.dim_int", f"{dt_tag(dt)}-dtype=i16", lambda g: g.call("prod.dim_int", g.t((2, 3), dt), 0, dtype=I16))
    add("cumsum", f"{dt_tag(dt)}-dtype=f16", lambda g: g.call("cumsum", g.t(R3, dt), -1, dtype=F16))
    add("argmax", f"{dt_tag(dt)}-dim=None", lambda g: g.call("argmax", g.t(R3, dt, low=0, high=3)))

# dim lists: (tag, dim); None and [] reduce everything.
DIMS = [("None", None), ("empty", []), ("0", [0]), ("neg", [-1, 0]), ("all3", [2, 0, 1]), ("dup", [1, -2]),
        ("out-of-range", [3])]
for tag, dims in DIMS:
    for keep in [False, True]:
        for op in ["sum.dim_IntList", "mean.dim", "var.correction", "any.dims"]:
            add(op, f"dim={tag}-keep={keep}", lambda g: g.call(op, g.t(R3, F32), dims, keepdim=keep))
        if dims is not None:
            for op in ["amax", "amin"]:
                add(op, f"dim={tag}-keep={keep}", lambda g: g.call(op, g.t(R3, F32), dims, keep))
# (tag, shape, layout) for every reduction.
SHAPES = [("0d", (), "contig"), ("zero-kept", (0, 4), "contig"), ("zero-reduced", (4, 0), "contig"),
          ("size1", (1, 4, 1), "contig"), ("T", (4, 5), "T"), ("step2", (4, 5), "step2"), ("expand", (4, 5), "expand")]
for tag, shape, layout in SHAPES:
    x = lambda g: g.t(shape, F32, layout)
    last = -1
    add("sum", tag, lambda g: g.call("sum", x(g)))
    add("mean", tag, lambda g: g.call("mean", x(g)))
    add("prod", tag, lambda g: g.call("prod", x(g)))
    add("any", tag, lambda g: g.call("any", x(g)))
    add("sum.dim_IntList", tag, lambda g: g.call("sum.dim_IntList", x(g), [last]))
    add("mean.dim", tag, lambda g: g.call("mean.dim", x(g), [last], True))
    add("prod.dim_int", tag, lambda g: g.call("prod.dim_int", x(g), last))
    add("amax", tag, lambda g: g.call("amax", x(g), [last]))
    add("amin", tag, lambda g: g.call("amin", x(g)))
    add("argmax", tag, lambda g: g.call("argmax", x(g), last))
    add("argmin", tag, lambda g: g.call("argmin", x(g)))
    add("argmax", f"{tag}-dim=None-keep", lambda g: g.call("argmax", x(g), None, True))
    add("var.correction", tag, lambda g: g.call("var.correction", x(g), [last]))
    add("any.dim", tag, lambda g: g.call("any.dim", x(g), last))
    add("any.dims", tag, lambda g: g.call("any.dims", x(g), None, True))
    add("max.dim", tag, lambda g: g.call("max.dim", x(g), last, n_out=2))
    add("min.dim", tag, lambda g: g.call("min.dim", x(g), 0, True, n_out=2))
    add("cumsum", tag, lambda g: g.call("cumsum", x(g), last))
    add("cumsum", f"{tag}-dim0", lambda g: g.call("cumsum", x(g), 0))

for correction in [0, 2, 1.5, 5, None]:
    add("var.correction", f"correction={correction!r}", lambda g: g.call("var.correction", g.t(R3, F64), [2], correction=correction))
add("var.correction", "one-element", lambda g: g.call("var.correction", g.t((3, 1), F32), [1]))
add("var.correction", "f16", lambda g: g.call("var.correction", g.t(R3, F16), None, correction=0))

NAN_TIES = [1.0, 3.0, 3.0, math.nan, 3.0, -1.0, math.nan, 2.0, 2.0, -1.0, 0.0, 0.0]
for op in ["argmax", "argmin"]:
    add(op, "ties-nan", lambda g: g.call(op, g.t((3, 4), F32, values=NAN_TIES), 1))
    add(op, "ties-nan-flat", lambda g: g.call(op, g.t((3, 4), F32, values=NAN_TIES)))
    add(op, "ties-int", lambda g: g.call(op, g.t((2, 4), I32, values=[5, 1, 5, 0, -2, -2, 7, 7]), 1))
    add(op, "bool", lambda g: g.call(op, g.t((2, 3), BOOL, values=[False, True, True, False, False, False]), 1))
    add(op, "empty-flat", lambda g: g.call(op, g.t((0, 3), F32)))
for op in ["max.dim", "min.dim"]:
    add(op, "ties-nan", lambda g: g.call(op, g.t((3, 4), F32, values=NAN_TIES), 1, n_out=2))
    add(op, "ties-nan-dim0", lambda g: g.call(op, g.t((3, 4), F32, values=NAN_TIES), 0, n_out=2))
for op in ["amax", "amin"]:
    add(op, "nan", lambda g: g.call(op, g.t((3, 4), F32, values=NAN_TIES), [1]))
# max() and min() without a dim (aten.max.default): the whole tensor, NaN propagating; an empty
# tensor is an error.
for op in ["max", "min"]:
    for dt in ALL:
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(R3, dt, low=-5, high=5)))
    for tag, shape, layout in SHAPES:
        add(op, tag, lambda g: g.call(op, g.t(shape, F32, layout)))
    add(op, "nan", lambda g: g.call(op, g.t((3, 4), F32, values=NAN_TIES)))
    add(op, "inf", lambda g: g.call(op, g.t((3,), F32, values=[-math.inf, 1.0, math.inf])))
add("sum", "f16-many", lambda g: g.call("sum", g.t((64, 33), F16)))
add("sum", "bf16-many", lambda g: g.call("sum", g.t((64, 33), BF16)))
add("mean.dim", "f16-many", lambda g: g.call("mean.dim", g.t((4, 300), F16), [1]))
add("cumsum", "f16-long", lambda g: g.call("cumsum", g.t((3, 100), F16), 1))
add("cumsum", "i8-wraps", lambda g: g.call("cumsum", g.t((2, 5), I8, values=[100, 100, 100, -128, -128, 1, 2, 3, 4, 5]), 1, dtype=I8))
add("prod", "i64-large", lambda g: g.call("prod", g.t((4,), I64, values=[1 << 20, 1 << 20, 1 << 20, 3])))
add("sum", "i64-large", lambda g: g.call("sum", g.t((3,), I64, values=[(1 << 62) - 1, 1 << 62, 5])))
add("any.dims", "u8-empty-dims", lambda g: g.call("any.dims", g.t(R3, U8, low=0, high=2), []))

# ----------------------------------------------------------------------------------------------
# Normalizations: softmax rows (incl. -inf and all -inf rows), layer/group/batch norm with and
# without weight and bias.

for op in ["_softmax", "_log_softmax"]:
    for dt in ALL:
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(R3, dt, special=True), -1, False))
    for dim in [0, 1, -3]:
        add(op, f"dim={dim}", lambda g: g.call(op, g.t(R3), dim, False))
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: g.call(op, g.t(shape, F32, layout), -1, False))
    add(op, "rows-with-inf", lambda g: g.call(op, g.t((3, 3), F32, values=[
        -math.inf, 0.0, 1.0, -math.inf, -math.inf, -math.inf, math.inf, 0.0, 1.0]), 1, False))
    add(op, "large", lambda g: g.call(op, g.t((2, 3), F32, values=[1000.0, 1001.0, 1002.0, -1000.0, -1e30, 0.0]), 1, False))
    add(op, "dim-out-of-range", lambda g: g.call(op, g.t(SHAPE), 2, False))
    add(op, "half_to_float-f32", lambda g: g.call(op, g.t(SHAPE, F32), 1, True))
    for dt in [F16, BF16]:
        # PyTorch's CPU kernel refuses half_to_float ("not supported on CPU"); on CUDA it means
        # softmax of the input upcast to f32, which is what the reference computes here.
        add(op, f"half_to_float-{dt_tag(dt)}", lambda g: g.call(op, g.t(SHAPE, dt), 1, True),
            ref=lambda g, op=op: [aten(op)(next(iter(g.inputs.values())).float(), 1, False)])


def contiguous_operands(g):
    """Replays g with the tensor operands of its last node made contiguous."""
    last = g.nodes[-1]
    fixed = Node(last.outs, last.op, tuple(Ref(f"{a}_c") if isinstance(a, Ref) else a for a in last.args), last.kwargs)
    copy = Graph(0)
    copy.inputs, copy.nodes = g.inputs, g.nodes[:-1] + [
        Node([Ref(f"{a}_c")], "clone", (a,), {"memory_format": torch.contiguous_format}) for a in last.args if isinstance(a, Ref)] + [fixed]
    return copy.replay(last.outs)


def decomposed(g):
    """Replays g with its last op computed by torch's decomposition of it, which is also its meta
    function and so what AOTAutograd's graphs expect (where the CPU kernel's dtypes differ)."""
    from torch._decomp import decomposition_table

    last = g.nodes[-1]
    copy = Graph(0)
    copy.inputs, copy.nodes = g.inputs, g.nodes[:-1] + [Node(last.outs, decomposition_table[aten(last.op)], last.args, last.kwargs)]
    return copy.replay(last.outs)


def affine(g, present, shape, dt):
    return g.t(shape, dt) if present else None


WB = [(True, True), (False, False), (True, False), (False, True)]
for w, b in WB:
    tag = f"w={int(w)},b={int(b)}"
    add("native_layer_norm", tag, lambda g: g.call(
        "native_layer_norm", g.t(R3), [5], affine(g, w, (5,), F32), affine(g, b, (5,), F32), 1e-5, n_out=3))
    add("native_layer_norm", f"{tag}-2d-shape", lambda g: g.call(
        "native_layer_norm", g.t(R3), [4, 5], affine(g, w, (4, 5), F32), affine(g, b, (4, 5), F32), 1e-3, n_out=3))
    add("native_group_norm", tag, lambda g: g.call(
        "native_group_norm", g.t((2, 6, 5)), affine(g, w, (6,), F32), affine(g, b, (6,), F32), 2, 6, 5, 3, 1e-5, n_out=3))
    add("_native_batch_norm_legit_no_training", tag, lambda g: g.call(
        "_native_batch_norm_legit_no_training", g.t((2, 3, 4)), affine(g, w, (3,), F32), affine(g, b, (3,), F32),
        g.t((3,)), g.t((3,), F32, low=0.5, high=2.0), 0.1, 1e-5, n_out=3))
for dt in ALL:
    add("native_layer_norm", dt_tag(dt), lambda g: g.call(
        "native_layer_norm", g.t(R3, dt), [5], g.t((5,), dt), g.t((5,), dt), 1e-5, n_out=3))
    add("native_group_norm", dt_tag(dt), lambda g: g.call(
        "native_group_norm", g.t((2, 4, 3, 2), dt), g.t((4,), dt), g.t((4,), dt), 2, 4, 6, 2, 1e-5, n_out=3))
    add("_native_batch_norm_legit_no_training", dt_tag(dt), lambda g: g.call(
        "_native_batch_norm_legit_no_training", g.t((2, 3, 4), dt), g.t((3,), dt), g.t((3,), dt),
        g.t((3,), dt), g.t((3,), dt, low=0.5, high=2.0), 0.1, 1e-5, n_out=3))
for tag, shape, layout in [("T", (4, 5), "T"), ("step2", (3, 4), "step2"), ("expand", (3, 4), "expand"), ("zero", (0, 4), "contig")]:
    add("native_layer_norm", tag, lambda g: g.call("native_layer_norm", g.t(shape, F32, layout), [shape[-1]], None, None, 1e-5, n_out=3))
    # ATen's CPU group-norm kernel requires a contiguous input (torch.group_norm makes it
    # contiguous first); coil takes any layout, so torch runs on a contiguous copy.
    add("native_group_norm", tag, lambda g: g.call(
        "native_group_norm", g.t(shape, F32, layout), None, None, shape[0], shape[1], 1, 1 if shape[1] % 2 else 2, 1e-5, n_out=3),
        ref=lambda g: contiguous_operands(g))
    add("_native_batch_norm_legit_no_training", tag, lambda g: g.call(
        "_native_batch_norm_legit_no_training", g.t(shape, F32, layout), None, None, g.t((shape[1],)),
        g.t((shape[1],), F32, low=0.5, high=2.0), 0.1, 1e-5, n_out=3))
add("native_layer_norm", "bad-shape", lambda g: g.call("native_layer_norm", g.t(R3), [4], None, None, 1e-5, n_out=3))
add("native_layer_norm", "bad-weight", lambda g: g.call("native_layer_norm", g.t(R3), [5], g.t((4,)), None, 1e-5, n_out=3))
add("native_layer_norm", "f16-input-f32-weight", lambda g: g.call("native_layer_norm", g.t(R3, F16), [5], g.t((5,)), g.t((5,)), 1e-5, n_out=3))
add("native_layer_norm", "constant-rows", lambda g: g.call("native_layer_norm", g.t((2, 3), F32, values=[1.0] * 6), [3], None, None, 1e-5, n_out=3))
for groups in [1, 6]:
    add("native_group_norm", f"groups={groups}", lambda g: g.call(
        "native_group_norm", g.t((2, 6, 5)), g.t((6,)), None, 2, 6, 5, groups, 1e-5, n_out=3))
add("native_group_norm", "bad-groups", lambda g: g.call("native_group_norm", g.t((2, 6, 5)), None, None, 2, 6, 5, 4, 1e-5, n_out=3))
add("native_group_norm", "bad-HxW", lambda g: g.call("native_group_norm", g.t((2, 6, 5)), None, None, 2, 6, 4, 2, 1e-5, n_out=3))
add("native_group_norm", "f16-input-f32-weight", lambda g: g.call(
    "native_group_norm", g.t((2, 4, 3), F16), g.t((4,)), g.t((4,)), 2, 4, 3, 2, 1e-5, n_out=3))
add("_native_batch_norm_legit_no_training", "4d", lambda g: g.call(
    "_native_batch_norm_legit_no_training", g.t((2, 3, 4, 2)), g.t((3,)), g.t((3,)), g.t((3,)), g.t((3,), F32, low=0.5, high=2.0), 0.1, 1e-3, n_out=3))
add("_native_batch_norm_legit_no_training", "2d", lambda g: g.call(
    "_native_batch_norm_legit_no_training", g.t((5, 3)), None, None, g.t((3,)), g.t((3,), F32, low=0.5, high=2.0), 0.1, 1e-5, n_out=3))
for dt in [F16, BF16]:
    add("_native_batch_norm_legit_no_training", f"{dt_tag(dt)}-input-f32-stats", lambda g: g.call(
        "_native_batch_norm_legit_no_training", g.t((2, 3, 4), dt), g.t((3,)), g.t((3,)), g.t((3,)),
        g.t((3,), F32, low=0.5, high=2.0), 0.1, 1e-5, n_out=3))
add("_native_batch_norm_legit_no_training", "bad-stats", lambda g: g.call(
    "_native_batch_norm_legit_no_training", g.t((2, 3, 4)), None, None, g.t((4,)), g.t((4,)), 0.1, 1e-5, n_out=3),
    coil_rejects="the CPU kernel does not check the running statistics' size against C")
for params in [(F32, F16), (F64, F32), (BF16, F16)]:
    add("native_layer_norm", f"mixed-{dt_tag(*params)}", lambda g: g.call(
        "native_layer_norm", g.t(R3, F16), [5], g.t((5,), params[0]), g.t((5,), params[1]), 1e-5, n_out=3))
add("native_layer_norm", "f32-input-f64-weight", lambda g: g.call("native_layer_norm", g.t(R3), [5], g.t((5,), F64), None, 1e-5, n_out=3))
add("_native_batch_norm_legit_no_training", "f16-input-f16-weight-f32-stats", lambda g: g.call(
    "_native_batch_norm_legit_no_training", g.t((2, 3, 4), F16), g.t((3,), F16), None, g.t((3,)), g.t((3,), F32, low=0.5, high=2.0), 0.1, 1e-5, n_out=3))

# Batch statistics (training mode): the meta's dtypes (torch's decomposition) differ from the CPU
# kernel's for f16/bf16 — the new running statistics are f32 — and AOTAutograd's graphs follow
# the meta, so the dtypes are compared with the decomposition's and the values with float64.
BN = "_native_batch_norm_legit_functional"
BN_NO_STATS = "_native_batch_norm_legit.no_stats"


def bn_stats(g, dt, c=3):
    return g.t((c,), dt), g.t((c,), dt, low=0.5, high=2.0)


for dt in FLOATS:
    for training in [True, False]:
        add(BN, f"{dt_tag(dt)}-training={training}", lambda g: g.call(
            BN, g.t((4, 3, 5), dt), g.t((3,), dt), g.t((3,), dt), *bn_stats(g, dt), training, 0.1, 1e-5, n_out=5),
            ref=decomposed, ref64=True)
    add(BN_NO_STATS, dt_tag(dt), lambda g: g.call(BN_NO_STATS, g.t((4, 3, 5), dt), g.t((3,), dt), None, True, 0.1, 1e-5, n_out=3),
        ref=decomposed, ref64=True)
    if dt in (F16, BF16):
        add(BN, f"{dt_tag(dt)}-input-f32-params", lambda g: g.call(
            BN, g.t((2, 3, 4, 4), dt), g.t((3,)), g.t((3,)), *bn_stats(g, F32), True, 0.25, 1e-5, n_out=5),
            ref=decomposed, ref64=True)
for dt in [I64, BOOL]:
    add(BN, dt_tag(dt), lambda g: g.call(BN, g.t((2, 3, 4), dt), None, None, *bn_stats(g, F32), True, 0.1, 1e-5, n_out=5))
for w, b in WB:
    add(BN, f"w={int(w)},b={int(b)}-4d", lambda g: g.call(
        BN, g.t((2, 3, 4, 2)), affine(g, w, (3,), F32), affine(g, b, (3,), F32), *bn_stats(g, F32), True, 0.1, 1e-3, n_out=5),
        ref=decomposed, ref64=True)
# (expand broadcasts the channels here: broadcasting the batch would make every channel constant,
# whose normalization divides rounding noise by sqrt(eps))
for tag, shape, layout in [("T", (4, 5), "T"), ("step2", (3, 4), "step2"), ("expand", (1, 3, 4), "expand")]:
    add(BN, tag, lambda g: g.call(BN, g.t(shape, F32, layout), None, None, *bn_stats(g, F32, shape[1]), True, 0.1, 1e-5, n_out=5),
        ref=decomposed, ref64=True)
add(BN, "step2-stats", lambda g: g.call(BN, g.t((2, 3, 4)), None, None, g.t((3,), F32, "step2"), g.t((3,), F32, "step2", low=0.5, high=2.0),
                                         True, 0.1, 1e-5, n_out=5), ref=decomposed, ref64=True)
add(BN, "momentum=1", lambda g: g.call(BN, g.t((2, 3, 4)), None, None, *bn_stats(g, F32), True, 1.0, 1e-5, n_out=5),
    ref=decomposed, ref64=True)
add(BN, "bad-stats", lambda g: g.call(BN, g.t((2, 3, 4)), None, None, *bn_stats(g, F32, 4), True, 0.1, 1e-5, n_out=5),
    coil_rejects="the CPU kernel does not check the running statistics' size against C")
add(BN, "zero-batch", lambda g: g.call(BN, g.t((0, 3, 2)), None, None, *bn_stats(g, F32), True, 0.1, 1e-5, n_out=5))
add(BN, "1d", lambda g: g.call(BN, g.t((3,)), None, None, *bn_stats(g, F32), True, 0.1, 1e-5, n_out=5))

# ----------------------------------------------------------------------------------------------
# Views: values, and the strides and storage offset coil infers (compared with torch's).


def view_case(op, tag, build, **opts):
    add(op, tag, build, strides=True, **opts)


for dt in ALL:
    view_case("alias", dt_tag(dt), lambda g: g.call("alias", g.t(SHAPE, dt)))
    view_case("view", dt_tag(dt), lambda g: g.call("view", g.t(R3, dt), [4, -1]))
view_case("alias", "T", lambda g: g.call("alias", g.t((3, 4), F32, "T")))
view_case("alias", "0d", lambda g: g.call("alias", g.t(())))

# (tag, input shape, layout, view size); torch decides which views of non-contiguous inputs work.
VIEWS = [("flat", R3, "contig", [-1]), ("split", (6, 4), "contig", [2, 3, 2, 2]), ("merge", R3, "contig", [12, 5]),
         ("unit-dims", (3, 4), "contig", [1, 3, 1, 4, 1]), ("0d-to-1", (), "contig", [1]), ("1-to-0d", (1,), "contig", []),
         ("0d-to-minus1", (), "contig", [-1]), ("zero", (0, 4), "contig", [4, 0, -1]), ("zero-minus1", (0, 4), "contig", [0, -1]),
         ("T-split-ok", (6, 4), "T", [2, 2, 6]), ("T-flat-bad", (6, 4), "T", [24]), ("T-merge-bad", (3, 4), "T", [12]),
         ("step2-split-ok", (3, 4), "step2", [3, 2, 2]), ("step2-flat-bad", (3, 4), "step2", [12]),
         ("expand-split-ok", (3, 4), "expand", [3, 2, 2]), ("expand-flat-bad", (3, 4), "expand", [12]),
         ("two-minus1", R3, "contig", [-1, -1]), ("bad-numel", R3, "contig", [7, 8]), ("negative", R3, "contig", [-2, 30])]
for tag, shape, layout, size in VIEWS:
    view_case("view", tag, lambda g: g.call("view", g.t(shape, F32, layout), size))
    # _unsafe_view's schema returns a new tensor (no alias): its layout is coil's to choose.
    add("_unsafe_view", tag, lambda g: g.call("_unsafe_view", g.t(shape, F32, layout), size))

PERMUTES = [("id", R3, [0, 1, 2]), ("rev", R3, [2, 1, 0]), ("neg", R3, [-1, 0, -2]), ("0d", (), []),
            ("dup", R3, [0, 0, 1]), ("short", R3, [1, 0]), ("zero", (0, 3), [1, 0])]
for tag, shape, dims in PERMUTES:
    view_case("permute", tag, lambda g: g.call("permute", g.t(shape), dims))
view_case("permute", "of-step2", lambda g: g.call("permute", g.t((3, 4), F32, "step2"), [1, 0]))
for dt in ALL:
    view_case("permute", dt_tag(dt), lambda g: g.call("permute", g.t(SHAPE, dt), [1, 0]))

EXPANDS = [("minus1", (3, 1), [-1, 4]), ("lead", (3, 1), [2, 3, 5]), ("0d", (), [2, 3]), ("same", (3, 4), [3, 4]),
           ("to-zero", (3, 1), [3, 0]), ("bad", (3, 2), [3, 4]), ("lead-minus1", (3,), [-1, 3]),
           ("fewer", (3, 4), [4]), ("zero-lead", (2,), [0, 2])]
for tag, shape, size in EXPANDS:
    view_case("expand", tag, lambda g: g.call("expand", g.t(shape), size))
view_case("expand", "of-T", lambda g: g.call("expand", g.call("unsqueeze", g.t((3, 4), F32, "T"), 1), [3, 2, 4]))
for dt in ALL:
    view_case("expand", dt_tag(dt), lambda g: g.call("expand", g.t((3, 1), dt), [2, 3, 4]))

# (tag, shape, dim, start, end, step)
BIG = 9223372036854775807
SLICES = [("all", (7, 4), 0, None, None, 1), ("mid", (7, 4), 0, 1, -1, 1), ("neg-start", (4, 7), 1, -3, None, 2),
          ("oversized", (7, 4), 0, -100, 100, 3), ("empty", (4, 7), 1, 5, 2, 1), ("int64-max", (4, 7), -1, 2, BIG, 1),
          ("step-beyond", (7, 4), 0, 2, None, 10), ("start-past-end", (7, 4), 0, 9, None, 1),
          ("step0", (7, 4), 0, None, None, 0), ("negative-step", (7, 4), 0, None, None, -1), ("zero", (0, 4), 0, 1, 3, 2),
          ("dim-out-of-range", (7, 4), 2, 0, 1, 1)]
for tag, shape, dim, start, end, step in SLICES:
    view_case("slice.Tensor", tag, lambda g: g.call("slice.Tensor", g.t(shape), dim, start, end, step))
view_case("slice.Tensor", "0d", lambda g: g.call("slice.Tensor", g.t(()), 0, 0, 1))
view_case("slice.Tensor", "of-T", lambda g: g.call("slice.Tensor", g.t((5, 6), F32, "T"), 1, 1, None, 2))
view_case("slice.Tensor", "of-step2", lambda g: g.call("slice.Tensor", g.t((3, 9), F32, "step2"), 1, 2, -1, 3))
for dt in ALL:
    view_case("slice.Tensor", dt_tag(dt), lambda g: g.call("slice.Tensor", g.t((5, 6), dt), 1, 1, 5, 2))

SELECTS = [("first", (4, 5), 0, 0), ("neg", (4, 5), 1, -1), ("out-of-range", (4, 5), 0, 4), ("neg-out-of-range", (4, 5), 1, -6),
           ("1d", (5,), 0, 2), ("0d", (), 0, 0)]
for tag, shape, dim, index in SELECTS:
    view_case("select.int", tag, lambda g: g.call("select.int", g.t(shape), dim, index))
view_case("select.int", "of-T", lambda g: g.call("select.int", g.t((4, 5), F32, "T"), 1, 2))
view_case("select.int", "of-step2", lambda g: g.call("select.int", g.t((4, 5), F32, "step2"), 0, -1))

SQ = (1, 3, 1, 2)
view_case("squeeze", "some", lambda g: g.call("squeeze", g.t(SQ)))
view_case("squeeze", "0d", lambda g: g.call("squeeze", g.t(())))
view_case("squeeze", "all-ones", lambda g: g.call("squeeze", g.t((1, 1))))
view_case("squeeze", "zero", lambda g: g.call("squeeze", g.t((1, 0, 1))))
view_case("squeeze", "of-T", lambda g: g.call("squeeze", g.t((3, 1, 4), F32, "T")))
for dim in [0, 1, -2, 4]:
    view_case("squeeze.dim", f"dim={dim}", lambda g: g.call("squeeze.dim", g.t(SQ), dim))
view_case("squeeze.dim", "0d", lambda g: g.call("squeeze.dim", g.t(()), -1))
for dims in [[0, -2], [1], [], [0, 0], [0, 5]]:
    view_case("squeeze.dims", f"dims={dims}", lambda g: g.call("squeeze.dims", g.t(SQ), dims))
view_case("squeeze.dims", "0d", lambda g: g.call("squeeze.dims", g.t(()), [0]))
for dim in [0, 2, 3, -1, -4, 4, -5]:
    view_case("unsqueeze", f"dim={dim}", lambda g: g.call("unsqueeze", g.t(R3), dim))
view_case("unsqueeze", "0d", lambda g: g.call("unsqueeze", g.t(()), 0))
view_case("unsqueeze", "of-T", lambda g: g.call("unsqueeze", g.t((3, 4), F32, "T"), 1))
view_case("unsqueeze", "of-step2", lambda g: g.call("unsqueeze", g.t((3, 4), F32, "step2"), 2))
for dt in ALL:
    view_case("squeeze.dim", dt_tag(dt), lambda g: g.call("squeeze.dim", g.t((3, 1), dt), 1))
    view_case("unsqueeze", dt_tag(dt), lambda g: g.call("unsqueeze", g.t((3,), dt), 0))

# (tag, input shape, layout, size, stride, storage_offset)
AS_STRIDED = [("transpose", (3, 4), "contig", [4, 3], [1, 4], None), ("window", (10,), "contig", [4, 3], [2, 1], None),
              ("offset", (10,), "contig", [2, 2], [3, 1], 4), ("broadcast", (5,), "contig", [3, 5], [0, 1], 0),
              ("of-step2", (3, 4), "step2", [2, 2], [1, 2], None), ("of-T", (3, 4), "T", [2, 3], [3, 1], 1),
              ("0d", (6,), "contig", [], [], 5), ("zero", (6,), "contig", [0, 3], [1, 1], 2),
              ("out-of-storage", (6,), "contig", [3, 3], [3, 1], None), ("negative-stride", (6,), "contig", [3], [-1], 2)]
for tag, shape, layout, size, stride, offset in AS_STRIDED:
    view_case("as_strided", tag, lambda g: g.call("as_strided", g.t(shape, F32, layout), size, stride, offset))
for dt in ALL:
    view_case("as_strided", dt_tag(dt), lambda g: g.call("as_strided", g.t((10,), dt), [3, 2], [2, 3], 1))
# Of a view of a computed value: sizes, strides and offset address the computed value's storage,
# not the view's elements.
view_case("as_strided", "of-computed-slice", lambda g: g.call(
    "as_strided", g.call("slice.Tensor", g.call("mul.Scalar", g.t((10,)), 2.0), 0, 2, 10), [2, 2], [3, 1], 1))
view_case("as_strided", "of-computed-T", lambda g: g.call(
    "as_strided", g.call("permute", g.call("view", g.call("mul.Scalar", g.t((10,)), 2.0), [2, 5]), [1, 0]), [3, 3], [1, 2], 0))

# (tag, input shape, layout, offset, dim1, dim2)
DIAGONALS = [("square", (4, 4), "contig", 0, 0, 1), ("above", (3, 5), "contig", 2, 0, 1), ("below", (5, 3), "contig", -2, 0, 1),
             ("past-the-end", (3, 4), "contig", 7, 0, 1), ("past-the-start", (3, 4), "contig", -5, 0, 1),
             ("swapped-dims", (3, 5), "contig", 1, 1, 0), ("3d-outer", (3, 2, 4), "contig", 0, 0, 2),
             ("4d-negative-dims", (2, 3, 4, 5), "contig", -1, -1, -2), ("of-T", (4, 3), "T", 1, 0, 1),
             ("of-step2", (3, 4), "step2", 0, 0, 1), ("of-expand", (3, 4), "expand", -1, 0, 1), ("zero", (0, 3), "contig", 0, 0, 1),
             ("same-dims", (3, 3), "contig", 0, 1, 1), ("dim-out-of-range", (3, 3), "contig", 0, 0, 2), ("1d", (3,), "contig", 0, 0, 1)]
for tag, shape, layout, offset, dim1, dim2 in DIAGONALS:
    view_case("diagonal", tag, lambda g: g.call("diagonal", g.t(shape, F32, layout), offset, dim1, dim2))
for dt in ALL:
    view_case("diagonal", dt_tag(dt), lambda g: g.call("diagonal", g.t((3, 4), dt), 1))
# Of a fused value: the diagonal's indices go into the producer's expression.
add("diagonal", "of-a-sum", lambda g: g.call("diagonal", g.call("add", g.t((2, 4, 4)), g.t((4, 1))), 1, 1, 2))
add("diagonal", "then-sum", lambda g: g.call("sum.dim_IntList", g.call("diagonal", g.call("mul", g.t((5, 5)), g.t((5, 5))), -1), [0]))

SPLITS = [("2-3", (5, 4), [2, 3], 0), ("zero-part", (5, 4), [0, 5], 0), ("last-dim", (3, 5), [1, 1, 3], -1),
          ("bad-sum", (5, 4), [2, 2], 0), ("one", (5, 4), [5], 0), ("negative", (5, 4), [-1, 6], 0), ("0d", (), [1], 0)]
for tag, shape, sizes, dim in SPLITS:
    view_case("split_with_sizes", tag, lambda g: g.call("split_with_sizes", g.t(shape), sizes, dim, n_out=len(sizes)))
view_case("split_with_sizes", "of-T", lambda g: g.call("split_with_sizes", g.t((5, 4), F32, "T"), [1, 3], 1, n_out=2))
view_case("split_with_sizes", "of-step2", lambda g: g.call("split_with_sizes", g.t((4, 5), F32, "step2"), [2, 3], -1, n_out=2))
for dt in ALL:
    view_case("split_with_sizes", dt_tag(dt), lambda g: g.call("split_with_sizes", g.t((5, 2), dt), [3, 2], n_out=2))

# ----------------------------------------------------------------------------------------------
# Creation: every dtype, default dtypes from the fill value, fills a dtype cannot hold, 0-d and
# zero-size shapes. empty.* contents are unspecified: only dtype, shape and strides compare.

for dt in ALL:
    for fill in [3, -2.5, True]:
        add("full", f"{dt_tag(dt)}-{fill!r}", lambda g: g.call("full", [2, 3], fill, dtype=dt))
for fill in [3, -2.5, True, False, 0.1]:
    add("full", f"default-dtype-{fill!r}", lambda g: g.call("full", [2, 3], fill))
for size in [[], [0, 3], [1], [2, 1, 3], [4, 0]]:
    add("full", f"size={size}", lambda g: g.call("full", size, 1.5))
FILL_EDGES = [(math.nan, F32), (math.inf, F16), (-math.inf, BF16), (70000.0, F16), (65519.0, F16), (1e39, F32),
              (300, U8), (-1, U8), (256, U8), (300, I8), (-129, I8), (2 ** 31, I32), (-2 ** 31, I32),
              (2 ** 63 - 1, I64), (-2 ** 63 + 1, I64), (2 ** 53 + 1, I64), (math.nan, I32), (math.inf, I64),
              (2.5, BOOL), (-7, BOOL), (2.7, I32), (-2.7, I16), (3.5e38, BF16), (1e-50, F32)]
for fill, dt in FILL_EDGES:
    add("full", f"edge-{fill!r}-{dt_tag(dt)}", lambda g: g.call("full", [3], fill, dtype=dt))

for dt in ALL:
    for fill in [3, -2.5]:
        add("full_like", f"{dt_tag(dt)}-{fill!r}", lambda g: g.call("full_like", g.t(SHAPE, dt), fill), strides=True)
for src, dst, fill in [(F32, I32, 7), (I64, F16, 1.5), (BOOL, F32, 1), (F16, BOOL, 0), (U8, I8, -3), (I32, U8, 300)]:
    add("full_like", f"{dt_tag(src)}-dtype={dt_tag(dst)}-{fill!r}",
        lambda g: g.call("full_like", g.t(SHAPE, src), fill, dtype=dst), strides=True)
for tag, shape, layout in LAYOUTS:
    for fmt in [None, torch.preserve_format, torch.contiguous_format]:
        add("full_like", f"{tag}-{MEMORY_FORMATS.get(fmt)}",
            lambda g: g.call("full_like", g.t(shape, F32, layout), 2.5, memory_format=fmt), strides=True)


def channels_last_input(g, shape, dtype=F32):
    """A 4-d operand of logical shape NCHW stored as NHWC (channels_last strides)."""
    n, c, h, w = shape
    return g.call("permute", g.t((n, h, w, c), dtype), [0, 3, 1, 2])


def channels_last_3d_input(g, shape, dtype=F32):
    n, c, d, h, w = shape
    return g.call("permute", g.t((n, d, h, w, c), dtype), [0, 4, 1, 2, 3])


# (tag, operand builder) for memory formats of 4-d (and 3-d, 5-d) tensors.
MF_OPERANDS = [("4d", lambda g: g.t((2, 3, 4, 5))), ("4d-cl", lambda g: channels_last_input(g, (2, 3, 4, 5))),
               ("4d-T", lambda g: g.t((2, 3, 4, 5), F32, "T")), ("4d-step2", lambda g: g.t((2, 3, 4, 5), F32, "step2")),
               ("4d-c1", lambda g: channels_last_input(g, (2, 1, 4, 5))), ("5d-cl3d", lambda g: channels_last_3d_input(g, (2, 3, 2, 4, 5))),
               ("3d", lambda g: g.t((3, 4, 5)))]
MF_FORMATS = [None, torch.preserve_format, torch.contiguous_format, torch.channels_last]
for tag, operand in MF_OPERANDS:
    for fmt in MF_FORMATS:
        add("full_like", f"mf-{tag}-{MEMORY_FORMATS.get(fmt)}",
            lambda g: g.call("full_like", operand(g), 1, memory_format=fmt), strides=True)



def _philox_reference(g, size, stream, distribution, dtype):
    """torch.ops.coil.philox_random (coil/_random.py): the same bits computed with tensor ops."""
    from coil import _random  # noqa: F401 - registers torch.ops.coil

    seed = next(iter(g.inputs.values()))
    return [torch.ops.coil.philox_random(seed, size, stream, distribution, dtype)]


# philox_random (coil's own: dropout, rand and randn in compiled graphs) against the op's PyTorch
# implementation, which computes the same bits (normal values within an f64 rounding).
for dt in FLOATS:
    for distribution, size, stream in [("uniform", [7, 5], 0), ("normal", [3, 4, 2], 3), ("uniform", [0, 4], 1)]:
        add("philox_random", f"{distribution}-{size}-{stream}-{dt_tag(dt)}",
            lambda g: g.call("philox_random", g.input(torch.tensor(-987654321012345, dtype=I64)), size, stream, distribution, dt),
            ref=lambda g, size=size, stream=stream, distribution=distribution, dt=dt: _philox_reference(g, size, stream, distribution, dt))

# (start, end, step)
RANGES = [(0, 5, 1), (2, 11, 3), (5, 0, -1), (10, -3, -4), (0.5, 3, 0.25), (0, 1, 0.1), (-3, 3, 2.5), (1, 1, 1),
          (1.5, 1.5, 0.5), (0, 2.0, 1), (-1, 1, 0.3), (3, 1, 1), (0, 5, 0), (0, 5, -1), (0.0, 0.0, 0.0),
          (0, math.inf, 1), (0, math.nan, 1)]
for start, end, step in RANGES:
    add("arange.start_step", f"{start!r},{end!r},{step!r}", lambda g: g.call("arange.start_step", start, end, step))
for dt in ALL:
    # A fractional step below 1 truncates to 0 for integer dtypes (ATen then divides by zero).
    # ATen truncates start and step to int64 for integer dtypes; for i64 (only) it also takes
    # the length from the truncated bounds, which coil does not do yet: left out for i64.
    for start, end, step in [(0, 10, 3), (5, -5, -2)] + ([(-2, 2.5, 0.5)] if dt.is_floating_point else []) + \
            ([(0.5, 5, 1.5), (-2.5, 7, 2.7)] if dt != I64 else []):
        add("arange.start_step", f"{start!r},{end!r},{step!r}-{dt_tag(dt)}",
            lambda g: g.call("arange.start_step", start, end, step, dtype=dt))
for start, end, step, dt in [(0, 2100, 3, F16), (0, 600, 1, BF16), (250, 256, 1, U8), (-128, 127, 5, I8),
                             (0, 1.0, 0.1, F64), (0.1, 0.9, 0.1, F32), (2 ** 40, 2 ** 40 + 5, 1, I64), (2 ** 40, 2 ** 40 + 5, 1, F32)]:
    add("arange.start_step", f"{start!r},{end!r},{step!r}-{dt_tag(dt)}",
        lambda g: g.call("arange.start_step", start, end, step, dtype=dt))
add("arange.start_step", "default-step", lambda g: g.call("arange.start_step", 3, 7))
# Bool bounds count as ints (torch.arange(True, 5, True) is [1, 2, 3, 4] in int64).
for start, end, step in [(True, 5, True), (False, True, 1), (0, 3, True), (True, 2.5, 0.5), (False, False, True)]:
    add("arange.start_step", f"{start!r},{end!r},{step!r}", lambda g: g.call("arange.start_step", start, end, step))

for dt in ALL:
    for s in [3, -2.5, True]:
        add("scalar_tensor", f"{dt_tag(dt)}-{s!r}", lambda g: g.call("scalar_tensor", s, dtype=dt))
for s in [3, -2.5, True, math.nan, -math.inf, 2 ** 40]:
    add("scalar_tensor", f"default-dtype-{s!r}", lambda g: g.call("scalar_tensor", s))
for s, dt in [(math.nan, F16), (math.inf, BF16), (70000.0, F16), (300, U8), (-1, U8), (math.nan, I64), (2 ** 62 + 1, I64),
              (2 ** 62 + 1, F64), (2.7, I8), (-0.0, F32)]:
    add("scalar_tensor", f"edge-{s!r}-{dt_tag(dt)}", lambda g: g.call("scalar_tensor", s, dtype=dt))

for dt in ALL:
    add("empty.memory_format", dt_tag(dt), lambda g: g.call("empty.memory_format", [2, 3], dtype=dt), values=False, strides=True)
add("empty.memory_format", "default-dtype", lambda g: g.call("empty.memory_format", [2, 3]), values=False, strides=True)
for size in [[], [0, 4], [1, 1], [2, 3, 4, 5], [2, 1, 4, 1], [2, 0, 3, 4], [2, 3, 2, 4, 5]]:
    for fmt in MF_FORMATS:
        add("empty.memory_format", f"{size}-{MEMORY_FORMATS.get(fmt)}",
            lambda g: g.call("empty.memory_format", size, dtype=F16, memory_format=fmt), values=False, strides=True)

# (size, stride)
EMPTY_STRIDED = [([2, 3], [3, 1]), ([2, 3], [1, 2]), ([2, 3], [0, 1]), ([3, 4], [10, 2]), ([], []), ([0, 3], [1, 1]),
                 ([2, 1, 3], [3, 99, 1]), ([4], [0]), ([2, 3], [3]), ([2, 3], [3, 1, 1])]
for size, stride in EMPTY_STRIDED:
    add("empty_strided", f"{size}-{stride}", lambda g: g.call("empty_strided", size, stride), values=False, strides=True)
for dt in ALL:
    add("empty_strided", dt_tag(dt), lambda g: g.call("empty_strided", [2, 3], [1, 2], dtype=dt), values=False, strides=True)

# ----------------------------------------------------------------------------------------------
# Copies and casts: every dtype pair, memory formats against each input layout (strides
# compared), broadcasting copy sources.

for dt in ALL:
    add("clone", dt_tag(dt), lambda g: g.call("clone", g.t(SHAPE, dt, special=True)), strides=True)
for tag, shape, layout in LAYOUTS:
    for fmt in [None, torch.preserve_format, torch.contiguous_format]:
        add("clone", f"{tag}-{MEMORY_FORMATS.get(fmt)}",
            lambda g: g.call("clone", g.t(shape, F32, layout), memory_format=fmt), strides=True)
for tag, operand in MF_OPERANDS:
    for fmt in MF_FORMATS:
        add("clone", f"mf-{tag}-{MEMORY_FORMATS.get(fmt)}", lambda g: g.call("clone", operand(g), memory_format=fmt), strides=True)
add("clone", "of-permute-3d", lambda g: g.call("clone", g.call("permute", g.t((3, 4, 5)), [1, 2, 0])), strides=True)
add("clone", "of-select-view", lambda g: g.call("clone", g.call("select.int", g.t((3, 4, 5)), 1, 2)), strides=True)


def cast_source(g, src, dst, shape=SHAPE, layout="contig"):
    """Values every cast defines: floats stay in an integer target's range (float-to-integer
    conversion out of range, or of nan, is undefined in C++ and in ATen)."""
    if src.is_floating_point and not dst.is_floating_point and dst != BOOL:
        return g.t(shape, src, layout, low=0 if dst == U8 else -9, high=20 if dst == U8 else 9)
    return g.t(shape, src, layout, special=src.is_floating_point)


for src in ALL:
    for dst in ALL:
        add("_to_copy", f"{dt_tag(src)}-to-{dt_tag(dst)}", lambda g: g.call("_to_copy", cast_source(g, src, dst), dtype=dst), strides=True)
add("_to_copy", "no-dtype", lambda g: g.call("_to_copy", g.t(SHAPE, F16)), strides=True)
for tag, shape, layout in LAYOUTS:
    add("_to_copy", f"{tag}-f32-to-f16", lambda g: g.call("_to_copy", g.t(shape, F32, layout), dtype=F16), strides=True)
    add("_to_copy", f"{tag}-contiguous", lambda g: g.call(
        "_to_copy", g.t(shape, I32, layout), dtype=F64, memory_format=torch.contiguous_format), strides=True)
for tag, operand in MF_OPERANDS:
    for fmt in MF_FORMATS:
        add("_to_copy", f"mf-{tag}-{MEMORY_FORMATS.get(fmt)}",
            lambda g: g.call("_to_copy", operand(g), dtype=BF16, memory_format=fmt), strides=True)
# (tag, source values and dtype, target dtype): wrapping integer casts, float truncation toward
# zero, overflow to inf, rounding to nearest even.
CAST_EDGES = [("wrap-i64-i8", [300, -300, 127, 128, 2 ** 40 + 5, -129], I64, I8),
              ("wrap-i64-u8", [300, -300, 255, 256, -1, 2 ** 40 + 5], I64, U8),
              ("wrap-i64-i16", [70000, -70000, 32767, 32768, -1, 2 ** 40 + 5], I64, I16),
              ("wrap-i64-i32", [2 ** 31, -2 ** 31 - 1, 2 ** 40 + 5, -1, 7, 0], I64, I32),
              ("wrap-i32-u8", [300, -300, 255, 256, -1, 7], I32, U8),
              ("trunc-f32-i64", [-2.7, 2.7, -0.5, 0.5, 1e10, -1e10], F32, I64),
              ("trunc-f64-i32", [-2.7, 2.7, -0.99, 0.99, 2147483647.5, -2147483648.5], F64, I32),
              ("overflow-f64-f16", [70000.0, 65519.0, 65520.0, 1e-8, -1e-8, 6e-8], F64, F16),
              ("overflow-f32-bf16", [3.4e38, 3.39e38, 1e-40, -1e-45, 1.00390625, 1.01171875], F32, BF16),
              ("round-i64-f32", [2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24 + 1), 2 ** 53 + 1, 2 ** 62 + 2 ** 38, 7], I64, F32),
              ("round-i64-f16", [65520, 65519, 2049, 2051, -65520, 4097], I64, F16),
              ("round-i64-bf16", [257, 259, 2 ** 40 + 2 ** 32, -257, 3 ** 20, 1], I64, BF16),
              ("round-i64-f64", [2 ** 53 + 1, 2 ** 62 + 1, -(2 ** 53 + 3), 2 ** 63 - 1, -2 ** 63, 3], I64, F64),
              ("edge-f32-to-bool", [0.0, -0.0, math.nan, 1e-45, -math.inf, 0.5], F32, BOOL),
              ("edge-f16-to-f32", [65504.0, 6e-8, -0.0, math.inf, math.nan, 0.1], F16, F32)]
for tag, values, src, dst in CAST_EDGES:
    add("_to_copy", tag, lambda g: g.call("_to_copy", g.t((len(values),), src, values=values), dtype=dst))

for dst in ALL:
    for src in [F32, I64, BOOL, F16]:
        add("copy", dt_tag(dst, src), lambda g: g.call("copy", g.t(SHAPE, dst), cast_source(g, src, dst)))
# (tag, self shape and layout, src shape and layout)
COPIES = [("bcast-row", (3, 5), "contig", (5,), "contig"), ("bcast-0d", (3, 5), "contig", (), "contig"),
          ("bcast-col", (3, 5), "contig", (3, 1), "contig"), ("bcast-lead", (2, 3, 5), "contig", (1, 5), "contig"),
          ("too-many-dims", (3, 5), "contig", (2, 3, 5), "contig"), ("mismatch", (3, 5), "contig", (4,), "contig"),
          ("T-self", (4, 5), "T", (4, 5), "contig"), ("T-src", (4, 5), "contig", (4, 5), "T"),
          ("step2-both", (3, 4), "step2", (3, 4), "step2"), ("expand-src", (3, 4), "contig", (3, 4), "expand"),
          ("expand-self", (3, 4), "expand", (3, 4), "contig"), ("zero", (0, 4), "contig", (1, 4), "contig"),
          ("0d", (), "contig", (), "contig"), ("0d-self-1-src", (), "contig", (1,), "contig")]
# ATen's functional copy clones self with clone_preserve_strides: a non-dense (step2) self keeps
# its gaps and offset, an implementation detail coil does not follow (it makes a dense result).
for tag, ss, sl, rs, rl in COPIES:
    add("copy", tag, lambda g: g.call("copy", g.t(ss, F32, sl), g.t(rs, F64, rl)), strides=sl != "step2")
add("copy", "non_blocking", lambda g: g.call("copy", g.t(SHAPE, I32), g.t(SHAPE, I32), True))
add("copy", "4d-cl-self", lambda g: g.call("copy", channels_last_input(g, (2, 3, 4, 5)), g.t((2, 3, 4, 5))), strides=True)

# ----------------------------------------------------------------------------------------------
# Shape ops that make new tensors: cat (empty and mixed-dtype parts), constant_pad_nd (negative
# pads), flip, repeat.

for dt in ALL:
    add("cat", dt_tag(dt), lambda g: g.call("cat", [g.t((3, 5), dt, special=True), g.t((2, 5), dt)]))
for a, b in PAIRS:
    add("cat", dt_tag(a, b), lambda g: g.call("cat", [g.t((3, 2), a), g.t((3, 4), b)], 1))
add("cat", "three-dtypes", lambda g: g.call("cat", [g.t((2, 3), U8), g.t((1, 3), I8), g.t((2, 3), BOOL)]))
# (tag, part shapes, dim)
CATS = [("dim1", [(3, 2), (3, 4)], 1), ("dim-1", [(3, 2), (3, 4)], -1), ("dim-2", [(1, 4), (3, 4)], -2),
        ("3d-mid", [(2, 1, 4), (2, 3, 4), (2, 2, 4)], 1), ("1d", [(3,), (4,)], 0), ("single", [(3, 4)], 0),
        ("same-twice", [(2, 3), (2, 3)], 0), ("zero-part", [(0, 4), (3, 4)], 0), ("zero-other-dim", [(3, 0), (3, 0)], 0),
        ("zero-cat-dim", [(3, 0), (3, 4)], 1), ("all-zero", [(0, 2), (0, 2)], 0),
        ("legacy-empty", [(3, 4), (0,), (2, 4)], 0), ("legacy-empty-dim1", [(0,), (3, 4), (3, 2)], 1),
        ("only-legacy-empty", [(0,), (0,)], 0), ("legacy-empty-first-3d", [(0,), (2, 3, 4)], -1),
        ("dim-out-of-range", [(3, 4), (3, 4)], 2), ("dim-out-of-range-neg", [(3, 4), (3, 4)], -3),
        ("rank-mismatch", [(3, 4), (4,)], 0), ("size-mismatch", [(3, 4), (3, 5)], 0), ("0d", [(), ()], 0),
        ("0d-and-1d", [(), (3,)], 0), ("empty-2d-mismatch", [(0, 3), (2, 4)], 0)]
for tag, shapes, dim in CATS:
    add("cat", tag, lambda g: g.call("cat", [g.t(s) for s in shapes], dim))
add("cat", "mixed-with-empty", lambda g: g.call("cat", [g.t((0,), F64), g.t((2, 3), I32), g.t((1, 3), I32)]))
add("cat", "bool-with-empty-f16", lambda g: g.call("cat", [g.t((2, 3), BOOL), g.t((0,), F16)]))
add("cat", "empty-list", lambda g: g.call("cat", []))
for tag, layouts in [("T-step2", ["T", "step2"]), ("expand-T", ["expand", "T"]), ("step2-contig-expand", ["step2", "contig", "expand"])]:
    for dim in [0, 1]:
        add("cat", f"{tag}-dim{dim}", lambda g: g.call("cat", [g.t((4, 3), F32, lay) for lay in layouts], dim))
add("cat", "4d-cl", lambda g: g.call("cat", [channels_last_input(g, (2, 3, 2, 2)), channels_last_input(g, (2, 1, 2, 2))], 1))

for dt in ALL:
    add("constant_pad_nd", dt_tag(dt), lambda g: g.call("constant_pad_nd", g.t(SHAPE, dt), [1, 2, 0, 1], 1))
# (tag, shape, pad)
PADS = [("last", (3, 5), [1, 2]), ("both", (3, 5), [1, 1, 2, 0]), ("zeros", (3, 5), [0, 0, 0, 0]), ("none", (3, 5), []),
        ("neg", (3, 5), [-1, 2]), ("neg-to-zero", (3, 5), [-2, -3]), ("neg-all", (4, 5), [-1, -1, -1, -1]),
        ("mixed", (3, 5), [2, -1, 0, 3]), ("3d-all", (2, 3, 4), [1, 2, 3, 1, 0, 2]), ("3d-lead", (2, 3, 4), [0, 0, 0, 0, 1, 1]),
        ("neg-past-other", (3, 5), [-6, 3]), ("neg-below-zero", (3, 5), [-4, -3]),
        ("odd", (3, 5), [1]), ("too-long", (3, 5), [1, 1, 1, 1, 1, 1]), ("0d", (), []), ("0d-pad", (), [1, 1]),
        ("zero-size", (0, 3), [1, 1, 1, 1]), ("zero-size-neg", (0, 3), [0, -3]), ("1d", (4,), [3, -2])]
for tag, shape, pad in PADS:
    add("constant_pad_nd", tag, lambda g: g.call("constant_pad_nd", g.t(shape), pad, 2.5))
for value, dt in [(2.5, F32), (-1, F32), (True, F32), (math.nan, F32), (-math.inf, F16), (2.5, I32), (-1, U8),
                  (300, U8), (2, BOOL), (70000.0, F16), (1e-3, BF16), (-129, I8)]:
    add("constant_pad_nd", f"value={value!r}-{dt_tag(dt)}", lambda g: g.call("constant_pad_nd", g.t((2, 3), dt), [1, 1], value))
add("constant_pad_nd", "default-value", lambda g: g.call("constant_pad_nd", g.t((2, 3), I64), [1, 0, 0, 2]))
for tag, shape, layout in [("T", (4, 3), "T"), ("step2", (3, 4), "step2"), ("expand", (3, 4), "expand")]:
    add("constant_pad_nd", tag, lambda g: g.call("constant_pad_nd", g.t(shape, F32, layout), [1, -1, 2, 1], -1.5))

for dt in ALL:
    add("flip", dt_tag(dt), lambda g: g.call("flip", g.t(SHAPE, dt, special=True), [0, 1]))
FLIPS = [("0", (3, 5), [0]), ("1", (3, 5), [1]), ("neg", (3, 5), [-1]), ("neg-pos", (3, 5), [-1, 0]), ("none", (3, 5), []),
         ("3d-all", (2, 3, 4), [0, 2, 1]), ("3d-mid", (2, 3, 4), [-2]), ("dup", (3, 5), [0, 0]), ("dup-neg", (3, 5), [1, -1]),
         ("out-of-range", (3, 5), [2]), ("0d", (), []), ("0d-dim0", (), [0]), ("0d-dim-1", (), [-1]), ("zero", (0, 3), [0, 1]),
         ("size1", (1, 4, 1), [0, 2])]
for tag, shape, dims in FLIPS:
    add("flip", tag, lambda g: g.call("flip", g.t(shape), dims))
for tag, shape, layout in [("T", (4, 3), "T"), ("step2", (3, 4), "step2"), ("expand", (3, 4), "expand")]:
    for dims in [[0], [1], [0, 1]]:
        add("flip", f"{tag}-{dims}", lambda g: g.call("flip", g.t(shape, F32, layout), dims))

for dt in ALL:
    add("repeat", dt_tag(dt), lambda g: g.call("repeat", g.t((2, 3), dt, special=True), [2, 3]))
REPEATS = [("ones", (2, 3), [1, 1]), ("lead", (2, 3), [2, 1, 3]), ("lead2", (3,), [2, 2, 2]), ("zero-rep", (2, 3), [0, 2]),
           ("zero-rep-last", (2, 3), [2, 0]), ("1d", (4,), [3]), ("0d-none", (), []), ("0d-lead", (), [2, 3]),
           ("fewer", (2, 3), [2]), ("negative", (2, 3), [-1, 2]), ("zero-size", (0, 3), [2, 2]), ("size1", (1, 3, 1), [3, 1, 2])]
for tag, shape, reps in REPEATS:
    add("repeat", tag, lambda g: g.call("repeat", g.t(shape), reps))
for tag, shape, layout in [("T", (4, 3), "T"), ("step2", (3, 4), "step2"), ("expand", (3, 4), "expand")]:
    add("repeat", tag, lambda g: g.call("repeat", g.t(shape, F32, layout), [2, 1, 2]))

# ----------------------------------------------------------------------------------------------
# Indexing: random valid indices (never all equal, so a wrong dim or order shows), negative
# and out-of-range indices, index dtypes, dims, broadcast index tensors, non-contiguous
# operands and zero-size index tensors.


def idx(g, shape, n, dt=I64, layout="contig", low=0):
    """An index operand of logical shape `shape` with random values in [low, n), not all
    equal; `layout` as in Graph.t (contig, T or step2)."""
    shape = tuple(shape)
    stored = shape[::-1] if layout == "T" else shape[:-1] + (2 * shape[-1] + 1,) if layout == "step2" else shape
    numel = math.prod(stored)
    t = torch.randint(low, n, stored, generator=g.gen) if numel and n > low else torch.full(stored, low, dtype=I64)
    logical = t.permute(*reversed(range(len(shape)))) if layout == "T" else t[..., 1::2] if layout == "step2" else t
    if logical.numel() > 1 and n - low > 1 and bool((logical == logical.reshape(-1)[0]).all()):
        first = (0,) * len(shape)
        logical[first] = low + 1 if logical[first] == low else low
    x = g.input(t.to(dt))
    if layout == "T":
        return g.call("permute", x, list(range(len(shape) - 1, -1, -1)))
    if layout == "step2":
        return g.call("slice.Tensor", x, -1, 1, None, 2)
    return x


def unique_idx(g, shape, dim, n, layout="contig"):
    """Scatter indices along `dim` that never repeat within a line (which write wins among
    duplicates is unspecified): a random permutation of range(n) per line, cut to shape."""
    shape = tuple(shape)
    full_shape = shape[:dim] + (n,) + shape[dim + 1:]
    perm = torch.argsort(torch.rand(full_shape, generator=g.gen), dim=dim).narrow(dim, 0, shape[dim])
    if layout == "T":
        return g.call("permute", g.input(perm.permute(*reversed(range(len(shape)))).contiguous()), list(range(len(shape) - 1, -1, -1)))
    return g.input(perm.contiguous())


for dt in ALL:
    add("index_select", dt_tag(dt), lambda g: g.call("index_select", g.t((4, 5), dt, special=True), 1, idx(g, (7,), 5)))
# (tag, self shape, dim, index shape, index bound)
INDEX_SELECTS = [("dim0", (4, 5), 0, (6,), 4), ("dim-1", (4, 5), -1, (3,), 5), ("dim-2", (4, 5), -2, (2,), 4),
                 ("3d-mid", (2, 4, 3), 1, (5,), 4), ("0d-index", (4, 5), 1, (), 5), ("empty-index", (4, 5), 0, (0,), 4),
                 ("2d-index", (4, 5), 0, (2, 2), 4), ("dim-out-of-range", (4, 5), 2, (3,), 4),
                 ("out-of-range", (4, 5), 0, (3,), 5), ("0d-self", (), 0, (1,), 1), ("0d-self-0d-index", (), 0, (), 1),
                 ("0d-self-two", (), 0, (2,), 1), ("zero-self", (0, 5), 1, (3,), 5), ("zero-self-dim", (0, 5), 0, (0,), 0),
                 ("1d", (6,), 0, (9,), 6)]
for tag, shape, dim, ishape, n in INDEX_SELECTS:
    add("index_select", tag, lambda g: g.call("index_select", g.t(shape), dim, idx(g, ishape, n)))
add("index_select", "negative", lambda g: g.call("index_select", g.t((4, 5)), 0, g.t((2,), I64, values=[1, -1])))
for dt in [I32, I16, U8, BOOL, F32]:
    add("index_select", f"index-{dt_tag(dt)}", lambda g: g.call("index_select", g.t((4, 5)), 0, idx(g, (3,), 2, dt)))
add("index_select", "T-step2", lambda g: g.call("index_select", g.t((4, 5), F32, "T"), 1, idx(g, (4,), 5, I64, "step2")))
add("index_select", "expand", lambda g: g.call("index_select", g.t((4, 5), F32, "expand"), 0, idx(g, (3,), 4)))

for dt in ALL:
    add("gather", dt_tag(dt), lambda g: g.call("gather", g.t((4, 5), dt, special=True), 1, idx(g, (3, 7), 5)))
# (tag, self shape, dim, index shape, index bound)
GATHERS = [("dim0", (4, 5), 0, (6, 5), 4), ("dim-1", (4, 5), -1, (4, 2), 5), ("dim-2", (4, 5), -2, (2, 3), 4),
           ("3d-mid", (2, 4, 3), 1, (2, 6, 2), 4), ("3d-last", (2, 4, 3), 2, (1, 3, 5), 3),
           ("index-larger-other-dim", (4, 5), 1, (5, 2), 5), ("rank-mismatch", (4, 5), 1, (4,), 5),
           ("dim-out-of-range", (4, 5), 2, (4, 5), 4), ("out-of-range", (4, 5), 0, (4, 5), 5), ("0d", (), 0, (), 1),
           ("1d-self-0d-index", (5,), 0, (), 5), ("0d-self-1d-index", (), 0, (3,), 1), ("empty-index", (4, 5), 1, (4, 0), 5),
           ("empty-index-larger", (4, 5), 1, (9, 0), 5), ("zero-self", (0, 5), 1, (0, 3), 5), ("1d", (6,), 0, (10,), 6),
           # ATen checks nothing of an empty index, its rank included
           ("empty-index-higher-rank", (4, 5), 1, (2, 0, 4), 5), ("empty-index-1d", (4, 5), 0, (0,), 4)]
for tag, shape, dim, ishape, n in GATHERS:
    add("gather", tag, lambda g: g.call("gather", g.t(shape), dim, idx(g, ishape, n)))
add("gather", "negative", lambda g: g.call("gather", g.t((2, 3)), 1, g.t((2, 1), I64, values=[1, -1])))
for dt in [I32, I16, BOOL]:
    add("gather", f"index-{dt_tag(dt)}", lambda g: g.call("gather", g.t((4, 5)), 0, idx(g, (2, 5), 4, dt)))
add("gather", "sparse_grad", lambda g: g.call("gather", g.t((4, 5)), 0, idx(g, (2, 5), 4), sparse_grad=True))
add("gather", "T-T", lambda g: g.call("gather", g.t((4, 5), F32, "T"), 0, idx(g, (3, 4), 4, I64, "T")))
add("gather", "step2-step2", lambda g: g.call("gather", g.t((4, 5), F32, "step2"), 1, idx(g, (4, 3), 5, I64, "step2")))
add("gather", "expand", lambda g: g.call("gather", g.t((4, 5), F32, "expand"), 1, idx(g, (2, 3), 5)))

for dt in ALL:
    add("embedding", dt_tag(dt), lambda g: g.call("embedding", g.t((10, 4), dt, special=True), idx(g, (2, 3), 10)))
# (tag, indices shape)
for tag, ishape in [("1d", (5,)), ("0d", ()), ("empty", (0,)), ("empty-3d", (2, 0, 3)), ("3d", (2, 2, 3))]:
    add("embedding", tag, lambda g: g.call("embedding", g.t((10, 4)), idx(g, ishape, 10)))
for pad in [2, -1, 0, 9]:
    add("embedding", f"padding_idx={pad}", lambda g: g.call("embedding", g.t((10, 4)), g.t((4,), I64, values=[2, 9, 0, 2]), pad))
add("embedding", "scale_grad_by_freq-sparse", lambda g: g.call("embedding", g.t((10, 4)), idx(g, (5,), 10), -1, True, True))
for dt in [I32, I16, U8, F32]:
    add("embedding", f"indices-{dt_tag(dt)}", lambda g: g.call("embedding", g.t((10, 4)), idx(g, (5,), 10, dt)))
add("embedding", "out-of-range", lambda g: g.call("embedding", g.t((10, 4)), g.t((3,), I64, values=[1, 10, 2])))
add("embedding", "negative", lambda g: g.call("embedding", g.t((10, 4)), g.t((3,), I64, values=[1, -1, 2])))
add("embedding", "1d-weight", lambda g: g.call("embedding", g.t((10,)), idx(g, (3,), 10)))
add("embedding", "3d-weight", lambda g: g.call("embedding", g.t((10, 4, 2)), idx(g, (3,), 10)))
add("embedding", "empty-weight-dim", lambda g: g.call("embedding", g.t((10, 0)), idx(g, (3,), 10)))
add("embedding", "T-weight-T-indices", lambda g: g.call("embedding", g.t((10, 4), F32, "T"), idx(g, (3, 2), 10, I64, "T")))
add("embedding", "step2", lambda g: g.call("embedding", g.t((10, 4), F32, "step2"), idx(g, (2, 3), 10, I64, "step2")))

for dt in ALL:
    add("index.Tensor", dt_tag(dt), lambda g: g.call("index.Tensor", g.t((4, 5), dt, special=True), [idx(g, (6,), 4)]))
X3 = (4, 5, 6)
# (tag, [index shape and bound, or None for a full slice])
INDEXES = [("first", [((3,), 4)]), ("second", [None, ((3,), 5)]), ("last", [None, None, ((7,), 6)]),
           ("two-bcast", [((3, 1), 4), ((2,), 5)]), ("all-three", [((2,), 4), ((2,), 5), ((2,), 6)]),
           ("non-adjacent", [((3,), 4), None, ((3,), 6)]), ("non-adjacent-bcast", [((2, 1), 4), None, ((3,), 6)]),
           ("adjacent-mid", [None, ((2, 2), 5), ((2, 1), 6)]), ("2d", [((2, 3), 4)]), ("0d", [((), 4)]),
           ("0d-two", [((), 4), ((), 5)]), ("0d-and-1d", [None, ((), 5), ((3,), 6)]), ("empty", [((0,), 4)]),
           ("empty-bcast", [((0, 1), 4), ((3,), 5)]), ("bcast-mismatch", [((3,), 4), ((2,), 5)]),
           ("too-many", [((2,), 4), ((2,), 5), ((2,), 6), ((2,), 1)]), ("out-of-range", [None, ((3,), 6)]),
           ("only-none", [None]), ("none-list", []), ("trailing-none", [((3,), 4), None, None])]
for tag, spec in INDEXES:
    add("index.Tensor", tag, lambda g: g.call("index.Tensor", g.t(X3), [None if s is None else idx(g, *s) for s in spec]))
add("index.Tensor", "negative", lambda g: g.call("index.Tensor", g.t(X3), [None, g.t((3,), I64, values=[-1, -5, 2])]))
add("index.Tensor", "negative-out-of-range", lambda g: g.call("index.Tensor", g.t(X3), [g.t((2,), I64, values=[-5, 1])]))
for dt in [I32, I16, F32]:
    add("index.Tensor", f"index-{dt_tag(dt)}", lambda g: g.call("index.Tensor", g.t(X3), [None, idx(g, (3,), 5, dt)]))
add("index.Tensor", "i32-and-i64", lambda g: g.call("index.Tensor", g.t(X3), [idx(g, (3,), 4, I32), idx(g, (3,), 5)]))
for dt in [BOOL, U8]:
    add("index.Tensor", f"mask-{dt_tag(dt)}", lambda g: g.call("index.Tensor", g.t(X3), [None, g.t((5,), dt, values=[1, 0, 1, 1, 0])]),
        coil_rejects="a boolean mask gives a data-dependent shape (use where or masked ops)")
add("index.Tensor", "T-self-step2-index", lambda g: g.call("index.Tensor", g.t(X3, F32, "T"), [None, idx(g, (2, 3), 5, I64, "step2")]))
add("index.Tensor", "expand-self-T-index", lambda g: g.call("index.Tensor", g.t((4, 5), F32, "expand"), [idx(g, (3, 2), 4, I64, "T")]))
add("index.Tensor", "zero-self", lambda g: g.call("index.Tensor", g.t((0, 5)), [None, idx(g, (3,), 5)]))
add("index.Tensor", "same-index-twice", lambda g: g.call("index.Tensor", g.t((5, 5)), [*(lambda i: [i, i])(idx(g, (4,), 5))]))

for dt in ALL:
    add("slice_scatter", dt_tag(dt), lambda g: g.call("slice_scatter", g.t((6, 5), dt), g.t((3, 5), dt, special=True), 0, 1, None, 2))


def slice_shape(shape, dim, start, end, step):
    """The shape of self[start:end:step] along dim, by torch."""
    return tuple(aten("slice.Tensor")(torch.empty(shape), dim, start, end, step).shape)


# (tag, self shape, dim, start, end, step)
SLICE_SCATTERS = [("all", (6, 5), 0, None, None, 1), ("dim1", (6, 5), 1, 1, 4, 1), ("neg-dim", (6, 5), -1, -3, None, 2),
                  ("oversized", (6, 5), 0, -100, 100, 4), ("empty", (6, 5), 1, 4, 2, 1), ("3d", (2, 6, 3), 1, 2, -1, 3),
                  ("zero-self", (0, 5), 0, 0, 3, 1), ("1d", (7,), 0, 1, None, 3)]
for tag, shape, dim, start, end, step in SLICE_SCATTERS:
    add("slice_scatter", tag, lambda g: g.call("slice_scatter", g.t(shape), g.t(slice_shape(shape, dim, start, end, step)), dim, start, end, step))
add("slice_scatter", "defaults", lambda g: g.call("slice_scatter", g.t((3, 4)), g.t((3, 4))))
add("slice_scatter", "src-mismatch", lambda g: g.call("slice_scatter", g.t((6, 5)), g.t((2, 5)), 0, 1, None, 2))
add("slice_scatter", "src-bcast", lambda g: g.call("slice_scatter", g.t((6, 5)), g.t((5,)), 0, 1, None, 2))
add("slice_scatter", "step0", lambda g: g.call("slice_scatter", g.t((6, 5)), g.t((6, 5)), 0, None, None, 0))
add("slice_scatter", "dim-out-of-range", lambda g: g.call("slice_scatter", g.t((6, 5)), g.t((6, 5)), 2))
add("slice_scatter", "0d", lambda g: g.call("slice_scatter", g.t(()), g.t(()), 0))
for a, b in [(F32, F16), (I32, F32), (F16, I64), (BOOL, F32), (U8, BOOL)]:
    add("slice_scatter", f"mixed-{dt_tag(a, b)}", lambda g: g.call("slice_scatter", g.t((6, 5), a), g.t((6, 2), b), 1, 3))
add("slice_scatter", "T-self-step2-src", lambda g: g.call("slice_scatter", g.t((6, 5), F32, "T"), g.t((6, 2), F32, "step2"), 1, 0, 4, 2))
add("slice_scatter", "expand-both", lambda g: g.call("slice_scatter", g.t((4, 5), F32, "expand"), g.t((2, 5), F32, "expand"), 0, 2))

for dt in ALL:
    add("select_scatter", dt_tag(dt), lambda g: g.call("select_scatter", g.t((4, 5), dt), g.t((5,), dt, special=True), 0, 2))
# (tag, self shape, dim, index)
SELECT_SCATTERS = [("first", (4, 5), 0, 0), ("neg-index", (4, 5), 1, -1), ("neg-dim", (4, 5), -1, 2), ("3d", (2, 3, 4), 1, 1),
                   ("out-of-range", (4, 5), 0, 4), ("neg-out-of-range", (4, 5), 1, -6), ("1d", (5,), 0, 3),
                   ("dim-out-of-range", (4, 5), 2, 0), ("zero-other", (4, 0), 0, 1)]
for tag, shape, dim, index in SELECT_SCATTERS:
    src_shape = shape[:dim % len(shape)] + shape[dim % len(shape) + 1:] if dim in range(-len(shape), len(shape)) else shape[1:]
    add("select_scatter", tag, lambda g: g.call("select_scatter", g.t(shape), g.t(src_shape), dim, index))
add("select_scatter", "src-mismatch", lambda g: g.call("select_scatter", g.t((4, 5)), g.t((4,)), 0, 1))
add("select_scatter", "src-bcast", lambda g: g.call("select_scatter", g.t((4, 5)), g.t((1,)), 0, 1))
add("select_scatter", "0d", lambda g: g.call("select_scatter", g.t(()), g.t(()), 0, 0))
for a, b in [(F32, F16), (I32, F32), (BOOL, I64)]:
    add("select_scatter", f"mixed-{dt_tag(a, b)}", lambda g: g.call("select_scatter", g.t((4, 5), a), g.t((4,), b), 1, 3))
add("select_scatter", "T-self-step2-src", lambda g: g.call("select_scatter", g.t((4, 5), F32, "T"), g.t((4,), F32, "step2"), 1, 2))

for op in ["scatter.src", "scatter_add"]:
    for dt in ALL:
        add(op, dt_tag(dt), lambda g: g.call(op, g.t((4, 5), dt), 0, unique_idx(g, (3, 4), 0, 4), g.t((3, 6), dt, special=op == "scatter.src")))
    # (tag, self shape, dim, index shape, src shape); indices are unique along dim for scatter.src
    for tag, shape, dim, ishape, sshape in [
            ("dim1", (4, 5), 1, (3, 4), (4, 5)), ("dim-1", (4, 5), -1, (4, 5), (4, 5)), ("dim-2", (4, 5), -2, (2, 5), (2, 5)),
            ("3d", (2, 4, 3), 1, (2, 3, 2), (2, 3, 3)), ("0d", (), 0, (), ()), ("empty-index", (4, 5), 0, (0, 5), (3, 5)),
            ("1d", (6,), 0, (4,), (5,)), ("zero-self", (4, 0), 0, (2, 0), (2, 0)), ("0d-self-1d-index", (), 0, (1,), (1,)),
            ("1d-self-0d-index", (5,), 0, (), ()), ("1d-self-0d-index-1d-src", (5,), 0, (), (3,)),
            ("0d-self-0d-index-1d-src", (), 0, (), (2,))]:
        n = shape[dim] if shape else 1
        add(op, tag, lambda g: g.call(op, g.t(shape), dim, unique_idx(g, ishape, dim, n) if ishape else idx(g, (), n), g.t(sshape)))
    # errors: index larger than src, larger than self outside dim, rank mismatch, dtypes, range
    add(op, "index-larger-than-src", lambda g: g.call(op, g.t((4, 5)), 0, unique_idx(g, (2, 5), 0, 4), g.t((2, 4))))
    add(op, "index-larger-than-self", lambda g: g.call(op, g.t((4, 3)), 0, unique_idx(g, (2, 5), 0, 4), g.t((2, 5))))
    add(op, "index-rank", lambda g: g.call(op, g.t((4, 5)), 0, idx(g, (3,), 4), g.t((4, 5))))
    add(op, "src-rank", lambda g: g.call(op, g.t((4, 5)), 0, unique_idx(g, (2, 5), 0, 4), g.t((2, 5, 1))))
    add(op, "dim-out-of-range", lambda g: g.call(op, g.t((4, 5)), 2, unique_idx(g, (2, 5), 0, 4), g.t((2, 5))))
    add(op, "src-dtype", lambda g: g.call(op, g.t((4, 5)), 0, unique_idx(g, (2, 5), 0, 4), g.t((2, 5), F64)))
    add(op, "index-i32", lambda g: g.call(op, g.t((4, 5)), 0, idx(g, (2, 5), 4, I32), g.t((2, 5))))
    add(op, "out-of-range", lambda g: g.call(op, g.t((4, 5)), 0, g.t((1, 2), I64, values=[1, 4]), g.t((1, 2))))
    add(op, "negative", lambda g: g.call(op, g.t((4, 5)), 0, g.t((1, 2), I64, values=[1, -1]), g.t((1, 2))))
    add(op, "T-self-T-index", lambda g: g.call(op, g.t((5, 4), F32, "T"), 1, unique_idx(g, (3, 4), 1, 4, "T"), g.t((3, 4))))
    add(op, "step2-src", lambda g: g.call(op, g.t((4, 5)), 1, unique_idx(g, (4, 2), 1, 5), g.t((4, 3), F32, "step2")))
    add(op, "expand-self", lambda g: g.call(op, g.t((4, 5), F32, "expand"), 1, unique_idx(g, (4, 2), 1, 5), g.t((4, 2))))
for dt in [F32, I64, F16, BF16, I8]:
    add("scatter_add", f"duplicates-{dt_tag(dt)}", lambda g: g.call("scatter_add", g.t((3, 4), dt), 1, idx(g, (3, 9), 4), g.t((3, 9), dt)))
add("scatter_add", "i8-wraps", lambda g: g.call("scatter_add", g.t((2,), I8, values=[100, -100]), 0,
                                                  g.t((4,), I64, values=[0, 0, 1, 1]), g.t((4,), I8, values=[20, 10, -20, -10])))

# ----------------------------------------------------------------------------------------------
# Linear algebra: every dtype (torch decides which it takes), shapes incl. zero-size and size-1,
# non-contiguous operands, addmm's beta/alpha, convolution options in 1-d/2-d/3-d and transposed,
# attention masks, scale and causal. Float values are compared with torch run in float64 (the
# reference sums exactly; ATen's blocked sums round differently).

for dt in ALL:
    add("mm", dt_tag(dt), lambda g: g.call("mm", g.t((3, 4), dt), g.t((4, 5), dt)), ref64=True)
    add("bmm", dt_tag(dt), lambda g: g.call("bmm", g.t((2, 3, 4), dt), g.t((2, 4, 5), dt)), ref64=True)
for a, b in [(F32, F16), (F32, F64), (I64, I32), (F32, I64)]:
    add("mm", f"mixed-{dt_tag(a, b)}", lambda g: g.call("mm", g.t((3, 4), a), g.t((4, 5), b)))
    add("bmm", f"mixed-{dt_tag(a, b)}", lambda g: g.call("bmm", g.t((2, 3, 4), a), g.t((2, 4, 5), b)))
# (tag, shape a, shape b, layout a, layout b)
MMS = [("1x1", (1, 1), (1, 1), "contig", "contig"), ("zero-m", (0, 4), (4, 5), "contig", "contig"),
       ("zero-k", (3, 0), (0, 5), "contig", "contig"), ("zero-n", (3, 4), (4, 0), "contig", "contig"),
       ("row-col", (1, 6), (6, 1), "contig", "contig"), ("T-T", (3, 4), (4, 5), "T", "T"),
       ("step2-expand", (3, 4), (4, 5), "step2", "expand"), ("expand-step2", (3, 4), (4, 5), "expand", "step2"),
       ("mismatch", (3, 4), (5, 4), "contig", "contig"), ("1d", (4,), (4, 5), "contig", "contig"),
       ("3d", (2, 3, 4), (4, 5), "contig", "contig"), ("larger", (9, 33), (33, 7), "contig", "contig")]
for tag, sa, sb, la, lb in MMS:
    add("mm", tag, lambda g: g.call("mm", g.t(sa, F32, la), g.t(sb, F32, lb)), ref64=True)
BMMS = [("batch1", (1, 3, 4), (1, 4, 5), "contig", "contig"), ("zero-batch", (0, 3, 4), (0, 4, 5), "contig", "contig"),
        ("zero-k", (2, 3, 0), (2, 0, 5), "contig", "contig"), ("T-T", (2, 3, 4), (2, 4, 5), "T", "T"),
        ("step2-expand", (2, 3, 4), (2, 4, 5), "step2", "expand"), ("batch-mismatch", (2, 3, 4), (3, 4, 5), "contig", "contig"),
        ("batch-bcast", (1, 3, 4), (2, 4, 5), "contig", "contig"), ("k-mismatch", (2, 3, 4), (2, 5, 5), "contig", "contig"),
        ("2d", (3, 4), (4, 5), "contig", "contig"), ("4d", (1, 2, 3, 4), (1, 2, 4, 5), "contig", "contig")]
for tag, sa, sb, la, lb in BMMS:
    add("bmm", tag, lambda g: g.call("bmm", g.t(sa, F32, la), g.t(sb, F32, lb)), ref64=True)
add("bmm", "batch-permuted", lambda g: g.call("bmm", g.call("permute", g.t((3, 2, 4)), [1, 0, 2]), g.t((2, 4, 5))), ref64=True)
add("mm", "i8-wraps", lambda g: g.call("mm", g.t((2, 3), I8, values=[100, 100, 100, -100, 50, 1]), g.t((3, 1), I8, values=[2, 1, 1])))
add("mm", "nan-inf", lambda g: g.call("mm", g.t((2, 2), F32, values=[math.nan, 1.0, math.inf, 0.0]), g.t((2, 2), F32, values=[1.0, 0.0, 2.0, 3.0])))

for dt in ALL:
    add("addmm", dt_tag(dt), lambda g: g.call("addmm", g.t((5,), dt), g.t((3, 4), dt), g.t((4, 5), dt)), ref64=True)
    add("addmm", f"{dt_tag(dt)}-beta=2-alpha=3", lambda g: g.call("addmm", g.t((3, 5), dt), g.t((3, 4), dt), g.t((4, 5), dt), beta=2, alpha=3), ref64=True)
for self_shape in [(3, 5), (1, 5), (3, 1), (), (1,), (1, 1), (4, 5), (2, 3, 5), (5, 3)]:
    add("addmm", f"self={list(self_shape)}", lambda g: g.call("addmm", g.t(self_shape), g.t((3, 4)), g.t((4, 5))), ref64=True)
for beta, alpha in [(0.5, 2), (1, 0), (-1, 1.5), (0, 1), (0.0, 2), (2, 0.0), (True, False), (1e-3, -2.5)]:
    add("addmm", f"beta={beta!r}-alpha={alpha!r}", lambda g: g.call("addmm", g.t((3, 5)), g.t((3, 4)), g.t((4, 5)), beta=beta, alpha=alpha), ref64=True)
for beta in [0, 0.0, False]:
    # beta == 0 ignores self entirely, nan and inf included
    add("addmm", f"beta={beta!r}-nan-self", lambda g: g.call(
        "addmm", g.t((2, 2), F32, values=[math.nan, math.inf, -math.inf, 1.0]), g.t((2, 3)), g.t((3, 2)), beta=beta), ref64=True)
add("addmm", "beta=1-nan-self", lambda g: g.call("addmm", g.t((2,), F32, values=[math.nan, 1.0]), g.t((2, 3)), g.t((3, 2))), ref64=True)
for dt, beta, alpha in [(I64, 0.5, 1), (I32, 1, 2.5), (I64, 2, 3), (BOOL, True, True), (I8, -1, 2), (U8, 2, 1)]:
    add("addmm", f"int-scalars-{dt_tag(dt)}-beta={beta!r}-alpha={alpha!r}", lambda g: g.call(
        "addmm", g.t((5,), dt), g.t((3, 4), dt), g.t((4, 5), dt), beta=beta, alpha=alpha))
for a, b, c in [(F16, F32, F32), (F32, F16, F16), (F64, F32, F32), (I64, F32, F32), (F32, F32, F64)]:
    add("addmm", f"mixed-{dt_tag(a, b, c)}", lambda g: g.call("addmm", g.t((5,), a), g.t((3, 4), b), g.t((4, 5), c)), ref64=True)
ADDMMS = [("zero-m", (5,), (0, 4), (4, 5)), ("zero-k", (3, 5), (3, 0), (0, 5)), ("zero-k-bcast", (5,), (3, 0), (0, 5)),
          ("mismatch", (5,), (3, 4), (5, 5)), ("self-bad", (4,), (3, 4), (4, 5)), ("1d-mat", (5,), (4,), (4, 5))]
for tag, ss, sa, sb in ADDMMS:
    add("addmm", tag, lambda g: g.call("addmm", g.t(ss), g.t(sa), g.t(sb)), ref64=True)
add("addmm", "T-step2-expand", lambda g: g.call("addmm", g.t((3, 5), F32, "T"), g.t((3, 4), F32, "step2"), g.t((4, 5), F32, "expand")), ref64=True)
add("addmm", "expand-self", lambda g: g.call("addmm", g.t((3, 5), F32, "expand"), g.t((3, 4), F32, "T"), g.t((4, 5))), ref64=True)


def conv(g, x_shape, w_shape, bias=True, stride=(1,), padding=(0,), dilation=(1,), transposed=False, output_padding=(0,),
         groups=1, dtype=F32, x_layout="contig", w_layout="contig", bias_shape=None, bias_dtype=None):
    cout = w_shape[1] * groups if transposed else w_shape[0]
    b = g.t(bias_shape or (cout,), bias_dtype or dtype) if bias else None
    return g.call("convolution", g.t(x_shape, dtype, x_layout), g.t(w_shape, dtype, w_layout), b, list(stride), list(padding),
                  list(dilation), transposed, list(output_padding), groups)


for dt in ALL:
    add("convolution", f"2d-{dt_tag(dt)}", lambda g: conv(g, (2, 3, 6, 5), (4, 3, 3, 2), dtype=dt), ref64=True)
    add("convolution", f"2d-transposed-{dt_tag(dt)}", lambda g: conv(g, (2, 3, 4, 5), (3, 4, 3, 2), transposed=True, dtype=dt), ref64=True)
# (tag, input shape, weight shape, options)
CONVS = [
    ("1d", (2, 4, 9), (6, 4, 3), {}),
    ("1d-stride-pad-dil", (2, 4, 9), (6, 4, 3), dict(stride=[2], padding=[2], dilation=[2])),
    ("1d-groups", (2, 4, 9), (6, 2, 3), dict(groups=2, padding=[1])),
    ("1d-no-bias", (1, 2, 5), (3, 2, 2), dict(bias=False)),
    ("2d", (2, 3, 7, 6), (4, 3, 3, 3), {}),
    ("2d-stride-pad", (2, 3, 7, 6), (4, 3, 3, 3), dict(stride=[2, 1], padding=[1, 2])),
    ("2d-scalar-options", (2, 3, 7, 6), (4, 3, 3, 3), dict(stride=[2], padding=[1], dilation=[2])),
    ("2d-dilation", (1, 2, 8, 8), (3, 2, 3, 2), dict(dilation=[2, 3])),
    ("2d-groups", (2, 4, 5, 5), (6, 2, 3, 3), dict(groups=2)),
    ("2d-depthwise", (2, 4, 5, 5), (8, 1, 3, 3), dict(groups=4, padding=[1, 1])),
    ("2d-1x1", (2, 4, 3, 3), (5, 4, 1, 1), {}),
    ("2d-kernel-eq-input", (2, 3, 3, 4), (2, 3, 3, 4), {}),
    ("2d-no-bias", (2, 3, 5, 5), (4, 3, 2, 2), dict(bias=False, stride=[2, 2])),
    ("2d-zero-batch", (0, 3, 5, 5), (4, 3, 2, 2), {}),
    ("2d-large-padding", (1, 1, 2, 2), (1, 1, 2, 2), dict(padding=[3, 3])),
    ("3d", (1, 2, 5, 4, 4), (3, 2, 3, 2, 2), {}),
    ("3d-options", (2, 2, 5, 6, 4), (4, 1, 2, 3, 2), dict(stride=[1, 2, 1], padding=[1, 0, 1], dilation=[2, 1, 1], groups=2)),
    ("1d-transposed", (2, 4, 5), (4, 3, 3), dict(transposed=True)),
    ("1d-transposed-options", (2, 4, 5), (4, 3, 3), dict(transposed=True, stride=[2], padding=[1], output_padding=[1])),
    ("1d-transposed-dilation", (2, 4, 5), (4, 3, 3), dict(transposed=True, stride=[2], dilation=[2], output_padding=[1])),
    ("2d-transposed-stride", (2, 3, 4, 3), (3, 2, 3, 3), dict(transposed=True, stride=[2, 3], padding=[1, 0], output_padding=[1, 2])),
    ("2d-transposed-groups", (2, 4, 3, 3), (4, 3, 2, 2), dict(transposed=True, groups=2, stride=[2, 2])),
    ("2d-transposed-no-bias", (1, 2, 3, 3), (2, 2, 3, 3), dict(transposed=True, bias=False, padding=[1, 1])),
    ("3d-transposed", (1, 2, 3, 2, 3), (2, 3, 2, 2, 2), dict(transposed=True, stride=[2, 1, 2], output_padding=[1, 0, 0])),
    ("3d-transposed-groups", (1, 4, 2, 3, 2), (4, 1, 2, 2, 3), dict(transposed=True, groups=2, dilation=[1, 2, 1], padding=[0, 1, 1])),
    # errors
    ("bad-channels", (2, 3, 5, 5), (4, 2, 3, 3), {}),
    ("groups-not-dividing", (2, 4, 5, 5), (6, 2, 3, 3), dict(groups=3)),
    ("input-too-small", (2, 3, 2, 2), (4, 3, 3, 3), {}),
    ("bad-bias", (2, 3, 5, 5), (4, 3, 3, 3), dict(bias_shape=(3,))),
    ("negative-padding", (2, 3, 5, 5), (4, 3, 3, 3), dict(padding=[-1, 0])),
    ("stride0", (2, 3, 5, 5), (4, 3, 3, 3), dict(stride=[0, 1])),
    ("dilation0", (2, 3, 5, 5), (4, 3, 3, 3), dict(dilation=[0, 1])),
    ("output_padding-too-big", (2, 4, 5), (4, 3, 3), dict(transposed=True, stride=[2], output_padding=[2])),
    ("output_padding-not-transposed", (2, 4, 9), (6, 4, 3), dict(output_padding=[1])),
    ("unbatched", (3, 5, 5), (4, 3, 3, 3), {}),
    ("wrong-option-length", (2, 3, 5, 5), (4, 3, 3, 3), dict(stride=[1, 1, 1])),
    ("groups0", (2, 3, 5, 5), (4, 3, 3, 3), dict(groups=0)),
    ("transposed-bad-channels", (2, 3, 4, 5), (4, 3, 3, 2), dict(transposed=True)),
]
for tag, xs, ws, opts in CONVS:
    add("convolution", tag, lambda g: conv(g, xs, ws, **opts), ref64=True)
for tag, xl, wl in [("T-input", "T", "contig"), ("step2-input-T-weight", "step2", "T"), ("expand-input", "expand", "step2")]:
    add("convolution", tag, lambda g: conv(g, (2, 3, 6, 5), (4, 3, 3, 2), x_layout=xl, w_layout=wl, padding=[1, 0]), ref64=True)
    add("convolution", f"{tag}-transposed", lambda g: conv(g, (2, 3, 4, 5), (3, 4, 3, 2), transposed=True, x_layout=xl, w_layout=wl), ref64=True)
add("convolution", "cl-input", lambda g: g.call("convolution", channels_last_input(g, (2, 3, 5, 5)), g.t((4, 3, 3, 3)), g.t((4,)),
                                                [1], [1], [1], False, [0], 1), ref64=True)
# Mismatched dtypes, which torch rejects (except a 16-bit input's f32 bias where torch's CPU
# convolution takes it through oneDNN: f16 on AVX-512 hosts, f16 and bf16 on some AVX2 hosts;
# those cases depend on the machine and are left out; coil keeps the rule of torch's other paths).
for x, w, b in [(F32, F16, F32), (F32, F32, F64), (F64, F32, F64)]:
    add("convolution", f"mixed-{dt_tag(x, w, b)}", lambda g: g.call("convolution", g.t((2, 3, 5, 5), x), g.t((4, 3, 3, 3), w), g.t((4,), b),
                                                                  [1], [0], [1], False, [0], 1), ref64=True)


# 2-D pooling: (tag, input shape, kernel, stride, padding, dilation, ceil_mode); window geometry
# with padding, dilation and ceil_mode's partial last window, 3-D inputs, every dtype, NaN/inf,
# non-contiguous inputs, and the shapes torch refuses.
MAX_POOLS = [("k2", (2, 3, 8, 8), [2, 2], [], [0], [1], False), ("k3s2p1", (1, 4, 9, 7), [3], [2], [1], [1], False),
             ("ceil", (2, 2, 7, 9), [3, 2], [2, 2], [1, 0], [1], True), ("dilated", (1, 2, 10, 9), [3, 2], [1, 2], [1, 1], [2, 1], False),
             ("3d-input", (3, 6, 5), [2], [2], [0], [1], True), ("big-window", (1, 1, 5, 5), [5], [1], [2], [1], False)]
for tag, shape, k, st, pad, dil, ceil in MAX_POOLS:
    add("max_pool2d_with_indices", tag, lambda g: g.call("max_pool2d_with_indices", g.t(shape), k, st, pad, dil, ceil, n_out=2))
for dt in FLOATS + [I64, I32, U8, BOOL]:
    add("max_pool2d_with_indices", dt_tag(dt), lambda g: g.call("max_pool2d_with_indices", g.t((2, 3, 7, 6), dt, special=True, low=0, high=4),
                                                                  [3], [2], [1], [1], False, n_out=2))
add("max_pool2d_with_indices", "ties-and-minus-inf", lambda g: g.call(
    "max_pool2d_with_indices", g.t((1, 1, 4, 4), F32, values=[-math.inf] * 6 + [2.0, 2.0] * 3 + [math.nan, 1.0, 2.0, -math.inf]),
    [2], [2], [1], [1], True, n_out=2))
for layout in ["T", "step2"]:
    add("max_pool2d_with_indices", layout, lambda g: g.call("max_pool2d_with_indices", g.t((2, 3, 6, 7), F32, layout), [3], [2], [1], [1], False,
                                                         n_out=2))
for tag, k, st, pad in [("pad-over-half", [3], [2], [2]), ("zero-stride", [3], [0], [1]), ("too-small", [6], [1], [0]), ("no-kernel", [0], [], [0])]:
    add("max_pool2d_with_indices", tag, lambda g: g.call("max_pool2d_with_indices", g.t((2, 5, 5)), k, st, pad, [1], False, n_out=2))
# (tag, input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_POOLS = [("k2", (2, 3, 8, 8), [2, 2], [], [0], False, True, None), ("k3s2p1", (1, 4, 9, 7), [3], [2], [1], False, True, None),
             ("no-pad-count", (1, 4, 9, 7), [3], [2], [1], False, False, None),
             ("ceil", (2, 2, 7, 9), [3, 2], [2, 2], [1, 0], True, True, None), ("ceil-no-pad-count", (2, 2, 7, 9), [3, 2], [2, 2], [1, 0], True, False, None),
             ("divisor", (2, 2, 6, 6), [3], [2], [1], False, True, 5), ("3d-input", (3, 6, 5), [2], [1], [1], True, False, None)]
for tag, shape, k, st, pad, ceil, count, div in AVG_POOLS:
    add("avg_pool2d", tag, lambda g: g.call("avg_pool2d", g.t(shape), k, st, pad, ceil, count, div))
for dt in FLOATS:
    add("avg_pool2d", dt_tag(dt), lambda g: g.call("avg_pool2d", g.t((2, 3, 7, 6), dt, special=True), [3], [2], [1]))
add("avg_pool2d", "T", lambda g: g.call("avg_pool2d", g.t((2, 3, 6, 7), F32, "T"), [2], [2], [1], True, False))
# int64 (the only integer type ATen's CPU kernel pools): an int64 sum, divided toward zero.
for tag, shape, k, st, pad, ceil, count, div in AVG_POOLS + [("divisor-negative", (1, 2, 5, 5), [2], [1], [0], False, True, -3)]:
    add("avg_pool2d", f"i64-{tag}", lambda g: g.call("avg_pool2d", g.t(shape, I64, low=-50, high=50), k, st, pad, ceil, count, div))
add("avg_pool2d", "i64-wraps", lambda g: g.call("avg_pool2d", g.t((1, 1, 1, 2), I64, values=[2 ** 62, 2 ** 62]), [1, 2]))
for tag, dt, k, pad, div in [("i32", I32, [2], [0], None), ("pad-over-half", F32, [2], [2], None), ("zero-divisor", F32, [2], [0], 0)]:
    add("avg_pool2d", tag, lambda g: g.call("avg_pool2d", g.t((1, 2, 4, 4), dt), k, [], pad, False, True, div))
for tag, shape, size in [("divisible", (2, 3, 8, 8), [4, 2]), ("uneven", (2, 3, 9, 7), [4, 3]), ("global", (2, 5, 7, 6), [1, 1]),
                         ("larger", (1, 2, 5, 4), [7, 6]), ("3d-input", (3, 10, 6), [3, 6])]:
    add("_adaptive_avg_pool2d", tag, lambda g: g.call("_adaptive_avg_pool2d", g.t(shape), size))
for dt in [F64, F16, BF16, I64]:
    add("_adaptive_avg_pool2d", dt_tag(dt), lambda g: g.call("_adaptive_avg_pool2d", g.t((2, 3, 7, 6), dt), [3, 2]))
add("_adaptive_avg_pool2d", "T", lambda g: g.call("_adaptive_avg_pool2d", g.t((2, 3, 6, 7), F32, "T"), [2, 3]))
for tag, shape in [("empty-channels", (2, 0, 6, 7)), ("empty-batch", (0, 2, 6, 7)), ("empty-height", (2, 0, 7))]:
    add("_adaptive_avg_pool2d", tag, lambda g: g.call("_adaptive_avg_pool2d", g.t(shape), [2, 3]))
for tag, shape in [("empty-channels", (2, 0, 6, 7)), ("empty-batch", (0, 2, 6, 7))]:
    add("max_pool2d_with_indices", tag, lambda g: g.call("max_pool2d_with_indices", g.t(shape), [2], n_out=2))
    add("avg_pool2d", tag, lambda g: g.call("avg_pool2d", g.t(shape), [2]))


def sdpa(g, q, k, v, dtype=F32, layout="contig", mask=None, **kwargs):
    """q, k, v: shapes; mask: None or (shape, dtype) (bool masks get random values)."""
    args = [g.t(q, dtype, layout), g.t(k, dtype, layout), g.t(v, dtype, layout)]
    if mask is not None:
        args.append(g.t(*mask))
    return g.call("scaled_dot_product_attention", *args, **kwargs)


Q4, K4, V4 = (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6)
Q3, K3, V3 = (3, 4, 8), (3, 6, 8), (3, 6, 5)
for dt in ALL:
    add("scaled_dot_product_attention", dt_tag(dt), lambda g: sdpa(g, Q4, K4, V4, dt), ref64=True)
SDPAS = [
    ("3d", Q3, K3, V3, {}), ("2d", (4, 8), (6, 8), (6, 5), {}), ("5d", (2, 1, 2, 3, 4), (2, 1, 2, 5, 4), (2, 1, 2, 5, 3), {}),
    ("causal", Q4, K4, V4, dict(is_causal=True)), ("causal-square", (2, 5, 4), (2, 5, 4), (2, 5, 3), dict(is_causal=True)),
    ("causal-more-queries", (2, 6, 4), (2, 3, 4), (2, 3, 3), dict(is_causal=True)),
    ("scale", Q4, K4, V4, dict(scale=0.5)), ("scale-causal", Q3, K3, V3, dict(scale=2.0, is_causal=True)),
    ("bool-mask", Q4, K4, V4, dict(mask=((4, 5), BOOL))), ("bool-mask-4d", Q4, K4, V4, dict(mask=((2, 1, 4, 5), BOOL))),
    ("bool-mask-full", Q4, K4, V4, dict(mask=((2, 3, 4, 5), BOOL))), ("float-mask", Q4, K4, V4, dict(mask=((4, 5), F32))),
    ("float-mask-bcast", Q4, K4, V4, dict(mask=((1, 3, 1, 5), F32))), ("float-mask-3d", Q3, K3, V3, dict(mask=((3, 4, 6), F32))),
    ("mask-and-causal", Q4, K4, V4, dict(mask=((4, 5), BOOL), is_causal=True)),
    ("mask-bad-shape", Q4, K4, V4, dict(mask=((4, 4), BOOL))), ("mask-f16-for-f32", Q4, K4, V4, dict(mask=((4, 5), F16))),
    ("mask-i64", Q4, K4, V4, dict(mask=((4, 5), I64))),
    ("zero-batch", (0, 4, 8), (0, 6, 8), (0, 6, 5), {}), ("zero-keys", (2, 4, 8), (2, 0, 8), (2, 0, 5), {}),
    ("zero-queries", (2, 0, 8), (2, 6, 8), (2, 6, 5), {}), ("one-key", (2, 4, 8), (2, 1, 8), (2, 1, 5), {}),
    ("embed-mismatch", (2, 4, 8), (2, 6, 7), (2, 6, 5), {}), ("kv-mismatch", (2, 4, 8), (2, 6, 8), (2, 5, 5), {}),
    ("batch-mismatch", (2, 4, 8), (3, 6, 8), (3, 6, 5), {}), ("rank-mismatch", Q4, K3, V3, {}),
    ("batch-bcast", (1, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6), {}),
    ("gqa", (2, 6, 4, 8), (2, 2, 5, 8), (2, 2, 5, 6), dict(enable_gqa=True)),
    ("gqa-off-heads-differ", (2, 6, 4, 8), (2, 2, 5, 8), (2, 2, 5, 6), {}),
    ("gqa-not-multiple", (2, 5, 4, 8), (2, 2, 5, 8), (2, 2, 5, 6), dict(enable_gqa=True)),
    ("T", (2, 4, 8), (2, 6, 8), (2, 6, 5), dict(layout="T")), ("step2", (2, 4, 8), (2, 6, 8), (2, 6, 5), dict(layout="step2")),
    ("expand", (2, 4, 8), (2, 6, 8), (2, 6, 5), dict(layout="expand")),
]
# ATen's math fallback broadcasts the batch dims of query, key and value (its fused kernels
# do not); coil wants them equal.
SDPA_BCAST = "query, key and value batch dims must be equal (no broadcasting, as in the fused kernels)"
for tag, q, k, v, opts in SDPAS:
    add("scaled_dot_product_attention", tag, lambda g: sdpa(g, q, k, v, **opts), ref64=True,
        coil_rejects=SDPA_BCAST if tag in ("rank-mismatch", "batch-bcast") else "")
# A query row whose keys are all masked out.
add("scaled_dot_product_attention", "masked-row", lambda g: g.call(
    "scaled_dot_product_attention", g.t((1, 2, 4)), g.t((1, 3, 4)), g.t((1, 3, 2)),
    g.t((2, 3), BOOL, values=[True, False, True, False, False, False])), ref64=True)
add("scaled_dot_product_attention", "float-mask-inf", lambda g: g.call(
    "scaled_dot_product_attention", g.t((1, 2, 4)), g.t((1, 3, 4)), g.t((1, 3, 2)),
    g.t((2, 3), F32, values=[0.0, -math.inf, 1.5, -math.inf, -math.inf, -math.inf])), ref64=True)
add("scaled_dot_product_attention", "dropout", lambda g: sdpa(g, Q3, K3, V3, dropout_p=0.5),
    coil_rejects="dropout is random; coil compiles inference graphs (dropout_p must be 0)")
add("scaled_dot_product_attention", "dropout-zero", lambda g: sdpa(g, Q3, K3, V3, dropout_p=0.0), ref64=True)
add("scaled_dot_product_attention", "mixed-dtypes", lambda g: g.call(
    "scaled_dot_product_attention", g.t(Q3, F32), g.t(K3, F16), g.t(V3, F32)))

# The special functions and the pointwise ops around them have their own file, which adds its
# cases to CASES when imported here.
import op_cases_special  # noqa: E402,F401
# So do the scans beside cumsum and the scatters beside scatter/scatter_add.
import op_cases_scatter_scan  # noqa: E402,F401
