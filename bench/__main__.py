"""The yardstick: coil against PyTorch eager, torch.compile (Inductor) and
torch.compile(mode="max-autotune-no-cudagraphs"), on one machine in one run.

    bench/run [--device cuda|cpu] [--only NAME,...] [--quick] [--profile] [--train [MODELS]] [--out DIR]
    bench/run --plot bench/results/FILE.json      # (re)draw the chart of a results file

Every workload (bench/workloads.py) is one PyTorch function; each mode calls it, coil through
torch.compile(backend="coil"). Each mode runs in processes of its own: a "cold" one on empty
caches (coil's, Inductor's and Triton's, made for this run) times every first call, then a
"warm" one on the caches it filled times every first call again and the steady state. Eager
runs in one process, which also measures the ceilings. Then one process times the steady
state again with the modes taking turns (a few calls each, round after round), since a GPU's
clocks drift with its power draw between one mode's process and the next; the tables report
those medians (each mode's own process's are kept as ms_alone). Results go to bench/results/ as
markdown, JSON and a PNG chart, named by device and date.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import report, workloads
from .child import MODES, TAG

ROOT = Path(__file__).resolve().parents[1]


def run_child(mode, phase, names, args, env, timeout_s=1500):
    """Runs bench.child, restarting it past a workload that killed it; {workload: record}."""
    got, remaining = {}, list(names)
    while remaining:
        cmd = [sys.executable, "-m", "bench.child", "--modes" if phase == "turns" else "--mode", mode, "--phase", phase,
               "--device", args.device, "--names", ",".join(remaining)] + (["--quick"] if args.quick else [])
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        killer = threading.Timer(timeout_s, proc.kill)
        killer.start()
        tail = collections.deque(maxlen=20)
        for line in proc.stdout:
            if not line.startswith(TAG):
                tail.append(line.rstrip())
                if args.verbose:
                    print(f"  [{mode}/{phase}] {line.rstrip()}", flush=True)
                continue
            record = json.loads(line[len(TAG):])
            name = record.pop("workload")
            got[name] = record
            print(f"{mode:>12} {phase:>5} {name:<14} {report.brief(record)}", flush=True)
        rc = proc.wait()
        killer.cancel()
        remaining = [n for n in remaining if n not in got]
        if rc == 0 or not remaining:
            if rc != 0:
                print(f"{mode} {phase}: exit {rc} after its last workload:\n  " + "\n  ".join(tail), flush=True)
            break
        why = "timed out" if rc in (-9, 137) else f"exit {rc}"
        got[remaining[0]] = {"error": f"the process died ({why}): " + " | ".join(list(tail)[-3:])[-400:]}
        print(f"{mode:>12} {phase:>5} {remaining[0]:<14} {got[remaining[0]]['error']}", flush=True)
        remaining = remaining[1:]
    return got


def measure_all(args, names):
    """{mode: {"cold": {...}, "warm": {...}}} for eager and the three compiled modes."""
    base = dict(os.environ, PYTHONUNBUFFERED="1")
    results, caches = {}, {}
    for mode in args.modes:
        if mode == "eager":
            results[mode] = {"warm": run_child(mode, "eager", names, args, base)}
            continue
        root = tempfile.mkdtemp(prefix=f"coil-bench-{mode}-")
        caches[mode] = env = dict(base, COIL_CACHE_DIR=f"{root}/coil", TORCHINDUCTOR_CACHE_DIR=f"{root}/inductor",
                                  TRITON_CACHE_DIR=f"{root}/triton")
        results[mode] = {phase: run_child(mode, phase, names, args, env) for phase in ("cold", "warm")}
    # The steady state again, every competing mode and coil in one process taking turns, on the
    # caches their processes filled (Inductor's and Triton's of max-autotune where it ran: the
    # default mode's few kernels compile again there).
    taking = [m for m in args.modes if m in report.OTHERS or m == "coil"]
    if len(taking) > 1:
        cache_of = lambda m: caches.get(m, {})  # noqa: E731
        inductor = cache_of("max-autotune") or cache_of("inductor")
        env = dict(base, **{k: v for k, v in inductor.items() if k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")},
                   **{k: v for k, v in cache_of("coil").items() if k == "COIL_CACHE_DIR"})
        results["_turns"] = run_child(",".join(taking), "turns", names, args, env)
    return results, caches


def main():
    p = argparse.ArgumentParser(prog="bench/run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when there is a GPU")
    p.add_argument("--only", default="", help=f"comma-separated workloads of: {', '.join(workloads.NAMES)}")
    p.add_argument("--quick", action="store_true", help="smaller sizes, same workloads, and no max-autotune (its GEMM "
                   "search alone takes minutes) unless --modes names it")
    p.add_argument("--modes", help=f"comma-separated modes of: {', '.join(MODES)} (default: all)")
    p.add_argument("--profile", action="store_true", help="Nsight Compute per-kernel profile of coil and Inductor (GPU)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--plot", metavar="JSON", help="only draw the chart of a results file")
    p.add_argument("--verbose", action="store_true", help="echo the measuring processes' output")
    p.add_argument("--train", nargs="?", const="default", metavar="MODELS",
                   help="also the training section: one forward + backward + AdamW step of real models under eager, "
                   "Inductor and coil (bench/train.py; default models: gpt2,llama,resnet50,vit_s on cuda, resnet18 on "
                   "cpu), its table written beside the results as train-<device>-<date>.md/json")
    args = p.parse_args()
    if args.plot:
        print(report.plot(json.loads(Path(args.plot).read_text()), Path(args.plot).with_suffix(".png")))
        return 0
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no GPU here")
    names = [n for n in args.only.split(",") if n] or workloads.NAMES
    args.modes = [m for m in (args.modes or ",".join(m for m in MODES if not (args.quick and m == "max-autotune"))).split(",") if m]
    unknown = sorted(set(names) - set(workloads.NAMES)) + sorted(set(args.modes) - set(MODES))
    if unknown:
        p.error(f"unknown workload(s) or mode(s): {', '.join(unknown)} (workloads: {', '.join(workloads.NAMES)}; "
                f"modes: {', '.join(MODES)})")
    if "eager" not in args.modes:
        p.error("--modes: eager is the reference every mode is checked against; include it")
    start = time.perf_counter()
    results, caches = measure_all(args, names)
    data = report.collect(args, names, results, time.perf_counter() - start)
    if args.profile and args.device == "cuda":
        from . import profile

        data["profiles"] = profile.run(args, names, caches, {r["name"]: r["bytes"] for r in data["workloads"] if r.get("bytes")})
    paths = report.write(data, Path(args.out))
    print("\n".join(report.summary_lines(data)))
    print("wrote " + ", ".join(str(x) for x in paths))
    if args.train:
        paths = training(args)
        print("wrote " + ", ".join(str(x) for x in paths))
    return 0


def training(args):
    """The yardstick's training section: bench.train over its models into a scratch folder, its
    table and records copied to the results folder under the device and date."""
    models = args.train if args.train != "default" else ("gpt2,llama,resnet50,vit_s" if args.device == "cuda" else "resnet18")
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([sys.executable, "-m", "bench.train", "--device", args.device, "--models", models, "--out", scratch],
                       cwd=ROOT, check=True)
        stem = f"train-{args.device}-{time.strftime('%Y-%m-%d')}"
        paths = []
        for ext in ("md", "json"):
            target = Path(args.out) / f"{stem}.{ext}"
            target.write_text((Path(scratch) / f"train-{args.device}.{ext}").read_text())
            paths.append(target)
    return paths


if __name__ == "__main__":
    sys.exit(main())
