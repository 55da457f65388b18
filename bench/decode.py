"""LLM decoding, one token at a time (issue 30's yardstick): a Llama-style model (TinyLlama's
shape by default: d=2048, 22 layers, 32 heads over 4 KV heads, SwiGLU 5632, vocabulary 32000;
1.1 B parameters in bf16) with a static KV cache written by index_copy_ at each step's position
(the gpt-fast pattern), greedy. Per batch size: a 128-token prompt prefilled in eager, then 256
new tokens, each a call of the compiled one-token step; timed from the first new token to the
last, after a warm-up generation (which compiles, and whose time is reported as the compile's).

Reported per backend (eager; Inductor default and reduce-overhead; coil default and
reduce-overhead): tokens/s, ms a token, and the % of the bandwidth limit: the bytes a token must
read (every weight, and the KV cache up to the position) over the device's measured copy
bandwidth. The tokens each backend generated are compared with eager's.

    python -m bench.decode [--batches 1,8] [--layers 22] [--modes eager,inductor,...] [--out DIR]
"""
import argparse
import json
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    dim: int = 2048
    layers: int = 22
    heads: int = 32
    kv_heads: int = 4
    hidden: int = 5632
    vocab: int = 32000
    max_len: int = 384
    rope_base: float = 10000.0

    @property
    def head_dim(self):
        return self.dim // self.heads


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotate(x, cos, sin):
    """Rotary embedding of x (B, T, H, D) by the angles of its positions (T, D/2)."""
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg, batch):
        super().__init__()
        self.cfg = cfg
        d = cfg.head_dim
        self.wqkv = nn.Linear(cfg.dim, (cfg.heads + 2 * cfg.kv_heads) * d, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)
        shape = (batch, cfg.kv_heads, cfg.max_len, d)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

    def forward(self, x, cos, sin, mask, pos):
        cfg, (b, t, _) = self.cfg, x.shape
        d, kv = cfg.head_dim, cfg.kv_heads * cfg.head_dim
        q, k, v = self.wqkv(x).split([cfg.dim, kv, kv], -1)
        q = rotate(q.view(b, t, cfg.heads, d), cos, sin).transpose(1, 2)
        k = rotate(k.view(b, t, cfg.kv_heads, d), cos, sin).transpose(1, 2)
        v = v.view(b, t, cfg.kv_heads, d).transpose(1, 2)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        rep = cfg.heads // cfg.kv_heads
        keys = self.k_cache.unsqueeze(2).expand(b, cfg.kv_heads, rep, cfg.max_len, d).reshape(b, cfg.heads, cfg.max_len, d)
        values = self.v_cache.unsqueeze(2).expand(b, cfg.kv_heads, rep, cfg.max_len, d).reshape(b, cfg.heads, cfg.max_len, d)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, t, cfg.dim))


class Layer(nn.Module):
    def __init__(self, cfg, batch):
        super().__init__()
        self.attn, self.attn_norm, self.ffn_norm = Attention(cfg, batch), RMSNorm(cfg.dim), RMSNorm(cfg.dim)
        self.w1, self.w3 = nn.Linear(cfg.dim, cfg.hidden, bias=False), nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.w2 = nn.Linear(cfg.hidden, cfg.dim, bias=False)

    def forward(self, x, cos, sin, mask, pos):
        h = x + self.attn(self.attn_norm(x), cos, sin, mask, pos)
        f = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(f)) * self.w3(f))


class Llama(nn.Module):
    def __init__(self, cfg, batch):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList(Layer(cfg, batch) for _ in range(cfg.layers))
        self.norm, self.output = RMSNorm(cfg.dim), nn.Linear(cfg.dim, cfg.vocab, bias=False)
        inv = 1.0 / cfg.rope_base ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim)
        angles = torch.outer(torch.arange(cfg.max_len).float(), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(cfg.max_len, cfg.max_len, dtype=torch.bool)), persistent=False)

    def forward(self, idx, pos):
        x = self.embed(idx)
        cos, sin, mask = self.cos[pos], self.sin[pos], self.causal[None, None, pos]
        for layer in self.layers:
            x = layer(x, cos, sin, mask, pos)
        return self.output(self.norm(x))

    def reset(self):
        for layer in self.layers:
            layer.attn.k_cache.zero_(), layer.attn.v_cache.zero_()


def one_token(model, token, pos):
    """The step every backend compiles: the next token (greedy) after `token` at position `pos`,
    and the logits it was chosen from."""
    logits = model(token, pos)[:, -1]
    return logits.argmax(-1, keepdim=True).to(token.dtype), logits


def generate(step, model, prompt, new_tokens):
    """Prefill in eager, then `new_tokens` calls of `step`; returns (tokens, seconds of the calls,
    the first call's logits)."""
    model.reset()
    with torch.no_grad():
        t = prompt.shape[1]
        token, _ = one_token(model, prompt, torch.arange(t, device=prompt.device))
        pos = torch.tensor([t], device=prompt.device)
        out, current, first = [token], token, None
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(new_tokens - 1):
            # as gpt-fast: the outputs kept are clones (a CUDA graph's outputs are its memory)
            token, logits = step(model, current, pos)
            if first is None:
                first = logits.float().clone()
            out.append(token.clone())
            current = token.clone()
            pos += 1
        torch.cuda.synchronize()
        return torch.cat(out, 1), time.perf_counter() - started, first


