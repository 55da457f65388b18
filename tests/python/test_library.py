"""The ATen ops coil calls as PyTorch's library kernels (coil/_library.py) are ops Inductor too
leaves to ATen, that coil does not compile itself: the list may not hide a gap in coil's
coverage behind "library call", and must not go stale when coil learns an op.
"""
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

coil = pytest.importorskip("coil")
from coil import _coil, _fx, _library  # noqa: E402
from tools import fallback_ops  # noqa: E402


def _overload(name):
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


def test_every_library_op_is_an_aten_overload():
    for name in sorted(_library.LIBRARY_OPS):
        op = _overload(name)
        assert isinstance(op, torch._ops.OpOverload) and str(op) == name


def test_inductor_compiles_no_library_op():
    inductor = {str(op) for op in fallback_ops.inductor_ops()}
    assert not sorted(_library.LIBRARY_OPS & inductor)


def test_coil_compiles_no_library_op():
    """An op coil learns leaves the list (a supported node is never a library call anyway); the
    attention ops stay: coil compiles them unless a node reads their logsumexp (training)."""
    table = {**coil._decompositions.core(), **coil._decompositions._extra()}
    compiled = [n for n in sorted(_library.LIBRARY_OPS) if fallback_ops.coil_compiles(_overload(n), table)
                and _overload(n).name() not in _fx.ATTENTION]
    assert not compiled


def test_is_library_call_follows_getitem():
    def f(x):
        values, indices = torch.sort(x)
        return values + 1, indices

    gm = torch.fx.experimental.proxy_tensor.make_fx(f)(torch.randn(4))
    calls = {n.name: _library.is_library_call(n) for n in gm.graph.nodes if n.op == "call_function"}
    assert calls["sort"] and calls["getitem"] and calls["getitem_1"] and not calls["add"]
    assert _fx.target_name(torch.ops.aten.sort.default) is not None and not _coil.supported("torch.ops.aten.sort.default")
