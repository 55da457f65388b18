"""Makes the seed corpora and dictionaries of the libFuzzer targets (tests/fuzz/corpus/<target>/,
tests/fuzz/dict/<target>.dict). Run where torch and numpy are installed (the repo's .venv):
`.venv/bin/python tests/fuzz/make_corpus.py`. It rewrites the generated seeds and keeps the
ones `scripts/fuzz --merge` added (named by their SHA-1) and the regression seeds (regress-*).

  graph_text   models/*.coil, tests/errors/*.coil, and the first case of every op in
               tests/python/op_cases.py (small graphs of every op and argument kind)
  pt2          the tests/fixtures/pt2 archives, and two of many ops (as exported, and in Core ATen)
  safetensors  the fixtures' small .io.safetensors, and files written here, valid and not
  npy          arrays numpy writes (every dtype, 0-d, empty, Fortran order, versions 1 to 3), and not
  package      small packages the coil CLI writes ($COIL_BIN, or build/tools/coil), and the same with
               the manifest broken in the ways read_package names
"""
import json
import re
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS, DICT = HERE / "corpus", HERE / "dict"


def keep(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def clear_generated(target):
    """Removes this script's seeds, not merged finds (40 hex digits) or regression seeds."""
    for f in (CORPUS / target).glob("*"):
        if not re.fullmatch(r"[0-9a-f]{40}", f.name) and not f.name.startswith("regress-"):
            f.unlink()


def write_dict(target, tokens):
    def quoted(t):
        b = t if isinstance(t, bytes) else t.encode()
        return '"' + "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\x{c:02x}" for c in b) + '"'
    DICT.mkdir(exist_ok=True)
    lines = [f"# {target}: tokens for libFuzzer's -dict (tests/fuzz/make_corpus.py writes this file)"]
    lines += [quoted(t) for t in dict.fromkeys(tokens)]
    (DICT / f"{target}.dict").write_text("\n".join(lines) + "\n")


OPS = [m.group(1) for m in re.finditer(r'^COIL_OP\(\w+, \w+, "([\w.]+)\(', (ROOT / "include/coil/ops.def").read_text(), re.M)]
DTYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool"]


def graph_text():
    clear_generated("graph_text")
    for f in sorted((ROOT / "models").glob("*.coil")) + sorted((ROOT / "tests/errors").glob("*.coil")):
        keep("graph_text", f"{f.parent.name}-{f.name}", f.read_bytes())
    sys.path.insert(0, str(ROOT / "tests/python"))
    from op_cases import CASES
    first = {}
    for case in CASES:
        first.setdefault(case.op, case)
    for op, case in sorted(first.items()):
        keep("graph_text", f"op-{op}.coil", case.graph.text(case.outputs))
    words = ["graph", "sym", "weights", "return", "none", "true", "false", "inf", "nan", "min", "max", "strides=",
             "offset=", "device=", "cpu", "cuda:0", "strided", "contiguous_format", "channels_last", "preserve_format",
             "%x", " = ", "input()", "weight(key=\"w\")", "constant([1.0])", ": f32[", "//", "aten::", "aten.", "1e308"]
    write_dict("graph_text", words + DTYPES + OPS)


class ManyOps(torch.nn.Module):
    """Ops of many argument kinds: tensor lists, dtypes, floats, bools, int lists, memory formats,
    Python numbers. Written around what coil's reader does not take (yet) as exported: aten.pad
    (F.pad before run_decompositions), narrow, topk."""

    def forward(self, x, i):
        y = torch.cat([x, x.flip(1)], dim=1).to(torch.float64).clamp(-0.5, 2.0)
        z = torch.constant_pad_nd(y, (1, 2), 0.25).softmax(-1).cumsum(0)
        w = torch.gather(z, 1, i).amax(dim=1, keepdim=True) + z[:, 1:3].mean()
        v = x.contiguous(memory_format=torch.contiguous_format).repeat(2, 1).index_select(0, i[:, 0])
        return w.to(torch.float16), torch.where(v > 0, v, v.abs() * 0.5).permute(1, 0), x.argmax(1)


