"""Complex tensors through torch.compile(backend="coil"): coil computes on their real pairs
(coil/_complex.py), FFTs run as PyTorch's library kernels, and the program gets eager's values
with no FallbackWarning. Runs on the CPU everywhere and on CUDA where there is a GPU.
"""
import warnings

import pytest
import torch

coil = pytest.importorskip("coil")
from test_torch_compile_ops import DEVICES, compiles_like_eager  # noqa: E402  (resets Dynamo per call)


@pytest.mark.parametrize("device", DEVICES)
def test_complex_arithmetic_on_real_pairs(device):
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(6, 8, generator=g).to(device) for _ in range(2))

    def fn(x, y):
        c = torch.complex(x, y)
        d = torch.polar(x.abs() + 0.5, y)
        e = (c * d + c - d * 2 - 1.5).conj_physical() * x
        f = torch.neg(e[1:, ::2]).permute(1, 0).reshape(-1) + 2 * c[0, :4].repeat(5)[:20]
        return torch.view_as_real(e), e.abs(), f, d.unsqueeze(0).expand(3, 6, 8)[1, 2]

    compiles_like_eager(fn, x, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_casts_to_and_between_complex_dtypes(device, dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 7, generator=g).to(device)
    compiles_like_eager(lambda x: (x.to(dtype) * 3, (x.to(torch.complex64) + x).to(dtype)), x)


@pytest.mark.parametrize("device", DEVICES)
def test_complex_inputs_and_outputs_around_ffts(device):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 16, generator=g).to(device)
    c = torch.randn(4, 9, dtype=torch.complex64, generator=g).to(device)

    def fn(x, c):
        spectrum = torch.fft.rfft(x * 2) * c  # r2c (a library call), then a complex product on pairs
        return torch.fft.irfft(spectrum.conj(), n=16) + 1, torch.fft.fft2(torch.nn.functional.pad(x, (0, 2))), c[:, 1:] - 1

    compiles_like_eager(fn, x, c, tol=(1e-4, 1e-4))


def test_the_pass_leaves_real_graphs_and_unknown_complex_ops_alone():
    """No complex value: nothing to do. A complex op with no rule (here a division by a complex
    tensor) runs on complex tensors in PyTorch, with a FallbackWarning naming it."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from coil import _complex

    gm = make_fx(lambda x: x * 2)(torch.randn(3))
    assert _complex.as_real_pairs(gm, [torch.randn(3)]) is None

    def fn(x, y):
        c = torch.complex(x, y)
        return (c / (c + 2)) * 2

    x, y = torch.randn(5), torch.randn(5)
    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend="coil")(x, y)
    torch.testing.assert_close(got, fn(x, y))
    said = [str(w.message) for w in caught if issubclass(w.category, coil.FallbackWarning)]
    assert len(said) == 1 and "aten.div.Tensor" in said[0], said
