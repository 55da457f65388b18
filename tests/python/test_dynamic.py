"""Dynamic sizes through torch.compile: a graph Dynamo traces with symbolic sizes (dynamic=True,
mark_dynamic, or the second size an input shows) is compiled by coil once and runs every size
(python/coil/_symbols.py, _dynamic.py); graphs coil cannot take so are compiled per size, still
right. Results against eager at 30+ sizes, primes and 1 among them; coil's compiles counted."""
import json
import warnings

import pytest
import torch
import torch.nn as nn

import coil
from coil import _coil, _symbols
from conftest import coil_fallbacks
from test_torch_compile import Block  # a GPT-2-style block: layer norm, causal attention of 4 heads of 16, an MLP

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]
TOL = {torch.float32: dict(rtol=2e-4, atol=2e-4), torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def compiles(monkeypatch):
    """The programs coil compiles from here on (their JSON), in order."""
    made = []
    real = _coil.Compiled

    def counting(program, *args, **kwargs):
        made.append(json.loads(program))
        return real(program, *args, **kwargs)

    monkeypatch.setattr(_coil, "Compiled", counting)
    return made


def symbolic(programs):
    return [p for p in programs if p.get("symbols")]


@pytest.mark.parametrize("device", DEVICES)
def test_one_compile_serves_every_sequence_length(device, compiles):
    """dynamic=True: 30 sequence lengths (1 and primes among them) through a GPT-2 block, one
    symbolic compile; a length of 1 is a graph of its own (Dynamo specializes sizes 0 and 1)."""
    torch.manual_seed(0)
    model = Block().to(device).eval()
    f = torch.compile(model, backend="coil", dynamic=True)
    lengths = [1, 4, 8, 16, 64, 100, 128] + PRIMES[:23]
    assert len(lengths) >= 30
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in lengths:
            x = torch.randn(2, t, 64, device=device)
            torch.testing.assert_close(f(x), model(x), **TOL[torch.float32])
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    # the graph of every length but 1, and length 1's (its batch still symbolic)
    assert len(compiles) == 2, [p.get("symbols") for p in compiles]
    lengths_graph = [p for p in compiles if len(p.get("symbols", ())) == 2]
    assert len(lengths_graph) == 1
    assert all(s["min"] >= 2 for s in lengths_graph[0]["symbols"])
    assert sorted(s["hint"] for s in lengths_graph[0]["symbols"]) == [2, 4]


@pytest.mark.parametrize("device", DEVICES)
def test_a_norms_float_eps_stays_guarded(device, compiles):
    """dynamic=True makes a LayerNorm's eps a float input of Dynamo's graph, which its use pins to
    its value: changing eps afterwards compiles again with the new value."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.LayerNorm(48, eps=1e-5), nn.Linear(48, 48)).to(device).eval()
    f = torch.compile(model, backend="coil", dynamic=True)
    with torch.no_grad():
        for rows in (3, 7, 11):
            x = torch.randn(rows, 48, device=device) * 3
            torch.testing.assert_close(f(x), model(x), **TOL[torch.float32])
        model[0].eps = 0.5  # an eps that changes the result a lot: the guard on its value must see it
        for rows in (5, 9):
            x = torch.randn(rows, 48, device=device) * 0.2
            torch.testing.assert_close(f(x), model(x), **TOL[torch.float32])
    assert len(symbolic(compiles)) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_calls_take_the_lean_path_at_sizes_met_before(device, compiles, monkeypatch):
    """A graph of symbolic sizes whose results are coil's outputs as they come takes the runner's
    lean path at sizes it met before (their output layouts known plain); where an output needs
    mending (an output fixup, here forced) every call takes the whole path. Values and strides
    match eager at every size, in any order of sizes."""
    from coil import _runner

    whole, mended = [], []
    real = _runner.Runner._run
    monkeypatch.setattr(_runner.Runner, "_run", lambda self, *a, **k: whole.append(1) or real(self, *a, **k))
    torch.manual_seed(0)
    lin = nn.Linear(24, 40).to(device)
    for mend in (False, True):
        if mend:
            monkeypatch.setattr(_runner, "_output_fixup", lambda *a: lambda t: mended.append(1) or t.clone())
        torch._dynamo.reset()
        f = torch.compile(lambda x: torch.nn.functional.gelu(lin(x)), backend="coil", dynamic=True)
        whole.clear()
        with torch.no_grad():
            for rows in (3, 17, 3, 5, 17, 29, 5, 3):
                x = torch.randn(rows, 24, device=device)
                got, want = f(x), torch.nn.functional.gelu(lin(x))
                torch.testing.assert_close(got, want, **TOL[torch.float32])
                assert got.stride() == want.stride()
        assert len(whole) == (8 if mend else 4), whole  # every call, or each size's first
    assert len(mended) == 8
    assert len(symbolic(compiles)) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_batch_and_length_both_dynamic_with_bf16(device, compiles):
    torch.manual_seed(0)
    model = Block().to(device).eval()
    f = torch.compile(model, backend="coil", dynamic=True)
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
        for b, t in [(2, 3), (3, 17), (5, 8), (7, 2), (2, 61), (4, 33)]:
            x = torch.randn(b, t, 64, device=device)
            got, want = f(x), model(x)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, **TOL[torch.bfloat16])
    assert len(symbolic(compiles)) == 1 and len(compiles) == 1


def test_a_second_size_compiles_once_for_every_later_size(compiles):
    """Without dynamic=True, Dynamo compiles the first size static and, at the second, a graph
    of symbolic sizes: coil compiles each once (before, every size was a compile of its own)."""
    model = nn.Sequential(nn.Linear(32, 48), nn.GELU(), nn.Linear(48, 8))
    f = torch.compile(model, backend="coil")
    with torch.no_grad():
        for rows in [3, 8, 5, 11, 2, 97, 64]:
            x = torch.randn(rows, 32)
            torch.testing.assert_close(f(x), model(x), **TOL[torch.float32])
    assert len(compiles) == 2 and len(symbolic(compiles)) == 1


def test_mark_dynamic_and_strided_inputs(compiles):
    """A dim marked dynamic, and a strided input (rows of a wider tensor) whose stride Dynamo
    makes a symbol of its own: the runner gives coil the stride's value from the tensor."""
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
    f = torch.compile(model, backend="coil")
    with torch.no_grad():
        for rows, wide in [(3, 2), (8, 2), (5, 3), (13, 4), (6, 2)]:
            x = torch.randn(rows, wide, 64)[:, 1]
            torch._dynamo.mark_dynamic(x, 0)
            torch.testing.assert_close(f(x), model(x), **TOL[torch.float32])
    assert len(symbolic(compiles)) >= 1
    assert len(compiles) <= 3


def test_output_layouts_follow_pytorch_at_every_size(compiles):
    """Results that are views in eager (a transpose, a slice) have PyTorch's strides, evaluated
    at each call's sizes; integer and boolean results keep their dtypes."""
    def fn(x, y):
        h = torch.softmax(x @ y.t(), -1)
        return h.t(), (h > 0.5), h.argmax(-1), x[1:, ::2] * 2, torch.cat([x, x.flip(0)], 0).cumsum(0)

    f = torch.compile(fn, backend="coil", dynamic=True)
    for n, m in [(3, 5), (7, 2), (11, 13), (2, 9), (31, 4)]:
        x, y = torch.randn(n, m), torch.randn(n + 1, m)
        got, want = f(x, y), fn(x, y)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.stride() == w.stride() or g.numel() <= 1, (g.stride(), w.stride())
            torch.testing.assert_close(g, w, **TOL[torch.float32]) if w.dtype.is_floating_point else torch.testing.assert_close(g, w)
    assert compiles and len(symbolic(compiles)) == len(compiles)  # (Dynamo's guards may trace again)


def test_transformers_models_compile_once():
    """Hugging Face GPT-2 and BERT (small configs, random weights) at several batch sizes and
    lengths: one coil compile each (their constants become weights of the program)."""
    transformers = pytest.importorskip("transformers")
    cases = {
        "gpt2": transformers.GPT2Model(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=128)),
        "bert": transformers.BertModel(transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                              intermediate_size=128, vocab_size=100)),
        # its causal mask's sizes hold min(T, T + 1); its attention's logsumexp output is traced, unread
        "llama": transformers.LlamaModel(transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                                 num_key_value_heads=2, intermediate_size=128, vocab_size=100)),
    }
    for name, model in cases.items():
        torch._dynamo.reset()
        model.eval()
        made = []
        real = _coil.Compiled

        def counting(program, *args, **kwargs):
            made.append(program)
            return real(program, *args, **kwargs)

        _coil.Compiled = counting
        try:
            f = torch.compile(model, backend="coil", dynamic=True)
            with torch.no_grad():
                for b, t in [(2, 5), (3, 7), (2, 11), (5, 13), (4, 16), (7, 3), (2, 31)]:
                    ids = torch.randint(0, 100, (b, t))
                    torch.testing.assert_close(f(ids).last_hidden_state, model(ids).last_hidden_state, **TOL[torch.float32])
        finally:
            _coil.Compiled = real
        assert len(made) == 1, name


