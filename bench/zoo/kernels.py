"""Where a model's GPU time goes, per mode: the kernels one call launches (eager, Inductor, coil),
grouped by name, with their count and CUDA time per call (torch.profiler over CUPTI, which also
sees the kernels coil launches through the driver API). A diagnosis tool, not a benchmark: the
profiler adds overhead per launch, so compare kernel times, not wall clock.

    python -m bench.zoo.kernels tv_resnet50 [--modes eager,inductor,coil] [--calls 5] [--top 25]
"""
import argparse
import json
import sys
from collections import defaultdict

import torch

from . import models
from .child import COMPILE, DTYPES


def profile(fn, inputs, calls):
    """{kernel name: [launches, total µs]} per call of fn, after two warm-up calls."""
    for _ in range(2):
        fn(*inputs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    kernels = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels[e.name]
            k[0] += 1
            k[1] += e.device_time
    return {name: [n / calls, us / calls] for name, (n, us) in kernels.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a zoo model (bench/zoo/models.py) or a yardstick workload (bench/workloads.py)")
    p.add_argument("--modes", default="eager,inductor,coil")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--size", default="full", choices=["full", "small"])
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--json", help="also write the profiles here")
    a = p.parse_args()
    modes = a.modes.split(",")
    if "coil" in modes:
        import coil

        coil.register()
    result = {}
    with torch.no_grad():
        if a.model in models.BY_NAME:
            model, inputs = models.make(a.model, a.size, "cuda", DTYPES[a.dtype])
        else:  # the yardstick's own (bf16 on the GPU)
            from .. import workloads

            w = workloads.build([a.model], "cuda", a.size == "small")[0]
            model, inputs = w.fn, w.inputs
        for mode in modes:
            fn = model if mode == "eager" else torch.compile(model, **COMPILE[mode])
            kernels = profile(fn, inputs, a.calls)
            result[mode] = kernels
            total = sum(us for _, us in kernels.values())
            launches = sum(n for n, _ in kernels.values())
            print(f"\n## {a.model} {mode}: {total / 1000:.3f} ms of kernels per call, {launches:.0f} launches")
            for name, (n, us) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:a.top]:
                print(f"{us:9.1f} us {n:4.0f}x  {us / total:6.1%}  {name[:150]}")
            sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
