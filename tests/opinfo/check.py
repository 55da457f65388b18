"""One OpInfo sample through eager and torch.compile, classified.

A sample's status is one of
  pass      the backend compiled every graph and the results match eager (graphs may call
            ATen library kernels, as both backends do for linear algebra, FFTs, sorting:
            recorded as the sample's "aten_calls");
  fallback  they match, but coil sent part or all of a graph to eager (a coil.FallbackWarning);
  mismatch  outputs or mutated inputs differ (values, shape, dtype, device);
  crash     the compiled call raised, or coil failed on a graph it had accepted
            (a coil.CompileErrorWarning), or the worker running it died or hung;
  skip      eager itself raises on the sample: nothing to compare against.
"""
import copy
import functools
import itertools
import logging
import time
import warnings

import torch
from torch.utils._pytree import tree_map

from tests.opinfo.compare import LOW_PRECISION, map_tensors, difference, downcast, upcast

STATUSES = ("skip", "pass", "fallback", "mismatch", "crash")  # worst last
RANK = {s: i for i, s in enumerate(STATUSES)}

# Ops whose values are random or uninitialized memory: only structure, shapes, dtypes and devices
# are compared. (Other ops whose eager output changes between two runs with the same seed are
# found at run time and treated alike.)
UNDETERMINED = frozenset({
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "rand_like", "randint", "randint_like", "randn", "randn_like", "uniform",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "pca_lowrank", "svd_lowrank",
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    "resize_", "resize_as_",
    # Their philox seed and offset outputs follow the generator's state (their attention output
    # is checked through nn.functional.scaled_dot_product_attention's samples).
    "torch.ops.aten._flash_attention_forward", "torch.ops.aten._efficient_attention_forward",
})


def worst(statuses):
    """An op's status over its samples: crash > mismatch > fallback > pass > skip."""
    return max(statuses, key=RANK.__getitem__, default="skip")


class Backend:
    """A torch.compile backend by name, wrapped to count the graphs Dynamo hands it (a sample
    that reaches no graph compiled nothing) and to note the ops it ran as ATen kernels: coil's
    library calls (logged by coil) and Inductor's ATen fallbacks."""

    def __init__(self, name):
        self.name = name
        if name == "coil":  # a build tree on PYTHONPATH (the GPU machine) has no entry point
            import coil

            coil.register()
        self.inner = torch._dynamo.lookup_backend(name)
        self.graphs = []  # call_function nodes per graph, this sample
        self.targets = set()  # Inductor: the post-grad graphs' ops, this sample
        self.library = set()  # coil: the ops it logged as library calls, this sample
        if name == "coil":
            self.fallback_warning, self.error_warning = coil.FallbackWarning, coil.CompileErrorWarning
            self._watch_coil()
        else:
            self.fallback_warning = self.error_warning = None
        if name == "inductor":
            self._watch_inductor()

    def __call__(self, gm, example_inputs):
        self.graphs.append(sum(n.op == "call_function" for n in gm.graph.nodes))
        return self.inner(gm, example_inputs)

    def start_sample(self):
        self.graphs, self.targets, self.library = [], set(), set()

    def aten_calls(self):
        """The ops of this sample the backend ran as ATen kernels."""
        if self.name == "coil":
            return sorted(self.library)
        from torch._inductor.lowering import fallbacks

        return sorted(str(t) for t in self.targets if t in fallbacks)

    def _watch_coil(self):
        """coil logs its library calls ("... call PyTorch's library kernels: a, b") at INFO."""
        backend = self

        class Recorder(logging.Handler):
            def emit(self, record):
                _, found, ops = record.getMessage().partition("library kernels: ")
                if found:
                    backend.library.update(op.strip() for op in ops.split(","))

        logger = logging.getLogger("coil")
        logger.setLevel(logging.INFO)
        logger.addHandler(Recorder())
        logger.propagate = False

    def _watch_inductor(self):
        """Notes the ops of each post-grad graph; those in torch._inductor.lowering.fallbacks
        after lowering (which adds the implicit ones) ran in ATen. Inductor's FX graph cache is
        off so that every graph is lowered and seen here."""
        import torch._inductor.config as config
        from torch._inductor.custom_graph_pass import CustomGraphPass

        backend = self

        class Recorder(CustomGraphPass):
            def __call__(self, graph):
                backend.targets.update(n.target for n in graph.nodes if n.op == "call_function")

            def uuid(self):
                return "opinfo-recorder"

        config.fx_graph_cache = False
        config.post_grad_custom_post_pass = Recorder()


