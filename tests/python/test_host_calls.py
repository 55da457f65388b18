"""PyTorch's library kernels as steps of coil's plan (coil.torch_call, _library.torch_call): a
graph whose only nodes coil does not generate are library calls (attention's fused kernels in
training, sorting, top-k) compiles to one program, not to parts around the calls, and gets
eager's values and gradients. The plan takes the calls' results as its buffers and lets go of
each after its last reader.
"""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

coil = pytest.importorskip("coil")
from conftest import TORCH_DEVICES, coil_fallbacks, record_runners  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout=0.0):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.norm, self.qkv, self.out = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return x + self.out(y.transpose(1, 2).reshape(b, t, d))


def _grads(model, x):
    return [p.grad for p in model.parameters()] + [x.grad]


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_attention_training_compiles_to_one_forward_and_one_backward(device, monkeypatch):
    """Two attention blocks: before, each attention call split the forward and the backward
    into three parts (six runs a step); now each graph is one program whose plan calls the
    attention kernel and its backward, with eager's loss and gradients."""
    torch.manual_seed(0)
    model = nn.Sequential(Attention(64, 4), Attention(64, 4)).to(device)
    eager = copy.deepcopy(model)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(2, 48, 64, device=device, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    runners = record_runners(monkeypatch)
    compiled = torch.compile(model, backend="coil")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast(device, dtype=dtype, enabled=device == "cuda"):
            loss = compiled(x).float().square().mean()
        loss.backward()
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    with torch.autocast(device, dtype=dtype, enabled=device == "cuda"):
        expected = eager(x_eager).float().square().mean()
    expected.backward()
    assert len(runners) == 2 and all(r.entry["hosted"] for r in runners), [type(r).__name__ for r in runners]
    for r in runners:
        assert r.compiled.graph_text().count("torch_call") == 2
    tol = dict(rtol=2e-2, atol=2e-2) if device == "cuda" else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss, expected, **tol)
    for got, want in zip(_grads(model, x), _grads(eager, x_eager)):
        torch.testing.assert_close(got, want, rtol=tol["rtol"], atol=tol["atol"] * want.abs().max().item())
    if device == "cuda":
        host = [r.compiled.stats()["host"] for r in runners]
        assert [h["torch_calls"] for h in host] == [2, 2], host


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_a_training_loop_with_library_calls_follows_eager(device):
    """Five steps of SGD through the hosted attention (calls whose results the plan holds and
    releases every step): the losses stay eager's."""
    torch.manual_seed(1)
    model = nn.Sequential(Attention(32, 2), Attention(32, 2)).to(device)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="coil")
    x = torch.randn(3, 40, 32, device=device)
    losses = []
    for m in (compiled, eager):
        params = (model if m is compiled else eager).parameters()
        opt = torch.optim.SGD(params, lr=0.05)
        run = []
        for _ in range(5):
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            run.append(loss.item())
        losses.append(run)
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_sorting_between_compiled_ops_runs_in_one_program(device, monkeypatch):
    """Inference with sort and topk (library kernels) between pointwise ops and a reduction:
    one program, eager's values and indices, the sorted values read again after the call."""
    def f(x):
        values, order = torch.sort(torch.sin(x) * 3, dim=-1, descending=True)
        top, where = torch.topk(values.cos() + x, k=5, dim=-1)
        return values[..., :7] * 2 + 1, order, top.sum(-1), where

    x = torch.randn(6, 33, device=device)
    runners = record_runners(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="coil")(x)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    assert len(runners) == 1 and runners[0].entry["hosted"]
    for g, w in zip(got, f(x)):
        torch.testing.assert_close(g, w)


