"""Which of PyTorch's Core ATen ops coil compiles, which the torch.compile adapter's
decomposition table rewrites before coil sees them, and which run in PyTorch eager when a graph
holds them (the adapter partitions around them; a .pt2 holding one is refused by name).

    .venv/bin/python tools/fallback_ops.py [--markdown]
"""
import sys

import torch

from coil import _backend, _coil, _fx


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
    compiled, decomposed, eager = [], [], []
    table = _backend._decompositions()
    for op in sorted(core_overloads(), key=lambda o: o.name()):
        target = _fx.target_name(op)
        name = op.name().removeprefix("aten::")
        if target is not None and _coil.supported(target):
            compiled.append(name)
        else:
            (decomposed if op in table else eager).append(name)
    sep = ", " if "--markdown" in sys.argv else "\n  "
    print(f"Core ATen overloads: {len(compiled) + len(decomposed) + len(eager)}; coil compiles {len(compiled)}; "
          f"the adapter decomposes {len(decomposed)} more before coil sees them: " + ", ".join(decomposed))
    print(f"{len(eager)} run in PyTorch eager (torch.compile) or are refused (.pt2):")
    print(("  " if sep != ", " else "") + sep.join(eager))


if __name__ == "__main__":
    main()
