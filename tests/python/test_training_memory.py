"""Training's memory and its runners: a backward frees its saved activations as it goes, its
outputs' layouts are known before a first call, no call's arguments stay alive in the compiled
function, and a backward coil fails on runs in eager (the decompositions leave nothing in the
graph that eager cannot run).
"""
import copy
import warnings

import pytest
import torch
import torch.nn as nn

coil = pytest.importorskip("coil")
from conftest import TORCH_DEVICES, coil_fallbacks, record_runners  # noqa: E402

DEVICES = TORCH_DEVICES

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.skipif("cuda" not in DEVICES, reason="no GPU"))])
def test_a_backward_frees_each_saved_activation_after_its_last_reader(device, monkeypatch):
    """The compiled backward is handed its saved activations (AOTAutograd's boxed call; from its
    first call on) and frees each once its last reader is enqueued, so the wide
    first layer's gradients, computed last, reuse the memory of the activations the later layers
    saved. Its peak in coil's pool is then lower than with every saved activation held to the
    end (the adapter's former call) by at least half of one [rows, 2048] f32 activation, and the
    gradients stay eager's."""
    from coil import _backend, _runner

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 4096), nn.Tanh(), nn.Linear(4096, 64), nn.Tanh(), nn.Linear(64, 2048), nn.Tanh(),
                          nn.Linear(2048, 64)).cuda()
    eager = copy.deepcopy(model)
    x = torch.randn(4096, 64, device="cuda")
    pool = _backend.device_memory(0)
    compiled = torch.compile(model, backend="coil")

    def backward_peak():
        model.zero_grad(set_to_none=True)
        loss = compiled(x).square().mean()
        torch.cuda.synchronize()
        pool.reset_peaks()
        loss.backward()
        torch.cuda.synchronize()
        return pool.stats()["peak_live_bytes"]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backward_peak()  # compiles (the first call hands its arguments over too: Runner._plan_fixups)
        with monkeypatch.context() as m:
            m.setattr(_runner.Runner, "boxed", lambda self, args: self(*args))
            held = backward_peak()
        handed = backward_peak()
    assert not coil_fallbacks(caught), coil_fallbacks(caught)
    activation = 4096 * 2048 * 4
    assert handed <= held - activation // 2, (held, handed)
    eager(x).square().mean().backward()
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4 * q.grad.abs().max().item(), msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_output_layouts_are_those_a_run_gives(device, monkeypatch):
    """Compiled.output_layouts (what a backward runner plans its outputs' fixups from, before a
    first call that hands its inputs over) against the tensors a run returns: sizes, strides and
    dtype of every output of a training step's forward and backward graphs."""
    runners = record_runners(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 36, 5)).to(device)
    x = torch.randn(2, 3, 6, 6, device=device)
    torch.compile(model, backend="coil")(x).square().mean().backward()
    assert len(runners) == 2 and runners[1].inputs is not None
    for runner in runners:
        layouts = runner.compiled.output_layouts()
        if runner.inputs is None:
            continue  # the forward, whose inputs are not recorded per call: the backward's are
        spans = [1 + sum((n - 1) * st for n, st in zip(sizes, strides)) for sizes, strides, _ in runner.inputs]
        args = [(torch.randn(span, device=device).to(dtype) if dtype.is_floating_point else torch.zeros(span, dtype=dtype, device=device))
                .as_strided(sizes, strides) for span, (sizes, strides, dtype) in zip(spans, runner.inputs)]
        outs = runner.compiled.run([a.data_ptr() for a in args], 0)
        assert len(outs) == len(layouts)
        for out, (sizes, strides, dtype) in zip(outs, layouts):
            if out is not None:
                assert (list(out.shape), list(out.stride()), dtype) == (sizes, strides, _runner_dtype_name(out.dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_a_run_lets_go_of_the_tensors_handed_to_it(device, monkeypatch):
    """The tensors handed to a run (`owners`: a backward's saved activations) are dropped by the
    time it returns: the run lets go of them without the GIL and drops them together once it has
    the GIL back (module.cc's Releases). Each, referenced only by the owners list, is freed then;
    the results are a run's that kept every input (same values)."""
    import weakref

    runners = record_runners(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)).to(device)
    x = torch.randn(8, 16, device=device, requires_grad=True)
    torch.compile(model, backend="coil")(x).square().sum().backward()
    backward = next(r for r in runners if r.inputs is not None)

    def arguments():
        torch.manual_seed(1)
        return [torch.randn(sizes, dtype=dtype, device=device) if dtype.is_floating_point
                else torch.zeros(sizes, dtype=dtype, device=device) for sizes, _, dtype in backward.inputs]

    kept = arguments()
    expected = backward.compiled.run([a.data_ptr() for a in kept], 0)
    args = arguments()
    ptrs, refs = [a.data_ptr() for a in args], [weakref.ref(a) for a in args]
    got = backward.compiled.run(ptrs, 0, args)
    assert not args  # (the run took the list's references)
    assert [r() is None for r in refs] == [True] * len(refs)
    for a, b in zip(got, expected):
        if a is not None:
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def _runner_dtype_name(dtype):
    from coil import _runner

    return _runner._COIL_DTYPES[dtype]


def test_view_strides_agree_with_aten():
    """The decompositions' test of whether a reshape is a view (_gradients.view_strides), against
    Tensor.view over random permuted, sliced and size-1 layouts and random target shapes."""
    import random

    from coil._gradients import view_strides

    rng = random.Random(0)
    for _ in range(2000):
        sizes = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(0, 4))]
        perm = list(range(len(sizes)))
        rng.shuffle(perm)
        t = torch.empty(sizes).permute(perm)
        if sizes and rng.random() < 0.3:
            d = rng.randrange(len(sizes))
            t = t.narrow(d, 0, max(1, t.shape[d] - 1))
        shape, left = [], t.numel()
        while left > 1:
            k = rng.choice([k for k in range(2, left + 1) if left % k == 0])
            shape.append(k)
            left //= k
        shape.insert(rng.randint(0, len(shape)), 1)
        try:
            want = list(t.view(shape).stride())
        except RuntimeError:
            want = None
        got = view_strides(t.shape, t.stride(), shape)
        assert (got is None) == (want is None), (list(t.shape), t.stride(), shape, want, got)
        if want is not None:
            assert [g for g, n in zip(got, shape) if n != 1] == [w for w, n in zip(want, shape) if n != 1]


