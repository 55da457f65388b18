"""The error suite. The rule under test: bad input never crashes, never leaves partial output,
and gives ONE line `coil: error: ...` on stderr with a non-zero exit; syntax and type errors in
graph files name `file:line:col`, what was expected and what was found.

Three parts:
- tests/errors/*.coil: malformed graphs, each headed by `# expect: <substring of the message>`,
  optionally `# expect-location: LINE:COL`, and `# known-bug: <why>` for a case coil gets wrong
  today (a strict xfail: once fixed, drop the line);
- the CLI: missing files, bad inputs and weights files, bad options, runtime errors, --help;
- seeded mutations of a valid graph: `coil check` must never crash, whatever it is given.
"""
import json
import os
import random
import re
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from conftest import COIL, ROOT, write_safetensors

ERRORS = ROOT / "tests" / "errors"
CASES = sorted(ERRORS.glob("*.coil"))


def coil(*args, cwd=None, timeout=300):
    return subprocess.run([COIL, *map(str, args)], capture_output=True, timeout=timeout, cwd=cwd)


def error_line(proc):
    """The one stderr line of a failed run (asserting there is exactly one, and its prefix)."""
    err = proc.stderr.decode("utf-8", errors="replace")
    assert proc.returncode > 0, f"expected a failure exit code, got {proc.returncode}; stderr:\n{err}"
    assert err.count("\n") == 1 and err.endswith("\n"), f"expected one line on stderr, got:\n{err}"
    assert err.startswith("coil: error: "), f"stderr must start with 'coil: error: ', got:\n{err}"
    return err[:-1]


def header(path):
    """The `# key: value` comment lines at the top of an error case."""
    keys = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].strip().partition(":")
        keys[key.strip()] = value.strip()
    return keys


# ---------------------------------------------------------------- tests/errors/*.coil

def case_params():
    for path in CASES:
        why = header(path).get("known-bug")
        marks = [pytest.mark.xfail(strict=True, reason=f"known bug: {why}")] if why else []
        yield pytest.param(path, id=path.stem, marks=marks)


def test_error_cases_are_there():
    assert len(CASES) >= 30
    for path in CASES:
        assert header(path).get("expect"), f"{path.name} has no `# expect:` line"


@pytest.mark.parametrize("path", case_params())
def test_error_case(coil_bin, path):
    want = header(path)
    proc = coil("check", path)
    assert proc.returncode == 1, f"exit code {proc.returncode}; stderr: {proc.stderr.decode(errors='replace')}"
    line = error_line(proc)
    assert proc.stdout == b"", "nothing may be printed on stdout when the graph is rejected"
    assert want["expect"] in line, f"expected {want['expect']!r} in the message, got:\n{line}"
    if "expect-location" in want:
        assert f"{path}:{want['expect-location']}:" in line, f"expected location {want['expect-location']}, got:\n{line}"


# ---------------------------------------------------------------- the CLI

MM = """graph g {
  %a = input() : f32[2, 3]
  %b = input() : f32[3, 4]
  %y = mm(%a, %b)
  return %y
}
"""

WEIGHTED = """graph g {
  weights "w.safetensors"
  %x = input() : f32[2, 3]
  %w = weight(key="fc.weight") : f32[4, 3]
  %wt = permute(%w, [1, 0])
  %y = mm(%x, %wt)
  return %y
}
"""

EMBEDDING = """graph g {
  %w = input() : f32[10, 4]
  %i = input(low=0, high=20) : i64[3]
  %y = embedding(%w, %i)
  return %y
}
"""

SYMBOLIC = """graph g {
  sym B = 2
  %x = input() : f32[B, 3]
  %y = relu(%x)
  return %y
}
"""

MODES = {"compiled": [], "interpret": ["--interpret"]}


