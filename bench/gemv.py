"""Products of a few rows (LLM decoding's projections: M = the batch, nn.Linear's weight [N, K]):
the device time of each backend's kernels per product, from torch.profiler (CUPTI sees cuBLAS's,
Triton's and coil's driver-API launches alike), so the host's per-call cost does not hide a
kernel of a few microseconds. Each call reads another copy of the weight, enough copies to
exceed L2 (a weight read again from L2 would beat the memory). Reported: µs a product, and the
weight's bytes over that time as a share of the device's measured copy bandwidth.

    python -m bench.gemv [--rows 1,8] [--modes eager,inductor,coil] [--out FILE.json]
"""
import argparse
import json
import platform
import statistics
import subprocess
from datetime import date

import torch
import torch.nn.functional as F

from bench.decode import copy_bandwidth

# (N, K): TinyLlama's (fused qkv, o, gate/up, down, vocabulary) and Llama-2-7B's projections
SHAPES = [(2560, 2048), (2048, 2048), (5632, 2048), (2048, 5632), (32000, 2048), (4096, 4096), (11008, 4096), (4096, 11008)]


def linear(x, w):
    return F.linear(x, w)


def compiled(mode):
    if mode == "eager":
        return linear
    if mode == "inductor":
        return torch.compile(linear)
    import coil

    coil.register()
    return torch.compile(linear, backend="coil")


def device_us(fn, x, weights, calls):
    """Median over rounds of the device time of the kernels of one call, µs."""
    from torch.profiler import ProfilerActivity, profile

    for w in weights[:3]:
        fn(x, w)
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(calls):
                fn(x, weights[i % len(weights)])
            torch.cuda.synchronize()
        total = sum(e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        rounds.append(total / calls)
    return statistics.median(rounds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--modes", default="eager,inductor,coil")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    bandwidth = copy_bandwidth()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    for m in [int(r) for r in args.rows.split(",")]:
        for n, k in SHAPES:
            bytes_w = n * k * 2
            copies = max(2, -(-3 * l2 // bytes_w))
            weights = [(torch.randn(n, k, device="cuda", generator=gen) * k ** -0.5).bfloat16() for _ in range(copies)]
            x = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
            want = F.linear(x.float(), weights[0].float())
            row = dict(m=m, n=n, k=k, weight_mb=bytes_w / 2**20)
            for mode in args.modes.split(","):
                torch._dynamo.reset()
                fn = compiled(mode)
                with torch.no_grad():
                    err = ((fn(x, weights[0]).float() - want).abs().max() / want.abs().max()).item()
                    us = device_us(fn, x, weights, args.calls)
                row[mode] = dict(us=us, bandwidth_share=bytes_w / (us * 1e-6) / bandwidth, error=err)
                print(f"M={m} N={n} K={k} {mode}: {us:.2f} us, {100 * row[mode]['bandwidth_share']:.1f}% of copy bandwidth, error {err:.1e}",
                      flush=True)
            rows.append(row)
            del weights
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        meta = dict(date=str(date.today()), device=torch.cuda.get_device_name(), torch=torch.__version__, host=platform.node(),
                    commit=commit, copy_bandwidth_gbs=bandwidth / 1e9)
        with open(args.out, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
