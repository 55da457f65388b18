"""torch.compile(backend="coil") against PyTorch eager on single ops and small functions that
once gave wrong results or failed to compile: each must compile whole (coil says nothing: no
fallback, no compile error) and match eager, inputs the function mutates included.

Runs on the CPU everywhere and on CUDA where there is a GPU.
"""
import warnings

import pytest
import torch
import torch.nn.functional as F

coil = pytest.importorskip("coil")
coil.register()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# (rtol, atol): about one rounding of the dtype.
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3),
       torch.bfloat16: (8e-3, 8e-3)}


def compiles_like_eager(fn, *args, tol=None):
    """Runs fn eagerly and compiled (under no_grad, on copies of args) and compares the outputs and every
    tensor argument afterwards (the mutated ones); coil must not warn."""
    torch._dynamo.reset()
    eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    coil_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        want = fn(*eager_args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(fn, backend="coil")(*coil_args)
    said = [str(w.message) for w in caught if "coil" in str(w.message)]
    assert not said, f"coil did not compile it whole: {said}"
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    for i, (g, w) in enumerate(zip(got + coil_args, want + eager_args)):
        if not isinstance(w, torch.Tensor):
            continue
        what = f"output {i}" if i < len(want) else f"argument {i - len(want)}"
        assert (g.dtype, g.shape, g.device) == (w.dtype, w.shape, w.device), what
        if w.dtype.is_floating_point or w.dtype.is_complex:
            rtol, atol = tol or TOL[w.dtype.to_real()]
            torch.testing.assert_close(g.resolve_conj(), w.resolve_conj(), rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"{what}: {m}")
        else:
            assert torch.equal(g, w), f"{what}:\ncoil  {g}\neager {w}"


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# ---- batch normalization with batch statistics: the running statistics are updated in place.
# AOTAutograd's graph holds _native_batch_norm_legit_functional, whose meta gives f32 running
# statistics for 16-bit ones (the CPU kernel returns them in 16 bits), then casts them back.

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_batch_norm_training_updates_running_stats(dtype, device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, 5, generator=g).to(dtype).to(device)
    rm = torch.randn(3, generator=g).to(dtype).to(device)
    rv = (torch.rand(3, generator=g) + 0.5).to(dtype).to(device)
    compiles_like_eager(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=True, momentum=0.1), x, rm, rv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_training_affine_and_without_stats(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 3, 3, generator=g).to(dtype)
    w, b = torch.randn(4, generator=g).to(dtype), torch.randn(4, generator=g).to(dtype)
    rm, rv = torch.zeros(4, dtype=dtype), torch.ones(4, dtype=dtype)
    compiles_like_eager(lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3), x, w, b, rm, rv)
    compiles_like_eager(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_batch_norm_module_training(dtype):
    bn = torch.nn.BatchNorm2d(3).to(dtype).train()
    bn_eager = torch.nn.BatchNorm2d(3).to(dtype).train()
    x = torch.randn(2, 3, 4, 4).to(dtype)
    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(bn, backend="coil")(x)
        want = bn_eager(x)
    assert not [str(w.message) for w in caught if "coil" in str(w.message)]
    rtol, atol = TOL[dtype]
    for a, b in [(got, want), (bn.running_mean, bn_eager.running_mean), (bn.running_var, bn_eager.running_var)]:
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
    assert bn.num_batches_tracked.item() == bn_eager.num_batches_tracked.item() == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_instance_norm_with_running_stats(dtype):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 6, generator=g).to(dtype)
    rm, rv = torch.randn(3, generator=g).to(dtype), (torch.rand(3, generator=g) + 0.5).to(dtype)
    compiles_like_eager(lambda x, rm, rv: F.instance_norm(x, rm, rv, use_input_stats=True, momentum=0.2), x, rm, rv)


# ---- full reductions, gathers, views, creation and clamping that once failed to compile

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_max_and_min_without_dim(dtype):
    x = torch.randn(3, 4, 5).mul(4).to(dtype)
    compiles_like_eager(lambda x: (torch.max(x), torch.min(x), x.max() + 0), x)


