"""Convolutions and matrix products through torch.compile(backend="coil") against the exact
result: strides, padding, dilation, groups up to depthwise, transposed, 1-3 spatial dims, odd
sizes, channels-last and sliced inputs, in every float dtype (and integer products).

The truth is the op in f64 on the same (already rounded) inputs; coil may differ from it by one
rounding of the result's dtype plus f32 accumulation error growing with the reduction length
K, so the tolerances hold on any x86 machine. Each dtype compiles one function holding all the
cases (one compile, many library calls). Runs on the CPU, and on CUDA where there is a GPU.
"""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

coil = pytest.importorskip("coil")
coil.register()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
CL, CL3 = torch.channels_last, torch.channels_last_3d

# (name, input shape, weight shape, bias, keyword arguments, memory format of the input or a
# slice of it, transposed)
CONVS = [
    ("2d stride pad dilation", (2, 3, 9, 8), (5, 3, 3, 3), True, dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2)), None, False),
    ("2d groups", (3, 4, 7, 6), (6, 2, 3, 3), False, dict(padding=1, groups=2), None, False),
    ("2d depthwise stride", (2, 6, 10, 7), (6, 1, 3, 3), True, dict(stride=2, padding=1, groups=6), None, False),
    ("2d depthwise multiplier 5x5", (1, 4, 5, 5), (8, 1, 5, 5), False, dict(padding=2, groups=4), None, False),
    ("2d 1x1", (2, 5, 4, 3), (7, 5, 1, 1), True, {}, None, False),
    ("2d channels-last", (2, 8, 6, 5), (4, 8, 3, 3), True, dict(padding=1), CL, False),
    ("2d channels-last depthwise", (2, 8, 6, 5), (8, 1, 3, 3), False, dict(padding=1, groups=8), CL, False),
    ("2d sliced input", (2, 3, 12, 10), (4, 3, 3, 2), True, {}, "slice", False),
    ("2d trailing input dropped", (1, 2, 7, 7), (3, 2, 2, 2), False, dict(stride=3), None, False),
    ("2d same, even kernel", (1, 2, 6, 5), (3, 2, 4, 4), True, dict(padding="same"), None, False),
    ("2d transposed", (2, 4, 5, 6), (4, 3, 3, 3), True, dict(stride=2, padding=1, output_padding=1), None, True),
    ("2d transposed groups dilation", (1, 4, 3, 4), (4, 2, 2, 3), False, dict(stride=2, groups=2, dilation=(1, 2)), None, True),
    ("1d stride dilation", (2, 3, 11), (4, 3, 3), True, dict(stride=2, padding=1, dilation=2), None, False),
    ("1d depthwise", (2, 5, 9), (5, 1, 4), False, dict(padding=3, groups=5), None, False),
    ("1d transposed", (2, 3, 7), (3, 5, 4), True, dict(stride=3, padding=1), None, True),
    ("3d stride pad dilation", (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), True, dict(stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2)), None, False),
    ("3d depthwise channels-last", (1, 4, 4, 5, 3), (4, 1, 3, 3, 3), True, dict(padding=1, groups=4), CL3, False),
    ("3d transposed", (1, 2, 3, 3, 2), (2, 3, 2, 2, 2), False, dict(stride=2), None, True),
]


