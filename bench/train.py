"""One training step (forward, backward, AdamW) of real models under eager, Inductor and coil:
step time (median of CUDA events around whole steps), peak device memory (sampled in two more
steps, every allocator in the process, coil's pools too), and cold compile time (the
first step on empty compile caches, less a steady step). bf16 autocast with f32 master weights,
the models in train mode (dropout on), torch.optim.AdamW(foreach=True) whose step is compiled by
the same backend as the model.

    python -m bench.train --device cuda --models gpt2,llama,resnet50,vit_s --out DIR

Each model runs in a process of its own, the modes one after another from the same weights and
data; each process gets empty Inductor and coil caches. Results: DIR/train-<device>.{json,md}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.zoo import check

TAG = "@train "
MODES = ["eager", "inductor", "coil"]


def _gpt2(device):
    import transformers

    config = transformers.GPT2Config(use_cache=False, attn_implementation="sdpa")  # GPT-2 small: 124M
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, config.vocab_size, (8, 1024), device=device)
    return model, lambda m: m(input_ids=tokens, labels=tokens).loss


def _llama(device):
    import transformers

    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                                      num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=1024,
                                      use_cache=False, attn_implementation="sdpa")  # ~150M: GQA, RoPE, SwiGLU
    model = transformers.LlamaForCausalLM(config)
    tokens = torch.randint(0, config.vocab_size, (8, 1024), device=device)
    return model, lambda m: m(input_ids=tokens, labels=tokens).loss


def _images(model, device, batch):
    x = torch.randn(batch, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    return model, lambda m: F.cross_entropy(m(x), y)


def _resnet50(device):
    import torchvision

    return _images(torchvision.models.resnet50(), device, 32)


def _vit_s(device):
    import timm

    return _images(timm.create_model("vit_small_patch16_224", pretrained=False), device, 32)


def _cnn_small(device):  # for a CPU smoke run
    import torchvision

    return _images(torchvision.models.resnet18(num_classes=1000), device, 4)


MODELS = {"gpt2": _gpt2, "llama": _llama, "resnet50": _resnet50, "vit_s": _vit_s, "resnet18": _cnn_small}


def emit(record):
    print(TAG + json.dumps(record), flush=True)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


class DeviceMemory:
    """The device's used memory (cudaMemGetInfo), sampled every millisecond on a thread until
    stop(), which returns its peak in GiB: what every allocator in the process holds (PyTorch's
    cache and coil's pools alike; torch.cuda.max_memory_allocated sees PyTorch's only)."""

    def __init__(self):
        import threading

        self.peak, self.done = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.is_set():
            free, total = torch.cuda.mem_get_info()
            self.peak = max(self.peak, total - free)
            time.sleep(0.001)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak / 2 ** 30


def top_kernels(step, count=80):
    """The GPU kernels of one step by total time: [(name, calls, ms)] (torch.profiler sees every
    launch in the process, coil's driver-API launches and library kernels included)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            calls, us = totals.get(e.name, (0, 0.0))
            totals[e.name] = (calls + 1, us + e.device_time)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][1])
    return [(name[:120], calls, us / 1e3) for name, (calls, us) in ranked[:count]] + [
        ("(all kernels)", sum(c for c, _ in totals.values()), sum(u for _, u in totals.values()) / 1e3)]


def host_profile(step, count=30):
    """The host's side of a step: milliseconds to issue it (the median of 5, each from an idle GPU,
    without waiting for it; a step whose host time is near its step time is launch-bound), coil's
    plans' host time a step, and the Python functions that took the most of that time (cProfile:
    the top by cumulative, then by own ms)."""
    import cProfile
    import pstats

    issues, repeats = [], 5
    torch.cuda.synchronize()
    before = plan_host_times()
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        issues.append((time.perf_counter() - start) * 1e3)
        torch.cuda.synchronize()
    after = plan_host_times()
    issued = statistics.median(issues)
    plans = {k: round((after[k] - before.get(k, 0)) / repeats, 3) for k in after}
    prof = cProfile.Profile()
    prof.enable()
    step()
    prof.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(prof).stats
    by_total = sorted(stats.items(), key=lambda kv: -kv[1][3])[:count]
    by_own = sorted(stats.items(), key=lambda kv: -kv[1][2])[:count]
    return issued, plans, [(f"{Path(f).name}:{line}:{fn}", calls, tottime * 1e3, cumtime * 1e3)
                           for (f, line, fn), (_, calls, tottime, cumtime, _) in by_total + by_own]


def plan_host_times():
    """coil's GPU plans' host time so far, summed over every compiled graph of the process
    (Compiled.stats()["host"]: setup, launches, library calls, outputs); empty without coil."""
    import gc

    runner = sys.modules.get("coil._runner")
    total = {}
    if runner is None:
        return total
    for o in gc.get_objects():
        if type(o) is runner.Runner:  # (not isinstance: it would dereference dead weak proxies)
            for k, v in o.compiled.stats().get("host", {}).items():
                total[k] = total.get(k, 0) + v
    return total


