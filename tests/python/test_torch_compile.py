"""torch.compile(backend="coil") against PyTorch eager: models, fallbacks, layouts, options.

Runs on the CPU everywhere and on CUDA where there is a GPU (scripts/gpu-check).
"""
import logging
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

coil = pytest.importorskip("coil")
coil.register()  # only needed for a build tree on PYTHONPATH (the GPU machine); installed: the entry point
from conftest import ROOT, coil_fallbacks  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TOL = {torch.float32: (2e-4, 2e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (4e-2, 4e-2)}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def check(model, *inputs, dtype=torch.float32, backend="coil", **compile_kwargs):
    """Eager vs torch.compile(backend=...) under no_grad; returns the compiled callable."""
    with torch.no_grad():
        want = model(*inputs)
        compiled = torch.compile(model, backend=backend, **compile_kwargs)
        got = compiled(*inputs)
    want_list = want if isinstance(want, (tuple, list)) else [want]
    got_list = got if isinstance(got, (tuple, list)) else [got]
    assert len(want_list) == len(got_list)
    rtol, atol = TOL.get(dtype, (0, 0))
    for w, g in zip(want_list, got_list):
        assert g.dtype == w.dtype and g.shape == w.shape and g.device == w.device
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=rtol, atol=atol)
        else:
            assert torch.equal(g, w)
    return compiled


class MLP(nn.Module):
    def __init__(self, d=64, h=256):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    """GPT-2-style: pre-norm causal self-attention and MLP, residuals."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = MLP(d, 4 * d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.relu(self.c2(x))
        return self.head(x.mean(dim=(2, 3)))


class Mixed(nn.Module):
    """Views, slicing, cat, where, embedding, masked_fill, argmax and cumsum."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)

    def forward(self, ids, x):
        e = self.emb(ids)                                   # [B, T, 16]
        y = torch.cat([e[:, ::2], x[:, 1::2]], dim=1)       # slicing with steps, cat
        y = y.permute(0, 2, 1).reshape(y.shape[0], -1)      # views
        mask = y > 0.5
        z = torch.where(mask, y, -y).masked_fill(y < -0.9, 0.0)
        return z.cumsum(dim=1), z.argmax(dim=1), y[..., 3:7]


