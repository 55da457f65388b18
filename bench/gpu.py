"""GPU benchmark of the compiler: coil against PyTorch eager, torch.compile (Inductor default)
and torch.compile(mode="max-autotune-no-cudagraphs"), in one run on one machine, bf16.

    python3 bench/gpu.py [--only NAME,...] [--quick] [--out DIR]

Workloads: the memory-bound suite at 16384x8192 (gelu(x + b), softmax, layer_norm, rms_norm,
sum over dim 0, x + y^T), an MLP with a gelu between its two linears, and a GPT-2-style
transformer block. Times are medians of CUDA-event-timed calls on device-resident inputs
(coil: `coil-bench`, events around Executable::run on device tensors, launch overhead
included; PyTorch: events around the call). Memory-bound results are given as a % of the
measured device-to-device copy bandwidth (bytes read + written by the op, counted once),
matrix work as a % of measured cuBLAS bf16 TFLOP/s. Compile times: cold is an empty cache
(coil: a fresh cache folder; Inductor: the first compile in this process with a fresh
TORCHINDUCTOR_CACHE_DIR), warm is a second compile with the cache filled (coil: a new process;
Inductor: after torch._dynamo.reset()). coil's outputs are checked against eager's."""
import argparse
import datetime
import json
import os
import platform
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "python"))
from conftest import read_safetensors, write_safetensors  # noqa: E402

COIL_BENCH = os.environ.get("COIL_BENCH", str(ROOT / "build" / "tools" / "coil-bench"))
F = torch.nn.functional
BF = torch.bfloat16


def event_median(fn, warmup=5, reps=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def ceilings():
    x = torch.randn(1 << 29, dtype=BF, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    ms = event_median(lambda: y.copy_(x), reps=20)
    copy_gbs = 2 * x.numel() * 2 / ms / 1e6
    n = 8192
    a, b = torch.randn(n, n, dtype=BF, device="cuda"), torch.randn(n, n, dtype=BF, device="cuda")
    ms = event_median(lambda: a @ b, reps=20)
    return copy_gbs, 2 * n**3 / ms / 1e9


# ---- workloads: (coil graph text, inputs, torch function, bytes moved, flops)

def memory_bound(R, C):
    x = f"bf16[{R}, {C}]"
    n = R * C * 2
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, dtype=BF, device="cuda", generator=g)

    def graph(name, body):
        return f"graph {name} {{\n{body}}}\n"

    return {
        "gelu_bias": (graph("gelu_bias", f"  %x = input() : {x}\n  %b = input() : bf16[{C}]\n  %a = add.Tensor(%x, %b)\n"
                            "  %y = gelu(%a)\n  return %y\n"),
                      {"x": rnd(R, C), "b": rnd(C)}, lambda x, b: F.gelu(x + b), 2 * n, 0),
        "softmax": (graph("softmax", f"  %x = input() : {x}\n  %y = _softmax(%x, -1, false)\n  return %y\n"),
                    {"x": rnd(R, C)}, lambda x: torch.softmax(x, -1), 2 * n, 0),
        "layer_norm": (graph("layer_norm", f"  %x = input() : {x}\n  %w = input() : bf16[{C}]\n  %b = input() : bf16[{C}]\n"
                             f"  %y, %m, %r = native_layer_norm(%x, [{C}], %w, %b, 1e-05)\n  return %y\n"),
                       {"x": rnd(R, C), "w": rnd(C), "b": rnd(C)}, lambda x, w, b: F.layer_norm(x, [C], w, b), 2 * n, 0),
        "rms_norm": (graph("rms_norm", f"  %x = input() : {x}\n  %w = input() : bf16[{C}]\n"
                           "  %f = _to_copy(%x, dtype=f32)\n  %s = mul.Tensor(%f, %f)\n  %m = mean.dim(%s, [-1], true)\n"
                           "  %e = add.Scalar(%m, 1e-06)\n  %r = rsqrt(%e)\n  %n = mul.Tensor(%f, %r)\n"
                           "  %h = _to_copy(%n, dtype=bf16)\n  %y = mul.Tensor(%h, %w)\n  return %y\n"),
                     {"x": rnd(R, C), "w": rnd(C)},
                     lambda x, w: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(BF) * w, 2 * n, 0),
        "sum_dim0": (graph("sum_dim0", f"  %x = input() : {x}\n  %y = sum.dim_IntList(%x, [0])\n  return %y\n"),
                     {"x": rnd(R, C)}, lambda x: x.sum(0), n, 0),
        "add_transpose": (graph("add_transpose", f"  %x = input() : {x}\n  %t = input() : bf16[{C}, {R}]\n"
                                "  %p = permute(%t, [1, 0])\n  %y = add.Tensor(%x, %p)\n  return %y\n"),
                          {"x": rnd(R, C), "t": rnd(C, R)}, lambda x, t: x + t.t(), 3 * n, 0),
    }


def mlp(M, D, H):
    g = torch.Generator(device="cuda").manual_seed(1)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, dtype=torch.float32, device="cuda", generator=g) * scale).to(BF)

    text = (f"graph mlp {{\n  %x = input() : bf16[{M}, {D}]\n  %w1 = input() : bf16[{H}, {D}]\n  %b1 = input() : bf16[{H}]\n"
            f"  %w2 = input() : bf16[{D}, {H}]\n  %b2 = input() : bf16[{D}]\n"
            f"  %w1t = permute(%w1, [1, 0])\n  %h = addmm(%b1, %x, %w1t)\n  %a = gelu(%h)\n"
            f"  %w2t = permute(%w2, [1, 0])\n  %y = addmm(%b2, %a, %w2t)\n  return %y\n}}\n")
    inputs = {"x": rnd(M, D), "w1": rnd(H, D, scale=D**-0.5), "b1": rnd(H), "w2": rnd(D, H, scale=H**-0.5), "b2": rnd(D)}
    fn = lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)  # noqa: E731
    return {"mlp": (text, inputs, fn, 0, 2 * 2 * M * D * H)}


