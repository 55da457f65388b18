"""torch.compile(backend="coil") keeps PyTorch's semantics where a program can observe them:
0-d CPU tensors meet device tensors as scalars, output strides follow PyTorch's (later views
rely on them), tensors crossing into and out of the parts PyTorch runs keep their layout,
returned views alias, and a graph coil fails on still runs (in eager, with one warning).

Runs on the CPU everywhere and on CUDA where there is a GPU (scripts/gpu-check).
"""
import warnings

import pytest
import torch
import torch.nn.functional as F

coil = pytest.importorskip("coil")
coil.register()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def run(fn, *args, **compile_kwargs):
    """(eager result, coil result, coil's warnings), under no_grad, on copies of the arguments."""
    with torch.no_grad():
        want = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(fn, backend="coil", **compile_kwargs)(*args)
    return want, got, [w for w in caught if issubclass(w.category, coil.FallbackWarning)]


def same(want, got, rtol=1e-5, atol=1e-5, strides=True):
    want = want if isinstance(want, (tuple, list)) else [want]
    got = got if isinstance(got, (tuple, list)) else [got]
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device)
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if strides and w.numel() > 1:
            sig = lambda t: [st for n, st in zip(t.shape, t.stride()) if n != 1]  # noqa: E731
            assert sig(g) == sig(w), f"strides {g.stride()} where PyTorch has {w.stride()}"


# -- 0-d CPU tensors are scalars next to device tensors -------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_cpu_scalar_tensors_meet_device_tensors(device):
    def f(x, s):
        mask = torch.tensor(torch.finfo(x.dtype).min)  # a lifted constant, as Hugging Face masks make
        y = torch.where(x > 0, x, mask) + s * torch.tensor(3.0)
        return torch.minimum(y, s), y.amax() * s

    x = torch.randn(4, 8, device=device)
    s = torch.tensor(0.5)  # 0-d, on the CPU, as a per-call input
    want, got, said = run(f, x, s)
    same(want, got)
    assert not [w for w in said if issubclass(w.category, coil.CompileErrorWarning)], [str(w.message) for w in said]


@pytest.mark.parametrize("device", DEVICES)
def test_cpu_scalar_tensor_returned(device):
    def f(x, s):
        return x * 2, s + 1  # the scalar stays on the CPU, as in eager

    want, got, _ = run(f, torch.randn(5, device=device), torch.tensor(2.0))
    same(want, got)


# -- output strides follow PyTorch's ---------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_a_view_after_a_permuted_result(device):
    """PyTorch's pointwise result keeps its input's permuted layout, so the transpose back is
    contiguous and `view` works; coil used to lay the result out contiguously and refuse the view
    (the ViT/MultiheadAttention failure on CUDA, where attention's output is permuted)."""
    def f(x):
        y = x.transpose(1, 2) * 2 + 1
        return y.transpose(1, 2).view(x.shape[0], -1), y

    want, got, said = run(f, torch.randn(3, 5, 7, device=device))
    same(want, got)
    assert not said, [str(w.message) for w in said]


@pytest.mark.parametrize("device", DEVICES)
def test_multihead_attention_batch_first(device):
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).to(device).eval()
    x = torch.randn(2, 10, 64, device=device)
    want, got, said = run(lambda q: mha(q, q, q, need_weights=False)[0], x)
    same(want, got, rtol=2e-4, atol=2e-4, strides=False)
    assert not [w for w in said if issubclass(w.category, coil.CompileErrorWarning)], [str(w.message) for w in said]


@pytest.mark.parametrize("device", DEVICES)
def test_output_strides_match_eager(device):
    def f(x, img):
        return (x.permute(2, 0, 1) * 3, x.transpose(0, 1).contiguous(), x[:, 1:, ::2] + 0, img.relu() * 2,
                x.sum(dim=1, keepdim=True).expand(-1, 4, -1))

    img = torch.randn(2, 3, 5, 5, device=device).to(memory_format=torch.channels_last)
    want, got, _ = run(f, torch.randn(3, 4, 6, device=device), img)
    same(want, got)


