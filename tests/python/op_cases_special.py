"""Op cases (see op_cases.py) of the special functions and the pointwise ops around them:
exp2, erfc, erfinv, erfcx, lgamma, digamma, the Bessel functions, signbit, round with decimals,
frexp, copysign, hypot, nextafter, ldexp, shifts, gcd, lcm and the Scalar_Tensor overloads.
Every dtype (PyTorch decides which it takes; where it raises, coil must reject the graph),
layouts, and each function's edge values: NaN, +-inf, +-0, poles and domain ends."""
import math

from op_cases import (ALL, BOOL, BROADCASTS, F16, F32, F64, BF16, I16, I32, I64, I8, INTS, LAYOUTS, SHAPE, U8, add,
                      dt_tag)

NAN, INF = math.nan, math.inf

# ----------------------------------------------------------------------------------------------
# Unary: every dtype (floats salted with nan/inf/+-0), the layouts, then values at each
# function's edges.

SPECIAL_UNARY = ["exp2", "erfc", "erfinv", "lgamma", "digamma", "i0", "special_i0e", "special_i1", "special_i1e",
                 "special_erfcx", "special_bessel_j0", "special_bessel_j1", "special_bessel_y0", "special_bessel_y1",
                 "special_modified_bessel_i0", "special_modified_bessel_i1", "special_modified_bessel_k0",
                 "special_modified_bessel_k1", "signbit"]
# The operands each function sees in the dtype sweep: where most of N(0, 2) is outside the
# domain, values inside it.
DOMAIN = {"erfinv": dict(low=-1, high=1)}

EDGES = {
    "exp2": [-INF, INF, NAN, 0.0, -0.0, 127.5, 128.0, -149.0, -150.0, 1023.0, 1024.0, -1074.0, 0.5],
    "erfc": [-INF, INF, NAN, 0.0, -0.0, 9.0, 10.0, 26.0, 27.5, -6.0, 1e-30, 0.5],
    "erfinv": [-1.0, 1.0, -0.0, 0.0, 1.5, -1.5, INF, NAN, 0.9999, -0.99999, 1e-30, 0.5, 0.7, 0.71],
    "lgamma": [0.0, -0.0, -1.0, -2.0, -100.0, -INF, INF, NAN, 1.0, 2.0, -2.5, 1e-30, 1e30, 3.5],
    "digamma": [0.0, -0.0, -1.0, -3.0, -INF, INF, NAN, 1.0, 1.4616321449683623, -0.5, 1e-30, 1e30, 9.99, 10.0],
    "i0": [-INF, INF, NAN, 0.0, 8.0, -8.0, 8.5, 80.0, 100.0, 700.0, 720.0, 1e-30],
    "special_i0e": [-INF, INF, NAN, 0.0, 8.0, -8.0, 8.5, 80.0, 1000.0, 1e30, 1e-30],
    "special_i1": [-INF, INF, NAN, 0.0, -0.0, 8.0, -8.0, 8.5, 80.0, -100.0, 700.0, 1e-30],
    "special_i1e": [-INF, INF, NAN, 0.0, -0.0, 8.0, -8.0, 8.5, 80.0, -1000.0, 1e30, 1e-30],
    "special_erfcx": [-INF, INF, NAN, 0.0, -0.0, 11.9, 12.0, 50.0, 1e10, -5.0, -9.0, -26.0, -27.0, 1e-30],
    "special_bessel_j0": [-INF, INF, NAN, 0.0, 2.404825557695773, 5.0, 25.0, -30.0, 1e-30],
    "special_bessel_j1": [-INF, INF, NAN, 0.0, -0.0, 3.8317059702075125, 5.0, 25.0, -30.0, 1e-30],
    "special_bessel_y0": [-INF, INF, NAN, 0.0, -0.0, -1.0, 0.8935769662791675, 5.0, 25.0, 1e-30],
    "special_bessel_y1": [-INF, INF, NAN, 0.0, -0.0, -1.0, 2.197141326031017, 5.0, 25.0, 1e-30],
    "special_modified_bessel_i0": [-INF, INF, NAN, 0.0, 8.0, -8.5, 80.0, 1e-30],
    "special_modified_bessel_i1": [-INF, INF, NAN, 0.0, -0.0, 8.0, -8.5, 80.0, 1e-30],
    "special_modified_bessel_k0": [-INF, INF, NAN, 0.0, -0.0, -1.0, 2.0, 2.5, 80.0, 800.0, 1e-30],
    "special_modified_bessel_k1": [-INF, INF, NAN, 0.0, -0.0, -1.0, 2.0, 2.5, 80.0, 800.0, 1e-30],
    "signbit": [-0.0, 0.0, -NAN, NAN, -INF, INF, -1e-45, 1e-45, -3.0],
}
# f16/bf16 overflow earlier: their edges are kept to values they hold.
HALF_EDGES = {"exp2": [-INF, INF, NAN, 0.0, 15.0, 16.0, -24.0, -25.0, 0.5]}
# PyTorch's double J0, J1, Y0 and Y1 are off by up to 9e-7 (absolute, against mpmath on
# (0, 40]; coil's, glibc's, by 2e-16), so their f64 cases are compared at that.
BESSEL_JY = {"special_bessel_j0", "special_bessel_j1", "special_bessel_y0", "special_bessel_y1"}