def host_phases(loss_of, compiled, update, opt, repeats=5):
    """Milliseconds the host takes to issue each phase of a step (forward with the loss, backward,
    optimizer step with zero_grad), each from an idle GPU: the median of `repeats` steps."""
    times = {"forward": [], "backward": [], "optimizer": []}

    def timed(phase, fn):
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        times[phase].append((time.perf_counter() - start) * 1e3)
        return out

    for _ in range(repeats):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = timed("forward", lambda: loss_of(compiled))
        timed("backward", loss.backward)
        timed("optimizer", lambda: (update(), opt.zero_grad(set_to_none=True)))
    torch.cuda.synchronize()
    return {phase: round(statistics.median(t), 3) for phase, t in times.items()}


def memory_phases(loss_of, compiled, update, opt, pool):
    """GiB held by PyTorch's allocator and by coil's pool (`pool`, or None) at the phases of one
    step, and each phase's peaks (each allocator's own: their sum bounds the step's): where a
    step's memory goes, saved activations (after the forward) against the backward's peak."""
    def held():
        return {"torch": torch.cuda.memory_allocated() / 2 ** 30, "coil": pool.stats()["live_bytes"] / 2 ** 30 if pool else 0.0}

    def peaks():
        torch.cuda.synchronize()
        coil = pool.stats() if pool else {}
        return {"torch": torch.cuda.max_memory_allocated() / 2 ** 30, "coil": coil.get("peak_live_bytes", 0) / 2 ** 30,
                "coil_requested": coil.get("peak_requested_bytes", 0) / 2 ** 30}

    def reset():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        if pool:
            pool.reset_peaks()

    phases = {}
    reset()
    phases["start"] = held()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_of(compiled)
    phases["forward_peak"], phases["after_forward"] = peaks(), held()
    reset()
    loss.backward()
    phases["backward_peak"], phases["after_backward"] = peaks(), held()
    reset()
    update()
    opt.zero_grad(set_to_none=True)
    phases["optimizer_peak"] = peaks()
    return phases


