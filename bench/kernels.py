"""Where a workload's GPU time goes, kernel by kernel, for each mode: `python -m bench.kernels
gpt2 --modes inductor,coil` compiles the workload (a yardstick workload, or a zoo model from
bench/zoo/models.py in bf16 at its full size) in one process per mode, runs it a few
times under torch.profiler (CUPTI sees coil's driver-API launches and cuBLASLt's kernels as
well as Triton's) and prints per mode the kernels by total GPU time per call, with their
launch counts. A diagnosis tool beside bench/run's --profile (Nsight Compute, per-kernel
counters, too slow for a model of ~150 kernels)."""
import argparse
import collections
import subprocess
import sys

import torch

from bench import child, workloads


def _workload(name, quick):
    """(callable, inputs): a zoo model by its name, else a yardstick workload."""
    from bench.zoo import models

    if name in models.BY_NAME:
        with torch.no_grad():
            return models.make(name, "small" if quick else "full", "cuda", torch.bfloat16)
    [w] = workloads.build([name], "cuda", quick)
    return w.fn, w.inputs


def one(name, mode, calls, quick):
    model, inputs = _workload(name, quick)
    compile_fn, _ = child.compiler(mode)
    fn = model if mode == "eager" else compile_fn(model)
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*inputs)
            torch.cuda.synchronize()
    times, counts = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            counts[e.name] += 1
    total = sum(times.values()) / calls
    print(f"## {name} / {mode}: {total / 1e3:.3f} ms of kernels per call, {sum(counts.values()) // calls} launches")
    print("| us per call | share | launches | kernel |\n|---|---|---|---|")
    for k, t in times.most_common(25):
        print(f"| {t / calls:.1f} | {100 * t / calls / total:.1f}% | {counts[k] // calls} | {k[:110]} |")
    print(flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", help=f"comma-separated workloads of: {', '.join(workloads.NAMES)}, or zoo models (bench/zoo/models.py)")
    p.add_argument("--modes", default="inductor,coil", help="comma-separated of: " + ", ".join(child.MODES))
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one name, one mode
    a = p.parse_args()
    if a.one:
        one(a.names, a.modes, a.calls, a.quick)
        return
    for name in a.names.split(","):
        for mode in a.modes.split(","):
            args = [sys.executable, "-m", "bench.kernels", name, "--modes", mode, "--calls", str(a.calls), "--one"]
            subprocess.run(args + (["--quick"] if a.quick else []), check=False)


if __name__ == "__main__":
    main()