def tol_of(op, dt):
    return (1e-6, 1e-6) if op in BESSEL_JY and dt == F64 else None


for op in SPECIAL_UNARY:
    for dt in ALL:
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(SHAPE, dt, special=True, **(DOMAIN.get(op, {}) if dt.is_floating_point else {}))),
            tol=tol_of(op, dt))
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: g.call(op, g.t(shape, F32, layout, **DOMAIN.get(op, {}))))
    for dt in [F32, F64]:
        add(op, f"edges-{dt_tag(dt)}", lambda g: g.call(op, g.t((len(EDGES[op]),), dt, values=EDGES[op])), tol=tol_of(op, dt))
    if op in HALF_EDGES:
        for dt in [F16, BF16]:
            add(op, f"edges-{dt_tag(dt)}", lambda g: g.call(op, g.t((len(HALF_EDGES[op]),), dt, values=HALF_EDGES[op])))
# Integer operands of the int-to-float functions.
for op in ["lgamma", "digamma", "erfc", "special_bessel_y0", "special_modified_bessel_k1"]:
    add(op, "ints", lambda g: g.call(op, g.t((6,), I64, values=[-2, -1, 0, 1, 2, 50])))
add("signbit", "ints", lambda g: g.call("signbit", g.t((5,), I8, values=[-128, -1, 0, 1, 127])))
add("signbit", "f16-signed-zero", lambda g: g.call("signbit", g.t((4,), F16, values=[-0.0, 0.0, -INF, 6e-8])))

# round(x, decimals): ties to even after scaling, negative decimals, every dtype (floats only).
for dt in ALL:
    add("round.decimals", dt_tag(dt), lambda g: g.call("round.decimals", g.t(SHAPE, dt, special=True), decimals=2))
for tag, shape, layout in LAYOUTS:
    add("round.decimals", tag, lambda g: g.call("round.decimals", g.t(shape, F32, layout), decimals=1))
for d in [0, 1, 3, -1, -2, 40]:
    for dt in [F32, F64, F16, BF16]:
        add("round.decimals", f"d={d}-{dt_tag(dt)}", lambda g: g.call(
            "round.decimals", g.t((9,), dt, values=[0.125, 0.375, -2.5, 1234.5678, -0.0, 15.0, 25.0, INF, NAN]), decimals=d))

# frexp: mantissa in [0.5, 1) and an int32 exponent; 0, inf and NaN give exponent 0.
for dt in ALL:
    add("frexp.Tensor", dt_tag(dt), lambda g: g.call("frexp.Tensor", g.t(SHAPE, dt, special=True), n_out=2))
for tag, shape, layout in LAYOUTS:
    add("frexp.Tensor", tag, lambda g: g.call("frexp.Tensor", g.t(shape, F32, layout), n_out=2))
