"""PyTorch's OpInfo samples through torch.compile(backend="coil"): the CPU slice CI runs, checked
against tests/opinfo/expected_failures.txt (the whole suite: python -m tests.opinfo.run).

The slice is fixed so that CI stays within its time: the ops of op_db in shard 0 of 4 (by a CRC
of the op's name and variant, so ops added to op_db leave the others in place), in f32, i64 and
bool, one sample each, on the CPU with two worker processes: 382 ops·dtypes of 179 ops, 4.5
minutes on a busy two-core machine with an empty kernel cache (the whole CPU run, all five
dtypes: 25 minutes). It fails on every crash, mismatch or fallback the expected file does not
list, and on every listed entry that now does better.
"""
import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.opinfo import compare, expected  # noqa: E402

EXPECTED = ROOT / "tests" / "opinfo" / "expected_failures.txt"
SLICE = ["--device", "cpu", "--dtypes", "f32,i64,bool", "--samples", "1", "--shard", "0:4", "--jobs", "2"]


EXPECTED_GRAD = ROOT / "tests" / "opinfo" / "expected_grad_failures.txt"
GRAD_SLICE = ["--grad", "--device", "cpu", "--dtypes", "f32", "--samples", "1", "--shard", "0:4", "--jobs", "2"]


def run_slice(tmp_path, selection, expected, at_least):
    """Runs the OpInfo suite on `selection` against the `expected` failures; fails on any
    difference, or where fewer than `at_least` ops·dtypes ran."""
    pytest.importorskip("coil")
    if importlib.util.find_spec("expecttest") is None:  # op_db's module imports it
        pytest.fail("the OpInfo suite needs the expecttest package (requirements.txt: expecttest==0.3.0)")
    proc = subprocess.run([sys.executable, "-m", "tests.opinfo.run", *selection, "--expected", str(expected),
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert (tmp_path / "results.json").exists(), proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    ran = [u for u in results["units"] if u["status"] != "skip"]
    assert len(ran) > at_least, f"the slice ran only {len(ran)} ops·dtypes: {results['summary']}"
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n(per sample: {tmp_path / 'summary.md'})"


def test_cpu_slice_matches_expected_failures(tmp_path):
    run_slice(tmp_path, SLICE, EXPECTED, 300)


def test_cpu_gradient_slice_matches_expected_failures(tmp_path):
    """OpInfo's samples of the ops that support autograd, their inputs' gradients through coil's
    compiled backward graphs against eager's (f32, shard 0 of 4, one sample: about 130 ops,
    half a minute), checked against tests/opinfo/expected_grad_failures.txt (the whole CPU run:
    `python -m tests.opinfo.run --grad --dtypes f32 --samples 1 --write-expected FILE`)."""
    run_slice(tmp_path, GRAD_SLICE, EXPECTED_GRAD, 100)


def test_difference_walks_outputs_and_tolerates_rounding():
    x = torch.tensor([1.0, float("nan")])
    assert compare.difference((x, [3, None]), (x.clone(), [3, None])) is None
    assert compare.difference(x + 1e-7, x) is None  # within float32's default tolerance
    assert "output[0]" in compare.difference((x + 1e-3,), (x,))
    assert "dtype" in compare.difference(x.double(), x)
    assert "2 elements" in compare.difference((x, x), (x,))
    assert compare.difference(torch.rand(3), torch.rand(3), values=False) is None
    mutated = (x.clone().zero_(), (2,), {})
    assert compare.difference(mutated, (x, (2,), {}), "inputs").startswith("inputs[0]: Tensor-likes are not close")


def test_an_f32_result_as_accurate_as_eagers_passes():
    """An f32 sum taken in another order than eager's is accepted where it is no further from the
    float64 answer than eager's (within f32's tolerance, or twice eager's largest error over the
    tensor), and refused where it is further."""
    from types import SimpleNamespace

    from tests.opinfo import check

    x = torch.tensor([1e8, 1.0, -1e8, 1.0, 3.0], dtype=torch.float32)
    op = SimpleNamespace(op=lambda t: t.sum())
    call = (x, (), {})
    exact = float(x.double().sum())  # 5
    eager_like = torch.tensor(exact + 4.0)  # an order that loses the small terms
    assert check._as_accurate_as_eager(op, call, 0, torch.tensor(exact), eager_like)
    assert check._as_accurate_as_eager(op, call, 0, torch.tensor(exact - 3.0), eager_like)
    assert not check._as_accurate_as_eager(op, call, 0, torch.tensor(exact + 9.0), eager_like)
    assert not check._as_accurate_as_eager(op, call, 0, torch.tensor(float("nan")), eager_like)
    # Over a tensor: an element where eager happens to be exact may be off by up to twice eager's
    # largest error elsewhere (another order's rounding), not more.
    rows = torch.stack([x, torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])])
    op, call = SimpleNamespace(op=lambda t: t.sum(dim=1)), (rows, (), {})
    eager_like = torch.tensor([exact + 4.0, 15.0])
    assert check._as_accurate_as_eager(op, call, 0, torch.tensor([exact, 17.0]), eager_like)
    assert not check._as_accurate_as_eager(op, call, 0, torch.tensor([exact, 25.0]), eager_like)