def test_a_library_call_that_returns_another_layout_is_copied_into_the_traced_one():
    """The function the plan calls hands back each output in its traced strides and never in
    an input's memory (the plan reuses that once the call is done)."""
    from coil import _library

    def f(x):
        s = torch.sort(x.t(), dim=0)
        return s.values, s.indices

    cpu = torch.device("cpu")
    gm = torch.fx.experimental.proxy_tensor.make_fx(f, tracing_mode="fake")(torch.randn(5, 4))
    node = next(n for n in gm.graph.nodes if n.op == "call_function" and _library.is_library_call(n))
    program_node, call = _library.torch_call(node, 0, coil._fx.COIL_DTYPES, cpu, _library.Stash(), {})
    assert program_node["target"] == "torch.ops.coil.torch_call.default"
    x = torch.randn(5, 4)
    traced = [node.meta["val"][i] for i in (0, 1)]
    for (out, ptr), want, expected in zip(call([x.t()]), traced, torch.sort(x.t(), dim=0)):
        assert out.stride() == want.stride() and out.data_ptr() == ptr
        torch.testing.assert_close(out, expected)

    # An op whose schema lets its result alias its input (view_as_real) hands back coil's memory:
    # the function copies it out, since coil reuses that memory once the call is done.
    viewing = torch.fx.experimental.proxy_tensor.make_fx(torch.view_as_real, tracing_mode="fake")(torch.randn(3, dtype=torch.complex64))
    node = next(n for n in viewing.graph.nodes if n.op == "call_function")
    _, call = _library.torch_call(node, 0, coil._fx.COIL_DTYPES, cpu, _library.Stash(), {})
    z = torch.randn(3, dtype=torch.complex64)
    [(out, ptr)] = call([z])
    assert out.untyped_storage().data_ptr() != z.untyped_storage().data_ptr() and out.data_ptr() == ptr
    torch.testing.assert_close(out, torch.view_as_real(z))


@pytest.mark.parametrize("device", TORCH_DEVICES)
def test_a_library_call_that_fails_in_the_plan_runs_the_graph_in_eager(device, monkeypatch):
    """A PyTorch error inside the plan's call comes out of the run as coil's error: the graph
    then runs in eager, with one warning, and the values are eager's."""
    from coil import _library

    made = _library.torch_call

    def failing(*args):
        program_node, call = made(*args)

        def broken(tensors):
            raise RuntimeError("a library kernel failed")
        return program_node, broken

    monkeypatch.setattr(_library, "torch_call", failing)

    def f(x):
        return torch.sort(x.exp(), dim=-1).values * 2

    x = torch.randn(4, 9, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="coil")(x)
    messages = coil_fallbacks(caught)
    assert len(messages) == 1 and "a library kernel failed" in messages[0], messages
    torch.testing.assert_close(got, f(x))


def test_values_coil_cannot_hold_pass_around_its_buffers(monkeypatch):
    """Library calls' values coil does not hold (on the GPU: attention's random state, uint64 or
    of another device; here int64, made unholdable for the test) go around its buffers: a
    placeholder only library calls read is taken from the call's arguments, and a result only
    the output reads is handed back from the stash (_library.Stash); the graph is one program."""
    from coil import _library

    holds = _library.static
    monkeypatch.setattr(_library, "static", lambda value, device: holds(value, device) and value.dtype != torch.int64)

    def f(w, indices, offsets):
        bag = F.embedding_bag(indices, w.sin(), offsets, mode="sum")
        values, order = torch.sort(bag * 2, dim=-1)
        return values + 1, order

    w, indices, offsets = torch.randn(10, 6), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5])
    runners = record_runners(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(f, backend="coil")
        for _ in range(2):
            got = compiled(w, indices, offsets)
            for g, e in zip(got, f(w, indices, offsets)):
                torch.testing.assert_close(g, e)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    assert len(runners) == 1 and runners[0].entry["hosted"]
    recipe = runners[0].entry["recipe"]
    assert recipe[1][0] == "stash", recipe
    assert runners[0].entry["per_call"] == [0]  # the indices and offsets never enter coil
    assert runners[0].stash.values == {} and runners[0].stash.args is None  # nothing kept past the run


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.skipif("cuda" not in TORCH_DEVICES, reason="no GPU"))])
def test_attention_dropout_draws_eagers_mask_and_the_backward_reuses_it(device, monkeypatch):
    """Attention with dropout in training: the fused kernel draws its mask from PyTorch's
    generator and saves its random state (traced on the meta device) for the backward, which
    coil passes around its buffers (Stash). With the same seed, as the only random op of the
    step, the mask is eager's: loss and gradients match eager's (a backward with another mask
    would not), and the graphs are still one program each."""
    torch.manual_seed(0)
    model = nn.Sequential(Attention(64, 4, dropout=0.3), Attention(64, 4, dropout=0.3)).to(device)
    eager = copy.deepcopy(model)
    x = torch.randn(2, 64, 64, device=device, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    runners = record_runners(monkeypatch)
    compiled = torch.compile(model, backend="coil")
    losses = []
    for m, inp in ((compiled, x), (eager, x_eager)):
        torch.manual_seed(1234)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = m(inp).float().square().mean()
        loss.backward()
        losses.append(loss)
    assert len(runners) == 2 and all(r.entry["hosted"] for r in runners)
    torch.testing.assert_close(losses[0], losses[1], rtol=2e-2, atol=2e-2)
    for got, want in zip(_grads(model, x), _grads(eager, x_eager)):
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2 * want.abs().max().item())