def block(B, T, D, NH):
    """A GPT-2-style block: pre-norm causal self-attention and a gelu(tanh) MLP, residuals."""
    g = torch.Generator(device="cuda").manual_seed(2)
    hd, M = D // NH, B * T

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, dtype=torch.float32, device="cuda", generator=g) * scale).to(BF)

    w = {"x": rnd(B, T, D), "ln1_w": 1 + rnd(D, scale=0.1), "ln1_b": rnd(D, scale=0.1), "attn_w": rnd(3 * D, D, scale=D**-0.5),
         "attn_b": rnd(3 * D, scale=0.1), "proj_w": rnd(D, D, scale=D**-0.5), "proj_b": rnd(D, scale=0.1),
         "ln2_w": 1 + rnd(D, scale=0.1), "ln2_b": rnd(D, scale=0.1), "fc_w": rnd(4 * D, D, scale=D**-0.5),
         "fc_b": rnd(4 * D, scale=0.1), "out_w": rnd(D, 4 * D, scale=(4 * D)**-0.5), "out_b": rnd(D, scale=0.1)}
    decl = "\n".join(f"  %{k} = input() : bf16[{', '.join(map(str, v.shape))}]" for k, v in w.items())
    text = f"""graph block {{
{decl}
  %h1, %mean1, %rstd1 = native_layer_norm(%x, [{D}], %ln1_w, %ln1_b, 1e-05)
  %h1_2d = view(%h1, [{M}, {D}])
  %attn_wt = permute(%attn_w, [1, 0])
  %qkv_2d = addmm(%attn_b, %h1_2d, %attn_wt)
  %qkv = view(%qkv_2d, [{B}, {T}, {3 * D}])
  %q, %k, %v = split_with_sizes(%qkv, [{D}, {D}, {D}], 2)
  %q4 = view(%q, [{B}, {T}, {NH}, {hd}])
  %k4 = view(%k, [{B}, {T}, {NH}, {hd}])
  %v4 = view(%v, [{B}, {T}, {NH}, {hd}])
  %qh = permute(%q4, [0, 2, 1, 3])
  %kh = permute(%k4, [0, 2, 1, 3])
  %vh = permute(%v4, [0, 2, 1, 3])
  %att = scaled_dot_product_attention(%qh, %kh, %vh, is_causal=true)
  %att_t = permute(%att, [0, 2, 1, 3])
  %att_c = clone(%att_t, memory_format=contiguous_format)
  %att_2d = view(%att_c, [{M}, {D}])
  %proj_wt = permute(%proj_w, [1, 0])
  %o_2d = addmm(%proj_b, %att_2d, %proj_wt)
  %o = view(%o_2d, [{B}, {T}, {D}])
  %x1 = add.Tensor(%x, %o)
  %h2, %mean2, %rstd2 = native_layer_norm(%x1, [{D}], %ln2_w, %ln2_b, 1e-05)
  %h2_2d = view(%h2, [{M}, {D}])
  %fc_wt = permute(%fc_w, [1, 0])
  %f_2d = addmm(%fc_b, %h2_2d, %fc_wt)
  %gl = gelu(%f_2d, approximate="tanh")
  %out_wt = permute(%out_w, [1, 0])
  %m_2d = addmm(%out_b, %gl, %out_wt)
  %m = view(%m_2d, [{B}, {T}, {D}])
  %y = add.Tensor(%x1, %m)
  return %y
}}
"""

    def fn(x, ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b):
        h = F.layer_norm(x, [D], ln1_w, ln1_b)
        q, k, v = F.linear(h, attn_w, attn_b).split(D, dim=2)
        q, k, v = (t.view(B, T, NH, hd).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(B, T, D)
        x1 = x + F.linear(a, proj_w, proj_b)
        h2 = F.layer_norm(x1, [D], ln2_w, ln2_b)
        return x1 + F.linear(F.gelu(F.linear(h2, fc_w, fc_b), approximate="tanh"), out_w, out_b)

    attn_flops = 2 * 2 * B * NH * T * T * hd // 2  # causal: half of QK^T and PV
    return {"transformer_block": (text, w, fn, 0, 2 * M * D * (3 * D + D + 8 * D) + attn_flops)}


def torch_modes(fn, inputs, eager_only=False):
    args = list(inputs.values())
    out = {}
    with torch.no_grad():
        ref = fn(*args)
        out["eager"] = {"ms": event_median(lambda: fn(*args))}
        for mode in () if eager_only else ("default", "max-autotune-no-cudagraphs"):
            seconds = []
            for _ in range(2):  # cold (empty Inductor cache), then warm (after a Dynamo reset)
                torch._dynamo.reset()
                c = torch.compile(fn, mode=None if mode == "default" else mode)
                t0 = time.perf_counter()
                c(*args)
                torch.cuda.synchronize()
                seconds.append(time.perf_counter() - t0)
            out[mode] = {"ms": event_median(lambda: c(*args)), "cold_s": seconds[0], "warm_s": seconds[1]}
    return ref, out


def coil_mode(name, text, inputs, ref, work):
    d = Path(work) / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "g.coil").write_text(text)
    write_safetensors(d / "in.safetensors", {k: v.cpu() for k, v in inputs.items()})
    cache = d / "cache"
    runs = []
    for i in range(2):  # cold (empty cache), then warm (a new process on the filled cache)
        cmd = [COIL_BENCH, str(d / "g.coil"), "--inputs", str(d / "in.safetensors"), "--cache-dir", str(cache)]
        if i == 0:
            cmd += ["--out", str(d / "out.safetensors")]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return {"error": (p.stderr or p.stdout).strip()[-2000:]}
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    got = next(iter(read_safetensors(d / "out.safetensors").values())).cuda().float()
    err = (got - ref.float()).abs().max().item()
    scale = ref.float().abs().max().item()
    if PROFILE:
        profile(d, cache)
    cold, warm = runs
    return {"ms": warm["median_ms"], "cold_s": cold["compile_ms"] / 1e3, "warm_s": warm["compile_ms"] / 1e3,
            "max_abs_err": err, "ref_max": scale, "tuned": cold["tuned_kernels"], "tune_ms": cold["tune_ms"],
            "kernels": cold["loop_kernels"], "externs": cold["extern_calls"], "units": cold["units"]}


