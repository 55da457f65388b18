"""The bundled models (models/*.coil) against the same models in PyTorch.

The PyTorch modules come from models/make_weights.py and load the committed .safetensors (the
files coil reads), so a stale weight file shows up as a mismatch here, and a separate test checks
the script still regenerates the committed files bit for bit. Each model runs compiled and
through the reference interpreter, at two batch sizes (the graphs' batch is the symbol B).

Tolerance: the reference is PyTorch in float64 on the same f32 weights and inputs, rounded to
f32. The interpreter computes each node in double and rounds its result to f32 (measured: at
most 4e-7 abs); the compiled code accumulates in f32 over at most 256 terms per dot product
(measured: at most 2e-6 abs, on GPT-2 outputs of magnitude up to ~5). rtol=1e-4, atol=1e-5
leaves a wide margin for both while still catching any wrong weight, axis or missing op (those
give errors of O(0.1) or more: a non-causal sdpa is off by 2.9)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import COMPILED_MODES, ROOT, read_safetensors, run_coil, write_safetensors

MODELS_DIR = ROOT / "models"
sys.path.insert(0, str(MODELS_DIR))
import make_weights  # noqa: E402

# Input shape without the batch dimension, and the output's.
MODELS = {
    "mlp": ((64,), (10,)),
    "gpt2_block": ((16, 64), (16, 64)),
    "cnn": ((3, 16, 16), (10,)),
}


def graph_text(name):
    # The weights file is named relative to the graph; run_coil writes the graph elsewhere.
    text = (MODELS_DIR / f"{name}.coil").read_text()
    local = f'weights "{name}.safetensors"'
    assert local in text
    return text.replace(local, f'weights "{MODELS_DIR / (name + ".safetensors")}"')


def reference_model(name):
    """The PyTorch module with the committed weights, in float64 and eval mode."""
    model = make_weights.build(name)
    weights = read_safetensors(MODELS_DIR / f"{name}.safetensors")
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected
    assert all(k.endswith("num_batches_tracked") for k in missing), missing
    return model.double().eval()


@pytest.mark.parametrize("mode", [*COMPILED_MODES, "interpreted"])
@pytest.mark.parametrize("batch", [2, 3])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_pytorch(name, batch, mode, coil_bin):
    in_shape, out_shape = MODELS[name]
    torch.manual_seed(100 + batch)
    x = torch.randn(batch, *in_shape)
    with torch.no_grad():
        want = reference_model(name)(x.double()).float()
    assert want.shape == (batch, *out_shape)

    extra = {"interpreted": ["--interpret"], "cuda": ["--device", "cuda"]}.get(mode, [])
    outputs, _ = run_coil(graph_text(name), {"x": x}, extra)
    assert list(outputs) == ["y"]
    got = outputs["y"]
    assert got.dtype == torch.float32
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_weights_file_matches_graph(name):
    """Every weight the graph names is in the file with the declared shape, and nothing else is."""
    text = (MODELS_DIR / f"{name}.coil").read_text()
    declared = {
        key: [int(s) for s in sizes.split(",")]
        for key, sizes in re.findall(r'weight\(key="([^"]+)"\)\s*:\s*f32\[([^\]]*)\]', text)
    }
    weights = read_safetensors(MODELS_DIR / f"{name}.safetensors")
    assert set(declared) == set(weights)
    for key, sizes in declared.items():
        assert weights[key].dtype == torch.float32, key
        assert list(weights[key].shape) == sizes, key
    assert (MODELS_DIR / f"{name}.safetensors").stat().st_size < 300_000


def test_batch_norm_stats_are_not_trivial():
    weights = read_safetensors(MODELS_DIR / "cnn.safetensors")
    for bn in ("bn1", "bn2"):
        assert weights[f"{bn}.running_mean"].abs().min() > 0
        assert (weights[f"{bn}.running_var"] - 1).abs().min() > 0
        assert weights[f"{bn}.running_var"].min() > 0


def test_weights_regenerate_bit_for_bit(tmp_path):
    make_weights.main(tmp_path)
    for name in make_weights.MODELS:
        fresh = (tmp_path / f"{name}.safetensors").read_bytes()
        assert fresh == (MODELS_DIR / f"{name}.safetensors").read_bytes(), (
            f"models/{name}.safetensors is stale: rerun models/make_weights.py")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_text_is_a_fixed_point(name, coil_bin, tmp_path):
    first = subprocess.run([coil_bin, "check", str(MODELS_DIR / f"{name}.coil")], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    reparsed = tmp_path / f"{name}.coil"
    reparsed.write_text(first.stdout)
    second = subprocess.run([coil_bin, "check", str(reparsed)], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_runs_from_the_command_line(name, coil_bin):
    """`coil run models/X.coil --check`: random inputs at B's hint, compiled, checked against the
    interpreter."""
    proc = subprocess.run([coil_bin, "run", str(MODELS_DIR / f"{name}.coil"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    batch = int(re.search(r"sym B = (\d+)", (MODELS_DIR / f"{name}.coil").read_text()).group(1))
    shape = ", ".join(str(s) for s in (batch, *MODELS[name][1]))
    assert f"%y: f32[{shape}]" in proc.stdout
    error = re.search(r"max abs error vs reference: (\S+)", proc.stdout)
    assert error and float(error.group(1)) < 1e-4, proc.stdout


@pytest.mark.parametrize("name", ["mlp", "mlp_raw", "block", "cnn", "block_raw", "cnn_raw", "gpt_raw", "pool", "pool_raw"])
def test_pt2_archive_runs_from_the_command_line(name, coil_bin):
    """`coil check|run model.pt2`: a torch.export archive read in C++, compiled, checked against the interpreter."""
    path = MODELS_DIR.parent / "tests" / "fixtures" / "pt2" / f"{name}.pt2"
    check = subprocess.run([coil_bin, "check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert "weight(key=" in check.stdout and "input()" in check.stdout
    proc = subprocess.run([coil_bin, "run", str(path), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    error = re.search(r"max abs error vs reference: (\S+)", proc.stdout)
    assert error and float(error.group(1)) < 1e-4, proc.stdout


@pytest.mark.parametrize("name", ["mlp", "block"])
def test_package_compiles_and_runs_from_the_command_line_and_from_cpp(name, coil_bin, tmp_path):
    """`coil compile model.pt2 -o model.coilpkg`, then `coil run model.coilpkg` and the C++
    example (examples/run_package.cc) on eager's inputs, into an empty kernel cache."""
    fixtures = MODELS_DIR.parent / "tests" / "fixtures" / "pt2"
    package = tmp_path / f"{name}.coilpkg"
    env = dict(os.environ, COIL_CACHE_DIR=str(tmp_path / "compile-cache"))
    made = subprocess.run([coil_bin, "compile", str(fixtures / f"{name}.pt2"), "-o", str(package)], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    io = read_safetensors(fixtures / f"{name}.io.safetensors")
    # Loading needs no C++ compiler (none is on the PATH) and adds nothing to the kernel cache.
    env.update(COIL_CACHE_DIR=str(tmp_path / "run-cache"), PATH="/nonexistent-coil-test-dir")
    env.pop("CXX", None)
    env.pop("COIL_CXX", None)
    out = tmp_path / "out.safetensors"
    ran = subprocess.run([coil_bin, "run", str(package), "--inputs", str(fixtures / f"{name}.io.safetensors"), "--out", str(out)],
                         capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    assert not (tmp_path / "run-cache").exists()
    got = read_safetensors(out)
    torch.testing.assert_close(next(iter(got.values())), io["out0"], rtol=1e-4, atol=1e-4)
    example = Path(coil_bin).parents[1] / "examples" / "run-package"
    if not example.exists():
        pytest.skip("the examples are not built here")
    out2 = tmp_path / "out2.safetensors"
    ran = subprocess.run([str(example), str(package), str(fixtures / f"{name}.io.safetensors"), str(out2)], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    torch.testing.assert_close(next(iter(read_safetensors(out2).values())), io["out0"], rtol=1e-4, atol=1e-4)


def test_installed_library_is_found_by_another_cmake_project(coil_bin, tmp_path):
    """`cmake --install`, then examples/ built as a project of its own with find_package(coil)
    against the prefix, runs a package the installed CLI compiled, matching eager."""
    build = Path(coil_bin).parents[1]
    proc = subprocess.run(["bash", str(MODELS_DIR.parent / "tests" / "install" / "check.sh"), str(build), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    io = read_safetensors(MODELS_DIR.parent / "tests" / "fixtures" / "pt2" / "mlp.io.safetensors")
    torch.testing.assert_close(next(iter(read_safetensors(tmp_path / "out.safetensors").values())), io["out0"], rtol=1e-4, atol=1e-4)


def test_a_build_missing_dependencies_names_their_packages(tmp_path):
    """`pip install .` on a machine without the -dev packages: the configure stops with one
    message listing each missing library and the Debian/Ubuntu packages to install."""
    root = MODELS_DIR.parent
    proc = subprocess.run(["cmake", "-S", str(root), "-B", str(tmp_path / "build"), "-DCOIL_TESTS=OFF",
                           "-DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "coil cannot be built here: missing" in proc.stderr, proc.stderr
    assert "fmt (formatting)" in proc.stderr and "CLI11 (the command line)" in proc.stderr
    assert "sudo apt install libfmt-dev libcli11-dev" in proc.stderr


def test_check_counts_equal_infinities_as_no_error(coil_bin, tmp_path):
    """`--check` where both the compiled graph and the interpreter give inf: inf - inf is NaN,
    which the error printed as `inf`; equal values are no error."""
    graph = tmp_path / "overflow.coil"
    graph.write_text("graph g {\n  %x = input(low=100, high=200) : f32[4, 8]\n  %y = exp(%x)\n  return %y\n}\n")
    proc = subprocess.run([coil_bin, "run", str(graph), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "inf" in proc.stdout  # the outputs' summary shows them
    error = re.search(r"max abs error vs reference: (\S+)", proc.stdout)
    assert error and float(error.group(1)) == 0, proc.stdout


class _Softmaxes(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.softmax(x, -1) + torch.nn.functional.log_softmax(x, 1, dtype=torch.float64).float()


class _Scalars(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1 - x / 3 + x ** 2


class _RmsNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(8)
        self.plain = torch.nn.RMSNorm([4, 8], elementwise_affine=False, eps=1e-3)

    def forward(self, x):
        return self.norm(x) + self.plain(x)


class _DropoutLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear, self.drop = torch.nn.Linear(8, 8), torch.nn.Dropout(0.25)

    def forward(self, x):
        return self.drop(self.linear(x))


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)[0]


class _PadNarrow(torch.nn.Module):
    def forward(self, x):
        padded = torch.nn.functional.pad(x, (1, 2, 0, 1), value=0.5) + torch.nn.functional.pad(x, (-1, 4, 1, 0))
        return padded.narrow(1, 1, 3) * 2 + padded.narrow(-1, -4, 2).sum(-1, keepdim=True).narrow(1, -3, 3)


PLAIN_EXPORTS = {"softmax": (_Softmaxes, torch.float32), "scalars": (_Scalars, torch.float32),
                 "rms_norm": (_RmsNorm, torch.float32), "rms_norm_bf16": (_RmsNorm, torch.bfloat16),
                 "dropout_eval": (_DropoutLinear, torch.float32), "multihead_attention": (_Attention, torch.float32),
                 "pad_narrow": (_PadNarrow, torch.float32), "pad_narrow_f16": (_PadNarrow, torch.float16)}


@pytest.mark.parametrize("name", PLAIN_EXPORTS)
def test_plain_export_runs_without_run_decompositions(coil_bin, tmp_path, name):
    """The README's AOT recipe on ordinary exports: `torch.export.export(model, args)` keeps
    softmax.int, rms_norm, dropout, unflatten, pad, narrow, `x * 2` with a Python number and
    friends, which the C++ reader decomposes as PyTorch's composites do."""
    torch.manual_seed(0)
    module, dtype = PLAIN_EXPORTS[name]
    model = module().to(dtype).eval()
    x = torch.randn(2, 4, 8, dtype=dtype)
    program = torch.export.export(model, (x,))
    torch.export.save(program, tmp_path / "model.pt2")
    input_name = program.graph_signature.user_inputs[0]
    write_safetensors(tmp_path / "in.safetensors", {input_name: x})
    proc = subprocess.run([coil_bin, "run", str(tmp_path / "model.pt2"), "--inputs", str(tmp_path / "in.safetensors"),
                           "--out", str(tmp_path / "out.safetensors")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with torch.no_grad():
        want = model(x)
    got = next(iter(read_safetensors(tmp_path / "out.safetensors").values()))
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)


def test_plain_export_of_a_padding_mode_the_reader_lacks_is_a_clear_error(coil_bin, tmp_path):
    """F.pad(mode="reflect") stays aten.pad in a plain export; the reader says what to do."""
    class Reflect(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.pad(x, (1, 2), mode="reflect")

    torch.export.save(torch.export.export(Reflect(), (torch.randn(2, 3, 6),)), tmp_path / "reflect.pt2")
    proc = subprocess.run([coil_bin, "run", str(tmp_path / "reflect.pt2")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "pad: mode 'reflect' is not supported when reading a .pt2 (only 'constant'); export after run_decompositions()" \
        in proc.stderr, proc.stderr