MODELS = {
    "mlp": (MLP, (8, 64)),
    "block": (Block, (2, 16, 64)),
    "cnn": (lambda: CNN().eval(), (2, 3, 12, 12)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["mlp", "block", "cnn"])
def test_models_match_eager(name, dtype, device):
    if device == "cpu" and dtype == torch.float16 and name == "cnn":
        pytest.skip("PyTorch eager has no float16 convolution on the CPU")
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().to(device=device, dtype=dtype)
    check(model, torch.randn(shape).to(device=device, dtype=dtype), dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_views_slicing_cat_where_embedding_masked_fill_argmax_cumsum(device):
    torch.manual_seed(1)
    ids = torch.randint(0, 50, (3, 10), device=device)
    x = torch.randn(3, 10, 16, device=device)
    check(Mixed().to(device), ids, x)


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs(device):
    def f(a, b, c):
        return torch.softmax(a * 2 + b, dim=-1) - c.sum(dim=0)

    a = torch.randn(7, 12, device=device).t()            # transposed
    b = torch.randn(12, 14, device=device)[:, ::2]       # strided columns
    c = torch.randn(5, 12, 7, device=device)[1:4]        # a storage offset
    check(f, a, b, c)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inputs_at_unaligned_addresses(device, dtype):
    """Views one element into their storage: on CUDA the kernels' 16-byte vector accesses need
    aligned bases, so the plan gives them an aligned copy; results as for aligned inputs."""
    def f(x, w, b, y):
        return F.layer_norm(x, (64,), w, b), torch.softmax(x, dim=-1) + y, (x * y).sum(dim=0), F.gelu(x + b)

    torch.manual_seed(3)
    x = torch.randn(24 * 64 + 1, device=device, dtype=dtype)[1:].view(24, 64)
    w, b = (torch.randn(65, device=device, dtype=dtype)[1:] for _ in range(2))
    y = torch.randn(24, 64, device=device, dtype=dtype)
    assert x.data_ptr() % 16 != 0 and w.data_ptr() % 16 != 0
    check(f, x, w, b, y, dtype=dtype)
    check(f, x.clone(), w.clone(), b.clone(), y, dtype=dtype)  # the same compiled graph, aligned inputs


@pytest.mark.parametrize("device", DEVICES)
def test_unsupported_op_falls_back_and_is_reported(device):
    def f(x, a):
        y = torch.relu(x) * 3
        c = torch.polar(y, a)
        return (c / torch.polar(a.abs() + 1, y)).abs() + 1, y * 2  # coil has no complex division

    x, a = torch.randn(4, 6, 8, device=device), torch.randn(4, 6, 8, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(f, x, a)
    messages = [str(w.message) for w in caught if issubclass(w.category, coil.FallbackWarning)]
    assert len(messages) == 1 and "(ops coil does not compile: aten.div.Tensor)" in messages[0], messages


def test_unsupported_op_with_fallback_error_raises():
    with pytest.raises(Exception, match="div"):
        check(lambda x: (torch.polar(x, x) / torch.polar(x, -x)).abs(), torch.randn(5), backend=coil.backend,
              options={"fallback": "error"})


@pytest.mark.parametrize("device", DEVICES)
def test_library_calls_run_in_pytorch_without_a_warning(device, caplog):
    """Sorting, selection, linear algebra and FFTs are PyTorch's library kernels (as they are
    Inductor's): the nodes around them compile, they run in ATen, logged at INFO, not warned,
    and fallback="error" accepts them."""
    def f(x, m):
        y = torch.relu(x) * 3
        s, _ = torch.sort(y, dim=-1)
        inv = torch.linalg.inv(m + 4 * torch.eye(5, device=m.device))
        return s + 1, torch.topk(y, 3, dim=-1).values * 2, inv.sum(dim=0), torch.fft.rfft(y)

    x, m = torch.randn(4, 6, 8, device=device), torch.randn(5, 5, device=device)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger="coil"):
        warnings.simplefilter("always")
        check(f, x, m, backend=coil.backend, options={"fallback": "error"})
    assert not [str(w.message) for w in caught if issubclass(w.category, coil.FallbackWarning)]
    logged = " ".join(r.getMessage() for r in caplog.records if r.name == "coil")
    for op in ("aten.sort.default", "aten.topk.default", "aten.linalg_inv_ex.default", "aten._fft_r2c.default"):
        assert op in logged, logged


def test_inference_mode_and_entry_point_name():
    model = MLP()
    x = torch.randn(4, 64)
    with torch.inference_mode():
        got = torch.compile(model, backend="coil")(x)
        torch.testing.assert_close(got, model(x), rtol=2e-4, atol=2e-4)


def test_training_compiles_forward_and_backward(monkeypatch, capfd):
    """A graph that needs gradients: AOTAutograd's forward and backward graphs both compiled by
    coil (no warning), the gradients eager's."""
    monkeypatch.setenv("COIL_DEBUG", "1")
    model = MLP()
    x = torch.randn(4, 64, requires_grad=True)
    compiled = torch.compile(model, backend="coil")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(x).sum().backward()
    assert not [str(w.message) for w in caught if "coil" in str(w.message) or "boxed" in str(w.message)]
    assert capfd.readouterr().err.count("coil: compiled a graph") == 2  # the forward and the backward
    got = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    model(x).sum().backward()
    for g, want in zip(got, [p.grad for p in model.parameters()] + [x.grad]):
        torch.testing.assert_close(g, want, rtol=1e-4, atol=1e-5)


def test_debug_stats_prints_each_compile_and_nothing_else(monkeypatch, capfd):
    """COIL_DEBUG=stats (what bench.train runs with): each compiled graph's wall time and
    statistics, without the graph text the other values print."""
    monkeypatch.setenv("COIL_DEBUG", "stats")
    model = MLP()
    x = torch.randn(6, 64)
    torch.testing.assert_close(torch.compile(model, backend="coil")(x), model(x), rtol=2e-4, atol=2e-4)
    err = capfd.readouterr().err
    assert err.count("coil: compiled a graph") == 1 and "'build_ms'" in err and " ms: {" in err, err
    assert "graph fx {" not in err, err


def test_dumped_programs_compile_with_the_cli(monkeypatch, tmp_path):
    """COIL_DUMP_DIR: each program the adapter compiles, as JSON, which `coil check` and
    `coil compile FILE.json` read (for CUDA code without a GPU)."""
    import os
    import subprocess

    monkeypatch.setenv("COIL_DUMP_DIR", str(tmp_path))
    model = MLP()
    x = torch.randn(6, 64)
    torch.testing.assert_close(torch.compile(model, backend="coil")(x), model(x), rtol=2e-4, atol=2e-4)
    dumped = sorted(tmp_path.glob("graph-*.json"))
    assert [p.name for p in dumped] == ["graph-0.json"]
    coil_bin = os.environ.get("COIL_BIN", str(ROOT / "build" / "tools" / "coil"))
    printed = subprocess.run([coil_bin, "check", str(dumped[0])], capture_output=True, text=True)
    assert printed.returncode == 0 and "graph fx {" in printed.stdout, printed.stderr
    code = subprocess.run([coil_bin, "compile", str(dumped[0]), "--device", "cuda", "--arch", "sm_90a", "--emit", "code"],
                          capture_output=True, text=True)
    assert code.returncode == 0 and "__global__" in code.stdout, code.stderr


def test_coil_compile_with_frozen_parameters(monkeypatch, capfd):
    monkeypatch.setenv("COIL_DEBUG", "1")  # prints the coil graph: the parameters are weights
    model = MLP()
    x = torch.randn(6, 64)
    with torch.no_grad():
        got = coil.compile(model, freeze=True)(x)
        torch.testing.assert_close(got, model(x), rtol=2e-4, atol=2e-4)
    assert 'weight(key="frozen' in capfd.readouterr().err


@pytest.mark.parametrize("how", ["coil.compile", "backend string"])
def test_new_shapes_recompile(how, monkeypatch, capfd):
    monkeypatch.setenv("COIL_DEBUG", "1")
    model = MLP()
    compiled = coil.compile(model) if how == "coil.compile" else torch.compile(model, backend="coil")
    with torch.no_grad():
        for rows in (3, 8, 5, 8):
            x = torch.randn(rows, 2, 64)[:, 1]  # strided rows too
            torch.testing.assert_close(compiled(x), model(x), rtol=2e-4, atol=2e-4)
    # Every shape ran through coil: the first shape's static graph, then Dynamo's graph of
    # symbolic sizes, compiled once for every later shape (test_dynamic.py).
    assert capfd.readouterr().err.count("coil: compiled a graph") == 2


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown option"):
        coil.compile(MLP(), options={"bogus": 1})
    with pytest.raises(ValueError, match="reduce-overhead"):  # (the message lists the modes)
        coil.compile(MLP(), mode="reduce-everything")


def test_multiple_outputs_inputs_returned_and_integers():
    def f(x, i):
        return x, (i * 2 + 1) % 7, x.amax(dim=0), (x > 0).sum(dim=1)

    check(f, torch.randn(5, 3), torch.arange(10))


def test_backend_name_works_without_importing_coil():
    """The torch_dynamo_backends entry point (an installed package) finds "coil" by itself."""
    import importlib.metadata
    import subprocess
    import sys

    if not any(e.name == "coil" for e in importlib.metadata.entry_points(group="torch_dynamo_backends")):
        pytest.skip("coil is not installed here (a build tree on PYTHONPATH has no entry point)")
    code = ("import sys, torch\n"
            "f = torch.compile(lambda x: torch.relu(x) * 2, backend='coil')\n"
            "with torch.no_grad():\n"
            "    y = f(torch.tensor([-1.0, 3.0]))\n"
            "assert y.tolist() == [0.0, 6.0], y\n"
            "print('coil' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"  # loaded through the entry point


def _run_fresh_process(code, cache_dir):
    """`code` in a new interpreter (no Dynamo or coil state carried over) with its own cache."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, COIL_CACHE_DIR=str(cache_dir), COIL_DEBUG="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out


WARM_START = """
import torch, coil
from torch._functorch import aot_autograd
coil.register()
calls = []
real = aot_autograd.aot_module_simplified
aot_autograd.aot_module_simplified = lambda *a, **k: calls.append(1) or real(*a, **k)
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.qkv, self.out = torch.nn.LayerNorm(32), torch.nn.Linear(32, 96), torch.nn.Linear(32, 32)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).split(32, dim=-1)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + torch.nn.functional.gelu(self.out(a))

torch.manual_seed(0)
block = Block().eval()
x = torch.randn(2, 7, 32)
with torch.no_grad():
    want = block(x)
    got = torch.compile(block, backend="coil")(x)
torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
print("aot", len(calls))
"""


def test_a_new_process_skips_aot_autograd_for_a_graph_it_compiled_before(tmp_path):
    first = _run_fresh_process(WARM_START, tmp_path)
    assert "aot 1" in first.stdout
    assert "AOTAutograd skipped" not in first.stderr
    assert list(tmp_path.glob("*/*.fxgraph")), "the program was not kept"
    second = _run_fresh_process(WARM_START, tmp_path)
    assert "aot 0" in second.stdout  # the kept program, called directly, matched eager again
    assert "AOTAutograd skipped" in second.stderr
    # A corrupted entry is a miss: AOTAutograd runs again and the result is still right.
    for entry in tmp_path.glob("*/*.fxgraph"):
        entry.write_bytes(entry.read_bytes()[:-5] + b"xxxxx")
    third = _run_fresh_process(WARM_START, tmp_path)
    assert "aot 1" in third.stdout and "AOTAutograd skipped" not in third.stderr


def test_graph_keys_follow_shapes_layouts_options_and_code():
    from coil import _cache

    def key(fn, *inputs, options=None):
        captured = []
        torch._dynamo.reset()
        torch.compile(fn, backend=lambda gm, ex: captured.append(_cache.graph_key(gm, ex, None, options or {})) or gm.forward)(*inputs)
        return captured[0]

    x = torch.randn(4, 6)
    base = key(lambda t: t.relu() + 1, x)
    assert base is not None and base == key(lambda t: t.relu() + 1, x.clone())
    assert base != key(lambda t: t.relu() + 1, torch.randn(4, 7))           # shape
    assert base != key(lambda t: t.relu() + 1, torch.randn(6, 4).t())       # strides
    assert base != key(lambda t: t.relu() + 1, x.double())                  # dtype
    assert base != key(lambda t: t.relu() + 2, x)                           # code
    assert base != key(lambda t: t.relu() + 1, x, options={"freeze": True})  # options


def test_graph_keys_follow_every_adapter_source(monkeypatch):
    """The decompositions the adapter applies (and the runner, the compiler binary) decide the
    kept program: a change to any of the package's files is a new key (_decompositions.py was
    left out: a kept program outlived a change of its decompositions)."""
    from pathlib import Path

    from coil import _cache

    base = _cache._sources_digest()
    read = Path.read_text
    for name in ("_decompositions.py", "_runner.py", "_backend.py"):
        monkeypatch.setattr(Path, "read_text", lambda self, *a, n=name, **k: read(self, *a, **k) + ("#" if self.name == n else ""))
        assert _cache._sources_digest() != base, name
    monkeypatch.setattr(Path, "read_text", read)
    assert _cache._sources_digest() == base


class Mutates(nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x.relu() + 1


class ReturnsAView(nn.Module):
    def forward(self, x):
        return x.t(), x.sum(dim=0)


@pytest.mark.parametrize("model", [Mutates(), ReturnsAView()], ids=["input mutation", "output aliases input"])
def test_graphs_that_need_aot_autograds_wrappers_keep_them(model, tmp_path):
    """No kept program and no direct call: AOTAutograd's wrappers apply the mutation / the alias."""
    x = torch.randn(5, 4)
    want_x = x.clone()
    with torch.no_grad():
        want = model(want_x)
        got = coil.compile(model, cache_dir=str(tmp_path))(x)
    for w, g in zip(want if isinstance(want, tuple) else [want], got if isinstance(got, tuple) else [got]):
        torch.testing.assert_close(g, w)
    torch.testing.assert_close(x, want_x)  # the input was mutated like eager's
    assert not list(tmp_path.glob("*/*.fxgraph"))


def _sum_then_add(x, y):  # the old x is summed, the new one returned
    s = x.sum()
    x.add_(y)
    return x * s


def _scale_then_transpose(x, y):  # the new x read at other elements than each one's own
    x.mul_(2)
    return x.t() + y.t()


def _two_updates(x, y):  # y's new value reads x's new value
    x.add_(1)
    y.mul_(x)
    return (x + y).sum(dim=1)


def _running_mean(x, y):  # BatchNorm-like: a running statistic updated from a reduction
    y.mul_(0.9).add_(x.mean(dim=0), alpha=0.1)
    return x - y


def _update_from_an_input(x, y):  # the new value is the other input itself
    x.copy_(y)
    return x + 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [_sum_then_add, _scale_then_transpose, _two_updates, _running_mean, _update_from_an_input],
                         ids=lambda f: f.__name__.strip("_"))