def training(name, device, mode):
    """Model `name` in train mode from seed 0, its loss function, its AdamW (foreach), and the
    model and the optimizer step as `mode` runs them (eager, or compiled by Inductor or coil)."""
    torch.manual_seed(0)
    with torch.device(device):
        model, loss_of = MODELS[name](device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def opt_step():
        opt.step()

    if mode == "eager":
        return model, loss_of, opt, model, opt_step
    # "coil", "inductor", or either with "-reduce-overhead" (CUDA graphs)
    backend, _, how = mode.partition("-")
    compile_mode = how or None
    return (model, loss_of, opt, torch.compile(model, backend=backend, mode=compile_mode),
            torch.compile(opt_step, backend=backend, mode=compile_mode))


def child(name, device, modes, steps, profile=False):
    if any(m.startswith("coil") for m in modes):
        import coil

        coil.register()
    torch.backends.cuda.matmul.allow_tf32 = True  # what training scripts set; bf16 autocast either way
    torch.backends.cudnn.allow_tf32 = True
    for mode in modes:
        model, loss_of, opt, compiled, update = training(name, device, mode)

        def step():
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = loss_of(compiled)
            loss.backward()
            update()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        record = {"step": "mode", "model": name, "mode": mode, "params": sum(p.numel() for p in model.parameters())}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.perf_counter()
                first = step()
                sync(device)
                record["first_s"] = time.perf_counter() - start
            if mode.startswith("coil"):  # what ran in PyTorch instead of coil, and coil's own failures
                record.update({k: v for k, v in check.coil_messages(caught).items() if v})
            record["first_loss"] = first.float().item()
            for _ in range(3):
                step()
            sync(device)
            times = []  # (no sampling thread meanwhile: its GIL turns would delay the host's issuing)
            for _ in range(steps):
                if device == "cuda":
                    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    begin.record()
                    step()
                    end.record()
                    end.synchronize()
                    times.append(begin.elapsed_time(end))
                else:
                    t0 = time.perf_counter()
                    step()
                    times.append((time.perf_counter() - t0) * 1e3)
            record["step_ms"] = statistics.median(times)
            record["quartiles"] = statistics.quantiles(times, n=4)[::2] if len(times) > 1 else [times[0]] * 2
            record["cold_compile_s"] = max(0.0, record["first_s"] - record["step_ms"] / 1e3)
            pool = None  # coil's pool on this GPU: what its graphs hold and keep cached
            if device == "cuda" and mode.startswith("coil"):
                from coil import _backend

                pool = _backend.device_memory(0)
            if device == "cuda":  # the peaks of two more steps, the device's sampled meanwhile
                torch.cuda.reset_peak_memory_stats()
                sampler = DeviceMemory()
                for _ in range(2):
                    step()
                torch.cuda.synchronize()
                record["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
                record["device_peak_gib"] = sampler.stop()
                if pool:
                    record["coil_pool"] = {k: (v / 2 ** 30 if k.endswith("bytes") else v) for k, v in pool.stats().items()}
            if profile and device == "cuda":
                record["memory_phases"] = memory_phases(loss_of, compiled, update, opt, pool)
                record["host_phases_ms"] = host_phases(loss_of, compiled, update, opt)
                record["kernels"] = top_kernels(step)
                record["host_ms"], record["plan_host"], record["host_calls"] = host_profile(step)
        except Exception as e:  # the other modes still run
            record["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        emit(record)
        del compiled, update, opt, model
        torch._dynamo.reset()
        if device == "cuda":
            import gc

            gc.collect()  # the compiled graphs (and coil's memory pools with them) go before the next mode
            torch.cuda.empty_cache()


def run_model(name, args):
    with tempfile.TemporaryDirectory() as caches:
        # COIL_DEBUG=stats: each coil compile's time and statistics (NVRTC, tuning) in the log
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{caches}/inductor", COIL_CACHE_DIR=f"{caches}/coil",
                   COIL_DEBUG=os.environ.get("COIL_DEBUG", "stats"),
                   TRITON_CACHE_DIR=f"{caches}/triton")
        cmd = [sys.executable, "-m", "bench.train", "--child", name, "--device", args.device, "--modes", args.modes,
               "--steps", str(args.steps)] + (["--profile"] if args.profile else [])
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
            out, err = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            out, err = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
        records = [json.loads(line[len(TAG):]) for line in out.splitlines() if line.startswith(TAG)]
        done = {r["mode"] for r in records}
        for mode in args.modes.split(","):
            if mode not in done:
                records.append({"model": name, "mode": mode, "error": f"no result ({err.strip().splitlines()[-1][:300] if err.strip() else 'crashed'})"})
        return records, err


def table(records, device):
    by = {(r["model"], r["mode"]): r for r in records}
    names = list(dict.fromkeys(r["model"] for r in records))
    lines = ["| model | params | eager ms | Inductor ms | coil ms | Inductor speedup | coil speedup | coil / Inductor | "
             "device peak GiB (eager / Inductor / coil) | cold compile s (Inductor / coil) |", "|" + "---|" * 10]
    ratios = []
    for n in names:
        e, i, c = (by.get((n, m), {}) for m in MODES)
        ms = [r.get("step_ms") for r in (e, i, c)]
        cell = lambda v, f="{:.1f}": f.format(v) if v is not None else "—"  # noqa: E731
        sp_i = ms[0] / ms[1] if ms[0] and ms[1] else None
        sp_c = ms[0] / ms[2] if ms[0] and ms[2] else None
        rel = ms[1] / ms[2] if ms[1] and ms[2] else None
        if rel:
            ratios.append(rel)
        peaks = " / ".join(cell(r.get("device_peak_gib"), "{:.2f}") for r in (e, i, c))
        colds = " / ".join(cell(r.get("cold_compile_s")) for r in (i, c))
        errors = "; ".join(f"{m}: {r['error']}" for m, r in zip(MODES, (e, i, c)) if r.get("error"))
        said = [f"coil ran {c['fallback_nodes']} node(s) in eager ({', '.join(c['fallback_ops'])})"] if c.get("fallback_nodes") else []
        said += [f"coil: {t[:200]}" for t in c.get("compile_errors", []) + c.get("other", [])]
        errors = "; ".join([errors] * bool(errors) + said)
        lines.append(f"| {n} | {cell((e or i or c).get('params', 0) / 1e6, '{:.0f}M')} | {cell(ms[0])} | {cell(ms[1])} | {cell(ms[2])} | "
                     f"{cell(sp_i, '{:.2f}x')} | {cell(sp_c, '{:.2f}x')} | {cell(rel, '{:.2f}x')} | {peaks} | {colds} |"
                     + (f"\n\n{n}: {errors}\n" if errors else ""))
    if ratios:
        lines.append(f"\ncoil / Inductor step-time geomean: {statistics.geometric_mean(ratios):.2f}x over {len(ratios)} models")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--models", default="gpt2,llama,resnet50,vit_s")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--out", default="/tmp/coil-train")
    p.add_argument("--child")
    p.add_argument("--profile", action="store_true", help="also list each mode's heaviest GPU kernels of a step")
    args = p.parse_args()
    if args.child:
        child(args.child, args.device, args.modes.split(","), args.steps, args.profile)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for name in args.models.split(","):
        got, err = run_model(name, args)
        records += got
        (out / f"train-{args.device}-{name}.log").write_text(err)
        for r in got:
            print(json.dumps(r), flush=True)
        meta = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "torch": torch.__version__,
                "date": time.strftime("%Y-%m-%d"), "records": records}
        (out / f"train-{args.device}.json").write_text(json.dumps(meta, indent=1))
        (out / f"train-{args.device}.md").write_text(f"# Training step, {meta['device']}, torch {meta['torch']}, {meta['date']}\n\n"
                                                      + table(records, args.device) + "\n")
    print(table(records, args.device))
    for r in records:
        for name, calls, ms in r.get("kernels", []):
            print(f"{r['model']} {r['mode']}: {ms:8.3f} ms {calls:5d}x {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