def test_expected_entries_only_shrink(tmp_path):
    listed = {("abs", "cpu", "f32"): "fallback", ("cos", "cpu", "f32"): "crash", ("cos", "cuda", "f32"): "crash",
              ("sin", "cpu", "i64"): "mismatch"}
    coverage = expected.Coverage("cpu", ["f32"], 1, ["abs", "cos", "tan"], ["abs", "cos", "sin", "tan"], whole=False)
    statuses = {("abs", "f32"): "fallback", ("cos", "f32"): "fallback", ("tan", "f32"): "mismatch"}
    lines = expected.differences(listed, {"cpu": 1, "cuda": 2}, statuses, coverage)
    assert lines == ["better: cos cpu f32: expected crash, now fallback: change its line to fallback",
                     "new failure: tan cpu f32: mismatch (not in the expected file)"]
    merged = expected.merge(listed, statuses, coverage)
    assert merged == {("abs", "cpu", "f32"): "fallback", ("cos", "cpu", "f32"): "fallback",
                      ("cos", "cuda", "f32"): "crash", ("sin", "cpu", "i64"): "mismatch",
                      ("tan", "cpu", "f32"): "mismatch"}
    statuses[("cos", "f32")] = "pass"
    assert expected.differences(listed, {"cpu": 1}, statuses, coverage)[0].startswith("fixed: cos cpu f32")
    assert expected.differences(listed, {"cpu": 2}, statuses, coverage)[0].startswith("samples: the cpu entries")
    expected.write(tmp_path / "expected.txt", merged, {"cpu": 1, "cuda": 2})
    assert expected.read(tmp_path / "expected.txt") == (merged, {"cpu": 1, "cuda": 2})


def test_merge_joins_shards_and_refuses_mismatched_runs(tmp_path):
    from tests.opinfo import merge, report

    def doc(selection, records, backend="inductor"):
        meta = {"backend": backend, "device": "cuda", "dtypes": ["f32"], "samples": 2, "selection": selection,
                "commit": "abc", "seconds": 10.0, "torch": "2.11.0", "jobs": 1}
        return {"meta": meta, "samples": records}

    a = doc("shard 0:2", [{"op": "add", "dtype": "f32", "status": "pass", "aten_calls": []},
                          {"op": "sort", "dtype": "f32", "status": "pass", "aten_calls": ["aten.sort.default"]}])
    b = doc("shard 1:2", [{"op": "mul", "dtype": "f32", "status": "fallback"}])
    meta, records = merge.merge([a, b])
    statuses = report.unit_statuses(records)
    assert meta["seconds"] == 20.0 and meta["selection"] == "shard 0:2 + shard 1:2"
    line = report.summary_line(meta, statuses, records)
    assert "3 ops·dtypes, 2 pass, 1 fallback" in line and "ops fully compiled: 2 of 3, 1 of them without ATen kernels" in line
    with pytest.raises(ValueError, match="backend"):
        merge.merge([a, doc("shard 1:2", [], backend="coil")])
    with pytest.raises(ValueError, match="more than one run"):
        merge.merge([a, a])
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert merge.main(["--out", str(tmp_path / "m"), str(tmp_path / "a"), str(tmp_path / "b.json")]) == 0
    assert "ATen fallbacks of Inductor" in (tmp_path / "m" / "summary.md").read_text()


def test_a_16_bit_gradient_is_checked_against_the_f64_answer_of_its_own_inputs():
    """A bf16 gradient rounded at other steps than eager's is accepted where it is no further from
    the float64 gradient of the same bf16 inputs and bf16 cotangents than eager's (bf16's
    tolerance, or twice eager's largest error), and refused where it is further."""
    from types import SimpleNamespace

    from tests.opinfo import check

    a = torch.tensor([[1.5, -2.25, 3.0], [0.5, 4.0, -1.0]], dtype=torch.bfloat16, requires_grad=True)
    b = torch.tensor([[2.0, 1.0, -0.75], [3.5, -2.5, 1.25]], dtype=torch.bfloat16, requires_grad=True)
    op = SimpleNamespace(op=lambda x, y: torch.linalg.cross(x, y))
    call = (a, (b,), {})
    run = functools.partial(check._run_grad, cotangent_dtype=torch.bfloat16)
    exact = run(op.op, check.map_tensors(check._copy(call), lambda t: t.detach().double().requires_grad_()), 0)
    eager = check._run_grad(op.op, check._copy(call), 0)
    ours = tuple(g.double().to(torch.bfloat16) for g in exact)  # the exact gradients, rounded once
    assert check._as_accurate_as_eager(op, call, 0, ours, eager, run, torch.bfloat16)
    off = tuple(g + 0.5 * g.abs().max() for g in ours)  # far past bf16's rounding
    assert not check._as_accurate_as_eager(op, call, 0, off, eager, run, torch.bfloat16)