# -- tensors crossing the parts PyTorch runs keep their layout --------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_expanded_tensor_crossing_a_fallback(device):
    """An expanded (stride-0) value made by coil and read by a part PyTorch runs and by coil
    again: half the values came back wrong when coil returned it contiguous."""
    a = torch.randn(1, 2, 3, device=device)

    def f(a):
        e = a.expand(2, 2, 3)
        return e / torch.linalg.vector_norm(e, dim=-1, keepdim=True)

    def g(a):
        e = (a * 1.5).expand(2, 2, 3)
        return e / torch.linalg.vector_norm(e, dim=-1, keepdim=True), e

    for fn in (f, g):
        torch._dynamo.reset()
        want, got, _ = run(fn, a)
        same(want, got, strides=False)


@pytest.mark.parametrize("device", DEVICES)
def test_cosine_similarity_broadcast(device):
    x, y = torch.randn(1, 2, 3, device=device), torch.randn(2, 1, 3, device=device)
    want, got, _ = run(lambda a, b: F.cosine_similarity(a, b, dim=-1), x, y)
    same(want, got, strides=False)


# -- returned views alias --------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_returned_views_alias_each_other(device):
    f = torch.compile(lambda x: (lambda y: (y, y.view(2, 2)))(x * 2), backend="coil")
    with torch.no_grad():
        p, q = f(torch.ones(4, device=device))
        p.add_(10)
    assert q.flatten().tolist() == [12.0] * 4


@pytest.mark.parametrize("device", DEVICES)
def test_returned_views_of_inputs_alias_them(device):
    f = torch.compile(lambda x: (x[1:], x.view(2, 3).t(), x * 2), backend="coil")
    x = torch.arange(6.0, device=device)
    with torch.no_grad():
        a, b, c = f(x)
        x.add_(100)
    assert a.tolist() == list(range(101, 106)) and b[0].tolist() == [100.0, 103.0]
    assert c.tolist() == [2.0 * i for i in range(6)]


# -- the fallback guarantee -----------------------------------------------------------------

def test_a_graph_coil_fails_on_still_runs(monkeypatch):
    def broken(*_args, **_kwargs):
        raise coil.CoilError("an internal failure")

    monkeypatch.setattr(coil._coil, "Compiled", broken)
    x = torch.randn(4, 4)
    want, got, said = run(lambda x: torch.relu(x) * 2, x)
    same(want, got)
    assert [w for w in said if issubclass(w.category, coil.CompileErrorWarning)], "no CompileErrorWarning"
    with pytest.raises(Exception, match="internal failure"):
        torch._dynamo.reset()
        coil.compile(lambda x: torch.relu(x) * 2, fallback="error")(x)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.float8_e4m3fn, torch.complex64])
def test_dtypes_coil_does_not_know_run_in_eager(dtype):
    """uint16 and fp8 run in PyTorch; complex values compile as real pairs (see
    test_torch_compile_complex.py) except in ops with no rule, here a product with a complex
    number, which run in PyTorch."""
    def f(x):
        y = (x * 2).to(dtype)
        return torch.view_as_real(y * (1 + 2j)) if dtype.is_complex else y.to(torch.float32) + 1

    want, got, said = run(f, torch.randn(4, 4))
    same(want, got)
    assert said and not [w for w in said if issubclass(w.category, coil.CompileErrorWarning)], [str(w.message) for w in said]


# -- ops coil compiles through decompositions ------------------------------------------------

