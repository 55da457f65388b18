"""Shared helpers for the Python suites: run a coil graph through the CLI on given torch
tensors and read the outputs back, using a small safetensors reader/writer (no extra wheel)."""
import json
import os
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
COIL = os.environ.get("COIL_BIN", str(ROOT / "build" / "tools" / "coil"))
# On a GPU machine (scripts/gpu-check) the compiled cases also run on CUDA.
CUDA = os.environ.get("COIL_TEST_DEVICE") == "cuda"
COMPILED_MODES = ["compiled"] + (["cuda"] if CUDA else [])
# Compiled kernels go to a cache of the test session's own unless the caller chose one.
if "COIL_CACHE_DIR" not in os.environ:
    os.environ["COIL_CACHE_DIR"] = tempfile.mkdtemp(prefix="coil_test_cache_")

DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
NAMES = {v: k for k, v in DTYPES.items()}
COIL_DTYPE = {
    torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "bool",
}


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(chunks))


def read_safetensors(path):
    blob = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = NAMES[info["dtype"]]
        buf = bytearray(blob[base + begin:base + end])
        flat = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
        out[name] = flat.view(dtype).reshape(info["shape"]) if buf else torch.empty(info["shape"], dtype=dtype)
    return out


def coil_type(t):
    return f"{COIL_DTYPE[t.dtype]}[{', '.join(str(s) for s in t.shape)}]"


def run_coil(graph_text, inputs, extra_args=()):
    """Runs `graph_text` with `inputs` (name -> tensor); returns (outputs by name, completed process)."""
    with tempfile.TemporaryDirectory() as d:
        graph = Path(d) / "g.coil"
        graph.write_text(graph_text)
        args = [COIL, "run", str(graph), "--out", str(Path(d) / "out.safetensors"), *extra_args]
        if inputs:
            write_safetensors(Path(d) / "in.safetensors", inputs)
            args += ["--inputs", str(Path(d) / "in.safetensors")]
        proc = subprocess.run(args, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"coil failed ({proc.returncode}): {proc.stderr.strip()}\n--- graph ---\n{graph_text}")
        return read_safetensors(Path(d) / "out.safetensors"), proc


@pytest.fixture(scope="session")
def coil_bin():
    if not Path(COIL).exists():
        pytest.fail(f"coil binary not found at {COIL}; build first (scripts/setup)")
    return COIL


# -- shared by the torch.compile suites --------------------------------------------------------

TORCH_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied before and after a test (a module opts in with
    `pytestmark = pytest.mark.usefixtures("fresh_dynamo")`)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def coil_fallbacks(caught):
    """The messages of coil's FallbackWarnings (CompileErrorWarning included) among `caught`."""
    import coil

    return [str(w.message) for w in caught if issubclass(w.category, coil.FallbackWarning)]


def record_runners(monkeypatch):
    """The list that every runner the adapter makes is appended to, from here on."""
    from coil import _backend

    runners = []
    load = _backend._load

    def recording(*args, **kwargs):
        runners.append(load(*args, **kwargs))
        return runners[-1]

    monkeypatch.setattr(_backend, "_load", recording)
    return runners
