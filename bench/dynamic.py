"""Dynamic sizes: one compiled function over many sequence lengths (issue 30's yardstick).

A GPT-2-style block (bench.workloads.Block, d=768) runs at 30 sequence lengths (primes among
them) through one function per backend, compiled with dynamic=True and with the default's
automatic dynamic (the second length makes the size symbolic), and through the same backend
compiled statically for each length (Dynamo reset before each, so every length is a compile of
its own). Each backend first compiles a small unrelated function (warm_up). Reported per backend
and style: the compile time the 30 lengths cost through the one function (each first call's
time less that length's steady call) against one static compile (the median over the lengths),
and the steady time per length against the static compile's at that length (median of
`--repeat` samples of 10 calls back to back, CUDA events on the GPU). coil's compiles are
counted; on the GPU, where one length's call spends its host time (host_split).

    python -m bench.dynamic --device cpu|cuda [--modes coil,inductor] [--lengths 30] [--out DIR]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from datetime import date
from pathlib import Path

import torch

from bench.workloads import Block

PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113,
          127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193, 197, 199, 211, 223, 227, 229, 233, 239, 241, 251]


def lengths(count):
    """`count` sequence lengths from 16 to 512: powers of two, round numbers and primes."""
    base = [16, 32, 64, 100, 128, 200, 256, 384, 500, 512]
    primes = [p * m for m in (1, 2) for p in PRIMES if 17 <= p * m <= 509 and p * m % 2 == 1]
    return sorted(set(base + primes[:max(0, count - len(base))]))[:count]


def timer(device):
    """ms of one call of fn, measured as the device sees it."""
    if device == "cuda":
        def time_call(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        return time_call

    def time_call(fn):
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    return time_call


def steady(fn, time_call, repeat, calls=10):
    """ms a call takes in a loop of calls (a model serving requests): the median over `repeat`
    samples of `calls` calls back to back. A lone call's events time its host latency too, which
    at batch 1 varied 2x from run to run (static 0.09-0.25 ms on one H200)."""
    for _ in range(2):
        fn()

    def loop():
        for _ in range(calls):
            fn()
    return statistics.median(time_call(loop) for _ in range(repeat)) / calls


def wall_loop(fn, repeat=5, calls=50):
    """ms per call of `calls` calls back to back by the host's clock, the GPU drained at the end
    (a serving loop's throughput: neither the host's issue nor the GPU's work hidden), the median
    of `repeat` samples."""
    samples = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e3 / calls)
    return statistics.median(samples)


def count_coil_compiles():
    """A list that gets an entry per coil compile from here on."""
    from coil import _coil

    made, real = [], _coil.Compiled

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    _coil.Compiled = counting
    return made


def host_split(fn, calls=200):
    """Microseconds of host time per call (the caller's wall clock, the GPU never waited for) and,
    for coil, its GPU plans' share by phase (Compiled.stats()["host"] summed over the process)."""
    from bench.train import plan_host_times

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    before = plan_host_times()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    wall = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    after = plan_host_times()
    split = {k: round((after[k] - before.get(k, 0)) / calls * 1e3, 2) for k in after if k.endswith("_ms")}
    return {"call_us": round(wall, 2), **{k[:-3] + "_us": v for k, v in split.items()}}


def warm_up(backend, device, dtype):
    """Compile and run a small unrelated function, dynamically and statically, so that the
    process's one-time costs (imports, Dynamo's, AOTAutograd's and sympy's first use) fall on
    neither of the measured compiles: the dynamic one runs first and took them all before."""
    small = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 64), torch.nn.GELU()).to(device, dtype).eval()
    with torch.no_grad():
        for dynamic in (True, False):
            torch._dynamo.reset()
            fn = torch.compile(small, backend=backend, dynamic=dynamic)
            for rows in (5, 9):
                fn(torch.randn(rows, 64, device=device, dtype=dtype))
    torch._dynamo.reset()


