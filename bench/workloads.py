"""The yardstick's workloads, each defined once in PyTorch: every mode (eager, Inductor,
max-autotune, coil) calls the same function on the same tensors.

A workload is built inside the process that measures it, from a fixed seed, so each process
sees the same values; only the named ones are built. GPU: bf16; CPU: fp32. `quick` shrinks the
sizes (not the structure).
"""
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Workload:
    name: str
    kind: str  # "memory" (judged by bytes against copy bandwidth) | "gemm" | "model" (by flops against cuBLAS)
    fn: Callable
    inputs: list  # the tensors passed per call (rotated between calls when they fit in the cache)
    note: str = ""


def _sizes(device, quick):
    gpu = device == "cuda"
    return {
        "rows_cols": ((4096, 4096) if quick else (16384, 8192)) if gpu else ((1024, 1024) if quick else (4096, 4096)),
        "mlp": ((2048, 1024, 4096) if quick else (8192, 4096, 16384)) if gpu else ((128, 256, 1024) if quick else (512, 512, 2048)),
        "swiglu": ((2048, 1024, 2816) if quick else (8192, 4096, 11008)) if gpu else ((128, 256, 704) if quick else (512, 512, 1408)),
        "gpt": ((2, 256) if quick else (8, 1024)) if gpu else ((1, 64) if quick else (2, 128)),
        "cnn": ((8, 64) if quick else (64, 128)) if gpu else ((2, 32) if quick else (8, 64)),
        "vision": ((8, 112) if quick else (32, 224)) if gpu else ((1, 64) if quick else (2, 224)),
    }


def _randn(gen, device, dtype, *shape, scale=1.0):
    return (torch.randn(*shape, device=device, generator=gen) * scale).to(dtype)


def _memory_bound(device, dtype, quick):
    R, C = _sizes(device, quick)["rows_cols"]
    g = torch.Generator(device=device).manual_seed(0)

    def x():
        return _randn(g, device, dtype, R, C)

    def vec(scale=1.0, offset=0.0):
        return _randn(g, device, dtype, C, scale=scale) + offset

    def rms_norm(x, w):
        f = x.float()
        return (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    shape = f"{R}x{C}"
    return {
        "gelu_bias": lambda: Workload("gelu_bias", "memory", lambda x, b: F.gelu(x + b), [x(), vec()], f"gelu(x + b), {shape}"),
        "softmax": lambda: Workload("softmax", "memory", lambda x: torch.softmax(x.float(), -1).to(x.dtype), [x()],
                                    f"softmax over rows in fp32, {shape}"),
        "layer_norm": lambda: Workload("layer_norm", "memory", lambda x, w, b: F.layer_norm(x, [C], w, b),
                                       [x(), vec(0.1, 1.0), vec(0.1)], f"layer_norm over rows, {shape}"),
        "rms_norm": lambda: Workload("rms_norm", "memory", rms_norm, [x(), vec(0.1, 1.0)], f"Llama-style rms_norm in fp32, {shape}"),
        "sum_dim0": lambda: Workload("sum_dim0", "memory", lambda x: x.sum(0), [x()], f"x.sum(0), {shape}"),
        "add_transpose": lambda: Workload("add_transpose", "memory", lambda x, y: x + y.t(), [x(), _randn(g, device, dtype, C, R)],
                                          f"x + y.t(), {shape}"),
        "row_center": lambda: Workload("row_center", "memory", lambda x: x - x.mean(-1, keepdim=True), [x()],
                                       f"x - x.mean(-1, keepdim=True), {shape}"),
    }


def _gemm_bound(device, dtype, quick):
    s = _sizes(device, quick)
    g = torch.Generator(device=device).manual_seed(1)
    M, D, H = s["mlp"]
    M2, D2, H2 = s["swiglu"]

    def mlp():
        return [_randn(g, device, dtype, M, D), _randn(g, device, dtype, H, D, scale=D**-0.5), _randn(g, device, dtype, H, scale=0.1),
                _randn(g, device, dtype, D, H, scale=H**-0.5), _randn(g, device, dtype, D, scale=0.1)]

    def swiglu():
        return [_randn(g, device, dtype, M2, D2), _randn(g, device, dtype, H2, D2, scale=D2**-0.5),
                _randn(g, device, dtype, H2, D2, scale=D2**-0.5), _randn(g, device, dtype, D2, H2, scale=H2**-0.5)]

    B, T = s["gpt"]

    def heads():
        return [_randn(g, device, dtype, B, 12, T, 64) for _ in range(3)]

    return {
        "attention": lambda: Workload("attention", "gemm", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                      heads(), f"causal scaled_dot_product_attention, GPT-2's heads: B={B} H=12 T={T} E=64"),
        "mlp": lambda: Workload("mlp", "gemm", lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2), mlp(),
                                f"linear + gelu + linear, M={M} D={D} H={H}"),
        "swiglu": lambda: Workload("swiglu", "gemm", lambda x, w1, w3, w2: F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2),
                                   swiglu(), f"Llama-style SwiGLU MLP, M={M2} D={D2} H={H2}"),
    }


