"""ops.def carries PyTorch's own schema strings: check each against torch's registry, so the
argument names, types and defaults coil binds are exactly ATen's."""
import re
from pathlib import Path

import pytest
import torch

OPS_DEF = Path(__file__).resolve().parents[2] / "include" / "coil" / "ops.def"
ENTRIES = [
    (m.group(1), m.group(3).replace('\\"', '"'))
    for m in re.finditer(r'^COIL_OP\((\w+), (\w+), "(.*)"\)', OPS_DEF.read_text(), re.M)
    if m.group(2) != "source"
]


OWN = {"philox_random", "torch_call"}  # tools/gen_op_schemas.py's


def test_op_list_is_not_empty():
    assert len(ENTRIES) > 130


@pytest.mark.parametrize("enum,schema", ENTRIES, ids=[e for e, _ in ENTRIES])
def test_schema_matches_torch(enum, schema):
    """ATen's ops their registry's schemas; coil's own (torch.ops.coil, which the adapter
    registers) the adapter's."""
    name = schema.split("(")[0]
    base, _, overload = name.partition(".")
    namespace = "coil" if base in OWN else "aten"
    if namespace == "coil":
        pytest.importorskip("coil")
    op = getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    assert str(op._schema).replace(f"{namespace}::", "") == schema


def test_ops_def_is_what_the_generator_writes():
    """tools/gen_op_schemas.py regenerates the schema column from torch; ops.def must be its output."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_op_schemas", OPS_DEF.parents[2] / "tools" / "gen_op_schemas.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = OPS_DEF.read_text()
    assert gen.regenerate(text) == text, "run: .venv/bin/python tools/gen_op_schemas.py"