def run_mode(mode, model, inputs, device, repeat):
    if mode == "coil":
        import coil

        coil.register()  # (a build tree on PYTHONPATH has no entry point)
    backend = "coil" if mode == "coil" else "inductor"
    warm_up(backend, device, inputs[0].dtype)
    time_call = timer(device)
    made = count_coil_compiles() if mode == "coil" else []
    out = {"lengths": [x.shape[1] for x in inputs]}
    # one function for every length: dynamic=True (every size symbolic from the first call; Dynamo
    # then also makes the modules' float attributes inputs, which its guards convert per call), and
    # the default's automatic dynamic (the first length compiled static, the second symbolic)
    probe = inputs[min(7, len(inputs) - 1)]  # where a call's host time goes: the 8th length (37 of 30)
    for style, options in (("dynamic", {"dynamic": True}), ("automatic", {})):
        made.clear()
        torch._dynamo.reset()
        f = torch.compile(model, backend=backend, **options)
        firsts, steadies, loops = [], [], []
        with torch.no_grad():
            for x in inputs:
                firsts.append(time_call(lambda: f(x)))
                steadies.append(steady(lambda: f(x), time_call, repeat))
                if device == "cuda":
                    loops.append(wall_loop(lambda: f(x)))
            if device == "cuda":
                out[f"host_{style}"] = host_split(lambda: f(probe))
        out[f"{style}_compile_s"] = sum(max(0.0, a - b) for a, b in zip(firsts, steadies)) / 1e3
        out[f"{style}_ms"] = steadies
        out[f"{style}_compiles"] = len(made)
        if loops:
            out[f"{style}_loop_ms"] = loops
    # static: a compile per length
    static_compile, static_ms, static_loops = [], [], []
    with torch.no_grad():
        for x in inputs:
            torch._dynamo.reset()
            g = torch.compile(model, backend=backend, dynamic=False)
            first = time_call(lambda: g(x))
            static_ms.append(steady(lambda: g(x), time_call, repeat))
            if device == "cuda":
                static_loops.append(wall_loop(lambda: g(x)))
            static_compile.append(max(0.0, first - static_ms[-1]) / 1e3)
            if device == "cuda" and x is probe:
                out["host_static"] = host_split(lambda: g(x))
    out["static_compile_s"] = statistics.median(static_compile)
    out["static_ms"] = static_ms
    if static_loops:
        out["static_loop_ms"] = static_loops
    for style in ("dynamic", "automatic"):
        ms = out[f"{style}_ms"]
        out[f"{style}_compile_ratio"] = out[f"{style}_compile_s"] / out["static_compile_s"]
        out[f"{style}_steady_ratio_median"] = statistics.median(d / s for d, s in zip(ms, static_ms))
        out[f"{style}_steady_ratio_max"] = max(d / s for d, s in zip(ms, static_ms))
        if static_loops:
            loops = out[f"{style}_loop_ms"]
            out[f"{style}_loop_ratio_median"] = statistics.median(d / s for d, s in zip(loops, static_loops))
            out[f"{style}_loop_ratio_max"] = max(d / s for d, s in zip(loops, static_loops))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--modes", default="coil,inductor")
    p.add_argument("--lengths", type=int, default=30)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--out", default="bench/results")
    args = p.parse_args()
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = Block().to(args.device, dtype).eval()
    g = torch.Generator(device=args.device).manual_seed(1)
    inputs = [torch.randn(args.batch, t, 768, device=args.device, dtype=dtype, generator=g) for t in lengths(args.lengths)]
    results = {"device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine(),
               "date": str(date.today()), "torch": torch.__version__, "dtype": str(dtype), "batch": args.batch,
               "commit": os.environ.get("COIL_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
               "modes": {}}
    for mode in args.modes.split(","):
        results["modes"][mode] = r = run_mode(mode, model, inputs, args.device, args.repeat)
        for style in ("dynamic", "automatic"):
            print(f"{mode} {style}: {len(inputs)} lengths; compile {r[style + '_compile_s']:.2f} s vs one static compile "
                  f"{r['static_compile_s']:.2f} s ({r[style + '_compile_ratio']:.2f}x); steady / static per length median "
                  f"{r[style + '_steady_ratio_median']:.2f}x, worst {r[style + '_steady_ratio_max']:.2f}x"
                  + (f"; coil compiles {r[style + '_compiles']}" if mode == "coil" else ""), flush=True)
            if style + "_loop_ratio_median" in r:
                print(f"  50-call loops by the host's clock: median {r[style + '_loop_ratio_median']:.2f}x, worst "
                      f"{r[style + '_loop_ratio_max']:.2f}x", flush=True)
        for k in ("host_dynamic", "host_automatic", "host_static"):
            if k in r:
                print(f"  {k} (length {inputs[min(7, len(inputs) - 1)].shape[1]}): {r[k]}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"dynamic-{args.device}-{results['date']}.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
