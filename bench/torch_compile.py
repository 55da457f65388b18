"""torch.compile(backend="coil") against backend="inductor" and eager: first-call time with
empty caches, first call with warm caches, steady-state run time, and the adapter's per-call
overhead on a tiny graph.

    python3 bench/torch_compile.py [--device cuda|cpu] [--quick] [--out DIR]

Models (random weights): a GPT-2-style block and a 12-layer GPT-2-small-shaped model (d=768,
12 heads, vocabulary 50257, tied head), bf16, batch 8, sequence 1024 on the GPU (fp32, smaller
on the CPU). Each first call runs in a fresh process: "cold" with empty cache folders (coil's
COIL_CACHE_DIR, Inductor's TORCHINDUCTOR_CACHE_DIR and Triton's), "warm" in a second process
with the folders the cold one filled. The time is from the call to its results being ready
(Dynamo, AOTAutograd, compiling and the first run). Steady state: the median of CUDA-event
timed calls (wall clock on the CPU) in the warm process. Outputs are checked against eager.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_model(name, device, dtype, quick):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, heads = 768, 12

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self, layers=12, vocab=50257, positions=1024):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()

    torch.manual_seed(0)
    batch, seq = (8, 1024) if device == "cuda" and not quick else (2, 128)
    if name == "block":
        model, inputs = Block(), (torch.randn(batch, seq, d),)
    else:
        model, inputs = GPT2(), (torch.randint(0, 50257, (batch, seq)),)
    model = model.to(device=device, dtype=dtype).eval()
    inputs = tuple(x.to(device=device, dtype=dtype if x.is_floating_point() else x.dtype) for x in inputs)
    return model, inputs


def one(args):
    """In a child process: the first call of one mode, then its steady state; JSON to stdout."""
    import torch

    coil_s = [0.0]  # seconds inside coil's C++ compile (the rest of a first call is Dynamo and AOTAutograd)
    if args.mode == "coil":
        import coil
        from coil import _backend

        coil.register()  # a build tree on PYTHONPATH has no entry point
        original = _backend._compile_whole

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                coil_s[0] += time.perf_counter() - t

        _backend._compile_whole = timed
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model, inputs = build_model(args.model, args.device, dtype, args.quick)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    with torch.no_grad():
        want = model(*inputs)
        sync()
        fn = model if args.mode == "eager" else torch.compile(model, backend=args.mode)
        start = time.perf_counter()
        got = fn(*inputs)
        sync()
        first = time.perf_counter() - start
        err = ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-6)).item()
        times = []
        for i in range(args.reps + 3):
            if args.device == "cuda":
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn(*inputs)
                e.record()
                e.synchronize()
                ms = s.elapsed_time(e)
            else:
                t = time.perf_counter()
                fn(*inputs)
                ms = (time.perf_counter() - t) * 1e3
            if i >= 3:
                times.append(ms)
    print(json.dumps({"first_s": first, "median_ms": statistics.median(times), "rel_err": err, "coil_compile_s": coil_s[0]}))


def run_child(model, mode, device, quick, reps, env):
    cmd = [sys.executable, __file__, "--one", "--model", model, "--mode", mode, "--device", device, "--reps", str(reps)]
    if quick:
        cmd.append("--quick")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def adapter_overhead(device):
    """Per-call time of a tiny graph (x + 1 on 16 floats): eager, the whole torch.compile call,
    coil's runner (the adapter's Python plus the C++ run) and the C++ run alone."""
    import torch
    import coil
    from coil import _backend

    runners = []
    original = _backend._compile_whole

    def keep(*a, **k):
        runners.append(original(*a, **k))
        return runners[-1]

    _backend._compile_whole = keep
    x = torch.randn(16, device=device)
    f = lambda t: t + 1  # noqa: E731
    with torch.no_grad():
        compiled = coil.compile(f)
        compiled(x)
    _backend._compile_whole = original
    runner = runners[-1]
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0

    def per_call_us(fn, n=20000):
        for _ in range(200):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            if device == "cuda":
                torch.cuda.synchronize()
            best.append((time.perf_counter() - t) / n * 1e6)
        return min(best)

    with torch.no_grad():
        return {
            "eager_us": per_call_us(lambda: f(x)),
            "compiled_call_us": per_call_us(lambda: compiled(x)),
            "coil_runner_us": per_call_us(lambda: runner(x)),
            "coil_cpp_run_us": per_call_us(lambda: runner.compiled.run([x.data_ptr()], stream)),
        }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="block")
    p.add_argument("--mode", default="coil")
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.one:
        return one(args)
    rows = []
    for model in ("block", "gpt2"):
        for mode in ("eager", "inductor", "coil"):
            caches = tempfile.mkdtemp(prefix=f"bench-{mode}-")
            env = dict(os.environ, COIL_CACHE_DIR=f"{caches}/coil", TORCHINDUCTOR_CACHE_DIR=f"{caches}/inductor",
                       TRITON_CACHE_DIR=f"{caches}/triton", PYTHONUNBUFFERED="1")
            cold = run_child(model, mode, args.device, args.quick, 3, env)
            warm = run_child(model, mode, args.device, args.quick, args.reps, env)
            rows.append({"model": model, "mode": mode, "cold": cold, "warm": warm})
            print(model, mode, json.dumps(cold), json.dumps(warm), flush=True)
    try:
        overhead = adapter_overhead(args.device)
    except Exception as e:  # the table is still written
        overhead = {"error": str(e).splitlines()[0]}
    print("adapter", json.dumps(overhead), flush=True)
    write(args, rows, overhead)


def write(args, rows, overhead):
    import torch

    now = datetime.datetime.now()
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    commit = os.environ.get("COIL_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                                             capture_output=True, text=True).stdout.strip()
    lines = [f"# torch.compile(backend=\"coil\") vs Inductor ({args.device}, {now:%Y-%m-%d})", "",
             f"Machine: {platform.node()}, {gpu}; torch {torch.__version__}, Python {platform.python_version()}, "
             f"coil {commit or 'unknown'}. Made by `bench/torch_compile.py{' --quick' if args.quick else ''}`.", "",
             "| model | mode | first call, cold caches (s) | first call, warm caches (s) | of which coil's C++ compile, cold/warm (s) | steady median (ms) | max rel. error vs eager |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        c, w = r["cold"], r["warm"]
        if "error" in c or "error" in w:
            lines.append(f"| {r['model']} | {r['mode']} | error: {c.get('error') or w.get('error')} | | | | |")
            continue
        inside = f"{c['coil_compile_s']:.3f} / {w['coil_compile_s']:.3f}" if r["mode"] == "coil" else ""
        lines.append(f"| {r['model']} | {r['mode']} | {c['first_s']:.2f} | {w['first_s']:.2f} | {inside} | {w['median_ms']:.3f} | {w['rel_err']:.1e} |")
    lines += ["", f"Adapter per call, tiny graph (x + 1 on 16 floats, {args.device}), µs: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in overhead.items()), ""]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"torch-compile-{args.device}-{now:%Y-%m-%d}"
    (out / f"{stem}.md").write_text("\n".join(lines))
    (out / f"{stem}.json").write_text(json.dumps({"rows": rows, "adapter": overhead}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
