"""Per-call cost of a tiny compiled graph (x * y + 1 on 16 elements): eager, coil, Inductor, and
Dynamo's own floor (backend="eager"), median of 5 loops of 20000 calls, synchronized at each end.
On CUDA also coil and Inductor with CUDA graphs (mode="reduce-overhead")."""
import statistics
import sys
import time

import torch

import coil

coil.register()  # (a build tree on PYTHONPATH has no entry point)

dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"  # python -m bench.overhead [cpu|cuda]


def fn(x, y):
    return x * y + 1


x, y = torch.randn(16, device=dev), torch.randn(16, device=dev)


def per_call(f, n=20000):
    for _ in range(200):
        f(x, y)
    if dev == "cuda":
        torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            f(x, y)
        if dev == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(ts)


cases = [("eager", fn), ("coil", torch.compile(fn, backend="coil")), ("inductor", torch.compile(fn, backend="inductor")),
         ("dynamo floor (backend=eager)", torch.compile(fn, backend="eager"))]
if dev == "cuda":
    cases += [("coil reduce-overhead", coil.compile(fn, mode="reduce-overhead")),
              ("inductor reduce-overhead", torch.compile(fn, mode="reduce-overhead"))]
timings = {name: per_call(f) for name, f in cases}
print("@overhead " + ", ".join(f"{k} {v:.1f} us" for k, v in timings.items()))
