"""Writes the bundled models' weights deterministically (fixed seeds), as .safetensors files
beside the graphs. Regenerate (from the repository root) with:

    .venv/bin/python models/make_weights.py            # rewrites models/*.safetensors
    .venv/bin/python models/make_weights.py OUT_DIR    # writes them elsewhere

Keys are the modules' state_dict names (num_batches_tracked left out). Each model starts from
its torch.manual_seed and its modules' own init, then every parameter gets N(0, 0.1) noise (so
norm weights and biases are not the trivial 1/0) and batch-norm running stats are drawn too
(mean ~ N(0, 0.2), var ~ U(0.5, 1.5)). The output is bit-for-bit reproducible;
tests/python/test_models.py checks the committed files against it.
The PyTorch modules here are also the references the model tests compare against."""
import json
import struct
import sys
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


class Gpt2Block(nn.Module):
    """GPT-2's block: pre-norm causal self-attention and a gelu(tanh) MLP, with residuals."""

    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(width, 3 * width)
        self.attn.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(width, 4 * width)
        self.mlp.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.c_proj(a.transpose(1, 2).contiguous().view(b, t, c))
        h = nn.functional.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.c_proj(h)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def build(name):
    torch.manual_seed({"gpt2_block": 1, "mlp": 2, "cnn": 3}[name])
    model = {"gpt2_block": Gpt2Block, "mlp": Mlp, "cnn": Cnn}[name]()
    with torch.no_grad():
        for p in model.parameters():  # non-trivial norms and biases, not the 1/0 defaults
            p.add_(torch.randn_like(p) * 0.1)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn_like(m.running_mean) * 0.2)
                m.running_var.copy_(torch.rand_like(m.running_var) + 0.5)
    return model.eval()


def save(path, tensors):
    header, chunks, offset = {}, [], 0
    for key, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[key] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(chunks))


MODELS = ("gpt2_block", "mlp", "cnn")


def state(name):
    return {k: v for k, v in build(name).state_dict().items() if not k.endswith("num_batches_tracked")}


def main(out_dir=HERE):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        save(out_dir / f"{name}.safetensors", state(name))


if __name__ == "__main__":
    main(*sys.argv[1:2])