FREXP_EDGES = [0.0, -0.0, INF, -INF, NAN, 1e-40, 1e-45, 3e38, 8.0, -0.75, 1.0]
for dt in [F32, F64]:
    add("frexp.Tensor", f"edges-{dt_tag(dt)}", lambda g: g.call("frexp.Tensor", g.t((11,), dt, values=FREXP_EDGES), n_out=2))
for dt in [F16, BF16]:
    add("frexp.Tensor", f"edges-{dt_tag(dt)}", lambda g: g.call(
        "frexp.Tensor", g.t((7,), dt, values=[0.0, -0.0, INF, NAN, 6e-8, 1e-5, -3.0]), n_out=2))

# ----------------------------------------------------------------------------------------------
# Binary, Tensor overloads: same-dtype sweep, promotion pairs, 0-d operands, broadcasting and
# layouts, then edges.

SPECIAL_BINARY = ["copysign.Tensor", "hypot", "nextafter", "ldexp.Tensor", "gcd", "lcm", "bitwise_left_shift.Tensor",
                  "bitwise_right_shift.Tensor", "__lshift__.Tensor", "__rshift__.Tensor"]
INTEGER_OPS = {"gcd", "lcm", "bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor", "__lshift__.Tensor", "__rshift__.Tensor"}
PAIRS = [(F32, F16), (F16, BF16), (F64, F32), (I32, I64), (I16, I8), (U8, I8), (BOOL, I32), (I64, F16), (I32, F64),
         (F32, I32), (F16, I64), (BF16, BOOL)]
ZERO_DIM = [(F16, F64), (I32, F32), (I8, I64), (U8, I8), (F32, I16)]


def operands(g, op, a_dt, b_dt, a_shape=SHAPE, b_shape=SHAPE, a_layout="contig", b_layout="contig"):
    return g.t(a_shape, a_dt, a_layout, special=True), g.t(b_shape, b_dt, b_layout, special=True)


for op in SPECIAL_BINARY:
    for dt in ALL:
        add(op, dt_tag(dt, dt), lambda g: g.call(op, *operands(g, op, dt, dt)))
    for a, b in PAIRS:
        # ldexp(f64, f32) rounds pow(2, other) to f32 (in other's dtype, as PyTorch does), where
        # CUDA's powf and glibc's may differ by an ulp.
        tol = (2e-7, 1e-12) if op == "ldexp.Tensor" and (a, b) == (F64, F32) else None
        add(op, dt_tag(a, b), lambda g: g.call(op, *operands(g, op, a, b)), tol=tol)
    for a, b in ZERO_DIM:
        add(op, f"{dt_tag(a)}-0d{dt_tag(b)}", lambda g: g.call(op, *operands(g, op, a, b, b_shape=())))
        add(op, f"0d{dt_tag(b)}-{dt_tag(a)}", lambda g: g.call(op, *operands(g, op, b, a, a_shape=())))
    main = I32 if op in INTEGER_OPS else F32
    for tag, sa, sb, la, lb in BROADCASTS:
        add(op, tag, lambda g: g.call(op, *operands(g, op, main, main, sa, sb, la, lb)))


def pair(g, op, dt, a, b, b_dt=None):
    return g.call(op, g.t((len(a),), dt, values=a), g.t((len(b),), b_dt or dt, values=b))


SIGNS = [1.0, -2.0, 0.0, -0.0, INF, -INF, NAN, 3.0, 5.0]
SIGN_OF = [-0.0, 0.0, -1.0, 2.0, -NAN, NAN, -INF, INF, 1e-45]
for dt in [F32, F64, F16, BF16]:
    add("copysign.Tensor", f"signs-{dt_tag(dt)}", lambda g: pair(g, "copysign.Tensor", dt, SIGNS, SIGN_OF))
    add("hypot", f"edges-{dt_tag(dt)}", lambda g: pair(g, "hypot", dt, [3.0, INF, NAN, -INF, 0.0, -0.0, 1e-30, 6e4, NAN],
                                                       [4.0, NAN, INF, 1.0, -0.0, 0.0, 1e-30, 6e4, 1.0]))
    add("nextafter", f"edges-{dt_tag(dt)}", lambda g: pair(
        g, "nextafter", dt, [1.0, 1.0, 0.0, -0.0, 0.0, NAN, 1.0, -1.0, 65504.0, INF, -INF, 1e-40],
        [2.0, 1.0, -1.0, 1.0, -0.0, 1.0, NAN, -INF, INF, 0.0, 0.0, 1.0]))
