"""Differential test of every op against PyTorch eager: coil's shape/dtype inference (the
graphs leave output types out) and its reference interpreter (values), on the cases of
op_cases.py. Where PyTorch raises, coil must reject the graph with exit code 1.

Every case runs twice: with `coil run --interpret` (the reference interpreter) and compiled
(the CPU compiler, whose results must match PyTorch just as closely), and on a GPU machine
(COIL_TEST_DEVICE=cuda) compiled for CUDA as well."""
import os
import re
import subprocess
import tempfile
import warnings
from pathlib import Path

import pytest
import torch

from conftest import COIL, COMPILED_MODES, read_safetensors, write_safetensors
from op_cases import CASES, NAME

OPS_DEF = Path(__file__).resolve().parents[2] / "include" / "coil" / "ops.def"
# (torch_call runs only inside the program that embeds coil, which the CLI is not: test_host_calls.py
# and the HostCalls gtests test it.)
OPS = [m.group(2) for m in re.finditer(r'^COIL_OP\(\w+, (\w+), "([\w.]+)\(', OPS_DEF.read_text(), re.M)
       if m.group(1) != "source" and m.group(2) != "torch_call"]

# (rtol, atol) per float dtype. coil computes in double and rounds once, so it should be at
# least as accurate as torch; these allow for torch's own rounding (about one ulp). A sum of
# products (case.terms of them per element: matrix products, convolutions) is allowed more:
# BLAS sums K products in the accumulation dtype in any order, within K * eps * sum(|products|)
# of the exact sum (summed_error).
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-6), torch.float16: (1e-3, 1e-3),
       torch.bfloat16: (1e-2, 1e-2)}


def summed_error(case, i, dtype):
    """The error an f32 (f64 for f64) sum of case.terms products may carry at each element of
    output i: terms * eps * the sum of the products' magnitudes (the graph replayed on absolute
    values), or 0 for an op that sums no products."""
    if not case.terms or not dtype.is_floating_point:
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        magnitudes = case.graph.replay(case.outputs, upcast=True, absolute=True)[i]
    accumulate = torch.float64 if dtype == torch.float64 else torch.float32
    return case.terms * torch.finfo(accumulate).eps * magnitudes.abs()


def assert_near(got, want, rtol, atol, what):
    """|got - want| <= atol + rtol * |want| elementwise (atol may be a tensor); NaN matches NaN and
    infinities match themselves."""
    g, w = got.to(torch.float64), want.to(torch.float64)
    allowed = atol + rtol * w.abs()
    ok = (g == w) | (g.isnan() & w.isnan()) | ((g - w).abs() <= allowed)
    if bool(ok.all()):
        return
    bad = (~ok).nonzero()[:5].tolist()
    lines = [f"  at {tuple(i)}: coil {g[tuple(i)].item()!r}, torch {w[tuple(i)].item()!r}, allowed error "
             f"{(allowed if allowed.dim() else allowed.expand_as(w))[tuple(i)].item():.3g}" for i in bad]
    raise AssertionError(f"{what}: {int((~ok).sum())} of {ok.numel()} elements differ\n" + "\n".join(lines))
DTYPE_BY_NAME = {v: k for k, v in NAME.items()}


def test_every_op_has_a_case():
    tested = {c.op for c in CASES}
    missing = [op for op in OPS if op not in tested]
    assert not missing, f"ops without a case in op_cases.py: {missing}"
    assert len(OPS) > 130


def coil(cmd, text, inputs=None, out=False, compiled=False, device="cpu"):
    with tempfile.TemporaryDirectory() as d:
        graph = Path(d) / "t.coil"
        graph.write_text(text)
        args = [COIL, cmd, str(graph)]
        if inputs:
            write_safetensors(Path(d) / "in.safetensors", inputs)
            args += ["--inputs", str(Path(d) / "in.safetensors")]
        if out:
            args += ["--out", str(Path(d) / "out.safetensors")]
            if not compiled:
                args.append("--interpret")
            elif device != "cpu":
                args += ["--device", device]
        proc = subprocess.run(args, capture_output=True, text=True)
        outputs = read_safetensors(Path(d) / "out.safetensors") if out and proc.returncode == 0 else None
    return proc, outputs


TYPE = re.compile(r"(\w+)\[([^\]]*)\](?: strides=\[([^\]]*)\])?(?: offset=(-?\d+))?")