@pytest.fixture
def work(tmp_path):
    """A folder with the graphs above and a good inputs file for MM."""
    for name, text in [("mm", MM), ("weighted", WEIGHTED), ("embedding", EMBEDDING), ("symbolic", SYMBOLIC)]:
        (tmp_path / f"{name}.coil").write_text(text)
    write_safetensors(tmp_path / "good.safetensors", {"a": torch.ones(2, 3), "b": torch.ones(3, 4)})
    return tmp_path


def run_fails(work, *args):
    """`coil run ... --out OUT` must fail with one line, and leave no output (not even a temporary)."""
    before = set(os.listdir(work))
    out = work / "out.safetensors"
    proc = coil("run", *args, "--out", out, cwd=work)
    line = error_line(proc)
    assert not out.exists(), "a failed run must not write its --out file"
    assert set(os.listdir(work)) == before, f"a failed run left files behind: {set(os.listdir(work)) - before}"
    return line


def test_good_run_writes_out(coil_bin, work):
    """The baseline the failures below differ from."""
    proc = coil("run", "mm.coil", "--inputs", "good.safetensors", "--out", "out.safetensors", cwd=work)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert (work / "out.safetensors").exists()


@pytest.mark.parametrize("command", ["check", "run", "compile"])
def test_missing_graph_file(coil_bin, work, command):
    before = set(os.listdir(work))
    proc = coil(command, "nonexistent.coil", cwd=work)
    line = error_line(proc)
    assert "nonexistent.coil" in line and "No such file" in line
    assert set(os.listdir(work)) == before


def test_graph_file_is_a_directory(coil_bin, work):
    (work / "dir.coil").mkdir()
    assert "dir.coil" in error_line(coil("check", "dir.coil", cwd=work))


@pytest.mark.parametrize("mode", MODES)
def test_inputs_missing_a_tensor(coil_bin, work, mode):
    write_safetensors(work / "in.safetensors", {"a": torch.ones(2, 3)})
    line = run_fails(work, "mm.coil", *MODES[mode], "--inputs", "in.safetensors")
    assert "no tensor named 'b'" in line and "%b" in line


@pytest.mark.parametrize("mode", MODES)
def test_inputs_wrong_shape(coil_bin, work, mode):
    write_safetensors(work / "in.safetensors", {"a": torch.ones(3, 2), "b": torch.ones(3, 4)})
    line = run_fails(work, "mm.coil", *MODES[mode], "--inputs", "in.safetensors")
    assert "%a" in line


@pytest.mark.parametrize("mode", MODES)
def test_inputs_wrong_dtype(coil_bin, work, mode):
    write_safetensors(work / "in.safetensors", {"a": torch.ones(2, 3, dtype=torch.float64), "b": torch.ones(3, 4)})
    line = run_fails(work, "mm.coil", *MODES[mode], "--inputs", "in.safetensors")
    assert "%a" in line and "f64" in line


def safetensors_bytes(header, data):
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


GOOD_HEADER = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
               "b": {"dtype": "F32", "shape": [3, 4], "data_offsets": [24, 72]}}
CORRUPT_INPUTS = {
    "empty": (b"", "too short"),
    "truncated_length": (b"\x10\x00\x00", "too short"),
    "truncated_header": (safetensors_bytes(GOOD_HEADER, bytes(72))[:40], "header length"),
    "truncated_data": (safetensors_bytes(GOOD_HEADER, bytes(72))[:-10], "out of range"),
    "garbage": (b"\xff" * 64, "not a safetensors file"),
    "huge_header_length": (struct.pack("<Q", 1 << 62) + b"{}", "header length"),
    "bad_json": (struct.pack("<Q", 20) + b'{"a": {"dtype": "F32', "not valid JSON"),
    "unknown_dtype": (safetensors_bytes({"a": {"dtype": "F33", "shape": [2, 3], "data_offsets": [0, 24]}}, bytes(24)),
                      "unsupported dtype 'F33'"),
    "negative_shape": (safetensors_bytes({"a": {"dtype": "F32", "shape": [-2, 3], "data_offsets": [0, 24]}}, bytes(24)),
                       "shape"),
    "size_mismatch": (safetensors_bytes({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 8]},
                                         "b": {"dtype": "F32", "shape": [3, 4], "data_offsets": [8, 56]}}, bytes(56)),
                      "size mismatch"),
    "shape_overflow": (safetensors_bytes({"a": {"dtype": "F32", "shape": [1 << 62, 4], "data_offsets": [0, 0]}}, b""),
                       "too large"),
}