# ldexp: exact for a float tensor and integer exponents (even where 2^n alone overflows, and an
# i64 exponent is taken as an int32), self * pow(2, other) otherwise.
for dt in [F32, F64, F16, BF16]:
    for e_dt in [I32, I64, I8]:
        add("ldexp.Tensor", f"edges-{dt_tag(dt, e_dt)}", lambda g: pair(
            g, "ldexp.Tensor", dt, [1.0, 3.0, 1e-30, 1.5, -2.0, 0.0, INF, NAN, 1e-5, 7.0],
            [2, -1, 127, -126, 100, 50, -3, 0, 20, -100], e_dt))
add("ldexp.Tensor", "f32-i64-beyond-int32", lambda g: pair(g, "ldexp.Tensor", F32, [3.0, 3.0, 5.0], [2 ** 32 + 2, -(2 ** 32) + 2, 2 ** 31 + 1], I64))
add("ldexp.Tensor", "f32-f32-fractional", lambda g: pair(g, "ldexp.Tensor", F32, [3.0, 1e-30, 2.0, -1.0], [0.5, 130.0, -1.5, 1000.0]))
add("ldexp.Tensor", "f32-f16-power-in-f16", lambda g: pair(g, "ldexp.Tensor", F32, [3.0, 1e-5], [2.0, 20.0], F16))
# Shifts: every integer dtype by amounts in and out of [0, bits), negative values.
for dt in INTS:
    vals = [5, -5, 1, -1, 100, -128, 7, 3, 127] if dt != U8 else [5, 250, 1, 255, 100, 128, 7, 3, 127]
    amounts = [0, 1, 7, 8, 15, 16, 31, 32, 63] if dt != U8 else [0, 1, 7, 8, 9, 64, 200, 255, 4]
    amounts = amounts if dt in (U8,) else amounts[:6] + [-1, 64, 100]
    for op in ["bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor", "__lshift__.Tensor", "__rshift__.Tensor"]:
        add(op, f"amounts-{dt_tag(dt)}", lambda g: pair(g, op, dt, vals, amounts))
# gcd and lcm: zeros, signs, the narrow types' minimum, overflow in lcm.
for dt in [I8, I16, I32, I64, U8]:
    a = [0, 0, 12, -12, 7, -128, 100, 120, 64] if dt != U8 else [0, 0, 12, 200, 7, 128, 100, 120, 64]
    b = [0, 5, 18, 18, -7, 3, 3, 121, 0] if dt != U8 else [0, 5, 18, 18, 7, 3, 3, 121, 0]
    for op in ["gcd", "lcm"]:
        add(op, f"edges-{dt_tag(dt)}", lambda g: pair(g, op, dt, a, b))
add("lcm", "overflow-i32", lambda g: pair(g, "lcm", I32, [100003, -65536, 2 ** 31 - 1], [99991, 65536, 2]))
add("gcd", "i64-minimum", lambda g: pair(g, "gcd", I64, [-(2 ** 63), -(2 ** 63), 6], [0, 6, -(2 ** 63)]))

# ----------------------------------------------------------------------------------------------
# Scalar overloads: a tensor and a scalar (Tensor_Scalar), or the scalar first (Scalar_Tensor).

