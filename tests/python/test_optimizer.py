"""A compiled optimizer step and training loop: the _foreach_* ops torch.optim's foreach
implementations call, each decomposed into per-tensor ops coil compiles, against eager; whole
optimizers' steps (parameters and state updated in place); and a 20-step training loop whose
losses follow eager's.
"""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

coil = pytest.importorskip("coil")
from conftest import TORCH_DEVICES, coil_fallbacks  # noqa: E402
from coil import _foreach  # noqa: E402

DEVICES = TORCH_DEVICES

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def foreach_arguments(op, device, dtype):
    """Arguments for a _foreach_* overload from its schema: lists of three tensors of different
    shapes (positive where a domain asks for it), scalars, a list of scalars, a 0-d tensor."""
    g = torch.Generator().manual_seed(hash(str(op)) % 1000)
    shapes = [(5,), (3, 4), (2, 3, 2)]
    name = op._schema.name
    positive = any(k in name for k in ("log", "sqrt", "rsqrt", "pow", "acos", "asin", "lgamma", "div", "reciprocal"))

    def tensor(shape):
        t = torch.randn(shape, generator=g)
        return (t.abs() + 0.5 if positive else t).to(device, dtype)

    args = []
    for a in op._schema.arguments:
        if a.kwarg_only:
            continue
        kind = str(a.type)
        if kind == "List[Tensor]":
            args.append([tensor(s) for s in shapes])
        elif kind == "List[number]":
            args.append([0.5, 1.5, -2.0] if "pow" not in name else [2.0, 0.5, 3.0])
        elif kind == "Tensor":
            args.append(torch.tensor(1.3, device=device, dtype=dtype))
        elif kind == "number":
            args.append(2.0 if "pow" in name or a.name == "ord" else 0.7)
        elif kind in ("bool", "Optional[int]"):
            args.append(False if kind == "bool" else None)
        else:
            raise AssertionError(f"{op}: argument {a.name} of type {kind}")
    return args


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", sorted(_foreach.table(), key=str), ids=str)
def test_foreach_op_matches_eager(op, device, dtype):
    args = foreach_arguments(op, device, dtype)
    if op is torch.ops.aten._foreach_maximum.List:
        args[0][1][0, 0] = float("nan")  # NaN wins, as in eager
    want = op(*args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(lambda *a: op(*a), backend="coil")(*args)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    tol = 1e-5 if dtype == torch.float32 else 1.6e-2
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)  # a bias before BatchNorm: a gradient of noise Adam amplifies
        self.fc1, self.fc2 = nn.Linear(8 * 4 * 4, 32), nn.Linear(32, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc2(F.gelu(self.fc1(x.flatten(1))))


OPTIMIZERS = {
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4, foreach=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=True),
    "adamw-amsgrad": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True, foreach=True),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_training_loop_follows_eager(device, optimizer, monkeypatch):
    """20 steps of a compiled model and a compiled optimizer step against eager's from the same
    weights and data: the losses stay together, the parameters end together; nothing falls back.
    The new parameters, optimizer state and BatchNorm statistics are computed over the old ones
    (no copy after the run)."""
    from coil import _updates

    copied = []
    finish = _updates.finish

    def counting_finish(results, args, updates):
        copied.extend(str(args[p].shape) for i, p in updates if results[i] is not None)
        return finish(results, args, updates)

    monkeypatch.setattr(_updates, "finish", counting_finish)
    torch.manual_seed(0)
    model = Net().to(device)
    twin = copy.deepcopy(model)
    opt, twin_opt = OPTIMIZERS[optimizer](model.parameters()), OPTIMIZERS[optimizer](twin.parameters())
    compiled = torch.compile(model, backend="coil")

    @torch.compile(backend="coil")
    def update():
        opt.step()

    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(8, 3, 8, 8, generator=g).to(device), torch.randint(0, 5, (8,), generator=g).to(device))
            for _ in range(4)]
    losses, twin_losses = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(20):
            x, y = data[i % len(data)]
            opt.zero_grad()
            loss = F.cross_entropy(compiled(x), y)
            loss.backward()
            update()
            losses.append(loss.item())
            twin_opt.zero_grad()
            twin_loss = F.cross_entropy(twin(x), y)
            twin_loss.backward()
            twin_opt.step()
            twin_losses.append(twin_loss.item())
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    assert not copied, copied
    assert losses[-1] < losses[0]  # it trains
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(twin_losses), rtol=2e-3, atol=2e-4)
    for (n, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=5e-3, atol=5e-4, msg=lambda m: f"{n}: {m}")
    for (n, b), c in zip(model.named_buffers(), twin.buffers()):
        torch.testing.assert_close(b, c, rtol=5e-3, atol=5e-4, msg=lambda m: f"{n}: {m}")