def test_gather_through_an_empty_index():
    x = torch.randn(3, 5)
    for index in [torch.zeros(3, 0, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.zeros(2, 0, 4, dtype=torch.long)]:
        compiles_like_eager(lambda x, i: torch.gather(x, 1, i) if i.dim() > 1 else torch.gather(x, 0, i), x, index)


def test_as_strided_views_of_part_of_the_storage():
    x = torch.randn(10)
    compiles_like_eager(lambda x: torch.as_strided(x, (2, 2), (3, 1), 1) * 2, x)  # a strict subset
    compiles_like_eager(lambda x: torch.as_strided(x, (3, 3), (1, 1), 2) + 1, x)  # overlapping rows
    # Of a computed value's view: the offset counts from the computed value's storage.
    compiles_like_eager(lambda x: torch.as_strided((x * 2)[2:], (2, 2), (3, 1), 1) + 1, x)
    compiles_like_eager(lambda x: torch.as_strided((x * 2).view(2, 5).t(), (3, 3), (1, 2), 0) + 1, x)


def test_arange_with_bool_bounds():
    x = torch.randn(4)
    compiles_like_eager(lambda x: torch.arange(True, 5, True) + x, x)
    compiles_like_eager(lambda x: x[torch.arange(False, True)], x)


def test_clamp_of_bools_against_one_bound_tensor():
    x, lo, hi = torch.randn(3, 4) > 0, torch.rand(4) > 0.5, torch.rand(3, 1) > 0.5
    compiles_like_eager(lambda x, lo: torch.clamp_min(x, lo), x, lo)
    compiles_like_eager(lambda x, hi: torch.clamp_max(x, hi), x, hi)
    compiles_like_eager(lambda x, lo: torch.clamp(x, min=lo), x, lo)


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_average_pooling_of_int64(count_include_pad):
    # ATen's CPU kernel sums int64 and divides rounding toward zero (negative sums included).
    x = torch.randint(-50, 50, (2, 3, 7, 6))
    compiles_like_eager(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=count_include_pad), x)
    compiles_like_eager(lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=count_include_pad), x[0])
    compiles_like_eager(lambda x: F.avg_pool2d(x, (2, 3), divisor_override=4), x)


def test_local_response_norm_of_int64():
    # On a 3-d input the decomposition pools the squares (int64) with avg_pool2d.
    x = torch.randint(-9, 9, (2, 5, 7))
    compiles_like_eager(lambda x: F.local_response_norm(x, 3), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_grouped_query_attention(dtype):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 8, 5, 16, generator=g).to(dtype)
    k, v = torch.randn(2, 2, 7, 16, generator=g).to(dtype), torch.randn(2, 2, 7, 16, generator=g).to(dtype)
    tol = (2e-2, 2e-2) if dtype == torch.bfloat16 else (1e-5, 1e-5)
    compiles_like_eager(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), q, k, v, tol=tol)
    compiles_like_eager(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), q, k, v, tol=tol)