SCALARS = [-3, 2.5, True]
for op in ["copysign.Scalar", "bitwise_left_shift.Tensor_Scalar", "bitwise_right_shift.Tensor_Scalar", "__lshift__.Scalar",
           "__rshift__.Scalar"]:
    for dt in ALL:
        for s in SCALARS:
            add(op, f"{dt_tag(dt)}-{s!r}", lambda g: g.call(op, g.t(SHAPE, dt, special=True), s))
    main = F32 if op.startswith("copysign") else I32
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: g.call(op, g.t(shape, main, layout), 3))
add("copysign.Scalar", "signed-zero", lambda g: g.call("copysign.Scalar", g.t((4,), F32, values=[1.0, -2.0, NAN, INF]), -0.0))
for s in [0, 3, 8, 31, 64, -1]:
    add("bitwise_left_shift.Tensor_Scalar", f"i32-by-{s}", lambda g: g.call("bitwise_left_shift.Tensor_Scalar",
                                                                           g.t((4,), I32, values=[1, -1, 2 ** 30, -7]), s))
    add("bitwise_right_shift.Tensor_Scalar", f"i64-by-{s}", lambda g: g.call("bitwise_right_shift.Tensor_Scalar",
                                                                            g.t((4,), I64, values=[1, -1, 2 ** 62, -7]), s))

SCALAR_FIRST = ["remainder.Scalar_Tensor", "bitwise_and.Scalar_Tensor", "bitwise_or.Scalar_Tensor",
                "bitwise_xor.Scalar_Tensor", "bitwise_left_shift.Scalar_Tensor", "bitwise_right_shift.Scalar_Tensor"]
for op in SCALAR_FIRST:
    nonzero = {"nonzero": True} if op.startswith("remainder") else {}
    for dt in ALL:
        for s in SCALARS:
            add(op, f"{s!r}-{dt_tag(dt)}", lambda g: g.call(op, s, g.t(SHAPE, dt, special=True, **(nonzero if not dt.is_floating_point else {}))))
    main = F32 if op.startswith("remainder") else I32
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: g.call(op, 7, g.t(shape, main, layout, **nonzero)))
for s in [7, -7, 7.5, -0.0]:
    add("remainder.Scalar_Tensor", f"signs-{s!r}", lambda g: g.call(
        "remainder.Scalar_Tensor", s, g.t((8,), F32, values=[2.0, -2.0, 3.5, -3.5, INF, -INF, 0.0, NAN])))
add("remainder.Scalar_Tensor", "int-by-zero", lambda g: g.call("remainder.Scalar_Tensor", 5, g.t((3,), I64, values=[1, 0, 2])))
add("remainder.Scalar_Tensor", "i8-signs", lambda g: g.call("remainder.Scalar_Tensor", -7, g.t((4,), I8, values=[3, -3, 5, -128])))
for op, s in [("bitwise_left_shift.Scalar_Tensor", 5), ("bitwise_right_shift.Scalar_Tensor", -100)]:
    for dt in [I8, U8, I32, I64]:
        add(op, f"amounts-{dt_tag(dt)}", lambda g: g.call(op, s, g.t((6,), dt, values=[0, 1, 7, 8, 63, 64] if dt != U8 else [0, 1, 7, 8, 200, 3])))

# ----------------------------------------------------------------------------------------------
# More of torch.special: ndtri, Airy's Ai, the scaled K0/K1, the spherical J0 (f32 and f64 only,
# as PyTorch), polygamma of orders 0 to 5, Hurwitz zeta and the orthogonal polynomials (Tensor,
# x_scalar and n_scalar overloads; f32 and f64, integer operands compute in f32).

MORE_UNARY = ["special_ndtri", "special_airy_ai", "special_scaled_modified_bessel_k0",
              "special_scaled_modified_bessel_k1", "special_spherical_bessel_j0"]
