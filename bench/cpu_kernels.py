"""CPU benchmark of the compiler: coil against PyTorch eager and torch.compile (Inductor), in
one run on one machine. Each workload is a coil graph and the same computation in PyTorch; all
three run on the same inputs and their outputs are compared.

    .venv/bin/python bench/cpu_kernels.py [--quick] [--only NAME] [--threads N]

Times are medians of in-process runs (coil: `coil run --repeat`, timed around Plan::run;
PyTorch: perf_counter around the call), allocation of outputs included on both sides. Compile
times are cold: an empty coil cache, and an empty Inductor cache with a reset Dynamo. Writes a markdown table and a
JSON file to bench/results/ named by date. The ceiling is a 64 MiB copy into memory already
touched; results that allocate fresh outputs (all three modes do) can pay page faults it
does not.

This is the CPU yardstick until the torch front end lands (issue 5): then the workloads move to
the one `bench/run` command and coil runs through torch.compile(backend="coil")."""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from conftest import read_safetensors, write_safetensors  # noqa: E402

COIL = os.environ.get("COIL_BIN", str(ROOT / "build" / "tools" / "coil"))
F = torch.nn.functional


# name: (coil graph body, input shapes, torch function of the inputs, bytes moved per call)
def workloads(quick):
    R, C = (1024, 1024) if quick else (4096, 4096)
    x = f"f32[{R}, {C}]"
    nbytes = R * C * 4
    return {
        "gelu_bias": (f"  %x = input() : {x}\n  %b = input() : f32[{C}]\n  %a = add.Tensor(%x, %b)\n  %y = gelu(%a)\n  return %y\n",
                      {"x": (R, C), "b": (C,)}, lambda x, b: F.gelu(x + b), 2 * nbytes),
        "softmax": (f"  %x = input() : {x}\n  %y = _softmax(%x, -1, false)\n  return %y\n",
                    {"x": (R, C)}, lambda x: torch.softmax(x, -1), 2 * nbytes),
        "layer_norm": (f"  %x = input() : {x}\n  %w = input() : f32[{C}]\n  %b = input() : f32[{C}]\n"
                       f"  %y, %m, %r = native_layer_norm(%x, [{C}], %w, %b, 1e-05)\n  return %y\n",
                       {"x": (R, C), "w": (C,), "b": (C,)}, lambda x, w, b: F.layer_norm(x, [C], w, b), 2 * nbytes),
        "rms_norm": (f"  %x = input() : {x}\n  %w = input() : f32[{C}]\n  %s = mul.Tensor(%x, %x)\n"
                     f"  %m = mean.dim(%s, [-1], true)\n  %e = add.Scalar(%m, 1e-06)\n  %r = rsqrt(%e)\n"
                     f"  %n = mul.Tensor(%x, %r)\n  %y = mul.Tensor(%n, %w)\n  return %y\n",
                     {"x": (R, C), "w": (C,)},
                     lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w, 2 * nbytes),
        "sum_dim0": (f"  %x = input() : {x}\n  %y = sum.dim_IntList(%x, [0])\n  return %y\n",
                     {"x": (R, C)}, lambda x: x.sum(0), nbytes),
        "add_transpose": (f"  %x = input() : {x}\n  %t = input() : f32[{C}, {R}]\n  %p = permute(%t, [1, 0])\n"
                          f"  %y = add.Tensor(%x, %p)\n  return %y\n",
                          {"x": (R, C), "t": (C, R)}, lambda x, t: x + t.t(), 3 * nbytes),
        "center_rows": (f"  %x = input() : {x}\n  %m = mean.dim(%x, [-1], true)\n  %y = sub.Tensor(%x, %m)\n  return %y\n",
                        {"x": (R, C)}, lambda x: x - x.mean(-1, keepdim=True), 2 * nbytes),
    }


def median_time(fn, repeat):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def run_coil(graph_text, inputs, repeat, cache):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.coil"
        path.write_text(graph_text)
        write_safetensors(Path(d) / "in.safetensors", inputs)
        out = Path(d) / "out.safetensors"
        args = [COIL, "run", str(path), "--inputs", str(Path(d) / "in.safetensors"), "--out", str(out),
                "--cache-dir", cache, "--repeat", str(repeat)]
        proc = subprocess.run(args, capture_output=True, text=True, check=True)
        compiled = re.search(r"compiled .* in ([\d.]+) ms", proc.stdout)
        run = re.search(r"run: ([\d.]+) ms median", proc.stdout)
        return float(compiled.group(1)), float(run.group(1)), read_safetensors(out)