class Block(nn.Module):
    """A GPT-2-style block: pre-norm causal self-attention and a gelu(tanh) MLP, with residuals."""

    def __init__(self, d=768, heads=12):
        super().__init__()
        self.d, self.heads = d, heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2 small's shape: 12 blocks of d=768, 12 heads, vocabulary 50257, a tied head."""

    def __init__(self, layers=12, vocab=50257, positions=1024, d=768):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


class CNN(nn.Module):
    """A small CNN: three 3x3 convolutions (batch norm, relu, two with stride 2), a global mean and a linear head."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.c2, self.bn2 = nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64)
        self.c3 = nn.Conv2d(64, 128, 3, stride=2, padding=1)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.c1(x)))
        x = F.relu(self.bn2(self.c2(x)))
        x = F.relu(self.c3(x))
        return self.head(x.mean(dim=(2, 3)))


def _model(name, cls, device, dtype, make_input, note):
    torch.manual_seed(3)
    with torch.device(device):
        module = cls().to(dtype).eval()
        for m in module.modules():  # batch-norm statistics that are not the identity
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
        inputs = [make_input()]
    return Workload(name, "model", module, inputs, note)


def _torchvision(name):
    def make():
        import torchvision.models

        return getattr(torchvision.models, name)()
    return make


def _models(device, dtype, quick):
    s = _sizes(device, quick)
    B, T = s["gpt"]
    N, HW = s["cnn"]
    VN, VHW = s["vision"]
    g = torch.Generator(device=device).manual_seed(4)
    return {
        "gpt2_block": lambda: _model("gpt2_block", Block, device, dtype, lambda: _randn(g, device, dtype, B, T, 768),
                                     f"GPT-2-style block, d=768, B={B} T={T}"),
        "gpt2": lambda: _model("gpt2", GPT2, device, dtype, lambda: torch.randint(0, 50257, (B, T), device=device, generator=g),
                               f"12-layer GPT-2 small, B={B} T={T}"),
        "cnn": lambda: _model("cnn", CNN, device, dtype, lambda: _randn(g, device, dtype, N, 3, HW, HW), f"small CNN, {N}x3x{HW}x{HW}"),
        **{name: (lambda name=name, note=note: _model(name, _torchvision(name), device, dtype,
                                                       lambda: _randn(g, device, dtype, VN, 3, VHW, VHW),
                                                       f"torchvision {note}, {VN}x3x{VHW}x{VHW}"))
           for name, note in [("resnet18", "ResNet-18"), ("mobilenet_v3_large", "MobileNet-V3 large"),
                              ("convnext_tiny", "ConvNeXt-T (depthwise 7x7)")]},
    }


NAMES = ["gelu_bias", "softmax", "layer_norm", "rms_norm", "sum_dim0", "add_transpose", "row_center",
         "attention", "mlp", "swiglu", "gpt2_block", "gpt2", "cnn", "resnet18", "mobilenet_v3_large", "convnext_tiny"]


def build(names, device, quick):
    """The named workloads, built on `device` (in NAMES order)."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    out = []
    for group in (_memory_bound, _gemm_bound, _models):
        factories = group(device, dtype, quick)
        out += [make() for name, make in factories.items() if name in names]
    return out