MORE_DOMAIN = {"special_ndtri": dict(low=0, high=1)}
MORE_EDGES = {
    "special_ndtri": [0.0, -0.0, 1.0, 0.5, 0.025, 0.975, 1e-30, 1e-10, 0.13533528323661269, 0.8646647167633873,
                      1.2664165549e-14, 0.99999, -0.5, 1.5, NAN, INF, -INF],
    "special_airy_ai": [-INF, INF, NAN, 0.0, -0.0, -2.09, -2.1, 2.09, 2.1, 8.3203353, 8.33, 50.0, 103.9, -10.5, 1e-30, -1.0],
    "special_scaled_modified_bessel_k0": [-INF, INF, NAN, 0.0, -0.0, -1.0, 1e-30, 0.5, 2.0, 2.5, 80.0, 800.0, 1e10],
    "special_scaled_modified_bessel_k1": [-INF, INF, NAN, 0.0, -0.0, -1.0, 1e-30, 0.5, 2.0, 2.5, 80.0, 800.0, 1e10],
    "special_spherical_bessel_j0": [-INF, INF, NAN, 0.0, -0.0, 0.49, 0.5, -0.5, 3.14159, 100.0, 1e-30, 1e30, -7.5],
}
# PyTorch's Ai (Cephes' expansions) is off by up to 3e-6 absolute near x = -2.09 and in f32's
# oscillating range (against mpmath); coil's compiled Ai is PyTorch's, its interpreter's exact.
AIRY_TOL = (1e-5, 5e-6)

for op in MORE_UNARY:
    tol = AIRY_TOL if op == "special_airy_ai" else None
    for dt in ALL:
        domain = MORE_DOMAIN.get(op, {}) if dt.is_floating_point else {}
        add(op, dt_tag(dt), lambda g: g.call(op, g.t(SHAPE, dt, special=True, **domain)), tol=tol)
    for tag, shape, layout in LAYOUTS:
        add(op, tag, lambda g: g.call(op, g.t(shape, F32, layout, **MORE_DOMAIN.get(op, {}))), tol=tol)
    for dt in [F32, F64]:
        add(op, f"edges-{dt_tag(dt)}", lambda g: g.call(op, g.t((len(MORE_EDGES[op]),), dt, values=MORE_EDGES[op])), tol=tol)
    add(op, "ints", lambda g: g.call(op, g.t((6,), I64, values=[-2, -1, 0, 1, 2, 50])), tol=tol)

# polygamma(n, x): digamma at n = 0, trigamma at 1 (positive x there: near its negative poles
# PyTorch's float kernel rounds sin(pi x) in float, far from the exact value), the zeta form
# beyond. 16-bit: PyTorch rounds zeta to the 16-bit type before the product (coil's compiled
# code too), so the exact value is the reference there.
POLYGAMMA_EDGES = [0.0, -0.0, INF, -INF, NAN, 1.0, 0.5, 1e-3, 10.0, 1e4, -0.5, -1.5, -2.25]
# PyTorch's trigamma (six steps of the recurrence, then three terms of the asymptotic series) is
# off by up to 5e-10 relative in f64 (against mpmath); coil's compiled trigamma is PyTorch's.
TRIGAMMA_TOL = (2e-9, 1e-12)
for order in [0, 1, 2, 3, 5]:
    for dt in ALL:
        # trigamma: positive x (integers too: at the negative ones PyTorch gives what sin(pi x)
        # rounds to, not infinity)
        domain = {} if order != 1 else dict(low=0.05, high=6.0) if dt.is_floating_point else dict(low=1, high=9)
        add("polygamma", f"n={order}-{dt_tag(dt)}", lambda g: g.call(
            "polygamma", order, g.t(SHAPE, dt, special=order != 1, **domain)),
            ref64=order >= 2 and dt in (F16, BF16), tol=TRIGAMMA_TOL if order == 1 and dt == F64 else None)
    for dt in [F32, F64]:
        add("polygamma", f"n={order}-edges-{dt_tag(dt)}", lambda g: g.call(
            "polygamma", order, g.t((len(POLYGAMMA_EDGES),), dt, values=POLYGAMMA_EDGES)),
            tol=TRIGAMMA_TOL if order == 1 and dt == F64 else None)
for tag, shape, layout in LAYOUTS:
    add("polygamma", tag, lambda g: g.call("polygamma", 2, g.t(shape, F32, layout, low=0.1, high=4.0)))
add("polygamma", "ints", lambda g: g.call("polygamma", 3, g.t((5,), I32, values=[1, 2, 3, 10, 100])))
add("polygamma", "negative-n", lambda g: g.call("polygamma", -1, g.t((3,), F32, values=[1.0, 2.0, 3.0])))

