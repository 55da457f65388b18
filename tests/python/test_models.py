"""The bundled models against their PyTorch modules (models/make_weights.py builds both the
weights and the modules), compiled and interpreted, at two batch sizes."""
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, run_coil

sys.path.insert(0, str(ROOT / "models"))
import make_weights  # noqa: E402

MODELS = {"mlp": (64,), "gpt2_block": (16, 64), "cnn": (3, 16, 16)}


def graph_text(name):
    # The weights file is named relative to the graph; run_coil copies the graph elsewhere.
    text = (ROOT / "models" / f"{name}.coil").read_text()
    return text.replace(f'weights "{name}.safetensors"', f'weights "{ROOT / "models" / (name + ".safetensors")}"')


@pytest.mark.parametrize("mode", ["compiled", "interpreted"])
@pytest.mark.parametrize("batch", [2, 3])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_pytorch(name, batch, mode):
    torch.manual_seed(100 + batch)
    x = torch.randn(batch, *MODELS[name])
    model = make_weights.build(name)
    with torch.no_grad():
        want = model(x)
    extra = ["--interpret"] if mode == "interpreted" else []
    outputs, _ = run_coil(graph_text(name), {"x": x}, extra)
    (got,) = outputs.values()
    assert got.dtype == torch.float32
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_text_is_a_fixed_point(name, coil_bin, tmp_path):
    first = subprocess.run([coil_bin, "check", str(ROOT / "models" / f"{name}.coil")], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    reparsed = tmp_path / f"{name}.coil"
    reparsed.write_text(first.stdout)
    second = subprocess.run([coil_bin, "check", str(reparsed)], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_main_command_model_runs(coil_bin):
    proc = subprocess.run([coil_bin, "run", str(ROOT / "models" / "gpt2_block.coil"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "%y: f32[2, 16, 64]" in proc.stdout
    assert "max abs error vs reference" in proc.stdout