# ---- 16-bit numerics: statistics' dtypes and single rounding

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_layer_norm_statistics_dtype(dtype, device):
    # mean and rstd: f32 on CUDA for 16-bit inputs, the input's dtype on the CPU (as eager).
    x = torch.randn(4, 6, 8).to(dtype).to(device)
    compiles_like_eager(lambda x: torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_convolution_with_bias_rounds_once(dtype):
    # x = w = 1 + u, bias u / 2: rounding the product before adding the bias gives 1 + 2u, once
    # (as eager on the CPU) 1 + 3u.
    u = 2.0 ** (-10 if dtype == torch.float16 else -7)
    x = torch.full((1, 1, 4, 4), 1 + u, dtype=dtype)
    w = torch.full((2, 1, 1, 2), 1 + u, dtype=dtype)
    w[..., 1] = 0
    b = torch.full((2,), u / 2, dtype=dtype)
    compiles_like_eager(lambda x, w, b: F.conv2d(x, w, b), x, w, b, tol=(0, 0))
    x3, w3 = x.reshape(1, 1, 2, 2, 4), w.reshape(2, 1, 1, 1, 2)
    compiles_like_eager(lambda x, w, b: F.conv3d(x, w, b), x3, w3, b, tol=(0, 0))
    g = torch.Generator().manual_seed(4)
    x, w, b = (torch.randn(s, generator=g).to(dtype) for s in [(2, 3, 8, 8), (4, 3, 3, 3), (4,)])
    compiles_like_eager(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b, tol=(1e-2, 1e-2))


@pytest.mark.parametrize("op", ["addcdiv", "addcmul"])
def test_addcdiv_addcmul_f16_round_once(op):
    """aten.addcdiv / addcmul reach coil whole (the adapter's Core ATen table keeps them) and are
    computed in f32 and rounded once, as ATen's kernels: equal to eager. (torch.addcdiv(...,
    value=v) written in Python is rewritten by Dynamo itself into div, mul and add; coil's
    adapter puts them back together, so that too equals eager.)"""
    g = torch.Generator().manual_seed(5)
    x, a = torch.randn(64, 33, generator=g).half(), torch.randn(64, 33, generator=g).half()
    b = (torch.rand(64, 33, generator=g) + 0.5).half()
    aten_op = getattr(torch.ops.aten, op).default
    compiles_like_eager(lambda x, a, b: aten_op(x, a, b, value=0.3), x, a, b, tol=(0, 0))
    compiles_like_eager(lambda x, a, b: getattr(torch, op)(x, a, b, value=0.3), x, a, b, tol=(0, 0))


def test_addcdiv_with_a_value_rounds_once():
    """Dynamo traces addcdiv(a, b, c, value=v) as add(a, mul(div(b, c), v)), which rounds bf16
    twice more than ATen's kernel: coil puts the op back together and matches eager's bits."""
    g = torch.Generator().manual_seed(0)
    a, b, c = ((torch.randn(4000, generator=g) * 5).bfloat16() for _ in range(3))
    compiles_like_eager(lambda a, b, c: torch.addcdiv(a, b, c, value=3.14), a, b, c, tol=(0, 0))
    # Written out by hand, the chain is the program: its roundings stay.
    compiles_like_eager(lambda a, b, c: a + b / c * 3.14, a, b, c, tol=(0, 0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtypes", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
                                    (torch.float32, torch.float16)])
def test_softmax_gradients_of_16_bit_tensors(device, op, dtypes):
    """_softmax_backward_data / _log_softmax_backward_data of 16-bit tensors as each device's
    kernel computes them: CUDA's softmax gradient rounds grad * output to 16 bits before its f32
    sum (the Core ATen table's decomposition does not: up to 16 units off where the sum
    cancels); the rest compute in f32 and round once. (f32, f16): CUDA's half-to-float, f32
    gradients of an f16 input."""
    dtype, input_dtype = dtypes
    if device == "cpu" and input_dtype != dtype:
        pytest.skip("half-to-float is CUDA's")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 40, generator=g)
    out = (torch.softmax(x, -1) if op == "softmax" else torch.log_softmax(x, -1)).to(device, dtype)
    grad = torch.randn(16, 40, generator=g).to(device, dtype)
    aten_op = torch.ops.aten._softmax_backward_data if op == "softmax" else torch.ops.aten._log_softmax_backward_data
    # One 16-bit rounding relative to each value, however small (cancellation is where another
    # order of roundings shows).
    compiles_like_eager(lambda grad, out: aten_op(grad, out, 1, input_dtype), grad, out, tol=(8e-3, 1e-6))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_inference_saved_statistics(device, dtype):
    """native_batch_norm in inference: the CPU kernel saves nothing (0 elements); CUDA's saves
    the running mean and 1 / sqrt(running_var + eps) per channel in f32, and the traced graph
    says so: coil returns each device's."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, 5, 5, generator=g).to(device, dtype)
    w, b, mean = (torch.randn(3, generator=g).to(device, dtype) for _ in range(3))
    var = (torch.rand(3, generator=g) + 0.5).to(device, dtype)
    compiles_like_eager(lambda x, w, b, mean, var: torch.native_batch_norm(x, w, b, mean, var, False, 0.1, 1e-5),
                        x, w, b, mean, var)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_bilinear_16_bit_in_f32(device, dtype):
    """F.bilinear (_trilinear) of 16-bit tensors: coil's decomposition multiplies and sums in f32
    and rounds once; ATen rounds its pairwise products to 16 bits, so eager is checked against
    the f32 computation rounded once, within one 16-bit rounding."""
    g = torch.Generator().manual_seed(6)
    x1, x2 = torch.randn(7, 5, generator=g), torch.randn(7, 6, generator=g)
    w, b = torch.randn(3, 5, 6, generator=g), torch.randn(3, generator=g)
    args = [t.to(device, dtype) for t in (x1, x2, w, b)]
    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(F.bilinear, backend="coil")(*args)
    assert not [str(w.message) for w in caught if "coil" in str(w.message)]
    reference = F.bilinear(*[t.float() for t in args]).to(dtype)
    torch.testing.assert_close(got.float(), reference.float(), rtol=TOL[dtype][0], atol=TOL[dtype][1])