DECOMPOSED = {
    "linalg_vector_norm": lambda x, y: torch.linalg.vector_norm(x, dim=-1) + torch.linalg.vector_norm(y, ord=3, dim=0),
    "fmax_fmin": lambda x, y: torch.fmax(x, y) + torch.fmin(x, y),
    "var_mean": lambda x, y: torch.var_mean(x, dim=1)[0] * torch.var_mean(y, dim=1, correction=0)[1],
    "addmv": lambda x, y: torch.addmv(x[0], y, x[1], beta=0.5, alpha=2),
    "addbmm": lambda x, y: torch.addbmm(y, torch.stack([x, y]), torch.stack([y.t(), x]), beta=0.5, alpha=1.5),
    "lifted_constant": lambda x, y: x + torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], device=x.device),
    "floor_divide": lambda x, y: torch.floor_divide(x, y),
    "avg_pool2d_pad_interpolate": lambda x, y: F.interpolate(F.avg_pool2d(F.pad(x.view(1, 1, 8, 8), (1, 2), value=3.0),
                                                                          2), scale_factor=2, mode="bilinear"),
    # coil's own decompositions into its scatters, gathers and reductions
    "index_add_index_reduce": lambda x, y: (x.index_add(0, torch.tensor([1, 3, 1], device=x.device), y[:3], alpha=2)
                                            + x.index_reduce(1, torch.tensor([0, 0, 7], device=x.device), y[:, :3], "amax")),
    "masked_scatter": lambda x, y: x.masked_scatter(y > 3.5, y * 2),
    "searchsorted_bucketize": lambda x, y: (torch.searchsorted(torch.linspace(-2, 2, 9, device=x.device), x, right=True)
                                            + torch.bucketize(x, torch.cumsum(y[1].abs(), 0) - 6)),
    "unfold": lambda x, y: x.unfold(1, 3, 2) * 2,
    "diagonal_scatter": lambda x, y: torch.diagonal_scatter(x, y[0, :7], offset=1) + torch.diagonal_scatter(x, y[1], 0, 1, 0),
    "unbind": lambda x, y: sum(t * i for i, t in enumerate(torch.unbind(x * y, 1))),
    "bilinear": lambda x, y: F.bilinear(x, y, torch.linspace(-1, 1, 192, device=x.device).view(3, 8, 8)),
    "scans": lambda x, y: torch.cummax(x, 1).values + torch.cummin(x, 0).indices + torch.logcumsumexp(x, 1) + torch.cumprod(y / 3, 0),
    "scatter_reduce_index_put": lambda x, y: x.scatter_reduce(1, (y.abs() * 2).long() % 8, y, "mean", include_self=False)
                                             .index_put((torch.tensor([0, 2, 0], device=x.device),), y[:3], accumulate=True),
    "masked_put": lambda x, y: x.index_put((y[:, 0] > 3,), y[0]),
    "max_pool3d_adaptive_pools": lambda x, y: (
        F.max_pool3d(x.view(1, 4, 4, 4), 2, 1, padding=1, dilation=(1, 2, 1), ceil_mode=True, return_indices=True)[1].sum()
        + F.adaptive_max_pool2d(y.view(2, 4, 8), (3, 5), return_indices=True)[0].sum()
        + F.adaptive_avg_pool3d(x.view(1, 4, 4, 4), (3, 2, 3))),
    "as_strided_scatter": lambda x, y: torch.as_strided_scatter(x * 1, y[:3, :2] + 1, (3, 2), (9, 2), 1),
    "legacy_convolution": lambda x, y: torch._convolution(x.view(1, 2, 4, 8), y[:4].reshape(2, 2, 2, 4), None, [1, 2],
                                                          [1, 0], [1, 1], False, [0, 0], 1, False, False, True, True),
    # cudnn_grid_sampler on CUDA (grid_sampler_2d on the CPU)
    "grid_sample_aligned_corners": lambda x, y: F.grid_sample(x.view(1, 2, 4, 8), (y[:6].reshape(1, 3, 8, 2) - 3) * 0.6,
                                                              align_corners=True),
    "int_div_by_number_tri_indices": lambda x, y: (
        x[:2, :3] * torch.triu_indices(4, 3, 1, device=x.device) + torch.tril_indices(3, 4, 1, device=x.device)[:, :3]
        + torch.div((y * 4).long(), -3, rounding_mode="floor")[:2, :3] + torch.div((y * 4).long(), 3, rounding_mode="trunc")[:2, :3]),
    "max_pool2d_backward": lambda x, y: torch.ops.aten.max_pool2d_with_indices_backward(
        y[:4, :4].reshape(1, 2, 2, 4), x.view(1, 2, 4, 8), [3, 3], [2, 2], [1, 1], [1, 1], False,
        F.max_pool2d(x.view(1, 2, 4, 8), 3, 2, 1, return_indices=True)[1]),
    "avg_pool3d": lambda x, y: (F.avg_pool3d(x.view(1, 1, 4, 4, 4), 3, 2, padding=1, ceil_mode=True, count_include_pad=False)
                                .sum() + F.avg_pool3d(y.view(2, 2, 4, 4), (2, 3, 1), divisor_override=5)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(DECOMPOSED))
