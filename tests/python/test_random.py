"""Random numbers in compiled graphs: coil draws rand, randn, dropout's masks, bernoulli and
uniform_ with Philox in its own kernels (no fallback), from a seed taken from PyTorch's
generator at every call. Checked: the kernels' bits against the op's PyTorch implementation,
the distributions' statistics, repeatability under torch.manual_seed, and that a dropout's
backward uses the mask its forward drew.
"""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

coil = pytest.importorskip("coil")
from conftest import TORCH_DEVICES, coil_fallbacks  # noqa: E402
from coil import _random  # noqa: E402,F401 - registers torch.ops.coil

DEVICES = TORCH_DEVICES

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def compiled(fn, *args):
    """fn compiled by coil on args, asserting nothing fell back to eager."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(fn, backend="coil")(*args)
    said = coil_fallbacks(caught)
    assert not said, said
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("distribution", ["uniform", "normal"])
def test_kernels_compute_the_ops_bits(device, dtype, distribution):
    """coil's generated Philox against torch.ops.coil.philox_random's tensor-op implementation:
    the same bits for uniform values, within a rounding of the dtype for normal ones."""
    seed = torch.tensor(-7_301_234_567_890_123, dtype=torch.int64, device=device)

    def f(seed):
        return torch.ops.coil.philox_random(seed, [37, 3, 5], 5, distribution, dtype)

    got, want = compiled(f, seed), f(seed)
    assert got.dtype == dtype and got.shape == (37, 3, 5)
    if distribution == "uniform":
        assert torch.equal(got, want)
        assert got.min() >= 0 and got.max() < 1  # 16-bit values never round up to 1
    else:
        # One rounding of the dtype: f64 logs and cosines one ulp apart may round either way.
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(got, want, rtol=eps, atol=eps)


def ks_statistic(sample, cdf):
    x, _ = torch.sort(sample.double().flatten())
    n = x.numel()
    f = cdf(x)
    i = torch.arange(1, n + 1, dtype=torch.float64, device=x.device)
    return max((i / n - f).max().item(), (f - (i - 1) / n).max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_rand_and_randn_follow_their_distributions(device):
    n = 1 << 16

    def f(x):
        return torch.rand(n, device=x.device) + x, torch.randn(n, device=x.device) * 2 + x

    torch.manual_seed(0)
    u, z = compiled(f, torch.zeros((), device=device))
    z = (z / 2).double()
    bound = 1.95 / math.sqrt(n)  # Kolmogorov-Smirnov at the 0.1% level
    assert ks_statistic(u, lambda x: x) < bound
    assert ks_statistic(z, lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2)))) < bound
    assert abs(u.double().mean().item() - 0.5) < 4 * math.sqrt(1 / 12 / n)
    assert abs(z.mean().item()) < 4 / math.sqrt(n) and abs(z.var().item() - 1) < 4 * math.sqrt(2 / n)
    assert abs(torch.corrcoef(torch.stack([u[:-1].double(), u[1:].double()]))[0, 1].item()) < 4 / math.sqrt(n)


@pytest.mark.parametrize("device", DEVICES)
def test_manual_seed_repeats_and_each_call_draws_anew(device):
    fn = torch.compile(lambda x: x + torch.rand(1000, device=x.device), backend="coil")
    x = torch.zeros((), device=device)
    torch.manual_seed(3)
    first, second = fn(x), fn(x)
    torch.manual_seed(3)
    again = fn(x)
    assert torch.equal(first, again) and not torch.equal(first, second)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_backward_uses_the_forward_mask(device, dtype):
    """F.dropout in a training graph: the mask drawn in coil's forward is the one its backward
    applies (the gradient is zero exactly where the output is), the kept fraction is 1 - p within
    4 sigma, and kept elements are scaled by 1 / (1 - p)."""
    p, n = 0.3, 1 << 14
    x = torch.full((n,), 1.5, device=device, dtype=dtype, requires_grad=True)
    weights = torch.linspace(1, 2, n, device=device, dtype=dtype)

    def f(x):
        return F.dropout(x, p, training=True) * weights

    torch.manual_seed(0)
    y = compiled(f, x)
    y.sum().backward()
    kept = y != 0
    assert torch.equal(x.grad != 0, kept)
    rate = kept.double().mean().item()
    assert abs(rate - (1 - p)) < 4 * math.sqrt(p * (1 - p) / n)
    scale = torch.tensor(1 / (1 - p), dtype=dtype).item()
    torch.testing.assert_close(x.grad[kept], (weights * scale)[kept], rtol=1e-2 if dtype != torch.float32 else 1e-6, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_bernoulli_and_uniform_are_drawn_by_coil(device):
    n = 1 << 14

    def f(x):
        b = torch.bernoulli(torch.zeros_like(x), p=0.25) + x  # p by keyword
        u = torch.empty_like(x).uniform_(-3.0, 5.0) + x
        return b, u

    b, u = compiled(f, torch.zeros(n, device=device))
    assert set(b.unique().tolist()) <= {0.0, 1.0}
    assert abs(b.mean().item() - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n)
    assert u.min() >= -3.0 and u.max() < 5.0 and abs(u.mean().item() - 1.0) < 4 * 8 / math.sqrt(12 * n)