def test_input_updates_match_eager(fn, device):
    """Inputs a graph mutates get their new values (coil computes them over the inputs' memory
    where no later step reads the old values), the results see the right ones, and a second
    call starts from the first call's values."""
    torch.manual_seed(3)
    x, y = torch.randn(6, 6, device=device), torch.randn(6, 6, device=device)
    want_x, want_y = x.clone(), y.clone()
    compiled = torch.compile(fn, backend="coil")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            want = fn(want_x, want_y)
            got = compiled(x, y)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(x, want_x, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(y, want_y, rtol=1e-5, atol=1e-5)
    assert not coil_fallbacks(caught), coil_fallbacks(caught)


def _views_across_a_library_call(x, w):
    # q and k: slices of one product, handed to the sort (a library call, a step of the program's
    # plan) as views of it; the results are a transpose of what the sort gave, and q and k
    # transposed, which together cover the product (returned as views of it).
    q, k = (x @ w).split(8, dim=1)
    s = torch.sort(q.t(), dim=-1).values
    return s.t(), s + k.t(), k.t(), q.t()


def _only_views_after_a_library_call(x, w):  # the part after the sort returns views of its input only
    return torch.sort(x @ w, dim=-1).values.t(), x.t()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [_views_across_a_library_call, _only_views_after_a_library_call], ids=lambda f: f.__name__.strip("_"))