def run_unit(op, device, dtype, count, backend, seed, grad=False):
    """Yields ("start", i) before sample i and ("result", record) after it, for the first
    `count` samples of `op` in `dtype`; samples are drawn after torch.manual_seed(seed).
    `grad`: the samples' gradients are compared (one backward through each float output, with
    the same random cotangents), not their outputs."""
    torch.manual_seed(seed)
    try:
        samples = list(itertools.islice(op.sample_inputs(device, dtype, requires_grad=grad), count))
    except Exception as e:  # op_db's own generator failing is not the backend's business
        yield "result", {"sample": None, "status": "skip", "detail": f"sample_inputs raised {_message(e)}"}
        return
    if not samples:
        yield "result", {"sample": None, "status": "skip", "detail": "no samples"}
    for i, sample in enumerate(samples):
        yield "start", i
        began = time.perf_counter()
        try:
            record = check_sample(op, sample, device, dtype, backend, seed + i, grad)
        except Exception as e:  # shown as a crash so that it gets fixed, with what it is
            record = {"status": "crash", "detail": f"error in the OpInfo harness: {_message(e)}"}
        yield "result", dict(record, sample=i, seconds=round(time.perf_counter() - began, 3))


def check_sample(op, sample, device, dtype, backend, seed, grad=False):
    """The record of one sample: status, detail (one line), graphs and what else was noticed.
    `grad`: what is compared is the gradients of the sample's inputs (_run_grad)."""
    call = (sample.input, tuple(sample.args), dict(sample.kwargs))
    run = _run_grad if grad else _run_values
    eager_inputs = _copy(call)
    try:
        want = run(op.op, eager_inputs, seed)
    except Exception as e:
        return {"status": "skip", "detail": f"eager raises {_message(e)}"}
    record = {}
    values = op.name not in UNDETERMINED
    if values and _differs_between_runs(op, call, want, eager_inputs, seed, run):
        values, record["note"] = False, "eager output changes between runs: structure compared only"
    compiled_inputs = _copy(call)
    backend.start_sample()
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a, **k: op.op(*a, **k), backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = run(compiled, compiled_inputs, seed)
            if device == "cuda":
                torch.cuda.synchronize()  # a kernel's fault shows here, not in a later sample
        except Exception as e:
            return dict(record, status="crash", detail=_message(e), graphs=backend.graphs)
    record["graphs"] = backend.graphs
    record["aten_calls"] = backend.aten_calls()
    errors = _messages(caught, backend.error_warning)
    if errors:
        return dict(record, status="crash", detail=errors[0])
    found = difference(got, want, "output", values) or difference(compiled_inputs, eager_inputs, "inputs", values)
    if found and values and dtype in LOW_PRECISION and _matches_f32_reference(op, call, dtype, seed, got, compiled_inputs, run):
        found, record["note"] = None, "matches the f32 reference, not eager"
    low_grad = grad and dtype in LOW_PRECISION
    if (found and values and (dtype == torch.float32 or low_grad) and not difference(compiled_inputs, eager_inputs, "inputs")
            and _as_accurate_as_eager(op, call, seed, got, want, functools.partial(run, cotangent_dtype=dtype) if low_grad else run,
                                      dtype)):
        found, record["note"] = None, "as close to the f64 reference as eager"
    if found:
        return dict(record, status="mismatch", detail=found)
    fallbacks = _messages(caught, backend.fallback_warning)
    if fallbacks:
        return dict(record, status="fallback", detail=fallbacks[0])
    return dict(record, status="pass", detail="" if any(backend.graphs) else "no graph with ops reached the backend")


def _copy(call):
    """A copy of the sample's (input, args, kwargs) that keeps tensors that alias each other
    aliased; sparse compressed tensors, which deepcopy refuses, are cloned one by one."""
    try:
        return copy.deepcopy(call)
    except (NotImplementedError, RuntimeError):
        return tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, call)


def _run_values(fn, call, seed):
    inputs, args, kwargs = call
    torch.manual_seed(seed)
    with torch.no_grad():
        return fn(inputs, *args, **kwargs)