def pt2():
    clear_generated("pt2")
    for f in sorted((ROOT / "tests/fixtures/pt2").glob("*.pt2")):
        keep("pt2", f.name, f.read_bytes())
    torch.manual_seed(0)
    args = (torch.randn(3, 4), torch.randint(0, 3, (3, 2)))
    ep = torch.export.export(ManyOps(), args)
    for name, program in (("many_ops_raw.pt2", ep), ("many_ops.pt2", ep.run_decompositions())):
        torch.export.save(program, str(CORPUS / "pt2" / name))
    keys = set()

    def walk(j):
        if isinstance(j, dict):
            for k, v in j.items():
                keys.add(k)
                walk(v)
        elif isinstance(j, list):
            for v in j:
                walk(v)

    for f in sorted((CORPUS / "pt2").glob("*.pt2")):
        if f.name.startswith("regress-") or re.fullmatch(r"[0-9a-f]{40}", f.name):
            continue  # inputs fuzzing found: not necessarily JSON, or zips
        with zipfile.ZipFile(f) as z:
            for n in z.namelist():
                if n.endswith(".json"):
                    walk(json.loads(z.read(n)))
    # Schema keys, not the models' own names (those hold a '.' or end in a digit).
    schema = sorted(k for k in keys if re.fullmatch(r"[a-z_]+", k) and not k.startswith(("p_", "b_")))
    targets = ["torch.ops.aten." + (op if "." in op else op + ".default") for op in OPS]
    write_dict("pt2", [f'"{k}":' for k in schema] + targets + ['{"as_int": ', '{"as_ints": [', '{"as_none": true}',
                                                              '"as_tensor": {"name": "', "9223372036854775807", "-1"])


