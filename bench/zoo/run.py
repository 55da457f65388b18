"""The model zoo: each model of bench/zoo/models.py through PyTorch eager, Inductor and coil, on
one machine in one run; results to bench/results/zoo-DEVICE-DTYPE-DATE.md and .json.

    python -m bench.zoo.run [--device cuda|cpu] [--dtype bf16|f32] [--size full|small]
                            [--only NAMES] [--modes eager,inductor,coil] [--out DIR] [--timeout S] [--part I/N]
                            [--batch B]
    python -m bench.zoo.run --merge PART.json ...     # the parts of a run joined into one report

Each model runs in a process of its own (bench/zoo/child.py) on empty caches made for it (coil's,
Inductor's and Triton's), so every first call is a cold compile and a crash, a hang or running out
of memory ends only that model's mode: the model runs again without the mode that died. Per mode:
pass or fail (the exception's first line), accuracy against eager (bench/zoo/check.py), the
first call's wall time, coil's fallbacks and its own failures, Dynamo's graph breaks; then the
steady state with the modes taking turns in the process (CUDA events or the wall clock), the
speedups over eager timed there.
"""
import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.zoo import models, report
from bench.zoo.child import DTYPES, TAG

ROOT = Path(__file__).resolve().parents[2]
MODES = ["eager", "inductor", "coil"]


def launch(name, modes, args, env):
    """Runs the child for one model until it exits or times out: (its steps, exit status, last lines)."""
    cmd = [sys.executable, "-m", "bench.zoo.child", "--name", name, "--size", args.size, "--device", args.device,
           "--dtype", args.dtype, "--modes", ",".join(modes)]
    # A session of its own: a timeout ends Inductor's compile workers with it.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    timed_out = []

    def kill():
        timed_out.append(True)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended on its own meanwhile
            timed_out.clear()

    killer = threading.Timer(args.timeout, kill)
    killer.start()
    steps, tail = [], collections.deque(maxlen=12)
    for line in proc.stdout:
        if line.startswith(TAG):
            steps.append(json.loads(line[len(TAG):]))
            print(f"  {name:<28} {report.brief(steps[-1])}", flush=True)
        elif line.strip():
            tail.append(line.rstrip())
            if args.verbose:
                print(f"  [{name}] {line.rstrip()}", flush=True)
    rc = proc.wait()
    killer.cancel()
    return steps, ("timed out" if timed_out else rc), list(tail)


def measure_model(name, args):
    """{name, family, eager, modes: {mode: first call}, ms, quartiles}: the model's record, its
    modes run again without one that killed its process."""
    record = {"name": name, "family": models.BY_NAME[name].family, "modes": {}}
    modes = list(args.modes)
    cache = Path(tempfile.mkdtemp(prefix=f"coil-zoo-{name}-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", COIL_CACHE_DIR=str(cache / "coil"),
               TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"), TRITON_CACHE_DIR=str(cache / "triton"))
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    if args.batch:
        env["COIL_ZOO_VISION_BATCH"] = str(args.batch)
    try:
        while True:
            steps, status, tail = launch(name, modes, args, env)
            running = None
            for step in steps:
                kind = step.pop("step")
                if kind == "eager":
                    record.setdefault("eager", step)
                elif kind == "start":
                    running = step["mode"]
                elif kind == "first":
                    record["modes"].setdefault(step.pop("mode"), step)  # the first process's: a cold compile
                    running = None
                else:
                    record.update(ms=step["ms"], quartiles=step["quartiles"], recompiled=step["recompiled"])
            if status == 0:
                break
            why = f"timed out after {args.timeout:.0f} s" if status == "timed out" else \
                f"the process died (exit {status}): " + " | ".join(tail[-3:])[-300:]
            if "eager" not in record:
                record["eager"] = {"error": why}
                break
            if running is None:  # it died while timing: the first calls stand
                record["timing_error"] = why
                break
            record["modes"][running] = {"error": why}
            modes.remove(running)
            print(f"  {name:<28} {running}: {why}; again without it", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return record


def main():
    p = argparse.ArgumentParser(prog="python -m bench.zoo.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when there is a GPU")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="default: bf16 on CUDA, f32 on the CPU")
    p.add_argument("--size", choices=["full", "small"], help="default: full on CUDA, small on the CPU")
    p.add_argument("--only", default="", help=f"comma-separated models of: {', '.join(models.NAMES)}")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated modes of: " + ", ".join(MODES))
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--timeout", type=float, default=900, help="seconds a model's process may take (default 900)")
    p.add_argument("--threads", type=int, help="OMP_NUM_THREADS of the models' processes (PyTorch's, Inductor's and "
                   "coil's CPU kernels); where other work shares the cores, 1 keeps OpenMP's barriers from waiting on "
                   "threads the system has put aside")
    p.add_argument("--batch", type=int, help="the full vision nets' batch (default 32; a CPU of few cores takes a smaller one)")
    p.add_argument("--part", help="I/N: every N-th model from the I-th (a run in parts, each within a time limit)")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="only join the results of parts into one report")
    p.add_argument("--verbose", action="store_true", help="echo the processes' other output")
    args = p.parse_args()
    if args.merge:
        data = report.merge([json.loads(Path(f).read_text()) for f in args.merge])
        return finish(data, report.paths(data, Path(args.out)))
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no GPU here")
    args.dtype = args.dtype or ("bf16" if args.device == "cuda" else "f32")
    args.size = args.size or ("full" if args.device == "cuda" else "small")
    names = [n for n in args.only.split(",") if n] or models.NAMES
    if args.part:
        index, count = (int(x) for x in args.part.split("/"))
        names = names[index - 1::count]
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(names) - set(models.NAMES)) + sorted(set(args.modes) - set(MODES))
    if unknown:
        p.error(f"unknown model(s) or mode(s): {', '.join(unknown)}")
    if "eager" not in args.modes:
        p.error("--modes: eager is the reference every mode is checked against; include it")
    start, data = time.perf_counter(), report.collect(args, list(os.getloadavg()))
    where = report.paths(data, Path(args.out))
    for name in names:
        print(f"{name} ({args.device}, {args.dtype}, {args.size})", flush=True)
        data["models"].append(measure_model(name, args))
        data.update(wall_s=time.perf_counter() - start, load_after=list(os.getloadavg()))
        report.write(data, where)  # after every model: a run cut short keeps what it measured
    return finish(data, where)


def finish(data, where):
    report.write(data, where)
    print("\n".join(report.summary_lines(data)))
    print("wrote " + ", ".join(str(x) for x in where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
