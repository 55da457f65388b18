"""torch.compile(backend="coil") on the special functions and the pointwise ops around them
(exp2, erfc, erfinv, lgamma, digamma, the Bessel functions, signbit, round with decimals,
frexp, copysign, hypot, nextafter, ldexp, shifts, gcd, lcm, the Scalar_Tensor overloads): each
must compile whole, with no coil.FallbackWarning, and match eager.

Runs on the CPU everywhere and on CUDA where there is a GPU.
"""
import warnings

import pytest
import torch

coil = pytest.importorskip("coil")
coil.register()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# (rtol, atol): a few roundings of the dtype (PyTorch's float kernels compute in float, coil's
# CPU special functions in double).
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (2e-5, 2e-6), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1.6e-2)}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiles_whole_like_eager(fn, *args, tol=None):
    """fn eagerly and compiled by coil under no_grad: the outputs must match and coil must not
    send anything to eager (no FallbackWarning, which CompileErrorWarning derives from)."""
    with torch.no_grad():
        want = fn(*args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(fn, backend="coil")(*args)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, coil.FallbackWarning)]
    assert not fallbacks, f"coil did not compile it whole: {fallbacks}"
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device), f"output {i}"
        if w.dtype.is_floating_point:
            rtol, atol = tol or TOL[w.dtype]
            torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"output {i}: {m}")
        else:
            assert torch.equal(g, w), f"output {i}:\ncoil  {g}\neager {w}"


def values(device, dtype, low=-4.0, high=4.0, n=(8, 33)):
    """Uniform values in [low, high) with NaN, +-inf and +-0 among them."""
    g = torch.Generator().manual_seed(0)
    t = torch.rand(n, generator=g, dtype=torch.float64) * (high - low) + low
    t.view(-1)[:6] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0], dtype=torch.float64)
    return t.to(device=device, dtype=dtype)


