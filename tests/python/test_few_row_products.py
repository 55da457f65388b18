"""Products of a few rows (LLM decoding's projections) through torch.compile against eager. On
CUDA these take coil's own kernel (codegen/cuda/cuda_gemv.cc) with its candidates tuned: weights
of over a MiB, 1 to 16 rows, a bias with tanh-GELU or ReLU, a residual added, weights read
transposed (nn.Linear's); the tuner may pick cuBLASLt instead — and products it leaves to
cuBLASLt (17 rows, a weight laid out along N) beside them. No graph may fall back to eager."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import coil
from conftest import CUDA, coil_fallbacks

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
DEVICES = ["cpu"] + (["cuda"] if CUDA and torch.cuda.is_available() else [])


def block(x, w1, b1, w2, r):
    h = F.gelu(F.linear(x, w1, b1), approximate="tanh")
    return F.linear(h, w2) + r, F.relu(F.linear(x, w1, b1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [1, 3, 8, 12, 17])
def test_few_row_products_follow_eager(device, rows):
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    d, hidden = 1024, 1400
    x = torch.randn(rows, d, device=device, dtype=dtype)
    w1 = (torch.randn(hidden, d, device=device) * d**-0.5).to(dtype)
    b1 = torch.randn(hidden, device=device, dtype=dtype)
    w2 = (torch.randn(d, hidden, device=device) * hidden**-0.5).to(dtype)
    r = torch.randn(rows, d, device=device, dtype=dtype)
    compiled = coil.compile(block)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(2):  # the tuned build, then the cached one
            got, want = compiled(x, w1, b1, w2, r), block(x, w1, b1, w2, r)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, **tol)
            x = torch.randn_like(x)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)


@pytest.mark.parametrize("device", DEVICES)
def test_weights_along_n_and_transposed_rows_follow_eager(device):
    torch.manual_seed(1)
    dtype = torch.float16 if device == "cuda" else torch.float32
    x = torch.randn(640, 4, device=device, dtype=dtype)  # read transposed: 4 rows, one element apart
    w = (torch.randn(900, 640, device=device) * 0.04).to(dtype)
    wn = (torch.randn(640, 900, device=device) * 0.04).to(dtype)  # x @ wn: B along N (cuBLASLt's)

    def fn(x, w, wn):
        return F.linear(x.t(), w), x.t() @ wn

    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        got = coil.compile(fn)(x, w, wn)
        tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.float16 else dict(rtol=1e-4, atol=1e-4)
        for g, e in zip(got, fn(x, w, wn)):
            torch.testing.assert_close(g, e, **tol)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)


def swiglu(x, w1, w3, w2, r):
    """A Llama MLP (SiLU gate), a residual added."""
    return (F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2) + r,)


def geglu(x, w1, w3, w2, r):
    """A GeGLU gate (erf GELU). (Apart from swiglu: in one graph the two would share their
    products, which would then have two readers and join neither kernel.)"""
    return (F.gelu(F.linear(x, w3)) * F.linear(x, w1),)


def gated_exposed(x, w1, w3, w2, r):
    """The gate's first product also returned: it stays a product of its own, the second joins."""
    a = F.linear(x, w1)
    return F.silu(a) * F.linear(x, w3), a


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,dtype", [(1, torch.bfloat16), (5, torch.float16), (16, torch.bfloat16), (3, torch.float32)])
@pytest.mark.parametrize("fn", [swiglu, geglu, gated_exposed])
def test_gated_products_follow_eager(device, rows, dtype, fn):
    """On CUDA the two products of a gate and the pointwise kernel after them are one kernel of
    coil's (schedule/fuse_gemv_epilogues.h); its result is eager's, rounded as eager rounds."""
    if device == "cpu" and dtype != torch.float32:
        pytest.skip("the CPU slice runs f32")
    torch.manual_seed(rows)
    d, hidden = 512, 1000  # hidden: no multiple of a block's outputs
    x = torch.randn(1, rows, d, device=device, dtype=dtype)
    w1, w3 = ((torch.randn(hidden, d, device=device) * d**-0.5).to(dtype) for _ in range(2))
    w2 = (torch.randn(d, hidden, device=device) * hidden**-0.5).to(dtype)
    r = torch.randn(1, rows, d, device=device, dtype=dtype)
    compiled = coil.compile(fn)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(2):
            got, want = compiled(x, w1, w3, w2, r), fn(x, w1, w3, w2, r)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, **tol)
            x = torch.randn_like(x)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)


def rms_norm(x, weight, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)).type_as(x) * weight


def normed_mlps(x, g, w1, w3, w2, b3):
    """A Llama MLP after its RMSNorm, and a GPT-2 one after its LayerNorm (bias, tanh-GELU)."""
    f = rms_norm(x, g)
    llama = x + F.linear(F.silu(F.linear(f, w1)) * F.linear(f, w3), w2)
    n = F.layer_norm(x, (x.shape[-1],), g, g * 0.5)
    gpt2 = F.linear(F.gelu(F.linear(n, w3, b3), approximate="tanh"), w2)
    return llama, gpt2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,dtype", [(1, torch.bfloat16), (4, torch.float16), (8, torch.bfloat16), (2, torch.float32)])
def test_normed_products_follow_eager(device, rows, dtype):
    """Norms ahead of the products: the RMSNorm of one row runs inside the products' kernel (a
    prologue each block computes, schedule/fuse_gemv_prologues.h); over more rows, and the
    LayerNorm (a Welford pass), a kernel of their own."""
    if device == "cpu" and dtype != torch.float32:
        pytest.skip("the CPU slice runs f32")
    torch.manual_seed(10 + rows)
    d, hidden = 640, 900
    x = torch.randn(rows, 1, d, device=device, dtype=dtype)
    g = (1 + 0.1 * torch.randn(d, device=device)).to(dtype)
    w1, w3 = ((torch.randn(hidden, d, device=device) * d**-0.5).to(dtype) for _ in range(2))
    w2 = (torch.randn(d, hidden, device=device) * hidden**-0.5).to(dtype)
    b3 = torch.randn(hidden, device=device, dtype=dtype)
    compiled = coil.compile(normed_mlps)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=3e-2)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(2):
            got, want = compiled(x, g, w1, w3, w2, b3), normed_mlps(x, g, w1, w3, w2, b3)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, **tol)
            x = torch.randn_like(x)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
