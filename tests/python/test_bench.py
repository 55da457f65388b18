"""The yardstick (bench/run) end to end on the CPU, small: it must keep working as coil changes.
Checks what it writes and that coil's results match eager; no timing is judged here."""
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench import report, workloads  # noqa: E402


def test_bench_runs_end_to_end_on_the_cpu(tmp_path):
    cmd = [sys.executable, "-m", "bench", "--device", "cpu", "--quick", "--only", "row_center,swiglu", "--modes", "eager,coil,capture",
           "--out", str(tmp_path)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    (js,) = tmp_path.glob("bench-cpu-*-quick.json")
    data = json.loads(js.read_text())
    assert [r["name"] for r in data["workloads"]] == ["row_center", "swiglu"]
    for r in data["workloads"]:
        coil = r["modes"]["coil"]
        assert coil["rel_err"] < 1e-5, r
        assert coil["ms"] > 0 and coil["cold_first_s"] > 0 and coil["warm_first_s"] > 0
        # the steady state taken again with eager and coil taking turns in one process
        assert coil["ms_alone"] > 0 and r["modes"]["eager"]["ms_alone"] > 0 and "ms_alone" not in r["modes"]["capture"], r
        q1, q3 = coil["ms_quartiles"]
        assert 0 < q1 <= coil["ms"] <= q3, r
        assert 0 < coil["pct"] and math.isfinite(r["coil_speedup"])
        capture = r["modes"]["capture"]  # the floor: Dynamo + AOTAutograd, the captured graph run as it is
        assert capture["rel_err"] < 1e-5 and capture["cold_first_s"] > 0 and r["best_other"] == "eager", r
    assert data["workloads"][0]["bytes"] == 2 * 1024 * 1024 * 4  # x read once, the result written once (fp32)
    assert data["workloads"][1]["flops"] == 3 * 2 * 128 * 256 * 704
    md = js.with_suffix(".md").read_text()
    assert "coil vs the best other mode" in md and "| row_center |" in md and "the modes taking turns" in md
    assert "that Dynamo + AOTAutograd alone take" in md
    assert js.with_suffix(".png").stat().st_size > 1000
    assert data["environment"]["commit"] and data["ceilings"]["copy_gbs"] > 0


def test_bench_refuses_unknown_workloads_and_modes():
    for extra in (["--only", "nope"], ["--modes", "eager,fast"], ["--modes", "coil"]):
        p = subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", *extra], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 2 and ("unknown" in p.stderr or "include it" in p.stderr), p.stderr


def _cell(ms, first=1.0):
    return {"ms": ms, "cold_first_s": first, "warm_first_s": first / 4, "rel_err": 1e-3, "pct": 50.0, "gbs": 100.0}


def test_summary_counts_slower_workloads_and_geomeans():
    data = {"workloads": [
        {"name": "a", "modes": {"eager": _cell(2.0), "inductor": _cell(1.0, 4.0), "coil": _cell(0.5, 1.0)}, "coil_speedup": 2.0},
        {"name": "b", "modes": {"eager": _cell(2.0), "inductor": _cell(1.0, 9.0), "coil": _cell(2.0, 1.0)}, "coil_speedup": 0.5},
        {"name": "c", "modes": {"eager": _cell(2.0), "coil": {"error": "cold: CoilError: boom"}}},
    ]}
    lines = report.summary_lines(data)
    assert "geomean 1.00x over 2 workloads; coil slower on 1 (b); no comparison for c" in lines[0]
    assert "inductor / coil: geomean 6.00x over 2 workloads" in lines[1]  # sqrt(4 * 9)


def test_summary_names_the_slower_workloads_whose_turns_overlap():
    def cell(ms, q1, q3):
        return dict(_cell(ms), ms_quartiles=[q1, q3])
    data = {"workloads": [
        {"name": "tie", "modes": {"eager": cell(1.0, 0.99, 1.01), "coil": cell(1.002, 1.0, 1.004)}, "best_other": "eager",
         "coil_speedup": 1.0 / 1.002},
        {"name": "behind", "modes": {"eager": cell(1.0, 0.99, 1.01), "coil": cell(1.1, 1.09, 1.11)}, "best_other": "eager",
         "coil_speedup": 1.0 / 1.1},
    ]}
    line = report.summary_lines(data)[0]
    assert "coil slower on 2 (tie, behind), 1 of them with quartile ranges overlapping the best other's in the turns (tie)" in line


def test_every_workload_builds_and_only_the_named_ones():
    built = workloads.build(workloads.NAMES, "cpu", quick=True)
    assert [w.name for w in built] == workloads.NAMES
    assert {w.kind for w in built} == {"memory", "gemm", "model"}
    assert [w.name for w in workloads.build(["cnn", "softmax"], "cpu", quick=True)] == ["softmax", "cnn"]