def test_ops_compiled_through_decompositions(name, device):
    x, y = torch.randn(8, 8, device=device), torch.randn(8, 8, device=device) + 3
    want, got, said = run(DECOMPOSED[name], x, y)
    same(want, got, rtol=1e-4, atol=1e-4, strides=False)
    assert not said, [str(w.message) for w in said]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["overlapping-ceil", "dilated-channels-last", "unbatched"])
def test_max_pool2d_backward_gathers_each_elements_windows(device, dtype, case):
    """max_pool2d_with_indices_backward (a training graph's) compiles as a gather: every input
    element sums the gradients of the overlapping windows whose max it was, in f32, and the
    result has ATen's layout (channels-last for a channels-last input)."""
    shape, k, stride, pad, dil, ceil = {"overlapping-ceil": ((2, 3, 9, 11), [3, 3], [2, 2], [1, 1], [1, 1], True),
                                        "dilated-channels-last": ((2, 4, 10, 9), [3, 2], [1, 2], [1, 0], [2, 1], False),
                                        "unbatched": ((3, 7, 8), [2, 2], [], [0, 0], [1, 1], False)}[case]
    g = torch.Generator().manual_seed(5)
    x = torch.randn(shape, generator=g).to(device, dtype)
    if case == "dilated-channels-last":
        x = x.to(memory_format=torch.channels_last)
    out, idx = F.max_pool2d(x, k, stride or None, pad, dil, ceil_mode=ceil, return_indices=True)
    grad = torch.randn(out.shape, generator=g).to(device, dtype)

    def f(grad, x, idx):
        return torch.ops.aten.max_pool2d_with_indices_backward(grad, x, k, stride, pad, dil, ceil, idx)

    want, got, said = run(f, grad, x, idx)
    reference = f(grad.float(), x.float(), idx).to(dtype)  # sums in f32, rounded once
    tol = 1e-5 if dtype == torch.float32 else 1e-2  # one 16-bit rounding
    torch.testing.assert_close(got.float(), reference.float(), rtol=tol, atol=tol)
    assert got.stride() == want.stride() and not said, [str(w.message) for w in said]


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8])
def test_max_pool3d_of_integers_picks_the_first_largest(dtype):
    """Integer max_pool3d (CPU: ATen's CUDA kernel takes floats only) pads with the dtype's
    lowest value and picks, among many ties, the first element of the window equal to its max."""
    x = torch.randint(0, 5, (2, 3, 5, 6, 7), generator=torch.Generator().manual_seed(2)).to(dtype)
    want, got, said = run(lambda x: F.max_pool3d(x, 3, 2, 1, dilation=(1, 2, 1), ceil_mode=True, return_indices=True), x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and not said, [str(w.message) for w in said]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_addbmm_16_bit_rounds_once(device, dtype):
    """coil's addbmm decomposition sums the batch's products in f32 and rounds once (it rounded
    the bmm to 16 bits first: one 16-bit step off eager and the f32 reference)."""
    g = torch.Generator().manual_seed(0)
    a, b1, b2 = (9 * torch.randn(*s, generator=g).to(device, dtype) for s in ((5, 10), (5, 5, 5), (5, 5, 10)))
    _, got, said = run(torch.addbmm, a, b1, b2)
    reference = torch.addbmm(a.float(), b1.float(), b2.float()).to(dtype)
    assert torch.equal(got, reference) or torch.allclose(got.float(), reference.float(), rtol=0, atol=0.0)
    assert not said, [str(w.message) for w in said]


# -- a graph without tensor inputs runs where it makes its tensors ---------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_factory_graph_runs_on_its_device(device):
    def f():
        grid = torch.arange(0, 12, 2, device=device, dtype=torch.float32)
        return torch.full((3, 6), 2.5, device=device) * grid + torch.eye(3, 6, device=device), torch.zeros(4, device=device)

    want, got, said = run(f)
    assert not said, [str(w.message) for w in said]
    same(want, got)


def test_graph_device_of_a_graph_without_tensor_inputs():
    from coil import _backend

    made = [torch.empty(2, device="meta"), 3]
    assert _backend._graph_device([], made) == torch.device("meta")
    assert _backend._graph_device([torch.tensor(1.0)], made) == torch.device("meta")  # a 0-d CPU input is a scalar
    assert _backend._graph_device([], [], default="cpu") == torch.device("cpu")


def test_dynamo_restarts_are_not_coil_failures():
    """Dynamo raises RestartAnalysis subclasses out of a backend's compile to steer itself
    (TensorifyScalarRestartAnalysis on a 0-d f64 input after a recompile): they go back to
    Dynamo, not into a CompileErrorWarning and eager."""
    fn = torch.compile(torch.i0, backend="coil")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x in [torch.rand(5, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64)]:
            torch.testing.assert_close(fn(x), torch.i0(x))
    assert not [str(w.message) for w in caught if issubclass(w.category, coil.FallbackWarning)]


def test_cpu_indices_are_taken_by_indexing_nodes_only():
    """Which nodes take CPU indices of a device tensor, checked with the device played by "meta"
    (runs without a GPU): index / index_put take them and a graph whose CPU inputs only they
    read compiles whole; another op reading the CPU tensor does not take it."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from coil import _support

    x, v = torch.randn(5, 6, device="meta"), torch.randn(6, device="meta")
    idx, mask = torch.tensor([4, 0, 2]), torch.tensor([True, False, True, True, False])
    meta = torch.device("meta")
    gm = make_fx(lambda x, idx, mask, v: (x[idx] + 1, x[:, idx].sum(dim=1), x.index_put((mask,), v)))(x, idx, mask, v)
    assert all(_support.node_supported(n, meta) for n in gm.graph.nodes if n.op == "call_function")
    assert all(_support.takes_input(n, meta) for n in gm.graph.nodes if n.op == "placeholder")
    gm = make_fx(lambda x, idx: (x[idx], idx * 2))(x, idx)
    assert not [n.name for n in gm.graph.nodes if n.op == "placeholder" and _support.takes_input(n, meta)
                and n.name.startswith("idx")]
    assert not _support.node_supported(next(n for n in gm.graph.nodes if n.name == "mul"), meta)


@pytest.mark.parametrize("device", DEVICES)
def test_cpu_indices_of_device_tensors(device):
    """PyTorch indexes a CUDA tensor with CPU indices and masks (copying them over); coil
    compiles such graphs whole, the indices copied to the device per call."""
    x, v = torch.randn(5, 6, device=device), torch.randn(6, device=device)
    mask, idx = torch.tensor([True, False, True, True, False]), torch.tensor([4, 0, 2])

    def fn(x, mask, idx, v):
        return x.index_put((mask,), v) * 2, x[idx] + 1, x[:, idx].sum(dim=1)

    want, got, said = run(fn, x, mask, idx, v)
    same(want, got)
    assert not said, [str(w.message) for w in said]


@pytest.mark.parametrize("device", DEVICES)
def test_data_dependent_ops_are_dynamos_graph_breaks(device):
    """narrow / tensor_split at a tensor's value: AOTAutograd's fake tensors raise
    DataDependentOutputException, which Dynamo turns into a graph break (as for Inductor), not
    a coil failure (CompileErrorWarning) with the whole graph in eager."""
    x = torch.randn(5, 6, device=device)
    start, sections = torch.tensor(1), torch.tensor([1, 4])
    cases = [lambda x, s: torch.narrow(x * 2, 1, s, 3) + 1, lambda x, s: [t * 2 for t in torch.tensor_split(x, s, 1)]]
    for fn, arg in zip(cases, (start, sections)):
        torch._dynamo.reset()
        want, got, said = run(fn, x, arg)
        same(want, got)
        assert not said, [str(w.message) for w in said]


def test_cudnn_grid_sampler_is_bilinear_grid_sampling_with_aligned_corners():
    """The decomposition of CUDA's cudnn_grid_sampler, checked where it runs on any device."""
    from coil import _decompositions

    g = torch.Generator().manual_seed(4)
    x, grid = torch.randn(2, 3, 5, 7, generator=g), torch.rand(2, 4, 6, 2, generator=g) * 2.4 - 1.2
    got = _decompositions._extra()[torch.ops.aten.cudnn_grid_sampler.default](x, grid)
    torch.testing.assert_close(got, F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True))