UNARY = {
    "exp2": torch.exp2, "erfc": torch.erfc, "lgamma": torch.lgamma, "digamma": torch.digamma, "i0": torch.i0,
    "i0e": torch.special.i0e, "i1": torch.special.i1, "i1e": torch.special.i1e, "signbit": torch.signbit,
}
# Functions PyTorch computes in f32 and f64 only.
UNARY_32_64 = {
    "erfcx": torch.special.erfcx, "bessel_j0": torch.special.bessel_j0, "bessel_j1": torch.special.bessel_j1,
    "bessel_y0": torch.special.bessel_y0, "bessel_y1": torch.special.bessel_y1,
    "modified_bessel_i0": torch.special.modified_bessel_i0, "modified_bessel_i1": torch.special.modified_bessel_i1,
    "modified_bessel_k0": torch.special.modified_bessel_k0, "modified_bessel_k1": torch.special.modified_bessel_k1,
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype, device):
    compiles_whole_like_eager(UNARY[name], values(device, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(UNARY_32_64))
def test_unary_f32_f64(name, dtype, device):
    # PyTorch's double J0, J1, Y0 and Y1 are off by up to 9e-7 (against mpmath; coil's by 2e-16).
    tol = (1e-6, 1e-6) if name.startswith("bessel") and dtype == torch.float64 else None
    compiles_whole_like_eager(UNARY_32_64[name], values(device, dtype, -6.0, 6.0), tol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_erfinv(dtype, device):
    x = values(device, dtype, -1.0, 1.0)
    x.view(-1)[6:10] = torch.tensor([1.0, -1.0, 1.5, -0.999], dtype=dtype)
    compiles_whole_like_eager(torch.erfinv, x)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_inputs_become_float(device):
    x = torch.arange(-3, 9, device=device, dtype=torch.int32)
    compiles_whole_like_eager(lambda t: (torch.lgamma(t), torch.special.i1e(t), torch.exp2(t), torch.signbit(t)), x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_round_decimals_and_frexp(dtype, device):
    x = values(device, dtype, -300.0, 300.0)
    compiles_whole_like_eager(lambda t: (torch.round(t, decimals=2), torch.round(t, decimals=-1), *torch.frexp(t)), x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_binary_floats(dtype, device):
    a, b = values(device, dtype), values(device, dtype).flip(-1)
    compiles_whole_like_eager(lambda x, y: (torch.copysign(x, y), torch.copysign(x, -0.0), torch.hypot(x, y),
                                            torch.nextafter(x, y)), a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_ldexp(dtype, device):
    x = values(device, dtype)
    n = torch.randint(-20, 20, x.shape, generator=torch.Generator().manual_seed(1)).to(device)
    compiles_whole_like_eager(lambda t, e: (torch.ldexp(t, e), torch.ldexp(t, e.to(dtype) / 2)), x, n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
def test_integer_ops(dtype, device):
    gen = torch.Generator().manual_seed(2)
    low = 0 if dtype == torch.uint8 else -100
    a = torch.randint(low, 100, (5, 17), generator=gen).to(device=device, dtype=dtype)
    s = torch.randint(-2 if dtype != torch.uint8 else 0, 70, (5, 17), generator=gen).to(device=device, dtype=dtype)
    compiles_whole_like_eager(lambda x, k: (x << k, x >> k, torch.bitwise_left_shift(x, 3), torch.bitwise_right_shift(5, k),
                                            torch.gcd(x, k), torch.lcm(x, k), 6 & x, 6 | x, 6 ^ x), a, s)


@pytest.mark.parametrize("device", DEVICES)
def test_remainder_scalar_first(device):
    x = values(device, torch.float32)
    i = torch.tensor([3, -3, 7, -7, 1, 2], device=device)
    compiles_whole_like_eager(lambda t, k: (5.5 % t, torch.remainder(-7, k)), x, i)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_with_other_ops(device):
    """Special functions in one graph with ordinary ops, as a model would use them."""
    x = values(device, torch.float32, 0.1, 5.0)
    compiles_whole_like_eager(lambda t: (torch.special.i0e(t) * torch.erfc(t - 1).sqrt() + torch.digamma(t + 1),
                                         torch.lgamma(t).exp2().clamp(max=1e6), torch.mvlgamma(t + 2, 3)), x)


# ---- ndtri, Airy's Ai, the scaled K0/K1, the spherical J0, polygamma, Hurwitz zeta and the
# orthogonal polynomials (with their scalar overloads, as Dynamo hands them over).

MORE_32_64 = {
    "ndtri": (torch.special.ndtri, 0.0, 1.0), "airy_ai": (torch.special.airy_ai, -8.0, 8.0),
    "scaled_modified_bessel_k0": (torch.special.scaled_modified_bessel_k0, 0.0, 6.0),
    "scaled_modified_bessel_k1": (torch.special.scaled_modified_bessel_k1, 0.0, 6.0),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, -20.0, 20.0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(MORE_32_64))
def test_more_unary_f32_f64(name, dtype, device):
    fn, low, high = MORE_32_64[name]
    compiles_whole_like_eager(fn, values(device, dtype, low, high))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_polygamma(dtype, device):
    # Orders 0 to 4 (torch.special.polygamma is the same op); trigamma at positive x (near its
    # negative poles PyTorch's float kernel is inexact; coil's CPU kernel computes as it does).
    x = values(device, dtype, -3.0, 6.0)
    pos = values(device, dtype, 0.05, 6.0)
    orders = [2, 3] if dtype in (torch.float16, torch.bfloat16) else [2, 3, 4, 6]
    compiles_whole_like_eager(lambda t, p: (torch.polygamma(0, t), torch.special.polygamma(1, p),
                                            *[torch.polygamma(n, t) for n in orders]), x, pos)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta(dtype, device):
    x = values(device, dtype, 1.0, 6.0)
    q = values(device, dtype, -2.0, 5.0).flip(-1)
    compiles_whole_like_eager(lambda a, b: (torch.special.zeta(a, b), torch.special.zeta(a, 2.0), torch.special.zeta(3, b)),
                              x, q)


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
               "legendre_polynomial_p"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials(name, dtype, device):
    # Degrees 0 to 14 (past the trigonometric forms' thresholds) and a negative one, x within
    # and beyond [-1, 1] with +-1 and 0 exactly; the Tensor, n_scalar and x_scalar overloads and
    # an integer degree tensor. The same code as PyTorch's in the same dtype: equal to rounding.
    fn = getattr(torch.special, name)
    gen = torch.Generator().manual_seed(3)
    x = (torch.rand(6, 17, generator=gen, dtype=torch.float64) * 2.6 - 1.3)
    x.view(-1)[:4] = torch.tensor([1.0, -1.0, 0.0, 0.5], dtype=torch.float64)
    x = x.to(device=device, dtype=dtype)
    n = torch.randint(-1, 15, (6, 17), generator=gen).to(device)
    compiles_whole_like_eager(lambda a, k: (fn(a, k.to(dtype)), fn(a, k), fn(a, 9), fn(a, 3), fn(0.25, k)), x, n)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_operands_become_float(device):
    x = torch.arange(0, 9, device=device, dtype=torch.int32)
    compiles_whole_like_eager(lambda t: (torch.special.ndtri(t), torch.special.airy_ai(t), torch.polygamma(2, t + 1),
                                         torch.special.chebyshev_polynomial_t(t, t), torch.special.zeta(t + 2, t)), x)


@pytest.mark.parametrize("device", DEVICES)
def test_more_fused_with_other_ops(device):
    x = values(device, torch.float32, 0.1, 3.0)
    compiles_whole_like_eager(lambda t: (torch.special.scaled_modified_bessel_k0(t) * t.exp() + torch.polygamma(1, t),
                                         # (no NaN x: PyTorch's CPU kernel leaves the result unset there)
                                         torch.special.legendre_polynomial_p(t.tanh().nan_to_num(0.5), 5).sum(-1),
                                         torch.special.ndtri(t.sigmoid()) * 2), x)
