"""Training through torch.compile(backend="coil"): AOTAutograd's joint graph, partitioned, with
the forward and the backward both compiled by coil. Gradients of every parameter and input are
checked against eager (and against f64 where a 16-bit or reordered sum makes eager itself only
one answer among several), and so are the backward ops coil decomposes.
"""
import copy
import json
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

coil = pytest.importorskip("coil")
from conftest import TORCH_DEVICES, coil_fallbacks, record_runners  # noqa: E402

aten = torch.ops.aten
DEVICES = TORCH_DEVICES
EPS = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def close_to_f64(got, reference, dtype, length):
    """`got` within a few roundings of `dtype` of the f64 answer, for sums of `length` terms:
    relative to the answer's largest element (cancellation makes single elements' relative
    error meaningless)."""
    scale = max(reference.abs().max().item(), 1e-30)
    tol = 8 * EPS[dtype] * max(length, 1) ** 0.5 + (2 * EPS[dtype] if dtype != torch.float32 else 0)
    torch.testing.assert_close(got.double(), reference, rtol=0, atol=tol * scale)


# -- the backward ops coil decomposes ---------------------------------------------------------

CONV_CASES = {
    # name: x shape, w shape, stride, padding, dilation, groups, transposed, output_padding
    "3x3": ((2, 5, 9, 11), (7, 5, 3, 3), [1, 1], [1, 1], [1, 1], 1, False, [0, 0]),
    "strided-odd": ((3, 4, 10, 9), (6, 4, 3, 2), [2, 3], [1, 0], [1, 1], 1, False, [0, 0]),
    "dilated-grouped": ((2, 6, 12, 10), (9, 2, 3, 3), [1, 2], [2, 1], [2, 1], 3, False, [0, 0]),
    "depthwise-multiplier": ((2, 4, 8, 8), (8, 1, 3, 3), [2, 2], [1, 1], [1, 1], 4, False, [0, 0]),
    "1x1-strided": ((2, 8, 7, 7), (5, 8, 1, 1), [2, 2], [0, 0], [1, 1], 1, False, [0, 0]),
    "1x1-grouped": ((2, 8, 5, 6), (6, 4, 1, 1), [1, 1], [0, 0], [1, 1], 2, False, [0, 0]),
    "1d": ((3, 4, 17), (6, 4, 5), [2], [2], [1], 1, False, [0]),
    "3d": ((1, 3, 5, 6, 4), (4, 3, 2, 3, 2), [1, 2, 1], [1, 1, 0], [1, 1, 2], 1, False, [0, 0, 0]),
    "transposed": ((2, 6, 5, 7), (6, 4, 3, 3), [2, 2], [1, 0], [1, 1], 1, True, [1, 0]),
    "transposed-grouped": ((2, 4, 6, 5), (4, 3, 2, 3), [1, 2], [0, 1], [2, 1], 2, True, [0, 1]),
}


def conv_problem(case, dtype, device, channels_last=False):
    x_shape, w_shape, stride, padding, dilation, groups, transposed, output_padding = CONV_CASES[case]
    g = torch.Generator().manual_seed(len(case))
    x = torch.randn(x_shape, generator=g)
    w = torch.randn(w_shape, generator=g)
    y = aten.convolution(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
    dy = torch.randn(y.shape, generator=g)
    tensors = [t.to(device, dtype) for t in (dy, x, w)]
    if channels_last and x.dim() == 4:
        tensors = [t.to(memory_format=torch.channels_last) for t in tensors]
    params = (stride, padding, dilation, transposed, output_padding, groups)
    return tensors, params


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case,layout", [(c, "contiguous") for c in sorted(CONV_CASES)] +
                         [(c, "channels_last") for c in sorted(CONV_CASES) if len(CONV_CASES[c][0]) == 4])