def test_views_are_returned_as_views_not_copies(fn, device, monkeypatch):
    """Results that view an intermediate coil computed (slices that together cover it, permutes)
    or an input of a compiled part are returned as views of it, as eager returns them: no copy
    of coil's output into PyTorch's layout."""
    from coil import _runner

    copies = []
    restride = _runner.restride
    monkeypatch.setattr(_runner, "restride", lambda t, sizes, strides: copies.append(sizes) or restride(t, sizes, strides))
    torch.manual_seed(5)
    x, w = torch.randn(12, 6, device=device), torch.randn(6, 16, device=device)
    compiled = torch.compile(fn, backend="coil")
    for _ in range(2):
        got, want = compiled(x, w), fn(x, w)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
            assert g.stride() == e.stride()
    assert not copies, copies


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU's memory")
def test_compiled_graphs_share_one_device_pool():
    """Graphs compiled for one GPU draw from one caching allocator: memory the first graph's
    run freed serves the second graph's run (the forward, backward and optimizer graphs of a
    training step, each caching its own peak, held 2-3x PyTorch's memory)."""
    from coil import _backend

    pool = _backend.device_memory(torch.cuda.current_device())
    x = torch.randn(1024, 1024, device="cuda")
    first = torch.compile(lambda t: (t.exp() * 2).sum(dim=0), backend="coil")
    second = torch.compile(lambda t: (t.sin() + 1).sum(dim=1), backend="coil")
    torch.testing.assert_close(first(x), (x.exp() * 2).sum(dim=0))
    torch.cuda.synchronize()
    reused = pool.stats()["reuses"]
    torch.testing.assert_close(second(x), (x.sin() + 1).sum(dim=1))
    torch.cuda.synchronize()
    assert pool.stats()["reuses"] > reused


