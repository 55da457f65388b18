"""Warm starts: the program AOTAutograd made of a Dynamo graph, kept in coil's cache folder by
the Dynamo graph's content, so that a new process given the same graph skips AOTAutograd (its
trace and decompositions are most of a warm first call) and calls the compiled graph directly.

Only graphs whose AOTAutograd result needs none of its runtime wrappers are kept (and called
directly): no input is mutated, no output aliases an input or an intermediate, no effect tokens
or functionalized RNG, every placeholder is the Dynamo input at its position. Others take
AOTAutograd's path every time.
"""
import json
import operator

import torch

from . import _coil

_VERSION = "1"  # of the entries' layout
_SAFE_MODULES = ("torch", "_operator", "operator", "builtins", "math")


def _sources_digest():
    """The adapter's own code and the compiler it loads are part of every key: they decide what
    program a graph becomes (the decompositions applied, the ops coil takes)."""
    from pathlib import Path

    here = Path(__file__).parent
    binary = Path(_coil.__file__).stat()
    return _coil.cache_key([p.read_text() for p in sorted(here.glob("*.py"))] + [f"{binary.st_size}:{binary.st_mtime_ns}"])


_SOURCES = _sources_digest()


def _input_meta(t):
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return None
    return [str(t.dtype), list(t.shape), list(t.stride()), str(t.device), t.requires_grad, isinstance(t, torch.nn.Parameter)]


def graph_key(gm, example_inputs, mode, options):
    """The key of a Dynamo graph with these example inputs, or None when it cannot be kept
    (attributes or submodules whose values the code does not show, functions outside torch)."""
    if any(True for _ in gm.parameters()) or any(True for _ in gm.buffers()):
        return None
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        return None
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            return None
        if node.op == "call_function" and node.target is not operator.getitem:
            module = getattr(node.target, "__module__", None) or ""
            if not module.split(".")[0] in _SAFE_MODULES:
                return None
    metas = [_input_meta(t) for t in example_inputs]
    if any(m is None for m in metas):
        return None
    parts = [_VERSION, torch.__version__, _SOURCES, gm.code, json.dumps(metas), repr(mode), json.dumps(sorted(options.items()), default=str),
             str(torch.is_grad_enabled())]
    return _coil.cache_key(parts)


def _layout_of(t):
    """(dtype, sizes, strides) of a traced tensor; a symbolic size as its expression's text (so
    that comparing two places no guard)."""
    text = lambda s: str(s.node.expr) if isinstance(s, torch.SymInt) else s  # noqa: E731
    return t.dtype, tuple(text(s) for s in t.shape), tuple(text(s) for s in t.stride())


def input_layouts(example_inputs):
    """What runs_directly compares of Dynamo's example inputs: dtype, shape and strides (the
    tensors themselves are the first call's values, which a closure must not keep alive); None
    for a size (a SymInt of a graph of symbolic sizes) or any other value."""
    return [_layout_of(t) if isinstance(t, torch.Tensor) else None for t in example_inputs]


def runs_directly(fx_gm, example_layouts):
    """Whether AOTAutograd's forward graph `fx_gm` can be called in place of its wrappers: its
    metadata (from the tracing context) shows nothing for them to do, and its placeholders are
    the Dynamo inputs one to one (`example_layouts`: input_layouts of them)."""
    from torch._functorch._aot_autograd.schemas import OutputType

    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context else None
    if meta is None or meta.tokens or meta.num_intermediate_bases or getattr(meta, "is_rng_op_functionalized", False):
        return False
    if any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
        return False
    if any(o.output_type != OutputType.non_alias for o in meta.output_info):
        return False
    placeholders = [n.meta.get("val") for n in fx_gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_layouts):
        return False
    for fake, real in zip(placeholders, example_layouts):
        if isinstance(fake, torch.SymInt) and real is None:
            continue  # a size, passed as an int (the runner reads sizes from the tensors)
        if not isinstance(fake, torch.Tensor) or real is None:
            return False
        layout = _layout_of(fake)
        symbolic = any(isinstance(s, str) for s in layout[1] + layout[2])
        # (Dynamo's example of a symbolic input is the first call's tensor: its dtype and rank)
        if layout != real and not (symbolic and layout[0] == real[0] and len(layout[1]) == len(real[1])):
            return False
    return True


def load(key, cache_dir):
    """The entry kept under `key`, or None."""
    data = _coil.cache_read(cache_dir, key, "fxgraph")
    if data is None:
        return None
    try:
        entry = json.loads(data)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) and entry.get("version") == _VERSION else None


def store(key, cache_dir, entry):
    """Keeps `entry` (a program and how to call it) under `key`; entries JSON cannot hold are not kept."""
    try:
        data = json.dumps(dict(entry, version=_VERSION))
    except (TypeError, ValueError):
        return
    _coil.cache_store(cache_dir, key, "fxgraph", data.encode())