PROFILE = False


def profile(d, cache):
    """coil's kernels in this workload (one warm run): time, DRAM bytes and SM throughput from Nsight Compute."""
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu" if Path("/usr/local/cuda/bin/ncu").exists() else None)
    if not ncu:
        print("profile: ncu not found", flush=True)
        return
    metrics = "gpu__time_duration.sum,dram__bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active"
    cmd = [ncu, "--csv", "--metrics", metrics, COIL_BENCH, str(d / "g.coil"), "--inputs", str(d / "in.safetensors"), "--cache-dir",
           str(cache), "--repeat", "1", "--warmup", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    rows = {}
    for line in p.stdout.splitlines():
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) < 15 or not cells[0].isdigit():
            continue
        rows.setdefault((cells[0], cells[4][:60]), {})[cells[-3]] = cells[-1]
    for (launch, kernel), m in rows.items():
        print(f"profile {launch:>3} {kernel:60s} " + " ".join(f"{k.split('__')[1].split('.')[0]}={v}" for k, v in m.items()), flush=True)
    if not rows:
        print("profile: no kernels:", (p.stderr or p.stdout)[-1500:], flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    ap.add_argument("--eager-only", action="store_true", help="no torch.compile modes (iterating on coil; no table)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--profile", action="store_true", help="coil's kernel times per workload (Nsight Systems)")
    a = ap.parse_args()
    global PROFILE
    PROFILE = a.profile
    torch.backends.cuda.matmul.allow_tf32 = False
    R, C = (2048, 1024) if a.quick else (16384, 8192)
    suite = memory_bound(R, C)
    suite.update(mlp(1024, 512, 2048) if a.quick else mlp(8192, 4096, 16384))
    suite.update(block(2, 128, 256, 4) if a.quick else block(8, 1024, 1024, 16))
    only = [s for s in a.only.split(",") if s]
    copy_gbs, tflops = ceilings()
    print(f"ceilings: copy {copy_gbs:.0f} GB/s, cuBLAS bf16 {tflops:.0f} TFLOP/s", flush=True)
    work = tempfile.mkdtemp(prefix="coil-gpu-bench-")
    results = {}
    for name, (text, inputs, fn, nbytes, flops) in suite.items():
        if only and name not in only:
            continue
        ref, r = torch_modes(fn, inputs, a.eager_only)
        r["coil"] = coil_mode(name, text, inputs, ref, work)
        for m in r.values():
            if "ms" in m:
                if nbytes:
                    m["pct"] = 100 * nbytes / m["ms"] / 1e6 / copy_gbs
                elif flops:
                    m["pct"] = 100 * flops / m["ms"] / 1e9 / tflops
        results[name] = {"bytes": nbytes, "flops": flops, **r}
        print(name, json.dumps(r), flush=True)
    if a.eager_only:
        return

    modes = ["eager", "default", "max-autotune-no-cudagraphs", "coil"]
    lines = [f"# GPU benchmark, {datetime.date.today()}", "",
             f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
             f"{platform.python_version()}; bf16. Ceilings measured in this run: device-to-device copy "
             f"{copy_gbs:.0f} GB/s, cuBLAS bf16 8192^3 {tflops:.0f} TFLOP/s.", "",
             "Median ms (events) and % of the ceiling (copy bandwidth for memory-bound rows, cuBLAS TFLOP/s for matrix rows); "
             "compile s cold / warm.", "",
             "| workload | eager | inductor | max-autotune | coil | coil vs best torch | compile inductor | compile max-autotune | compile coil | coil max err |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        def cell(m):
            x = r.get(m, {})
            return f"{x['ms']:.3f} ({x.get('pct', 0):.0f}%)" if "ms" in x else "error"

        def comp(m):
            x = r.get(m, {})
            return f"{x['cold_s']:.2f} / {x['warm_s']:.2f}" if "cold_s" in x else "-"
        best = min(r[m]["ms"] for m in modes[:3])
        c = r["coil"]
        ratio = f"{best / c['ms']:.2f}x" if "ms" in c else "-"
        err = f"{c['max_abs_err']:.3g} (of {c['ref_max']:.3g})" if "ms" in c else c.get("error", "")[:200]
        lines.append(f"| {name} | " + " | ".join(cell(m) for m in modes) + f" | {ratio} | {comp('default')} | "
                     f"{comp('max-autotune-no-cudagraphs')} | {comp('coil')} | {err} |")
    table = "\n".join(lines) + "\n"
    print(table)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-{datetime.date.today()}" + ("-quick" if a.quick else "")
    (out / f"{stem}.md").write_text(table)
    (out / f"{stem}.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                                  "copy_gbs": copy_gbs, "cublas_tflops": tflops, "results": results}, indent=1))


if __name__ == "__main__":
    main()
