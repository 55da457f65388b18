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


def _programs_for_cuda(monkeypatch):
    """The list that each program the adapter makes from here on is appended to, made again for
    CUDA from the same (CPU) trace, with its example inputs: what a CUDA graph would get."""
    from coil import _fx

    made = []
    program = _fx.program

    def for_cuda(gm, input_values, frozen, device, *args, **kwargs):
        made.append((program(gm, input_values, frozen, torch.device("cuda"), *args, **kwargs), input_values))
        return program(gm, input_values, frozen, device, *args, **kwargs)

    monkeypatch.setattr(_fx, "program", for_cuda)
    return made


def test_step_counts_on_the_cpu_are_computed_on_the_host(monkeypatch):
    """A CUDA graph of an AdamW step whose step counts are 0-d CPU tensors (state made before
    the step was compiled: capturable stays False) adds to them on the host before the run
    (_host: the graph's prologue), as eager does; the kernels read the new counts, which go to
    the device together. Checked on the program made for CUDA from a CPU trace: the prologue is
    the counts' additions, the counts are no input of the program, the new ones are results of
    the prologue, and the prologue computes them."""
    from coil import _host

    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(s)) for s in [(8, 4), (4,), (3, 3)]]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-2, foreach=True)
    opt.step()  # the state, steps on the CPU

    @torch.compile(backend="coil")
    def step():
        opt.step()

    with monkeypatch.context() as m:
        made = _programs_for_cuda(m)
        step()
    entry, values = made[-1]
    counts = {i for i, v in enumerate(values) if v.dim() == 0}
    assert len(counts) == 3
    assert [s["op"] for s in entry["prologue"]] == ["aten.add.Scalar"] * 3
    assert {s["args"][0]["arg"] for s in entry["prologue"]} == counts
    assert not counts & set(entry["per_call"])
    assert sorted(step[1] for step in entry["recipe"] if step[0] == "host") == [0, 1, 2]
    real = [torch.tensor(2.0) if i in counts else None for i in range(len(values))]
    assert [v.item() for v in _host.Prologue(entry["prologue"])(real)] == [3.0] * 3
    assert [opt.state[p]["step"].item() for p in params] == [2.0] * 3


def test_a_graph_of_host_results_only_computes_them_in_coil(monkeypatch):
    """A CUDA graph whose only computed result is a 0-d CPU value (the rest its inputs) leaves
    coil nothing to compute were that value the host's: coil computes it, as before the prologue
    (a program has outputs)."""
    made = _programs_for_cuda(monkeypatch)
    f = torch.compile(lambda x, s: (x, s + 1), backend="coil")
    x, s = torch.randn(3), torch.tensor(2.0)
    out = f(x, s)
    assert out[0] is x and out[1].item() == 3.0
    entry, _ = made[-1]
    assert "prologue" not in entry and ("coil", 0) in entry["recipe"]


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.skipif("cuda" not in DEVICES, reason="no GPU"))])
def test_a_step_with_counts_on_the_cpu_never_waits_for_the_gpu(device):
    """The same on the GPU: AdamW's state made before the step was compiled has its counts on
    the CPU, which Dynamo moves to the parameters' device when it traces the step (torch 2.11's
    OptimizerVariable.move_step_if_cpu, whatever the backend). The compiled step then makes no
    PyTorch call that waits for the device, and four steps match eager's, counts included."""
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(s, device=device)) for s in [(64, 32), (32,), (17, 5)]]
    twins = [nn.Parameter(p.detach().clone()) for p in params]
    opt, twin_opt = torch.optim.AdamW(params, lr=1e-2, foreach=True), torch.optim.AdamW(twins, lr=1e-2, foreach=True)
    for o, ps in ((opt, params), (twin_opt, twins)):
        for p in ps:
            p.grad = torch.ones_like(p)
        o.step()
    assert opt.state[params[0]]["step"].device.type == "cpu"

    @torch.compile(backend="coil")
    def step():
        opt.step()

    g = torch.Generator(device=device).manual_seed(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step()  # compiles (a step with the gradients of ones, which the twin takes too)
        twin_opt.step()
        for _ in range(3):
            grads = [torch.randn(p.shape, device=device, generator=g) for p in params]
            for p, q, d in zip(params, twins, grads):
                p.grad, q.grad = d, d.clone()
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                step()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            twin_opt.step()
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    for p, q in zip(params, twins):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(opt.state[p][key], twin_opt.state[q][key], rtol=1e-5, atol=1e-6, check_device=False)
    assert opt.state[params[0]]["step"].device == params[0].device and opt.state[params[0]]["step"].item() == 5


def test_0d_values_go_to_the_device_together():
    """_host.to_device: each value at a 16-byte aligned element of one copy per dtype, the
    values and dtypes kept (here on the CPU, where no memory can be pinned: the pageable copy)."""
    from coil import _host

    values = [torch.tensor(1.5), torch.tensor(7, dtype=torch.int64), torch.tensor(True), torch.tensor(-2.0),
              torch.tensor(3, dtype=torch.int64)]
    moved = _host.to_device(values, torch.device("cpu"))
    assert [(m.dtype, m.item()) for m in moved] == [(v.dtype, v.item()) for v in values]
    assert all(m.dim() == 0 and m.data_ptr() % 16 == 0 for m in moved)
    assert moved[0].untyped_storage().data_ptr() == moved[3].untyped_storage().data_ptr()  # one copy a dtype
