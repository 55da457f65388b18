"""How the yardstick measures: per-call medians (CUDA events on the GPU, the wall clock on the
CPU), alone and with the modes taking turns in one process, each call taking the next of at
least two input sets (no call finds its inputs in the last-level cache), the two
ceilings (a large device copy, a large GEMM), work counted per workload, and errors against eager.
"""
import math
import statistics
import time
from pathlib import Path

import torch


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def cache_bytes(device):
    """The last-level cache: the GPU's L2, or the CPU's L3 (L2 where there is none)."""
    if device == "cuda":
        return torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
        best = max(best, int(text.rstrip("KM")) * scale)
    return best or 32 << 20


def input_sets(inputs, device):
    """Copies of the inputs to rotate through, so that together they are 3x the last-level
    cache, and at least two: no call finds its inputs left in the cache by the one before (at
    most 32 sets). Inputs larger than the cache need a second set too: the call before leaves
    the last cache-full it read, and a kernel streaming with evict-first loads keeps those lines
    and hits them at its end (on the H100, max-autotune's column sum of 16384x8192 bf16 ran
    0.088 ms a call after another mode's call on the same tensor, 0.10-0.12 after its own)."""
    size = sum(t.numel() * t.element_size() for t in inputs)
    count = min(32, max(2, math.ceil(3 * cache_bytes(device) / max(size, 1))))
    return [inputs] + [[t.clone() for t in inputs] for _ in range(count - 1)]


def median_ms(fn, sets, device, budget_s=0.5, min_reps=10, max_reps=200):
    """Median time of one call in ms, after warm-up, over as many calls as fit in `budget_s`.
    GPU: a pair of events around each call with no synchronisation between calls (the queue
    stays full, as in a model's loop; a launch-bound call shows its launch cost)."""
    for i in range(3):
        fn(*sets[i % len(sets)])
    sync(device)
    start = time.perf_counter()
    for i in range(3):
        fn(*sets[i % len(sets)])
    sync(device)
    reps = int(min(max_reps, max(min_reps, budget_s / max((time.perf_counter() - start) / 3, 1e-6))))
    if device != "cuda":
        times = []
        for i in range(reps):
            t = time.perf_counter()
            fn(*sets[i % len(sets)])
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times), reps
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (s, e) in enumerate(events):
        s.record()
        fn(*sets[i % len(sets)])
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events), reps


def interleaved_ms(fns, sets, device, rounds=9, round_s=0.05, max_calls=8):
    """{mode: (median, first quartile, third quartile) of the rounds' ms a call}, the modes taking
    turns: `rounds` rounds in which each mode (the first one rotating) makes one unmeasured call,
    then a burst of up to `max_calls` calls (about `round_s` of them) between one pair of CUDA
    events made beforehand (no synchronisation between calls or modes; the wall clock on the
    CPU); a round's time per call is the burst's over its calls. A GPU's clocks follow its power
    draw over tens of milliseconds (on the H100, a bf16 SwiGLU ran 3.19 ms a call in its first
    60 ms, 3.40 ms a call 150 ms later), so modes timed one after another see different states;
    taking turns gives each mode the same mix of them."""
    names = list(fns)
    turn = [0]  # one count for all modes: a call never takes the set the call before took

    def call(n):
        fns[n](*sets[turn[0] % len(sets)])
        turn[0] += 1

    cost = {}
    for n in names:  # warm-up, and the cost of a call that sets the calls per round
        for _ in range(2):
            call(n)
        sync(device)
        start = time.perf_counter()
        call(n)
        sync(device)
        cost[n] = time.perf_counter() - start
    calls = {n: max(1, min(max_calls, int(round_s / max(cost[n], 1e-6)))) for n in names}
    gpu = device == "cuda"
    bursts = {n: [] for n in names}  # (start, end) events on the GPU, ms on the CPU
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(rounds * len(names))] if gpu else []
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            call(n)
            pair = events.pop() if gpu else None
            if gpu:
                pair[0].record()
            t = time.perf_counter()
            for _ in range(calls[n]):
                call(n)
            if gpu:
                pair[1].record()
            bursts[n].append(pair if gpu else (time.perf_counter() - t) * 1e3)
    sync(device)
    out = {}
    for n in names:
        per_call = [(b[0].elapsed_time(b[1]) if gpu else b) / calls[n] for b in bursts[n]]
        q1, _, q3 = statistics.quantiles(per_call, n=4) if len(per_call) > 1 else per_call * 3
        out[n] = (statistics.median(per_call), q1, q3)
    return out


def per_call_us(fn, device, calls=2000):
    """Wall-clock time per call of a launch-bound function (the best of 5 loops of `calls`)."""
    for _ in range(100):
        fn()
    sync(device)
    best = math.inf
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
    return best


def ceilings(device):
    """The two ceilings, measured here: copy bandwidth (GB/s, bytes read + written) of a large
    device-to-device copy, and the TFLOP/s of a large GEMM (cuBLAS bf16 on the GPU, fp32 on the CPU)."""
    if device == "cuda":
        x = torch.randn(1 << 29, device=device).to(torch.bfloat16)  # 1 GiB
        n, dtype = 8192, torch.bfloat16
    else:
        x = torch.randn(1 << 26, device=device)  # 256 MiB
        n, dtype = 2048, torch.float32
    y = torch.empty_like(x)
    ms, _ = median_ms(lambda: y.copy_(x), [[]], device, budget_s=1.0, max_reps=50)
    copy_gbs = 2 * x.numel() * x.element_size() / ms / 1e6
    del x, y
    a, b = torch.randn(n, n, device=device).to(dtype), torch.randn(n, n, device=device).to(dtype)
    ms, _ = median_ms(lambda: a @ b, [[]], device, budget_s=1.0, max_reps=50)
    return {"copy_gbs": copy_gbs, "gemm_tflops": 2 * n**3 / ms / 1e9, "gemm": f"{n}^3 {str(dtype).split('.')[1]}"}


def outputs(value):
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in outputs(v)] if isinstance(value, (list, tuple)) else []


def bytes_moved(inputs, result):
    """What an ideal kernel moves: every input read once and every output written once."""
    return sum(t.numel() * t.element_size() for t in list(inputs) + outputs(result))


def flops(fn, inputs):
    """Matrix flops (mm, bmm, convolution, attention) as torch.utils.flop_counter counts them
    (it counts causal attention as full attention)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn(*inputs)
    return counter.get_total_flops()


def rel_error(got, want):
    """max |got - want| / max |want| over all outputs (integers exactly)."""
    worst = 0.0
    for g, w in zip(outputs(got), outputs(want), strict=True):
        if g.shape != w.shape:
            return math.inf
        if not w.is_floating_point():
            worst = max(worst, 0.0 if torch.equal(g, w) else math.inf)
            continue
        scale = w.float().abs().max().clamp_min(1e-6)
        worst = max(worst, ((g.float() - w.float()).abs().max() / scale).item())
    return worst