# Hurwitz zeta(x, q): x >= 1, q anywhere (negative q: NaN unless x is an integer, inf at the
# non-positive integers).
ZETA_X = [2.0, 2.0, 2.0, 2.0, 2.5, 1.0, 0.5, NAN, 2.0, 3.0, 4.0, 7.0, 2.0, 1.5, 30.0, 2.0]
ZETA_Q = [1.0, 0.0, -1.0, -1.5, -1.5, 3.0, 3.0, 1.0, NAN, 2.0, -0.25, 0.5, INF, 1e-3, 1.0, 1e6]
ZETA = ["special_zeta", "special_zeta.self_scalar", "special_zeta.other_scalar"]


def zeta_operands(g, dt_x, dt_q, shape_x=SHAPE, shape_q=SHAPE, layout_x="contig", layout_q="contig"):
    return (g.t(shape_x, dt_x, layout_x, low=1.0, high=6.0) if dt_x.is_floating_point else g.t(shape_x, dt_x, low=1, high=6),
            g.t(shape_q, dt_q, layout_q, low=0.05, high=5.0) if dt_q.is_floating_point else g.t(shape_q, dt_q, low=0, high=6))


for dt in ALL:
    add("special_zeta", dt_tag(dt, dt), lambda g: g.call("special_zeta", *zeta_operands(g, dt, dt)))
for a, b in [(F32, F64), (I64, F32), (F32, I32), (F16, F32), (BOOL, F64), (I32, I64), (F16, I64), (BF16, BF16)]:
    add("special_zeta", dt_tag(a, b), lambda g: g.call("special_zeta", *zeta_operands(g, a, b)))
for tag, sa, sb, la, lb in BROADCASTS:
    add("special_zeta", tag, lambda g: g.call("special_zeta", *zeta_operands(g, F32, F32, sa, sb, la, lb)))
for dt in [F32, F64]:
    add("special_zeta", f"edges-{dt_tag(dt)}", lambda g: pair(g, "special_zeta", dt, ZETA_X, ZETA_Q))
for dt in [F32, F64, I64, F16]:
    for s in [2, 3.5]:
        add("special_zeta.self_scalar", f"{s!r}-{dt_tag(dt)}", lambda g: g.call(
            "special_zeta.self_scalar", s, g.t(SHAPE, dt, low=0.1, high=5.0) if dt.is_floating_point else g.t(SHAPE, dt, low=1, high=9)))
        add("special_zeta.other_scalar", f"{dt_tag(dt)}-{s!r}", lambda g: g.call(
            "special_zeta.other_scalar", g.t(SHAPE, dt, low=1.0, high=6.0) if dt.is_floating_point else g.t(SHAPE, dt, low=1, high=9), s))
add("special_zeta.self_scalar", "step2", lambda g: g.call("special_zeta.self_scalar", 2.0, g.t((3, 4), F32, "step2", low=0.1, high=4.0)))
add("special_zeta.other_scalar", "T", lambda g: g.call("special_zeta.other_scalar", g.t((3, 4), F32, "T", low=1.5, high=4.0), -0.5))

# The orthogonal polynomials. x in a range where float and double agree to the tolerance (the
# recurrences cancel), degrees 0 to 12 (past the trigonometric thresholds 4, 6 and 8), negative
# degrees, |x| = 1 (x = 0 and 1 for the shifted ones), 0-d and scalar operands; n never NaN or
# infinite (PyTorch's CPU and CUDA kernels read those differently) and x never NaN with n >= 2
# (PyTorch's CPU kernels return an uninitialized value there).
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
               "legendre_polynomial_p"]
POLY_X = [1.0, -1.0, 0.0, -0.0, 0.5, -0.5, 0.999, 0.3, 1.5, -1.25, 2.0, 0.75, INF, -INF, 1.0, -1.0, 0.0, 0.25, 0.6, NAN, -0.9]
POLY_N = [7.0, 7.0, 9.0, 5.0, 9.0, 10.0, 12.0, 7.0, 5.0, 6.0, 4.0, 3.0, 3.0, 2.0, 0.0, -2.0, 12.0, 11.0, 5.0, 1.0, 2.5]