@pytest.mark.parametrize("kind", CORRUPT_INPUTS)
def test_inputs_file_corrupt(coil_bin, work, kind):
    blob, words = CORRUPT_INPUTS[kind]
    (work / "in.safetensors").write_bytes(blob)
    line = run_fails(work, "mm.coil", "--inputs", "in.safetensors")
    assert "in.safetensors" in line and words in line, line


def test_inputs_file_missing(coil_bin, work):
    line = run_fails(work, "mm.coil", "--inputs", "nonexistent.safetensors")
    assert "nonexistent.safetensors" in line


@pytest.mark.parametrize("mode", MODES)
def test_weights_file_missing(coil_bin, work, mode):
    line = run_fails(work, "weighted.coil", *MODES[mode])
    assert "w.safetensors" in line


@pytest.mark.parametrize("mode", MODES)
def test_weight_key_missing(coil_bin, work, mode):
    write_safetensors(work / "w.safetensors", {"fc.bias": torch.ones(4)})
    line = run_fails(work, "weighted.coil", *MODES[mode])
    assert "fc.weight" in line and "w.safetensors" in line


@pytest.mark.parametrize("mode", MODES)
def test_weight_wrong_shape(coil_bin, work, mode):
    write_safetensors(work / "w.safetensors", {"fc.weight": torch.ones(3, 4)})
    line = run_fails(work, "weighted.coil", *MODES[mode])
    assert "fc.weight" in line and "[3, 4]" in line


def test_weights_file_not_named(coil_bin, work):
    (work / "noweights.coil").write_text(WEIGHTED.replace('  weights "w.safetensors"\n', ""))
    assert "weights" in run_fails(work, "noweights.coil")


def test_weights_from_a_device_are_bounded(coil_bin, work):
    """`weights "/dev/zero"` read until bad_alloc: a file that is not regular is read only up to
    a bound."""
    (work / "zero.coil").write_text(WEIGHTED.replace('weights "w.safetensors"', 'weights "/dev/zero"'))
    line = run_fails(work, "zero.coil")
    assert "/dev/zero" in line and "not a regular file" in line