def profile(step, model, prompt, steps=32):
    """Prints the kernels taking the most GPU time over `steps` decode calls (from the prompt on:
    its prefill's kernels count a share of each step) and returns what each adds to the timeline."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        generate(step, model, prompt, steps)
    events = prof.key_averages()
    table = events.table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=70)
    print("\n".join(line for line in table.splitlines() if line.strip()), flush=True)
    kernels = sum(e.count for e in events if e.device_time_total > 0)
    busy = sum(e.device_time_total for e in events) / 1e3
    print(f"@profile {kernels / (steps - 1):.0f} device activities a step, busy {busy / (steps - 1):.3f} ms a step", flush=True)
    # What each kernel adds to the timeline: its end past the latest end before it, the kernels
    # in order of their starts. With overlapped launches a kernel's own time overstates its cost
    # (its start hides under the one before); these add up to the time the device was busy.
    activities = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start),
                        key=lambda e: e.time_range.start)
    exposed, calls, latest = {}, {}, None
    for e in activities:
        start, end = e.time_range.start, e.time_range.end
        gain = end - (start if latest is None else max(start, latest))
        latest = end if latest is None else max(latest, end)
        exposed[e.name] = exposed.get(e.name, 0.0) + max(gain, 0.0)
        calls[e.name] = calls.get(e.name, 0) + 1
    top = []
    for name, us in sorted(exposed.items(), key=lambda kv: -kv[1])[:16]:
        print(f"@exposed {us / (steps - 1):8.1f} us a step, {calls[name] / (steps - 1):5.1f} calls, {us / calls[name]:6.2f} us a call: {name[:90]}",
              flush=True)
        top.append(dict(kernel=name, us_a_step=us / (steps - 1), calls_a_step=calls[name] / (steps - 1), us_a_call=us / calls[name]))
    return dict(activities_a_step=kernels / (steps - 1), busy_ms_a_step=busy / (steps - 1), exposed=top)


def copy_bandwidth():
    """Bytes a second of a large device-to-device copy (read + write), median of 20."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    times = []
    for _ in range(22):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * a.numel() / statistics.median(times[2:])


def backends(names):
    import coil

    coil.register()
    made = {
        "eager": lambda: one_token,
        "inductor": lambda: torch.compile(one_token),
        "inductor-reduce-overhead": lambda: torch.compile(one_token, mode="reduce-overhead"),
        "coil": lambda: coil.compile(one_token),
        "coil-reduce-overhead": lambda: coil.compile(one_token, mode="reduce-overhead"),
    }
    return [(n, made[n]) for n in names]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--modes", default="eager,inductor,inductor-reduce-overhead,coil,coil-reduce-overhead")
    parser.add_argument("--out", default="")
    parser.add_argument("--profile", action="store_true", help="the top kernels of 32 steps of each backend")
    args = parser.parse_args()
    cfg = Config(layers=args.layers, max_len=args.prompt + args.new)
    bandwidth = copy_bandwidth()
    results = []
    for batch in [int(b) for b in args.batches.split(",")]:
        torch.manual_seed(0)
        model = Llama(cfg, batch).to("cuda", torch.bfloat16).eval()
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        prompt = torch.randint(0, cfg.vocab, (batch, args.prompt), device="cuda")
        # per token, on average: every weight, and K and V of every layer up to the position (the
        # step reads the whole static cache; the limit counts only what a token needs)
        kv_token = 2 * cfg.layers * batch * cfg.kv_heads * cfg.head_dim * 2
        kv_bytes = kv_token * (args.prompt + args.new / 2)
        limit_s = (weight_bytes + kv_bytes) / bandwidth
        reference = None
        for name, make in backends(args.modes.split(",")):
            torch._dynamo.reset()
            step = make()
            started = time.perf_counter()
            generate(step, model, prompt, 4)  # compiles (and warms up, captures CUDA graphs)
            compile_s = time.perf_counter() - started
            generate(step, model, prompt, args.new)
            tokens, seconds, logits = generate(step, model, prompt, args.new)
            if reference is None:
                reference = logits
            # the first step's logits against the first backend's (random weights leave logits near
            # ties, so greedy tokens part ways after the first bf16 rounding that differs)
            error = ((logits - reference).abs().max() / reference.abs().max()).item()
            per_token = seconds / (args.new - 1)
            row = dict(backend=name, batch=batch, tokens_per_s=batch / per_token, ms_per_token=per_token * 1e3,
                       bandwidth_pct=100 * limit_s / per_token, compile_s=compile_s, logits_error=error)
            results.append(row)
            print(f"@decode {name} B={batch}: {row['tokens_per_s']:.0f} tok/s, {row['ms_per_token']:.3f} ms/token, "
                  f"{row['bandwidth_pct']:.1f}% of the bandwidth limit ({limit_s * 1e3:.3f} ms), first calls {compile_s:.1f} s, "
                  f"first logits vs the first backend's: {error:.2e} of the largest", flush=True)
            if args.profile and name != "eager":
                row["profile"] = profile(step, model, prompt)
        del model
    meta = dict(date=str(date.today()), device=torch.cuda.get_device_name(), torch=torch.__version__, python=platform.python_version(),
                commit=subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
                config=vars(cfg) | {"prompt": args.prompt, "new": args.new}, copy_bandwidth_gbs=bandwidth / 1e9)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, f"decode-{meta['date']}.json").write_text(json.dumps(dict(meta=meta, results=results), indent=1))


if __name__ == "__main__":
    main()