def poly_operands(g, dt_x, dt_n, shape_x=SHAPE, shape_n=SHAPE, layout_x="contig", layout_n="contig"):
    # Integer x in {-1, 0, 1} (u8: {0, 1}), degrees from -1 (u8 and bool: 0).
    x = (g.t(shape_x, dt_x, layout_x, low=-1.2, high=1.2) if dt_x.is_floating_point else
         g.t(shape_x, dt_x, layout_x, low=0 if dt_x in (U8, BOOL) else -1, high=2))
    n = g.t(shape_n, dt_n, layout_n, low=0 if dt_n in (U8, BOOL) else -1, high=13)
    return x, n


def poly_tol(*dts):
    """PyTorch's f32 kernels round cos(n acos x) (and the recurrences) in float: up to about
    n * 1e-7 off the exact value the interpreter gives (coil's compiled code is PyTorch's)."""
    return None if F64 in dts else (1e-5, 1e-5)


for name in POLYNOMIALS:
    op = f"special_{name}"
    for dt in ALL:
        add(op, dt_tag(dt, dt), lambda g: g.call(op, *poly_operands(g, dt, dt)), tol=poly_tol(dt))
    for a, b in [(F32, I64), (F64, F32), (I64, F32), (F32, F64), (F16, F32), (BOOL, I64), (F16, I64), (I32, I64)]:
        add(op, dt_tag(a, b), lambda g: g.call(op, *poly_operands(g, a, b)), tol=poly_tol(a, b))
    for tag, sa, sb, la, lb in BROADCASTS:
        add(op, tag, lambda g: g.call(op, *poly_operands(g, F32, F32, sa, sb, la, lb)), tol=poly_tol(F32))
    for dt in [F32, F64]:
        add(op, f"edges-{dt_tag(dt)}", lambda g: pair(g, op, dt, POLY_X, POLY_N), tol=poly_tol(dt))
    for n in [0, 1, 3, 8, 11, -1, 2.5]:
        add(f"{op}.n_scalar", f"n={n!r}", lambda g: g.call(f"{op}.n_scalar", g.t(SHAPE, F32, low=-1.2, high=1.2), n),
            tol=poly_tol(F32))
    add(f"{op}.n_scalar", "f64-T", lambda g: g.call(f"{op}.n_scalar", g.t((3, 4), F64, "T", low=-1.2, high=1.2), 9))
    add(f"{op}.n_scalar", "i64", lambda g: g.call(f"{op}.n_scalar", g.t((5,), I64, values=[-1, 0, 1, 2, 3]), 4))
    add(f"{op}.n_scalar", "f16", lambda g: g.call(f"{op}.n_scalar", g.t((3,), F16), 2))
    for x in [0.5, -1.0, 1.0, 0.0, 2]:
        add(f"{op}.x_scalar", f"x={x!r}", lambda g: g.call(f"{op}.x_scalar", x, g.t((14,), I64, values=list(range(-1, 13)))),
            tol=poly_tol(F32))
    add(f"{op}.x_scalar", "f64-n", lambda g: g.call(f"{op}.x_scalar", 0.3, g.t((3, 4), F64, "step2", low=0, high=12)))
    add(f"{op}.x_scalar", "f16-n", lambda g: g.call(f"{op}.x_scalar", 0.3, g.t((3,), F16, low=0, high=5)))
# Hermite beyond PyTorch's CPU degree limits (NaN past 128 in f32, 512 in f64; below them the
# values at these degrees overflow, but H_odd(0) = 0).
for name in ["hermite_polynomial_h", "hermite_polynomial_he"]:
    add(f"special_{name}", "limit-f32", lambda g: pair(g, f"special_{name}", F32, [0.0, 1e-3, 0.5], [129.0, 200.0, 513.0]))
    add(f"special_{name}", "limit-f64", lambda g: pair(g, f"special_{name}", F64, [0.0, 0.0, 1e-3], [129.0, 513.0, 600.0]))