def test_pt2_weight_entry_cannot_inflate_past_its_tensors(coil_bin, tmp_path):
    """A 4 MB .pt2 inflating to 4 GiB was read fully: a compressed weight file is read only up
    to the bytes its tensors reach (torch.export stores them uncompressed)."""
    import zipfile
    source = ROOT / "tests" / "fixtures" / "pt2" / "mlp.pt2"
    bomb = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(bomb, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("weights/weight_0"):
                data += bytes(256 << 20)
                zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
            else:
                zout.writestr(info, data)
    assert bomb.stat().st_size < (2 << 20)
    line = error_line(coil("run", bomb))
    assert "weight_0" in line and "more than the 512 allowed" in line


@pytest.mark.parametrize("size, words", [("B=x", "non-negative integer"), ("B=-1", "non-negative integer"),
                                         ("B=1.5", "non-negative integer"), ("B=", "non-negative integer"),
                                         ("=3", "NAME=VALUE"), ("B", "NAME=VALUE"),
                                         ("Q=3", "no size symbol 'Q'")])
def test_size_malformed(coil_bin, work, size, words):
    line = run_fails(work, "symbolic.coil", "--size", size)
    assert words in line and size in line


CUBE = """graph g {
  sym B = 2
  %x = input() : f32[B]
  %a = view(%x, [B, 1, 1])
  %b = view(%x, [1, B, 1])
  %c = view(%x, [1, 1, B])
  %ab = add.Tensor(%a, %b)
  %y = add.Tensor(%ab, %c)
  return %y
}
"""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("graph, size", [("symbolic", 72057594037927936), ("symbolic", 4611686018427387904),
                                         ("symbolic", 9223372036854775807), ("cube", 2097152)])
def test_sizes_whose_bytes_overflow_are_errors(coil_bin, work, mode, graph, size):
    """--size values whose tensors' element or byte counts overflow int64 (an f32[B, 3] input
    with B = 2^56 or 2^62; an output [B, B, B] with B = 2^21): SIGABRT in malloc and SIGSEGV in a
    kernel before; now one error line."""
    (work / "cube.coil").write_text(CUBE)
    line = run_fails(work, f"{graph}.coil", *MODES[mode], "--size", f"B={size}")
    assert "too large" in line or "out of memory" in line, line


@pytest.mark.parametrize("mode", MODES)
def test_runtime_error_embedding_index_out_of_range(coil_bin, work, mode):
    line = run_fails(work, "embedding.coil", *MODES[mode], "--seed", "0")
    assert "out of bounds" in line and "%" in line


@pytest.mark.parametrize("where", ["missing_dir/out.safetensors", "a_dir"])
def test_out_not_writable(coil_bin, work, where):
    (work / "a_dir").mkdir()
    before = set(os.listdir(work))
    proc = coil("run", "mm.coil", "--interpret", "--out", where, cwd=work)
    assert where in error_line(proc)
    assert set(os.listdir(work)) == before and list((work / "a_dir").iterdir()) == []


def test_out_replaces_only_regular_files(coil_bin, work):
    """--out over a FIFO (as over a device such as /dev/full, which a run as root once replaced
    with a regular file) is refused and the FIFO stays; a symbolic link is followed: the file it
    names gets the output and the link stays a link."""
    fifo = work / "pipe"
    os.mkfifo(fifo)
    proc = coil("run", "mm.coil", "--interpret", "--out", "pipe", cwd=work)
    line = error_line(proc)
    assert "pipe" in line and "FIFO" in line and "regular files" in line
    assert fifo.is_fifo()
    (work / "real.safetensors").write_bytes(b"old")
    (work / "link.safetensors").symlink_to("real.safetensors")
    proc = coil("run", "mm.coil", "--interpret", "--out", "link.safetensors", cwd=work)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (work / "link.safetensors").is_symlink() and (work / "real.safetensors").read_bytes() != b"old"


def test_failed_run_keeps_an_existing_out_file(coil_bin, work):
    out = work / "out.safetensors"
    out.write_bytes(b"previous results")
    proc = coil("run", "embedding.coil", "--interpret", "--out", out, cwd=work)
    error_line(proc)
    assert out.read_bytes() == b"previous results"


@pytest.mark.parametrize("args", [[], ["check"], ["run"], ["compile"]], ids=["coil", "check", "run", "compile"])
def test_help(coil_bin, args):
    proc = coil(*args, "--help")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert "Usage" in proc.stdout.decode() and proc.stderr == b""


def test_version_is_defined_once(coil_bin):
    """`coil --version`, `python -m coil --version` and coil.__version__ all give VERSION's."""
    import sys

    import coil as coil_package
    version = (ROOT / "VERSION").read_text().strip()
    proc = coil("--version")
    assert proc.returncode == 0 and proc.stdout.decode().strip() == f"coil {version}", proc
    module = subprocess.run([sys.executable, "-m", "coil", "--version"], capture_output=True, text=True,
                            env=dict(os.environ, COIL_BIN=str(COIL)))
    assert module.returncode == 0 and module.stdout.strip() == f"coil {version}", module
    assert coil_package.__version__ == version
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" in project["dynamic"]
    # The wheel says what it needs and carries its license.
    assert any(d.startswith("torch") for d in project["dependencies"])
    assert project["license-files"] == ["LICENSE"] and (ROOT / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.parametrize("args, words", [
    ([], "subcommand"),
    (["frob"], "unknown command 'frob'"),
    (["run"], "FILE is required"),
    (["run", "mm.coil", "--bogus"], "--bogus"),
    (["run", "mm.coil", "--seed", "abc"], "abc"),
    (["check", "mm.coil", "extra.coil"], "extra.coil"),
    (["compile", "mm.coil", "--emit", "nonsense"], "nonsense"),
], ids=["no-command", "unknown-command", "no-file", "unknown-option", "bad-seed", "extra-arg", "bad-emit"])
def test_usage_errors(coil_bin, work, args, words):
    line = error_line(coil(*args, cwd=work))
    assert words in line and "--help" in line


# ---------------------------------------------------------------- robustness

BASE = """# a small graph that touches most of the syntax
graph fuzz {
  sym B = 4
  %x = input() : f32[B, 8]
  %i = input(low=0, high=16) : i64[B]
  %w = constant(value=[1.0, -2.5, 3e-05, inf]) : f32[4]
  %e = full([16, 8], 0.5, dtype=f32)
  %emb = embedding(%e, %i) : f32[B, 8]
  %t = permute(%x, dims=[1, 0]) : f32[8, B] strides=[1, 8]
  %s = slice.Tensor(%x, 1, 0, 4) : f32[B, 4] strides=[8, 1]
  %a = add.Tensor(%s, %w, alpha=2)
  %g = gelu(%a, approximate="tanh")
  %v, %idx = max.dim(%g, 1, keepdim=true) : f32[B, 1], i64[B, 1]
  %m = mm(%t, %x) : f32[8, 8]
  %y, %mean, %rstd = native_layer_norm(%emb, [8], none, none, 1e-05)
  %r = view(%y, [B*8 // 2, 2])
  %c = cat([%x, %emb], 1)
  return %g, %v, %m, %r, %c
}
""".encode()

# Characters that mean something in the format, plus a few that never may (NUL, a non-ASCII byte).
ALPHABET = [bytes([c]) for c in b'%[](){},=:*+-/"#.\n\t 0123456789eBxaf_'] + [b"\x00", b"\xff", b"\xc3\xa9"]


def mutate(text, rng):
    for _ in range(rng.randint(1, 3)):
        lines = text.split(b"\n")
        pos = rng.randrange(len(text) + 1)
        kind = rng.randrange(8)
        if kind == 0:
            text = text[:pos] + text[pos + rng.randint(1, 3):]
        elif kind == 1:
            text = text[:pos] + rng.choice(ALPHABET) + text[pos:]
        elif kind == 2:
            text = text[:pos] + rng.choice(ALPHABET) + text[pos + 1:]
        elif kind == 3:
            text = text[:pos]
        elif kind == 4:
            k = rng.randrange(len(lines))
            text = b"\n".join(lines[:k + 1] + lines[k:])
        elif kind == 5:
            k = rng.randrange(len(lines))
            text = b"\n".join(lines[:k] + lines[k + 1:])
        elif kind == 6:
            j, k = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[j], lines[k] = lines[k], lines[j]
            text = b"\n".join(lines)
        else:  # a digit changed: sizes, dims and hints that no longer fit
            digits = [i for i, c in enumerate(text) if 48 <= c <= 57]
            if digits:
                i = rng.choice(digits)
                text = text[:i] + str(rng.randrange(10)).encode() + text[i + 1:]
    return text


def check_bytes(path, text):
    """Runs `coil check` on `text`; returns a problem description, or None when coil behaved."""
    path.write_bytes(text)
    proc = coil("check", path, timeout=60)
    err = proc.stderr.decode("utf-8", errors="replace")
    if proc.returncode not in (0, 1):
        return f"exit code {proc.returncode} (stderr: {err!r})"
    if proc.returncode == 1:
        if not (err.startswith("coil: error: ") and err.endswith("\n") and err.count("\n") == 1):
            return f"stderr is not one 'coil: error:' line: {err!r}"
        if proc.stdout:
            return "output on stdout although the graph was rejected"
        return None
    if err:
        return f"stderr on success: {err!r}"
    # What `coil check` prints must read back to itself.
    printed = proc.stdout
    path.write_bytes(printed)
    again = coil("check", path, timeout=60)
    if again.returncode != 0 or again.stdout != printed:
        return f"printed form does not read back (exit {again.returncode}: {again.stderr.decode(errors='replace')!r})"
    return None


def test_base_graph_is_valid(coil_bin, tmp_path):
    assert check_bytes(tmp_path / "base.coil", BASE) is None


def test_mutated_graphs_never_crash(coil_bin, tmp_path):
    rng = random.Random(20240607)
    mutants = [mutate(BASE, rng) for _ in range(300)]

    def one(k):
        problem = check_bytes(tmp_path / f"m{k}.coil", mutants[k])
        return None if problem is None else f"mutant {k}: {problem}\n--- text ---\n{mutants[k].decode(errors='replace')}"

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        problems = [p for p in pool.map(one, range(len(mutants))) if p]
    assert not problems, f"{len(problems)} of {len(mutants)} mutants misbehaved; the first:\n" + "\n\n".join(problems[:3])


PATHOLOGICAL = {
    "deep_parentheses": b"graph g {\n  sym B = 2\n  %x = input() : f32[" + b"(" * 100000 + b"B" + b")" * 100000 + b"]\n  return %x\n}\n",
    "deep_negation": b"graph g {\n  %x = input() : f32[" + b"-" * 100000 + b"2]\n  return %x\n}\n",
    "long_line": b"graph g {\n  %x = input() : f32[" + b"1, " * 50000 + b"1]\n  return %x\n}\n",
    "long_name": b"graph g {\n  %" + b"x" * 100000 + b" = input() : f32[2]\n  return %x\n}\n",
    "many_statements": b"graph g {\n  %x0 = input() : f32[2]\n"
                       + b"".join(b"  %%x%d = relu(%%x%d)\n" % (i + 1, i) for i in range(3000)) + b"  return %x3000\n}\n",
    "unterminated_at_eof": b'graph g {\n  %w = weight(key="abc',
    "backslash_at_eof": b'graph g {\n  %w = weight(key="abc\\',
    "only_comment": b"# nothing here",
    "binary": bytes(range(256)) * 4,
    "nul_in_string": b'graph g {\n  weights "a\x00b"\n  %w = weight(key="k") : f32[2]\n  return %w\n}\n',
    "huge_integer": b"graph g {\n  %x = input() : f32[" + b"9" * 400 + b"]\n  return %x\n}\n",
    "huge_float": b"graph g {\n  %x = input() : f32[2]\n  %y = leaky_relu(%x, 1" + b"0" * 400 + b".0)\n  return %y\n}\n",
    "tiny_float": b"graph g {\n  %x = input() : f32[2]\n  %y = leaky_relu(%x, 1e-400)\n  return %y\n}\n",
    "size_overflow_expression": b"graph g {\n  sym B = 2\n  %x = input() : f32[B*9223372036854775807*9223372036854775807]\n  return %x\n}\n",
    "crlf": MM.replace("\n", "\r\n").encode(),
}


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_pathological_input(coil_bin, tmp_path, name):
    problem = check_bytes(tmp_path / "p.coil", PATHOLOGICAL[name])
    assert problem is None, problem


def _chain(op, n, shape="4, 4"):
    return ("graph g {\n  %x0 = input() : f32[" + shape + "]\n" + "".join(f"  %x{i + 1} = {op}(%x{i})\n" for i in range(n))
            + f"  return %x{n}\n}}\n")


BOUNDED = {
    # Each value inlined into the next: 81 s and 3.3 GB, then minutes of g++ on one expression.
    "relu_chain_5000": (_chain("relu", 5000), ["run", "--check"]),
    # A slice per output column: > 300 s and megabytes of source.
    "adaptive_pool_to_100000": ("graph g {\n  %x = input() : f32[1, 1, 4, 4]\n  %y = _adaptive_avg_pool2d(%x, [1, 100000])\n"
                                "  return %y\n}\n", ["run", "--check"]),
    # Windows of two sizes along both dims, many outputs per dim (the gather per window offset).
    "adaptive_pool_uneven": ("graph g {\n  %x = input() : f32[2, 3, 7, 301]\n  %y = _adaptive_avg_pool2d(%x, [5, 100])\n"
                             "  return %y\n}\n", ["run", "--check"]),
    # Graph::find scanned every node for every name: minutes for 100,000 nodes.
    "neg_chain_100000": (_chain("neg", 100000, "4"), ["check"]),
}


@pytest.mark.parametrize("name", BOUNDED)
def test_compile_time_stays_bounded(coil_bin, tmp_path, name):
    text, command = BOUNDED[name]
    path = tmp_path / f"{name}.coil"
    path.write_text(text)
    proc = coil(command[0], path, *command[1:], timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    if "--check" in command:
        error = re.search(rb"max abs error vs reference: (\S+)", proc.stdout)
        assert error and float(error.group(1)) < 1e-5, proc.stdout[-2000:]


def test_generated_code_past_the_budget_is_a_limit(coil_bin, monkeypatch):
    """Generated code past the source budget (32 MB by default; COIL_MAX_SOURCE_MB) is an error
    that says so on the CLI, and under torch.compile the graph runs in PyTorch with one
    FallbackWarning, not a CompileErrorWarning: a valid graph too large is not a bug."""
    import warnings

    import coil as coil_module

    def run(budget):
        env = dict(os.environ, COIL_MAX_SOURCE_MB=budget)
        return subprocess.run([COIL, "run", ROOT / "models/mlp.coil"], capture_output=True, env=env, timeout=300)

    assert "more than the 0.001 MB coil compiles at once" in error_line(run("0.001"))
    assert "COIL_MAX_SOURCE_MB is 'lots'" in error_line(run("lots"))
    assert run("64").returncode == 0

    monkeypatch.setenv("COIL_MAX_SOURCE_MB", "0.001")
    model = torch.nn.Sequential(torch.nn.Linear(9, 17), torch.nn.ReLU(), torch.nn.Linear(17, 5)).eval()
    x = torch.randn(3, 9)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        got = torch.compile(model, backend="coil")(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    fallbacks = [w for w in caught if issubclass(w.category, coil_module.FallbackWarning)]
    assert [w.category for w in fallbacks] == [coil_module.FallbackWarning], [str(w.message) for w in fallbacks]
    assert "more than the 0.001 MB" in str(fallbacks[0].message)


def test_cat_of_many_symbolic_sizes_is_an_error(coil_bin, tmp_path):
    """cat of 2,000 tensors of symbolic sizes simplified index sums of every length for hours."""
    n = 300
    text = ("graph g {\n" + "".join(f"  sym S{i} = 2\n" for i in range(n)) + "".join(f"  %x{i} = input() : f32[S{i}]\n" for i in range(n))
            + "  %y = cat([" + ", ".join(f"%x{i}" for i in range(n)) + "], 0)\n  return %y\n}\n")
    (tmp_path / "cat.coil").write_text(text)
    line = error_line(coil("run", tmp_path / "cat.coil", timeout=120))
    assert "cat of 300 tensors whose sizes along dim 0 are symbolic" in line
