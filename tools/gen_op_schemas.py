"""Regenerates the schema strings of include/coil/ops.def from PyTorch's operator registry.

    .venv/bin/python tools/gen_op_schemas.py            # rewrite ops.def in place
    .venv/bin/python tools/gen_op_schemas.py --check    # exit 1 and list the entries that differ

ops.def is coil's op table: COIL_OP(Enum, family, "schema"). The enum and family are coil's;
the schema string (argument names, types, defaults, returns) is ATen's own, which is what lets
the .pt2 reader and the torch.compile adapter bind arguments by name when a file omits
defaults. Run this after moving to a new torch; tests/python/test_schemas.py runs --check's
comparison in CI. Sources (coil's input, weight and constant) and coil's own ops (OWN) are not
ATen ops and are kept.
"""
import argparse
import re
import sys
from pathlib import Path

import torch

OPS_DEF = Path(__file__).resolve().parents[1] / "include" / "coil" / "ops.def"
ENTRY = re.compile(r'^COIL_OP\((\w+), (\w+), "(.*)"\)$', re.M)
OWN = {"philox_random", "torch_call"}  # ops of coil's own (the adapter's torch.ops.coil namespace)


def torch_schema(schema):
    """ATen's schema string for the overload an ops.def schema string names."""
    name = schema.split("(")[0]
    base, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, base), overload or "default")
    return str(op._schema).replace("aten::", "")


def regenerate(text):
    def entry(m):
        enum, family, schema = m.group(1), m.group(2), m.group(3)
        if family == "source" or schema.split("(")[0] in OWN:
            return m.group(0)
        return f'COIL_OP({enum}, {family}, "{torch_schema(schema.replace(chr(92) + chr(34), chr(34))).replace(chr(34), chr(92) + chr(34))}")'

    return ENTRY.sub(entry, text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when ops.def differs from torch")
    args = parser.parse_args()
    text = OPS_DEF.read_text()
    fresh = regenerate(text)
    if args.check:
        old, new = text.splitlines(), fresh.splitlines()
        diff = [(a, b) for a, b in zip(old, new) if a != b]
        for a, b in diff:
            print(f"- {a}\n+ {b}")
        print(f"{len(diff)} of {len(ENTRY.findall(text))} entries differ from torch {torch.__version__}")
        return 1 if diff else 0
    if fresh != text:
        OPS_DEF.write_text(fresh)
    print(f"ops.def: schemas from torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