def test_convolution_backward_matches_f64(device, dtype, case, layout):
    """convolution_backward, which coil decomposes (the input's gradient a transposed
    convolution, the weight's the input's windows contracted with dy), against ATen's in f64:
    all three gradients, each within a few roundings of the dtype for its sum's length. Also over
    channels-last operands (a backward graph's saved activations, laid out so by coil's forward),
    which the decomposition reads through views of their own strides."""
    (dy, x, w), (stride, padding, dilation, transposed, output_padding, groups) = conv_problem(
        case, dtype, device, channels_last=layout == "channels_last")
    bias = [w.shape[1] * groups if transposed else w.shape[0]]

    def f(dy, x, w):
        return aten.convolution_backward(dy, x, w, bias, stride, padding, dilation, transposed, output_padding, groups,
                                         [True, True, True])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="coil")(dy, x, w)
    assert not coil_fallbacks(caught)
    want = f(*(t.cpu().double().contiguous() for t in (dy, x, w)))
    k = w[0, 0].numel()
    lengths = [w.shape[0 if not transposed else 1] * k, dy[:, 0].numel(), dy[:, 0].numel()]
    for got_t, want_t, length, like in zip(got, want, lengths, (x, w, None)):
        assert got_t.dtype == dtype and got_t.shape == want_t.shape
        close_to_f64(got_t.cpu(), want_t, dtype, length)


@pytest.mark.parametrize("case", ["1x1-grouped", "1x1-strided"])
def test_a_1x1_weight_gradient_reads_channels_last_operands_in_place(case):
    """A 1x1 convolution's weight gradient over channels-last dy and x is dy^T x over their
    [N*H*W, C] matrices as they lie: no copy before the product (one of the subsampled x for a
    strided convolution)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from coil import _gradients

    (dy, x, w), (stride, padding, dilation, transposed, output_padding, groups) = conv_problem(
        case, torch.float32, "cpu", channels_last=True)
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in (dy, x, w)]
        traced = make_fx(lambda dy, x, w: _gradients.convolution_backward(
            dy, x, w, None, stride, padding, dilation, transposed, output_padding, groups, [False, True, False]))(*fakes)
    copies = [n for n in traced.graph.nodes if n.target in (aten.clone.default, aten._unsafe_view.default)]
    assert len(copies) == (1 if case == "1x1-strided" else 0), traced.graph


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", [[True, False, False], [False, True, False], [False, True, True]])
def test_convolution_backward_computes_only_what_the_mask_asks(device, mask):
    (dy, x, w), (stride, padding, dilation, transposed, output_padding, groups) = conv_problem("3x3", torch.float32, device,
                                                                                               channels_last=True)

    def f(dy, x, w):
        return aten.convolution_backward(dy, x, w, [w.shape[0]], stride, padding, dilation, transposed, output_padding,
                                         groups, mask)

    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # eager's f32 in f32, as coil's
        want = f(dy, x, w)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="coil")(dy, x, w)
    assert not coil_fallbacks(caught)
    for g, e in zip(got, want):
        assert (g is None) == (e is None)
        if e is not None:
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


POOL_CASES = {
    # name: x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    "overlapping": ((2, 3, 9, 11), [3, 3], [2, 2], [1, 1], False, True, None),
    "ceil-excluding-pad": ((2, 3, 10, 7), [3, 2], [2, 2], [1, 1], True, False, None),
    "divisor": ((1, 4, 8, 8), [2, 2], [], [0, 0], False, True, 3),
    "unbatched": ((3, 7, 6), [3, 3], [1, 2], [1, 0], True, True, None),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_avg_pool2d_backward_gathers_each_elements_windows(device, dtype, case):
    shape, k, stride, pad, ceil, include, divisor = POOL_CASES[case]
    g = torch.Generator().manual_seed(9)
    x = torch.randn(shape, generator=g).to(device, dtype)
    out = F.avg_pool2d(x, k, stride or None, pad, ceil, include, divisor)
    grad = torch.randn(out.shape, generator=g).to(device, dtype)

    def f(grad, x):
        return aten.avg_pool2d_backward(grad, x, k, stride, pad, ceil, include, divisor)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="coil")(grad, x)
    assert not coil_fallbacks(caught)
    want = f(grad.double(), x.double())
    close_to_f64(got.cpu(), want.cpu(), dtype, k[0] * k[1])
    assert got.stride() == f(grad, x).stride()


# -- models: every gradient against eager -----------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(32, 64), nn.Linear(64, 48), nn.Linear(48, 10)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    """Convolutions (strided, grouped), BatchNorm in train mode (running statistics updated),
    pools of both kinds."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.bn2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=4, bias=False), nn.BatchNorm2d(16)
        self.c3 = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.c1(x))), 2)
        x = F.avg_pool2d(F.silu(self.bn2(self.c2(x))), 3, 1, 1, count_include_pad=False)
        return self.fc(F.adaptive_avg_pool2d(self.c3(x), 1).flatten(1))