def _run_grad(fn, call, seed, cotangent_dtype=None):
    """The gradients of the call's tensors that require them (fresh leaves, in order; None where
    unused) from one backward through its floating outputs, each weighted by a random cotangent
    drawn from `seed` (rounded to `cotangent_dtype` first, where given: a 16-bit problem's
    cotangents in its f64 reference). Raises where there is nothing to differentiate (the sample
    is skipped)."""
    call = map_tensors(call, lambda t: t.detach().requires_grad_() if t.requires_grad else t)
    leaves = []
    map_tensors(call, lambda t: leaves.append(t) if t.requires_grad else None)
    inputs, args, kwargs = call
    torch.manual_seed(seed)
    out = fn(inputs, *args, **kwargs)
    outs = [t for t in _tensors(out) if t.requires_grad and t.dtype.is_floating_point]
    if not leaves or not outs:
        raise RuntimeError("no differentiable output or input")
    g = torch.Generator().manual_seed(seed)
    cotangents = [torch.randn(t.shape, generator=g, dtype=torch.float32).to(cotangent_dtype or t.dtype).to(t) for t in outs]
    grads = torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)
    return tuple(None if v is None else v.detach() for v in grads)


def _differs_between_runs(op, call, want, eager_inputs, seed, run=_run_values):
    """Whether eager gives other values on a second run with the same seed (random ops that
    are not in UNDETERMINED, uninitialized memory)."""
    again_inputs = _copy(call)
    try:
        again = run(op.op, again_inputs, seed)
    except Exception:
        return True
    return bool(difference(again, want) or difference(again_inputs, eager_inputs, "inputs"))


# assert_close's relative tolerance per dtype, above the f64 reference's error allowance.
_RTOL = {torch.float32: 1.3e-6, torch.bfloat16: 1.6e-2, torch.float16: 1e-3}


def _as_accurate_as_eager(op, call, seed, got, want, run=_run_values, dtype=torch.float32):
    """Whether a result is no further from the op run in float64 (on the same inputs of `dtype`,
    upcast) than eager's result is, element by element or within twice eager's largest error over
    the tensor, and within assert_close's tolerances for `dtype`: sums taken in another order (a
    GEMM's algorithm, a reduction's split) or rounded at other steps differ from eager's by the
    rounding each makes, and a result as close to the exact answer is not wrong. (A 16-bit
    gradient's reference takes the same 16-bit inputs and cotangents: `run` rounds them.)"""
    inputs = map_tensors(_copy(call), lambda t: t.detach().double().requires_grad_(t.requires_grad) if t.dtype == dtype else t)
    try:
        exact = run(op.op, inputs, seed)
    except Exception:
        return False
    got_t, want_t, exact_t = _tensors(got), _tensors(want), _tensors(exact)
    if not (len(got_t) == len(want_t) == len(exact_t)) or not got_t:
        return False
    for g, w, r in zip(got_t, want_t, exact_t):
        if g.shape != w.shape or g.dtype != w.dtype or g.device != w.device:
            return False
        if not g.dtype.is_floating_point:
            if not torch.equal(g, w):
                return False
            continue
        g64, w64, r64 = g.double(), w.double(), r.double().to(g.device)
        same_nan = g64.isnan() == w64.isnan()
        # Eager's own error, element by element, or twice its largest over the tensor: another
        # summation order (a GEMM library's blocking) has errors of that size where eager's
        # happen to be small.
        eager_error = (w64 - r64).abs()
        finite = eager_error[torch.isfinite(eager_error)]
        scale = 2 * finite.max() if finite.numel() else torch.zeros((), dtype=torch.float64, device=g.device)
        allowed = torch.maximum(eager_error, scale) + 1e-5 + _RTOL[dtype] * r64.abs()
        close = ((g64 - r64).abs() <= allowed) | (g64 == w64) | (g64.isnan() & w64.isnan())
        if not bool((same_nan & close).all()):
            return False
    return True


def _tensors(value):
    out = []
    map_tensors(value, lambda t: out.append(t) or t)
    return out


def _matches_f32_reference(op, call, dtype, seed, got, compiled_inputs, run):
    """Whether a 16-bit result is close to the op run in float32 on upcast inputs and cast back:
    a compiler that keeps intermediates in float32 is more accurate than eager, not wrong
    (Inductor's OpInfo test accepts the same reference)."""
    inputs = map_tensors(upcast(_copy(call), dtype), lambda t: t.detach().requires_grad_(t.requires_grad))
    try:
        want = downcast(run(op.op, inputs, seed), dtype)
    except Exception:
        return False
    return not (difference(got, want) or difference(compiled_inputs, downcast(inputs, dtype), "inputs"))


def _messages(caught, category):
    if category is None:
        return []
    return list(dict.fromkeys(_one_line(str(w.message)) for w in caught if issubclass(w.category, category)))


def _message(error):
    return _one_line(f"{type(error).__name__}: {error}")


def _one_line(text, limit=600):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."