class SmallCnn(nn.Module):
    """A CNN's pooling: a padded 3x3/2 max pool (ResNet's stem), average pools with and without
    ceil_mode, a ceil_mode max pool, and global average pooling before the classifier."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.fc = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = nn.functional.max_pool2d(x, 3, stride=2, padding=1)
        a = nn.functional.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)
        b = nn.functional.avg_pool2d(x, 2, ceil_mode=True)
        c = nn.functional.max_pool2d(x, 2, ceil_mode=True)
        x = torch.relu(self.c2(x))
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)), a, b, c


@pytest.mark.parametrize("device", DEVICES)
def test_a_cnn_compiles_symbolically_over_image_sizes(device, compiles):
    """Image sizes symbolic through convolutions and pooling: every graph coil compiles is
    symbolic (Dynamo traces again where PyTorch's pooling shape formulas guard a size's parity,
    so a few graphs serve the 16 sizes), and each size matches eager."""
    torch.manual_seed(0)
    model = SmallCnn().to(device).eval()
    f = torch.compile(model, backend="coil", dynamic=True)
    sizes = [(8, 8), (9, 13), (16, 11), (17, 17), (23, 31), (32, 29), (7, 5), (12, 10), (15, 19), (20, 22), (11, 16),
             (5, 5), (24, 13), (13, 24), (18, 7), (29, 32)]
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for h, w in sizes:
            x = torch.randn(2, 3, h, w, device=device)
            for got, want in zip(f(x), model(x)):
                torch.testing.assert_close(got, want, **TOL[torch.float32])
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    assert compiles and len(symbolic(compiles)) == len(compiles), [p.get("symbols") for p in compiles]
    assert len(compiles) <= 8, len(compiles)


def test_graphs_coil_cannot_take_symbolically_compile_per_size(compiles, caplog):
    """An op coil compiles only for static sizes (topk, a library call here): the graph is
    compiled for each size it meets, as before, and says why in the log (no warning)."""
    def fn(x):
        return torch.topk(x * 2, 2, dim=-1).values + 1

    f = torch.compile(fn, backend="coil", dynamic=True)
    with caplog.at_level("INFO", logger="coil"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5, 9):
            x = torch.randn(4, n)
            torch.testing.assert_close(f(x), fn(x))
    assert "compiled for each size it meets" in caplog.text
    assert not symbolic(compiles)
    assert not coil_fallbacks(caught)


def test_a_shape_whose_compile_fails_at_a_call_runs_in_eager_with_a_warning(monkeypatch, compiles):
    """A graph compiled per size compiles at a call, where Dynamo no longer catches what tracing
    raises (AOTAutograd's trace of a graph reading a tensor's value outside Dynamo's shape
    environment): that shape runs in PyTorch with a warning, or raises under fallback="error"."""
    from coil import _backend

    def failing(*args, **kwargs):
        raise torch._subclasses.fake_tensor.DataDependentOutputException(torch.ops.aten._local_scalar_dense.default)

    monkeypatch.setattr(_backend, "_compile_symbolic", lambda *args: None)
    monkeypatch.setattr(_backend, "_compile_graph", failing)

    def fn(x):
        return torch.tanh(x) * 2

    f = torch.compile(fn, backend="coil", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5):
            x = torch.randn(n, 4)
            torch.testing.assert_close(f(x), fn(x))
    assert any("runs in PyTorch eager at this shape" in m for m in coil_fallbacks(caught)), coil_fallbacks(caught)
    torch._dynamo.reset()
    strict = coil.compile(fn, dynamic=True, fallback="error")
    with pytest.raises(Exception, match="DataDependent|_local_scalar_dense"):
        strict(torch.randn(3, 4))


@pytest.mark.parametrize("device", DEVICES)
def test_training_with_dynamic_sizes_compiles_once(device, compiles):
    """A training graph of symbolic sizes: its forward and its backward each compiled once, over
    sizes including 2 and primes; every parameter's gradient matches eager's at every size. The
    forward hands the backward the sizes it saved (results that are sizes), and the backward reads
    a size that only such an argument carries (the gradient of a sum over the batch: a 0-d tensor
    expanded to [B, 1])."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    twin = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    twin.load_state_dict(model.state_dict())
    f = torch.compile(model, backend="coil", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in (3, 7, 2, 31, 64):
            x = torch.randn(rows, 16, device=device)
            f(x).sum().backward()
            twin(x).sum().backward()
            for p, q in zip(model.parameters(), twin.parameters()):
                torch.testing.assert_close(p.grad, q.grad, **TOL[torch.float32])
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    assert len(compiles) == 2 and len(symbolic(compiles)) == 2, [p.get("symbols") for p in compiles]


@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_reads_a_size_only_its_size_argument_carries(device, compiles):
    """(x.sum(0) * w).sum(): the backward's gradient of x is w expanded over the rows, whose count
    no tensor the backward takes has: it comes as a size argument, which the compiled backward
    reads per call."""
    torch.manual_seed(0)
    w = torch.randn(16, device=device, requires_grad=True)
    g = torch.compile(lambda x, w: (x.sum(0) * w).sum(), backend="coil", dynamic=True)
    for rows in (3, 7, 2, 31):
        x = torch.randn(rows, 16, device=device, requires_grad=True)
        g(x, w).backward()
        xe, we = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        (xe.sum(0) * we).sum().backward()
        torch.testing.assert_close(x.grad, xe.grad, **TOL[torch.float32])
    assert len(compiles) == 2 and len(symbolic(compiles)) == 2, [p.get("symbols") for p in compiles]


@pytest.mark.parametrize("device", DEVICES)
def test_training_an_embedding_model_over_batch_and_length(device, compiles):
    """Batch and length both symbolic: embedding (its backward an accumulation at data-dependent
    rows), layer norm and a projection, trained over 4 shapes; gradients match eager's, one
    symbolic forward and one symbolic backward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 16), nn.LayerNorm(16), nn.Linear(16, 50)).to(device)
    twin = nn.Sequential(nn.Embedding(50, 16), nn.LayerNorm(16), nn.Linear(16, 50)).to(device)
    twin.load_state_dict(model.state_dict())
    f = torch.compile(model, backend="coil", dynamic=True)
    for b, t in [(2, 3), (3, 7), (5, 2), (2, 13)]:
        x = torch.randint(0, 50, (b, t), device=device)
        f(x).float().pow(2).mean().backward()
        twin(x).float().pow(2).mean().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL[torch.float32])
    assert len(compiles) == 2 and len(symbolic(compiles)) == 2, [p.get("symbols") for p in compiles]


@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_coil_cannot_take_symbolically_compiles_per_size(device, compiles):
    """Batch norm in training over symbolic image sizes: the forward compiles once (the running
    variance's unbiased factor n / (n - 1) from the symbolic count n), the backward (which divides
    sizes as floats) once per size; gradients and running statistics match eager's, with no
    warning."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 4)).train()
    twin = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4)).train()
    twin.load_state_dict(model.state_dict())
    model, twin = model.to(device), twin.to(device)
    f = torch.compile(model, backend="coil", dynamic=True)
    sizes = (8, 11, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in sizes:
            x = torch.randn(2, 3, s, s, device=device)
            f(x).pow(2).mean().backward()
            twin(x).pow(2).mean().backward()
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL[torch.float32])
    torch.testing.assert_close(model[1].running_mean, twin[1].running_mean, **TOL[torch.float32])
    torch.testing.assert_close(model[1].running_var, twin[1].running_var, **TOL[torch.float32])
    assert len(symbolic(compiles)) == 1 and len(compiles) == 1 + len(sizes), [p.get("symbols") for p in compiles]