def printed_layouts(printed, names):
    """(strides, offset) of the named values, from the types `coil check` prints."""
    out = {}
    for line in printed.splitlines():
        m = re.match(r"\s*((?:%\w+(?:, )?)+) = .*\) : (.*)$", line)
        if not m:
            continue
        lhs = [n.strip()[1:] for n in m.group(1).split(",")]
        for name, t in zip(lhs, TYPE.finditer(m.group(2))):
            if name in names:
                sizes = [int(s) for s in t.group(2).split(",") if s.strip()]
                strides = [int(s) for s in t.group(3).split(",")] if t.group(3) else contiguous(sizes)
                out[name] = (strides, int(t.group(4) or 0))
    return out


def contiguous(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.insert(0, acc)
        acc *= max(s, 1)
    return strides


def comparable_strides(t, strides):
    """Strides of dims that can be told apart: a size-1 dim's stride is never used, and an
    empty tensor has no layout."""
    if t.numel() == 0:
        return None
    return [s for s, n in zip(strides, t.shape) if n != 1]


def torch_expected(case):
    """(outputs, error): the torch replay, or the exception it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if case.ref is not None:
                return case.ref(case.graph), None
            return case.graph.replay(case.outputs), None
    except (RuntimeError, ValueError, IndexError, TypeError, ZeroDivisionError) as e:
        return None, e


def shard(cases):
    """COIL_TEST_SHARD=A:B keeps the cases from fraction A to B of the list (a GPU run in parts)."""
    spec = os.environ.get("COIL_TEST_SHARD")
    if not spec:
        return cases
    a, b = (float(x) for x in spec.split(":"))
    return cases[int(a * len(cases)):int(b * len(cases))]


SHARD = shard(CASES)


@pytest.mark.parametrize("mode", ["interpret", *COMPILED_MODES])
@pytest.mark.parametrize("case", SHARD, ids=[c.id for c in SHARD])
def test_op(case, mode):
    text = case.graph.text(case.outputs)
    expected, error = torch_expected(case)
    proc, actual = coil("run", text, case.graph.inputs, out=True, compiled=mode != "interpret",
                        device="cuda" if mode == "cuda" else "cpu")
    where = f"\n--- graph ---\n{text}--- coil stderr ---\n{proc.stderr.strip()}"
    if case.coil_rejects:
        assert error is None, f"torch raised {error!r}; the case expects torch to accept it"
        assert proc.returncode == 1, f"coil should reject this ({case.coil_rejects}){where}"
        return
    if error is not None:
        assert proc.returncode == 1, f"torch raised {type(error).__name__}: {str(error)[:300]}\nbut coil " \
                                     f"{'accepted it' if proc.returncode == 0 else 'crashed'}{where}"
        assert "coil: error:" in proc.stderr
        return
    assert proc.returncode == 0, f"coil failed but torch gives {[(e.dtype, tuple(e.shape)) for e in expected]}{where}"
    assert len(actual) == len(expected)
    values64 = None
    if case.ref64:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values64 = case.graph.replay(case.outputs, upcast=True)
    for i, (name, want) in enumerate(zip(case.outputs, expected)):
        got = actual[name]
        assert (got.dtype, tuple(got.shape)) == (want.dtype, tuple(want.shape)), \
            f"output %{name}: coil infers {got.dtype}{list(got.shape)}, torch gives {want.dtype}{list(want.shape)}{where}"
        if not case.values:
            continue
        if values64 is not None:
            want = values64[i].to(want.dtype)
        if want.dtype.is_floating_point:
            rtol, atol = case.tol or TOL[want.dtype]
            assert_near(got, want, rtol, atol + summed_error(case, i, want.dtype), f"output %{name}{where}")
        else:
            assert torch.equal(got, want), f"output %{name}:\ncoil  {got}\ntorch {want}{where}"
    if case.strides:
        check_proc, _ = coil("check", text)
        layouts = printed_layouts(check_proc.stdout, set(case.outputs))
        for name, want in zip(case.outputs, expected):
            strides, offset = layouts[name]
            assert comparable_strides(want, strides) == comparable_strides(want, list(want.stride())), \
                f"output %{name}: coil infers strides {strides}, torch has {list(want.stride())}{where}"
            if want.numel():
                assert offset == want.storage_offset(), \
                    f"output %{name}: coil infers offset {offset}, torch has {want.storage_offset()}{where}"