class ResNetStem(nn.Module):
    """A ResNet's pooling layers around convolutions: max pooling 3x3/2 after the stem, an
    average pooling, adaptive average pooling to 1x1 before the head."""

    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 16, 7, stride=2, padding=3), nn.BatchNorm2d(16)
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.stem(x))), 3, stride=2, padding=1)
        x = F.avg_pool2d(F.relu(self.conv(x)) + x, 2, ceil_mode=True, count_include_pad=False)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)), F.adaptive_avg_pool2d(x, (3, 2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pooling_compiles_whole(device, dtype):
    torch.manual_seed(4)
    model = ResNetStem().eval().to(device=device, dtype=dtype)
    x = torch.randn(2, 3, 37, 30, device=device, dtype=dtype)
    check(model, x, dtype=dtype, options={"fallback": "error"})  # "error": a node left to PyTorch would raise
    pooled, idx = torch.compile(lambda t: F.max_pool2d(t, 2, return_indices=True), backend="coil", options={"fallback": "error"})(x)
    want, want_idx = F.max_pool2d(x, 2, return_indices=True)
    torch.testing.assert_close(pooled, want, rtol=0, atol=0)
    assert torch.equal(idx, want_idx)


@pytest.mark.parametrize("device", DEVICES)
def test_reflection_padding_numbers_first_diagonal_and_inverse_trig_compile_whole(device):
    """Ops that used to fall back: sub.Tensor(7, x) from reflection padding's decomposition (and
    numbers first in add/mul), diagonal, the inverse trigonometric and the hyperbolic functions."""
    def f(x):
        padded = F.pad(x, (1, 1, 2, 2), mode="reflect") + F.pad(x, (2, 0, 1, 1), mode="replicate").sum()
        y = x.clamp(-0.9, 0.9)
        trig = torch.asin(y) + torch.acos(y) + torch.atan(x) + torch.asinh(x) + torch.acosh(x.abs() + 1) + torch.atanh(y)
        trig = trig + torch.sinh(x) + torch.cosh(x)
        return padded, 3 - x, 2 * x + (5 + x), torch.diagonal(x, 1, -2, -1), trig

    x = torch.randn(2, 3, 6, 7, device=device)
    with torch.no_grad():
        got = coil.compile(f, fallback="error")(x)  # "error": a node left to PyTorch would raise
        want = f(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=2e-4, atol=2e-4)