def inductor_compile_ms(fn, args):
    torch._dynamo.reset()
    with tempfile.TemporaryDirectory() as d:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
        compiled = torch.compile(fn)
        t = time.perf_counter()
        compiled(*args)
        ms = (time.perf_counter() - t) * 1e3
        return compiled, ms


def machine():
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gxx = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "compiler": gxx, "commit": commit,
            "date": datetime.date.today().isoformat(), "python": platform.python_version()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    info = machine()
    big = torch.randn(64 * 1024 * 1024 // 4)
    dst = torch.empty_like(big)
    copy_ms = median_time(lambda: dst.copy_(big), a.repeat)  # into warm memory: no page faults
    ceiling_gbs = 2 * big.numel() * 4 / copy_ms / 1e6
    rows = []
    for name, (body, shapes, fn, nbytes) in workloads(a.quick).items():
        if a.only and a.only != name:
            continue
        torch.manual_seed(0)
        inputs = {k: torch.randn(*s) for k, s in shapes.items()}
        args = list(inputs.values())
        with torch.no_grad():
            want = fn(*args)
            eager_ms = median_time(lambda: fn(*args), a.repeat)
            compiled, inductor_compile = inductor_compile_ms(fn, args)
            inductor_ms = median_time(lambda: compiled(*args), a.repeat)
        cache = tempfile.mkdtemp(prefix="coil_bench_cache_")
        try:
            coil_compile, coil_ms, outs = run_coil(f"graph {name} {{\n{body}}}\n", inputs, a.repeat, cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        got = outs["y"]
        err = ((got.double() - want.double()).abs().max() / want.double().abs().max().clamp_min(1e-30)).item()
        best = min(eager_ms, inductor_ms)
        rows.append({"workload": name, "eager_ms": eager_ms, "inductor_ms": inductor_ms, "coil_ms": coil_ms,
                     "coil_vs_best": best / coil_ms, "coil_gbs": nbytes / coil_ms / 1e6,
                     "ceiling_pct": 100 * nbytes / coil_ms / 1e6 / ceiling_gbs, "max_rel_err": err,
                     "coil_compile_ms": coil_compile, "inductor_compile_ms": inductor_compile})
        print(f"{name:14s} eager {eager_ms:8.3f}  inductor {inductor_ms:8.3f}  coil {coil_ms:8.3f} ms  "
              f"x{best / coil_ms:5.2f}  compile {coil_compile:7.1f} vs {inductor_compile:8.1f} ms  err {err:.1e}")
    speed = statistics.geometric_mean([r["coil_vs_best"] for r in rows])
    compile_ratio = statistics.geometric_mean([r["inductor_compile_ms"] / r["coil_compile_ms"] for r in rows])
    slower = sum(r["coil_vs_best"] < 1 for r in rows)
    summary = (f"geomean speed coil vs best of eager/inductor: x{speed:.2f}; geomean compile-time ratio "
               f"(inductor/coil): x{compile_ratio:.1f}; coil slower on {slower} of {len(rows)}")
    print(summary)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"cpu-{info['date']}{'-quick' if a.quick else ''}"
    stem.with_suffix(".json").write_text(json.dumps({"machine": info, "copy_ceiling_gbs": ceiling_gbs,
                                                     "threads": a.threads, "rows": rows, "summary": summary}, indent=1))
    lines = [f"# CPU benchmark, {info['date']}", "",
             f"{info['cpu']}, {info['cores']} cores ({a.threads} threads used); torch {info['torch']}; "
             f"{info['compiler']}; coil {info['commit']}; copy ceiling {ceiling_gbs:.1f} GB/s.", "",
             "| workload | eager ms | inductor ms | coil ms | coil vs best | coil GB/s (% ceiling) | max rel err | "
             "coil compile ms | inductor compile ms |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['eager_ms']:.3f} | {r['inductor_ms']:.3f} | {r['coil_ms']:.3f} | "
                     f"x{r['coil_vs_best']:.2f} | {r['coil_gbs']:.1f} ({r['ceiling_pct']:.0f}%) | {r['max_rel_err']:.1e} | "
                     f"{r['coil_compile_ms']:.0f} | {r['inductor_compile_ms']:.0f} |")
    lines += ["", summary, "", "Times are medians of in-process runs and include allocating the outputs in every mode; the ceiling is a copy into memory already touched, so results that pay first-touch page faults on fresh outputs sit well below it. Compile times are cold (empty coil cache; reset Dynamo and an empty Inductor cache).", ""]
    stem.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {stem}.md and .json")


if __name__ == "__main__":
    main()