class GPTBlock(nn.Module):
    """A GPT-2 block over token embeddings: layer norms, fused attention, tanh-GELU MLP."""

    def __init__(self, d=64, heads=4, vocab=97, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(32, d)
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.emb(idx) + self.pos(torch.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], 2)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, -1)))
        x = x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))
        logits = self.head(x)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


class LlamaBlock(nn.Module):
    """RMSNorm, rotary embeddings, grouped-query attention, SwiGLU."""

    def __init__(self, d=64, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.n1, self.n2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.q, self.k = nn.Linear(d, d, bias=False), nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v, self.o = nn.Linear(d, kv_heads * self.hd, bias=False), nn.Linear(d, d, bias=False)
        self.gate, self.up, self.down = nn.Linear(d, 96, bias=False), nn.Linear(d, 96, bias=False), nn.Linear(96, d, bias=False)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w

    def rotate(self, x):
        t = x.shape[2]
        freq = 1.0 / 10000 ** (torch.arange(0, self.hd, 2, device=x.device).float() / self.hd)
        angle = torch.outer(torch.arange(t, device=x.device).float(), freq)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        a, b = x[..., ::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)

    def forward(self, x):
        bsz, t, d = x.shape
        h = self.rms(x, self.n1)
        q = self.rotate(self.q(h).view(bsz, t, self.heads, self.hd).transpose(1, 2))
        k = self.rotate(self.k(h).view(bsz, t, self.kv_heads, self.hd).transpose(1, 2))
        v = self.v(h).view(bsz, t, self.kv_heads, self.hd).transpose(1, 2)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(bsz, t, d))
        h = self.rms(x, self.n2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def model_case(name, device, dtype):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name == "mlp":
        return MLP(), [torch.randn(12, 32, generator=g)]
    if name == "cnn":
        return CNN(), [torch.randn(4, 3, 16, 16, generator=g)]
    if name == "gpt":
        return GPTBlock(), [torch.randint(0, 97, (2, 24), generator=g), torch.randint(0, 97, (2, 24), generator=g)]
    if name == "llama":
        return LlamaBlock(), [torch.randn(2, 20, 64, generator=g)]
    raise KeyError(name)


def step(model, inputs, compiled):
    """One forward and backward: (loss, gradients of the parameters and of the float inputs)."""
    model.zero_grad(set_to_none=True)
    out = compiled(*inputs)
    loss = out if out.dim() == 0 else (out.float() * torch.linspace(-1, 1, out.numel(), device=out.device).view(out.shape)).sum()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    grads.update({f"input{i}": t.grad.detach().clone() for i, t in enumerate(inputs) if t.grad is not None})
    return loss.detach(), grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt", "llama"])
def test_model_gradients_match_eager(device, dtype, name):
    """Every parameter's and float input's gradient, and the loss, of one step compiled by coil
    against eager's, with no part left to eager; BatchNorm's running statistics (updated in
    train mode) too. bf16: each against the f32 model's, within bf16's roundings."""
    if dtype == torch.bfloat16 and name == "gpt":
        pytest.skip("the GPT block's bf16 case runs under autocast (test_autocast_training)")
    model, inputs = model_case(name, device, dtype)
    model = model.to(device)
    trained = copy.deepcopy(model).to(dtype)

    def prepared(dtype):
        # Fresh leaves each time (`to` returns the tensor itself where nothing changes).
        return [t.to(device, dtype).clone().requires_grad_(True) if t.is_floating_point() else t.to(device) for t in inputs]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss, grads = step(trained, prepared(dtype), torch.compile(trained, backend="coil"))
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # eager's f32 convolutions in f32, as coil's
        want_loss, want = step(model, prepared(torch.float32), model)
    # A gradient that cancels (a bias before BatchNorm: 0 in exact arithmetic) is rounding noise
    # of the size of the others.
    floor = 0.05 * max(g.abs().max().item() for g in want.values())
    if dtype == torch.float32:
        torch.testing.assert_close(loss, want_loss, rtol=2e-4, atol=2e-5)
        for key, g in grads.items():
            scale = max(want[key].abs().max().item(), floor)
            torch.testing.assert_close(g, want[key], rtol=2e-4, atol=2e-5 * scale, msg=lambda m: f"{key}: {m}")
    else:
        # bf16: no further from the f32 model's gradients than eager's bf16 step, within a margin.
        eager = copy.deepcopy(model).to(dtype)
        eager_loss, eager_grads = step(eager, prepared(dtype), eager)
        assert set(grads) == set(want) == set(eager_grads)
        for key, g in list(grads.items()) + [("loss", loss)]:
            ref = want_loss if key == "loss" else want[key]
            ours = (g.float() - ref).abs().max().item()
            theirs = ((eager_loss if key == "loss" else eager_grads[key]).float() - ref).abs().max().item()
            scale = max(ref.abs().max().item(), floor if key != "loss" else 0.0)
            assert ours <= 2 * theirs + 2 * EPS[dtype] * scale, f"{key}: coil off by {ours}, eager by {theirs}"
    rtol, atol = (1e-4, 1e-5) if dtype == torch.float32 else (5e-2, 2e-2)
    for (n, b), (_, e) in zip(trained.named_buffers(), model.named_buffers()):  # BatchNorm's running statistics
        torch.testing.assert_close(b.float(), e.float(), rtol=rtol, atol=atol, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_saved_activations_keep_the_layout_coil_gives_them(device, monkeypatch):
    """A training forward's saved activations come out of coil channels-last beside its
    convolutions (their strides are coil's to pick), AOTAutograd traces the backward with them
    laid out so, and the backward takes them as they are: no copy at either boundary. Loss,
    gradients and running statistics as eager's."""
    runners = record_runners(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 24, 1, bias=False),
                          nn.BatchNorm2d(24), nn.ReLU(), nn.Conv2d(24, 24, 3, stride=2, padding=1), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(24, 5)).to(device)
    eager = copy.deepcopy(model)
    x = torch.randn(4, 3, 12, 10, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = torch.compile(model, backend="coil")(x).square().mean()
        loss.backward()
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    forward, backward = runners
    strides = forward.compiled.output_strides()
    picked = [tuple(strides[k]) for _, k in forward.entry["any_layout"] if len(strides[k]) == 4]
    if device == "cpu":  # the CPU keeps the traced layouts (see _backend._compile_forward)
        assert not forward.entry["any_layout"], forward.entry["any_layout"]
    else:
        # channels-last (C innermost) where a library convolution is near (a small one may stay a
        # loop kernel over the traced layout)
        assert sum(s[1] == 1 for s in picked) >= 2, picked
    taken = [tuple(i["meta"]["strides"]) for i in json.loads(backward.entry["program"])["inputs"]]
    assert all(s in taken for s in picked), (picked, taken)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        want = eager(x).square().mean()
        want.backward()
    torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-5)
    floor = max(q.grad.abs().max().item() for q in eager.parameters())  # a bias before BatchNorm: rounding noise
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4 * floor, msg=lambda m: f"{n}: {m}")
    for (n, b), e in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(b, e, rtol=1e-4, atol=1e-5, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_a_loss_saves_row_statistics_not_its_log_softmax(device, monkeypatch):
    """A bf16-autocast head and cross-entropy: the forward graph saves the logits' row maximum and
    log-sum (its softmax decomposed, as Inductor's is), not an f32 [rows, classes] log-softmax;
    the backward computes it again. Loss and gradients as eager's."""
    from coil import _backend

    saved = []
    compile_forward = _backend._compile_forward

    def recording(gm, *args, **kwargs):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        saved.append([(tuple(v.shape), v.dtype) for v in (a.meta.get("val") for a in out.args[0] if a is not None)
                      if isinstance(v, torch.Tensor)])
        return compile_forward(gm, *args, **kwargs)

    monkeypatch.setattr(_backend, "_compile_forward", recording)
    torch.manual_seed(0)
    head = nn.Linear(48, 1001).to(device)
    x = torch.randn(64, 48, device=device)
    y = torch.randint(0, 1001, (64,), device=device)
    y[3] = -100  # ignored

    def loss_of(model):
        with torch.autocast(device, dtype=torch.bfloat16):
            return F.cross_entropy(model(x), y)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = torch.compile(loss_of, backend="coil")(head)
        loss.backward()
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    assert saved and not any(shape == (64, 1001) and dtype == torch.float32 for graph in saved for shape, dtype in graph), saved
    grads = {n: p.grad.clone() for n, p in head.named_parameters()}
    head.zero_grad(set_to_none=True)
    want = loss_of(head)
    want.backward()
    torch.testing.assert_close(loss, want, rtol=1e-3, atol=1e-3)
    for n, p in head.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, rtol=2e-2, atol=2e-3 * p.grad.abs().max().item(), msg=lambda m: f"{n}: {m}")


