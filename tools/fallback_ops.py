"""Which ATen ops coil compiles, against what Inductor compiles.

Inductor compiles an op when it has a lowering for it (torch._inductor.lowering.lowerings) or
decomposes it (torch._inductor.decomposition.select_decomp_table()), unless it sends it to ATen
(torch._inductor.lowering.fallbacks). coil compiles an op when its C++ front end takes the
target (coil._coil.supported) or the adapter's decomposition table rewrites it first. The
difference, less the overloads that never reach a backend (in-place and out= variants, Python
number overloads, named dims: AOTAutograd's functional graphs hold none of them), is what coil
still sends to eager where Inductor would not.

    .venv/bin/python tools/fallback_ops.py [--markdown] [--core]
--core: the Core ATen op set only (what a .pt2 archive holds).
"""
import sys

import torch

from coil import _coil, _decompositions, _fx


def _reaches_a_backend(op):
    """Whether AOTAutograd's functional Core-ATen graphs can hold this overload."""
    schema = op._schema
    if op.namespace != "aten" or schema.is_mutable or op._overloadname in ("out",) or op._overloadname.endswith("_out"):
        return False
    if any(a.name == "out" for a in schema.arguments) or "Dimname" in str(schema) or "hacked_twin" in op._overloadname:
        return False
    # Python-number and list overloads (add.int, eq.str, ...) take no tensor.
    if not any("Tensor" in str(a.type) for a in schema.arguments) or not any("Tensor" in str(r.type) for r in schema.returns):
        return False
    in_place = op._opname.endswith("_") and not op._opname.startswith("__")  # add_, but not __lshift__
    return not op._opname.startswith("_foreach") and not in_place


def inductor_ops():
    from torch._inductor import decomposition, lowering

    keys = set(lowering.lowerings) | set(decomposition.select_decomp_table())
    return {op for op in keys if isinstance(op, torch._ops.OpOverload) and op not in lowering.fallbacks}


def coil_compiles(op, table):
    target = _fx.target_name(op)
    return op in table or (target is not None and _coil.supported(target))


def core_overloads():
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags:
                yield op


def main():
    table = {**_decompositions.core(), **_decompositions._extra()}
    candidates = set(core_overloads()) if "--core" in sys.argv else inductor_ops()
    candidates = sorted((op for op in candidates if _reaches_a_backend(op)), key=lambda o: o.name())
    missing = [op.name().removeprefix("aten::") for op in candidates if not coil_compiles(op, table)]
    scope = "Core ATen overloads" if "--core" in sys.argv else "overloads Inductor compiles"
    sep = ", " if "--markdown" in sys.argv else "\n  "
    print(f"{scope}: {len(candidates)}; coil compiles or decomposes {len(candidates) - len(missing)}; "
          f"{len(missing)} run in PyTorch eager under coil:")
    print(("  " if sep != ", " else "") + sep.join(missing))


if __name__ == "__main__":
    main()