def safetensors_file(header, data=b"", pad=True):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors():
    clear_generated("safetensors")
    for f in sorted((ROOT / "tests/fixtures/pt2").glob("*.io.safetensors")):
        if f.stat().st_size <= 2048:
            keep("safetensors", f.name, f.read_bytes())
    codes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for code, size in codes.items():
        n = 6 * size
        header[code.lower()] = {"dtype": code, "shape": [2, 3], "data_offsets": [len(data), len(data) + n]}
        data += bytes(range(len(data) % 200, len(data) % 200 + n))
    keep("safetensors", "every_dtype.safetensors", safetensors_file(header, data))
    keep("safetensors", "empty.safetensors", safetensors_file({}))
    keep("safetensors", "scalar_and_empty.safetensors", safetensors_file(
        {"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, "e": {"dtype": "I16", "shape": [0, 3], "data_offsets": [4, 4]}},
        struct.pack("<f", 1.5)))
    one = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    bad = {
        "overlap": ({"a": one, "b": one}, bytes(8)),
        "hole": ({"a": {**one, "data_offsets": [4, 12]}}, bytes(12)),
        "dtype": ({"a": {**one, "dtype": "C64"}}, bytes(8)),
        "mismatch": ({"a": {**one, "shape": [3]}}, bytes(8)),
        "negative": ({"a": {**one, "shape": [-2]}}, bytes(8)),
        "metadata": ({"__metadata__": {"k": 1}, "a": one}, bytes(8)),
        "huge": ({"a": {**one, "shape": [2**62, 2**62]}}, bytes(8)),
    }
    for name, (h, d) in bad.items():
        keep("safetensors", f"bad_{name}.safetensors", safetensors_file(h, d))
    keep("safetensors", "bad_truncated.safetensors", safetensors_file({"a": one}, bytes(8))[:-3])
    keep("safetensors", "bad_length.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
    keep("safetensors", "bad_duplicate.safetensors", struct.pack("<Q", 40) + b'{"a":{},"a":{}}'.ljust(40))
    write_dict("safetensors", ['"dtype"', '"shape"', '"data_offsets"', '"__metadata__"', "18446744073709551615"]
               + [f'"{c}"' for c in codes] + ['"F8_E4M3"', '"U16"', '"C64"'])


def npy():
    clear_generated("npy")
    import io

    def saved(a, version=None):
        buf = io.BytesIO()
        if version is None:
            np.save(buf, a)
        else:
            np.lib.format.write_array(buf, a, version=version)
        return buf.getvalue()

    rng = np.random.default_rng(0)
    for dt in ["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "|i1", "|u1", "|b1"]:
        keep("npy", f"{dt[1:]}.npy", saved((rng.random((2, 3)) * 10).astype(dt)))
    keep("npy", "scalar.npy", saved(np.float32(2.5)))
    keep("npy", "empty.npy", saved(np.zeros((0, 3), "<i4")))
    keep("npy", "fortran.npy", saved(np.asfortranarray(np.arange(24, dtype="<i2").reshape(2, 3, 4))))
    keep("npy", "v2.npy", saved(np.arange(3, dtype="<f4"), (2, 0)))
    keep("npy", "v3.npy", saved(np.arange(3, dtype="<f8"), (3, 0)))
    keep("npy", "bad_big_endian.npy", saved(np.arange(3, dtype=">f4")))
    keep("npy", "bad_u4.npy", saved(np.arange(3, dtype="<u4")))
    keep("npy", "bad_structured.npy", saved(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")])))
    keep("npy", "bad_truncated.npy", saved(np.arange(6, dtype="<f4"))[:-5])
    write_dict("npy", [b"\x93NUMPY", b"\x01\x00", b"\x02\x00", b"\x03\x00", "'descr'", "'fortran_order'", "'shape'",
                       "True", "False", "'<f4'", "'>f8'", "'|b1'", "'<u2'", "(", ")", ",)", "L", "9223372036854775807"])


PACKAGE_GRAPHS = {
    "add": "graph add {\n  %x = input() : f32[4, 3]\n  %y = add.Scalar(%x, 1.5)\n  return %y\n}\n",
    "weighted": "graph weighted {\n  sym B = 2\n  weights \"w.safetensors\"\n  %x = input() : f32[B, 3]\n"
                "  %w = weight(key=\"w\") : f32[3]\n  %y = mul.Tensor(%x, %w)\n  %s = sum.dim_IntList(%y, [1])\n  return %s\n}\n",
}


def repacked(data, manifest_edit=None, drop=None, add=None):
    """The package's zip again, with its manifest edited, an entry dropped or one added."""
    import io
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for name in src.namelist():
            if name == drop:
                continue
            body = src.read(name)
            if name == "coilpkg/manifest.json" and manifest_edit:
                m = json.loads(body)
                manifest_edit(m)
                body = json.dumps(m, indent=1).encode()
            dst.writestr(name, body)
        for name, body in (add or {}).items():
            dst.writestr(name, body)
    return out.getvalue()


def package():
    clear_generated("package")
    cli = os.environ.get("COIL_BIN", str(ROOT / "build/tools/coil"))
    seeds = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "w.safetensors").write_bytes(safetensors_file({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}},
                                                             struct.pack("<3f", 1.0, -2.0, 0.5)))
        for name, text in PACKAGE_GRAPHS.items():
            (tmp / f"{name}.coil").write_text(text)
            subprocess.run([cli, "compile", str(tmp / f"{name}.coil"), "-o", str(tmp / f"{name}.coilpkg"),
                            "--cache-dir", str(tmp / "cache")], check=True)
            seeds[name] = (tmp / f"{name}.coilpkg").read_bytes()
            keep("package", f"{name}.coilpkg", seeds[name])
    data = seeds["add"]
    keep("package", "bad_version.coilpkg", repacked(data, lambda m: m.update(version=1)))
    keep("package", "bad_type.coilpkg", repacked(data, lambda m: m.update(build_threads="4")))
    keep("package", "bad_device.coilpkg", repacked(data, lambda m: m.update(device="tpu")))
    keep("package", "no_toolchain.coilpkg", repacked(data, lambda m: m.pop("toolchain")))
    keep("package", "bad_size.coilpkg", repacked(data, lambda m: m["entries"]["coilpkg/graph.coil"].update(bytes=3)))
    keep("package", "missing_entry.coilpkg", repacked(data, drop="coilpkg/graph.coil"))
    keep("package", "unlisted_entry.coilpkg", repacked(data, add={"coilpkg/cache/extra.so": b"\x7fELF"}))
    write_dict("package", ["coilpkg/", "coilpkg/manifest.json", "coilpkg/graph.coil", "coilpkg/weights.safetensors",
                           "coilpkg/cache/", "\"format\"", "\"coilpkg\"", "\"version\"", "\"entries\"", "\"bytes\"",
                           "\"hash\"", "\"device\"", "\"cuda\"", "\"toolchain\"", "\"build_threads\"", "\"allow_tf32\"",
                           "\"compiled_on\"", "..", "/", "PK\x03\x04", "PK\x01\x02", "PK\x05\x06"])


if __name__ == "__main__":
    graph_text()
    pt2()
    safetensors()
    npy()
    package()
    for d in sorted(CORPUS.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files) // 1024} KiB")