def test_size_expressions_as_trees():
    """_symbols writes Dynamo's size expressions as coil's trees; those it cannot are refused."""
    import sympy
    from torch.utils._sympy import functions as fn

    s0, s1 = sympy.Symbol("s0", integer=True, positive=True), sympy.Symbol("s1", integer=True, positive=True)
    assert _symbols._tree(s0 * s1 + 3) in ({"add": [3, {"mul": [{"sym": "s0"}, {"sym": "s1"}]}]},
                                           {"add": [{"mul": [{"sym": "s0"}, {"sym": "s1"}]}, 3]})
    assert _symbols._tree(fn.FloorDiv(s0, 2)) == {"floordiv": [{"sym": "s0"}, 2]}
    assert [_symbols.evaluate({"as_sym": _symbols._tree(fn.CeilDiv(s0, 4))}, {"s0": n}) for n in (4, 5, 9)] == [1, 2, 3]
    assert _symbols._tree(fn.ModularIndexing(s0, 2, 8)) == {"mod": [{"floordiv": [{"sym": "s0"}, 2]}, 8]}
    assert _symbols._tree(s0 ** 2) == {"mul": [{"sym": "s0"}, {"sym": "s0"}]}
    for tree, want in [({"add": [3, {"mul": [{"sym": "s0"}, {"sym": "s1"}]}]}, 3 + 5 * 7),
                       ({"floordiv": [{"add": [{"sym": "s0"}, 4, -1]}, 4]}, 2), ({"max": [1, {"sym": "s1"}]}, 7)]:
        assert _symbols.evaluate({"as_sym": tree}, {"s0": 5, "s1": 7}) == want
    with pytest.raises(_symbols.NotExpressible):
        _symbols._tree(s0 / 3)