def _conv(x, w, b, kwargs, transposed):
    k = w.dim() - 2
    if transposed:
        return {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[k](x, w, b, **kwargs)
    return {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[k](x, w, b, **kwargs)


def _tolerance(dtype, k):
    """(rtol, atol) against the f64 truth: one rounding of the result plus f32 accumulation error."""
    if dtype == torch.float64:
        return 1e-12, 1e-12 * k
    if dtype == torch.float32:
        return 2e-6, 4e-6 * math.sqrt(k)
    eps = torch.finfo(dtype).eps  # one ulp at 1: covers the half-ulp rounding and the f32 sum
    return eps, eps + 4e-6 * math.sqrt(k)


def _check(fn, args, ks, names, dtype, device):
    """Compiles fn whole (coil must not warn) and compares each output with fn in f64."""
    torch._dynamo.reset()
    with torch.no_grad():
        truth = fn(*[a.double() if a is not None and a.is_floating_point() else a for a in args])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(fn, backend="coil")(*args)
    said = [str(w.message) for w in caught if "coil" in str(w.message)]
    assert not said, f"coil did not compile it whole: {said}"
    for g, t, k, name in zip(got, truth, ks, names):
        assert (g.dtype, g.shape, g.device.type) == (dtype, t.shape, device), name
        if not dtype.is_floating_point:
            assert torch.equal(g, t), name
            continue
        rtol, atol = _tolerance(dtype, k)
        torch.testing.assert_close(g.double(), t, rtol=rtol, atol=atol, msg=lambda m: f"{name} ({dtype}): {m}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_convolutions_match_f64(dtype, device):
    g = torch.Generator().manual_seed(7)
    args, ks = [], []
    for _, xs, ws, bias, kwargs, fmt, transposed in CONVS:
        x = torch.randn(xs, generator=g).to(dtype).to(device)
        if fmt == "slice":
            x = x[:, :, ::2, 1:]
        elif fmt is not None:
            x = x.to(memory_format=fmt)
        w = torch.randn(ws, generator=g).to(dtype).to(device)
        b = torch.randn(ws[1 if transposed else 0] * (kwargs.get("groups", 1) if transposed else 1), generator=g)
        args += [x, w, b.to(dtype).to(device) if bias else None]
        taps = math.prod(ws[2:])
        ks.append((ws[0] // kwargs.get("groups", 1) if transposed else ws[1]) * taps)

    def fn(*a):
        return tuple(_conv(a[3 * i], a[3 * i + 1], a[3 * i + 2], c[4], c[6]) for i, c in enumerate(CONVS))

    _check(fn, args, ks, [c[0] for c in CONVS], dtype, device)


# Integer products: PyTorch has them on the CPU only (CUDA's addmm takes no int).
@pytest.mark.parametrize("dtype,device", [(d, dev) for dev in DEVICES for d in FLOATS] + [(torch.int32, "cpu")])
def test_matrix_products_match_f64(dtype, device):
    g = torch.Generator().manual_seed(11)

    def r(*shape):
        t = torch.randn(shape, generator=g)
        return (t * 4).round().to(dtype).to(device) if not dtype.is_floating_point else t.to(dtype).to(device)

    x, w, bias = r(5, 67), r(33, 67), r(33)  # a Linear layer: the weight transposed
    a, b = r(3, 7, 129), r(3, 129, 9)
    m1, m2, c = r(6, 257), r(257, 10), r(6, 10)
    q, kt = r(2, 4, 5, 16), r(2, 1, 16, 7)  # matmul broadcasting a batch dim
    s = r(12, 20)[::2, ::2]  # strided operands
    names = ["linear", "bmm", "addmm beta alpha", "broadcast matmul", "strided mm"]
    ks = [67, 129, 257, 16, 10]

    def fn(x, w, bias, a, b, m1, m2, c, q, kt, s):
        beta, alpha = (0.5, 2.0) if dtype.is_floating_point else (2, 3)
        return (F.linear(x, w, bias), torch.bmm(a, b), torch.addmm(c, m1, m2, beta=beta, alpha=alpha), q @ kt, s @ s.t())

    _check(fn, (x, w, bias, a, b, m1, m2, c, q, kt, s), ks, names, dtype, device)


class _ConvBlock(torch.nn.Module):
    """What cuDNN's fused epilogue takes (schedule/fuse_conv_epilogues.h): conv -> batch norm
    (eval, statistics that are not the identity) -> relu; conv + bias -> relu; ResNet's residual
    block with a downsample shortcut (its own conv and batch norm) and with an identity one; and a
    convolution whose raw result is also returned (no fusion: it must still be right)."""

    def __init__(self, c):
        super().__init__()
        n = torch.nn
        self.c1, self.b1 = n.Conv2d(3, c, 3, padding=1, bias=False), n.BatchNorm2d(c)
        self.c2 = n.Conv2d(c, c, 3, padding=1)
        self.c3, self.b3 = n.Conv2d(c, 2 * c, 1, bias=False), n.BatchNorm2d(2 * c)
        self.down, self.bd = n.Conv2d(c, 2 * c, 1, stride=1, bias=False), n.BatchNorm2d(2 * c)
        self.c4, self.b4 = n.Conv2d(2 * c, 2 * c, 3, padding=1, bias=False), n.BatchNorm2d(2 * c)
        self.c5 = n.Conv2d(2 * c, 2 * c, 1)
        for m in self.modules():
            if isinstance(m, n.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)
            if isinstance(m, n.Conv2d):
                m.weight.data.normal_(0, 1 / math.sqrt(m.weight[0].numel()))

    def forward(self, x):
        r = F.relu(self.b1(self.c1(x)))
        h = F.relu(self.c2(r))
        y = F.relu(self.b3(self.c3(h)) + self.bd(self.down(h)))
        z = F.relu(self.b4(self.c4(y)) + y)
        raw = self.c5(z)
        return z, raw, F.relu(raw) * 2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_convolution_epilogues_match_f64(dtype, device):
    torch.manual_seed(11)
    model = _ConvBlock(16).eval()
    x = torch.randn(2, 3, 12, 10)
    with torch.no_grad():
        truth = model.double()(x.double())
        model = model.to(dtype).to(device)
        torch._dynamo.reset()
        got = torch.compile(model, backend="coil")(x.to(dtype).to(device))
    # Each output holds a few roundings of O(1) intermediates (fused: one), on top of f32 sums.
    eps = torch.finfo(dtype).eps if dtype != torch.float32 else 1e-6
    for g, t in zip(got, truth):
        assert g.dtype == dtype
        torch.testing.assert_close(g.double().cpu(), t, rtol=4 * eps, atol=8 * eps + 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_convolution_epilogues_keep_nans(device):
    """relu(nan) is nan in PyTorch: a fused epilogue's relu must keep it too."""
    torch.manual_seed(12)
    model = _ConvBlock(8).eval().to(device)
    x = torch.randn(1, 3, 6, 5, device=device)
    x[0, 1, 2, 3] = float("nan")
    with torch.no_grad():
        want = model(x)
        torch._dynamo.reset()
        got = torch.compile(model, backend="coil")(x)
    for g, w in zip(got, want):
        assert torch.equal(torch.isnan(g), torch.isnan(w))
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, equal_nan=True)