def test_parts_around_library_calls_keep_each_node_beside_its_readers():
    """_segments: the nodes PyTorch runs (here a sort) delimit the parts coil compiles. A node
    joins the part of its first reader (cos, read after the sort: not computed before it and
    carried), and one only the output reads joins the part of its last input (v * y: a weight
    gradient's place, beside what it reads, not in a part at the end)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from coil import _backend

    def f(x, y):
        m = x * 2
        v = torch.sort(m).values
        c = torch.cos(y)
        r = torch.relu(v) + c
        g = v * y  # read only by the output
        e = torch.exp(y)  # read only by the output
        return r, g, e

    gm = make_fx(f)(torch.randn(8), torch.randn(8))
    parts = _backend._segments(gm, torch.device("cpu"))
    where = {n.target: p.id for p in parts for n in p.nodes}
    assert where[aten.cos.default] == 1 and where[aten.relu.default] == 1
    assert where[aten.exp.default] == 0
    muls = [p.id for p in parts for n in p.nodes if n.target == aten.mul.Tensor]
    assert sorted(muls) == [0, 1], muls  # x * 2 before the sort, v * y after it


def test_a_product_read_late_stays_beside_its_inputs():
    """_segments: a weight gradient whose sum with another is made after a library call (GPT-2's
    tied head and embedding) is computed beside the output gradient it reads, which dies there;
    only its result is carried to the later part."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from coil import _backend

    def f(g, h, w, x):
        dw = torch.mm(g.t(), h)  # read only through the sum at the end
        late = torch.sort(x).values
        return dw.float() + late.sum(), torch.mm(g, w)

    gm = make_fx(f)(torch.randn(16, 8), torch.randn(16, 4), torch.randn(8, 5), torch.randn(8))
    parts = _backend._segments(gm, torch.device("cpu"))
    where = {n.name: p.id for p in parts for n in p.nodes}
    assert where["mm"] == where["mm_1"] == 0, where
    assert where["add"] == 1, where


def test_a_tuples_items_stay_in_its_part():
    """_segments: a getitem read only after a library call stays in its tuple's part (a tuple
    cannot cross parts; the part reading it would be left to eager)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from coil import _backend

    def f(x):
        mx, idx = torch.max(x, 0)
        v = torch.sort(x * mx).values
        return v + idx

    gm = make_fx(f)(torch.randn(8, 4))
    parts = _backend._segments(gm, torch.device("cpu"))
    where = {n.name: p.id for p in parts for n in p.nodes}
    assert where["max_1"] == where["getitem"] == where["getitem_1"], where
