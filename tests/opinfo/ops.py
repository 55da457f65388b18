"""Which ops and dtypes a run covers: op_db by key, dtype names, filters, shards and seeds.

An op's key is its name, with ".variant" where op_db has a variant_test_name (op_db has no two
ops with one key). Shards and seeds come from a CRC of the key, not from positions in op_db, so
that a torch upgrade adding ops leaves the other ops' shards and samples where they were.
"""
import re
import zlib

import torch

DTYPES = {
    "f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "i64": torch.int64,
    "bool": torch.bool, "f64": torch.float64, "i32": torch.int32,
}
DEFAULT_DTYPES = ("f32", "bf16", "f16", "i64", "bool")


def op_key(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def load_ops():
    """op_db as {key: OpInfo}, in op_db's order. Importing it needs the expecttest package."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {op_key(op): op for op in op_db}
    assert len(ops) == len(op_db), "two op_db entries share a key"
    return ops


def stable_hash(text):
    return zlib.crc32(text.encode())


def parse_shard(text):
    """'A:B' -> (A, B): the ops whose key hashes to A modulo B (0 <= A < B)."""
    index, count = (int(part) for part in text.split(":"))
    if not 0 <= index < count:
        raise ValueError(f"--shard {text}: want A:B with 0 <= A < B")
    return index, count


def select(keys, pattern=None, shard=None):
    """The keys matching the regex `pattern` (re.search) and in `shard` (A, B)."""
    chosen = [k for k in keys if pattern is None or re.search(pattern, k)]
    if shard is not None:
        chosen = [k for k in chosen if stable_hash(k) % shard[1] == shard[0]]
    return chosen


def units(ops, keys, device, dtype_names, grad=False):
    """The (key, dtype name) pairs to run: each dtype in `dtype_names` that the op supports on
    `device` (grad: that it differentiates, for the ops that support autograd), in op_db's order."""
    def dtypes(op):
        if grad:
            return op.supported_backward_dtypes(device) if op.supports_autograd else set()
        return op.supported_dtypes(device)

    return [(k, name) for k in keys for name in dtype_names if DTYPES[name] in dtypes(ops[k])]


def seed(key, dtype_name):
    """The seed a unit's samples are drawn with: the same in every run, whatever runs beside it."""
    return stable_hash(f"{key} {dtype_name}") % 2**31
