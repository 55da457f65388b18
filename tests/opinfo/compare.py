"""Structural comparison of what an op gave in eager and through torch.compile.

Outputs of op_db ops are tensors, nested tuples/lists (torch.return_types are tuples), dicts,
Python numbers, bools and None; the same walk compares the mutated inputs (the sample's input,
args and kwargs after the call). Tensor values use torch.testing.assert_close's per-dtype
default tolerances with equal_nan=True and ignore strides: a compiled op may return another
memory layout as long as the content is the same.
"""
import math

import torch
from torch.testing import assert_close

LOW_PRECISION = (torch.bfloat16, torch.float16)
# Values compared with ==; other objects (modules, functions) only by type.
PLAIN = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), slice, range,
         torch.dtype, torch.device, torch.layout, torch.memory_format)


def difference(got, want, path="output", values=True):
    """The first difference between `got` (compiled) and `want` (eager) as one line, or None.

    values=False compares only the structure, shapes, dtypes and devices: for ops whose values
    are random or uninitialized.
    """
    if isinstance(want, torch.Tensor):
        return _tensor_difference(got, want, path, values)
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return f"{path}: {type(got).__name__} where eager gave a {type(want).__name__}"
        if len(got) != len(want):
            return f"{path}: {len(got)} elements where eager gave {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            found = difference(g, w, f"{path}[{i}]", values)
            if found:
                return found
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{path}: keys {sorted(map(str, got)) if isinstance(got, dict) else got!r} where eager gave {sorted(map(str, want))}"
        for key in want:
            found = difference(got[key], want[key], f"{path}[{key!r}]", values)
            if found:
                return found
        return None
    return _scalar_difference(got, want, path, values)


def _tensor_difference(got, want, path, values):
    if not isinstance(got, torch.Tensor):
        return f"{path}: {type(got).__name__} where eager gave a tensor"
    for what in ("shape", "dtype", "device", "layout"):
        if getattr(got, what) != getattr(want, what):
            return f"{path}: {what} {getattr(got, what)} where eager gave {getattr(want, what)}"
    if not values:
        return None
    try:
        assert_close(got, want, equal_nan=True, check_stride=False)
    except AssertionError as e:
        return f"{path}: {_one_line(e)}"
    return None


def _scalar_difference(got, want, path, values):
    if not isinstance(want, PLAIN):  # e.g. an nn.Module in kwargs: deep copies are never ==
        return None if type(got) is type(want) else f"{path}: {type(got).__name__} where eager gave {type(want).__name__}"
    if isinstance(want, bool) or not isinstance(want, (int, float)):
        return None if got == want else f"{path}: {got!r} where eager gave {want!r}"
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"{path}: {type(got).__name__} where eager gave a {type(want).__name__}"
    if not values or got == want or (math.isnan(got) and math.isnan(want)):
        return None
    try:
        assert_close(got, want)
    except AssertionError as e:
        return f"{path}: {_one_line(e)}"
    return None


def _one_line(error):
    """assert_close's message (a paragraph) folded onto one line for the results file."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


def upcast(value, dtype):
    """`value` with its tensors of the 16-bit `dtype` turned to float32 (the reference inputs)."""
    return map_tensors(value, lambda t: t.float() if t.dtype == dtype else t)


def downcast(value, dtype):
    """`value` with its float32 tensors turned back to the 16-bit `dtype` (the reference result)."""
    return map_tensors(value, lambda t: t.to(dtype) if t.dtype == torch.float32 else t)


def map_tensors(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):  # torch.return_types become plain tuples: compared alike
        return (list if isinstance(value, list) else tuple)(map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value