def test_own_decompositions_of_ops_dynamo_rarely_hands_over():
    """expand_as, split (three overloads) and lift_fresh are decomposed by coil's own table into
    ops coil compiles, with eager's values (Dynamo and AOTAutograd usually decompose them first)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from coil import _decompositions

    aten = torch.ops.aten
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    cases = {
        aten.expand_as.default: lambda: aten.expand_as.default(y, x),
        aten.split.Tensor: lambda: aten.split.Tensor(x, 3, 1),
        aten.split.sizes: lambda: aten.split.sizes(x, [2, 6], 1),
        aten.split.default: lambda: aten.split.default(x, [1, 3], 0),
        aten.lift_fresh.default: lambda: aten.lift_fresh.default(x),
    }
    for op, fn in cases.items():
        traced = make_fx(fn, decomposition_table=_decompositions._extra())()
        assert all(n.target != op for n in traced.graph.nodes), op
        want = fn()
        for g, w in zip(*[list(v) if isinstance(v, (list, tuple)) else [v] for v in (traced(), want)]):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_masked_put_of_one_value_per_row_runs_in_eager(device):
    """x[mask] = v with one row of v per selected row depends on how many rows the mask selects:
    that index_put runs in eager with a FallbackWarning (coil's inference refuses it, which would
    otherwise fail the whole graph with a CompileErrorWarning)."""
    x = torch.randn(6, 4, device=device)
    mask = torch.tensor([True, False, True, False, False, True], device=device)
    rows = torch.randn(3, 4, device=device)
    want, got, said = run(lambda x, m, v: x.index_put((m,), v) * 2, x, mask, rows)
    same(want, got)
    assert said and not [w for w in said if issubclass(w.category, coil.CompileErrorWarning)], [str(w.message) for w in said]


def test_the_decomposition_table_is_made_once_and_each_compile_gets_its_own():
    """coil's table (Core ATen's, less the ops it keeps whole, plus its own) is made once per
    process and per training flag; a caller that changes its copy changes nobody else's."""
    from coil import _decompositions

    aten = torch.ops.aten
    for training in (False, True):
        first, second = _decompositions.core(training), _decompositions.core(training)
        assert first == second and first is not second
        assert aten.addcdiv.default not in first  # kept whole
        assert (aten._softmax.default in first) == training
        first.clear()
        assert _decompositions.core(training) == second