@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_coil_fails_on_runs_in_eager(device, monkeypatch):
    """A training step whose backward graph coil fails to compile: that graph runs in PyTorch eager
    (one warning) with the gradients eager gives. Its decomposed convolution backward once left a
    view that failed at trace time in the graph (dead there, but eager runs every node)."""
    from coil import _backend, _coil

    made = []
    real = _coil.Compiled

    def failing_backward(program, *args, **kwargs):
        made.append(program)
        if len(made) == 2:
            raise _coil.CoilError("the test's failure")
        return real(program, *args, **kwargs)

    monkeypatch.setattr(_backend._coil, "Compiled", failing_backward)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).to(device)
    eager = copy.deepcopy(model)
    x = torch.randn(4, 3, 16, 16, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = torch.compile(model, backend="coil")(x).float().square().mean()
        loss.backward()
    assert len(made) == 2 and [str(w.message) for w in caught if "failed to compile" in str(w.message)], caught
    with torch.autocast(device, dtype=torch.bfloat16):
        want = eager(x).float().square().mean()
    want.backward()
    torch.testing.assert_close(loss, want, rtol=2e-2, atol=1e-3)
    floor = max(q.grad.abs().max().item() for q in eager.parameters())  # a bias before BatchNorm: rounding noise
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=5e-2, atol=2e-2 * floor, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("training", [False, True])
def test_compiled_graphs_keep_no_call_arguments_alive(device, training):
    """The tensors a compiled function is first called with (Dynamo's example inputs, real ones)
    are freed once the caller drops them: the compilers AOTAutograd keeps for a lazy backward held
    them, and GPT-2's first logits (785 MiB, the input of its loss graph) stayed alive through
    training."""
    import gc
    import weakref

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    compiled = torch.compile(model, backend="coil")
    seen = []
    with torch.set_grad_enabled(training):
        for _ in range(3):
            x = torch.randn(8, 16, device=device, requires_grad=training)
            out = compiled(x)
            if training:
                out.square().sum().backward()
            seen.append(weakref.ref(x))
            del x, out
    gc.collect()
    assert [r() is None for r in seen] == [True] * 3
