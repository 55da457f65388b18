"""CUDA graphs through torch.compile: mode="reduce-overhead" (or options={"cuda_graphs": True})
has each compiled graph warm up once, capture a CUDA graph, then replay it. Against eager:
inputs that change values and addresses, outputs held across calls (never overwritten), a
static KV cache updated in place, training steps, and dynamic sizes. On the CPU the mode is
accepted and changes nothing."""
import copy
import warnings

import pytest
import torch
from torch import nn

import coil
from coil import _backend
from conftest import coil_fallbacks, record_runners

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


class Block(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


class Cache(nn.Module):
    """A static KV cache written at the positions given (the gpt-fast pattern) and read whole."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 32)
        self.register_buffer("cache", torch.zeros(16, 32))

    def forward(self, v, pos):
        self.cache.index_copy_(0, pos, self.proj(v))
        return self.cache.sum(1) * 2


def _graph_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, _backend.CudaGraphWarning)]


def _graph_stats(runners):
    return [r.compiled.stats()["cuda_graphs"] for r in runners]


def test_the_mode_turns_cuda_graphs_on_and_the_option_decides():
    assert _backend._check_options("reduce-overhead", None)["cuda_graphs"] is True
    assert "cuda_graphs" not in _backend._check_options(None, None)
    assert _backend._check_options("reduce-overhead", {"cuda_graphs": False})["cuda_graphs"] is False
    assert _backend._check_options(None, {"cuda_graphs": True})["cuda_graphs"] is True
    with pytest.raises(ValueError, match="not supported"):
        _backend._check_options("reduce-everything", None)


def test_reduce_overhead_on_the_cpu_runs_as_default():
    torch.manual_seed(0)
    model = Block()
    compiled = coil.compile(model, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(5, 64)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert not coil_fallbacks(caught) and not _graph_warnings(caught)


@cuda_only
def test_replays_follow_eager_as_inputs_change(monkeypatch):
    torch.manual_seed(0)
    model = Block().cuda()
    runners = record_runners(monkeypatch)
    compiled = coil.compile(model, mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for _ in range(12):
            x = torch.randn(8, 64, device="cuda")  # new values, at new addresses or at reused ones
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert not coil_fallbacks(caught) and not _graph_warnings(caught), caught
    (stats,) = _graph_stats(runners)
    assert stats["plain_runs"] == 1 and stats["replays"] == 11, stats  # a warm-up, then replays
    assert 1 <= stats["captures"] <= 2, stats


@cuda_only
def test_outputs_held_across_calls_keep_their_values(monkeypatch):
    torch.manual_seed(0)
    model = Block().cuda()
    runners = record_runners(monkeypatch)
    compiled = coil.compile(model, mode="reduce-overhead")
    inputs = [torch.randn(8, 64, device="cuda") for _ in range(9)]
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        held = [compiled(x) for x in inputs]  # every output kept
        for x, got in zip(inputs, held):
            torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    notes = _graph_warnings(caught)
    assert len(notes) == 1 and "still held" in notes[0], notes
    (stats,) = _graph_stats(runners)
    assert stats["graphs"] == 4 and stats["replays"] == 4 and stats["plain_runs"] == 5, stats
    del held
    with torch.no_grad():
        x = torch.randn(8, 64, device="cuda")
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert _graph_stats(runners)[0]["replays"] == 5


@cuda_only
def test_a_static_kv_cache_is_updated_in_place(monkeypatch):
    torch.manual_seed(0)
    model = Cache().cuda()
    eager = copy.deepcopy(model)
    runners = record_runners(monkeypatch)
    compiled = coil.compile(model, mode="reduce-overhead")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")  # one tensor, advanced in place
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for step in range(10):
            v = torch.randn(1, 32, device="cuda")
            got, want = compiled(v, pos), eager(v, pos)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(model.cache, eager.cache, rtol=1e-5, atol=1e-5, msg=f"step {step}")
            pos.add_(1)
    assert not coil_fallbacks(caught) and not _graph_warnings(caught), caught
    assert sum(s["replays"] for s in _graph_stats(runners)) >= 8


@cuda_only
def test_training_steps_with_cuda_graphs_follow_eager(monkeypatch):
    torch.manual_seed(0)
    model = Block().cuda()
    eager = copy.deepcopy(model)
    runners = record_runners(monkeypatch)
    compiled = coil.compile(model, mode="reduce-overhead")
    opt, opt_eager = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(6):
            x = torch.randn(16, 64, device="cuda")
            for m, o, f in ((model, opt, compiled), (eager, opt_eager, eager)):
                o.zero_grad()
                loss = f(x).square().mean()
                loss.backward()
                o.step()
            for (name, p), q in zip(model.named_parameters(), eager.parameters()):
                torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=f"step {step} {name}")
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    stats = _graph_stats(runners)
    assert len(stats) == 2 and all(s["replays"] >= 4 for s in stats), stats  # forward and backward


@cuda_only
def test_dynamic_sizes_are_captured_per_size(monkeypatch):
    torch.manual_seed(0)
    model = Block().cuda()
    runners = record_runners(monkeypatch)
    compiled = coil.compile(model, mode="reduce-overhead", dynamic=True)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        inputs = [torch.randn(n, 64, device="cuda") for n in (3, 5, 3, 7, 5, 3, 2, 7, 2)]  # (at distinct addresses)
        for x in inputs:
            n = x.shape[0]
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4, msg=f"{n} rows")
    assert not coil_fallbacks(caught) and not _graph_warnings(caught), caught
    (stats,) = _graph_stats(runners)  # one compile for every size
    assert stats["plain_runs"] == 4 and stats["captures"] == 4 and stats["replays"] == 5, stats
