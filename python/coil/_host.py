"""0-d CPU values that a device graph computes from 0-d CPU values (a counter a program keeps on
the CPU beside its device tensors, which eager adds to on the host; AdamW's step counts are not
among them under torch.compile: Dynamo moves a CPU count to its parameter's device when it
traces the step, whatever the backend). coil computes them on the host as well, in PyTorch,
before the run (the graph's prologue). Computed on the device, each value was copied there and
its new value back, and each of those copies waited for the stream.

The counts the program's kernels read (bias corrections) go to the device together, one copy
per dtype from pinned memory, which waits for nothing (to_device).
"""
import torch


def scalars(gm, input_values, frozen, device):
    """The nodes of `gm` (a graph for `device`, not the CPU) computed on the host (a set):
    the graph's results that are 0-d CPU tensors made by deterministic, functional aten ops from
    0-d CPU placeholders passed per call and plain numbers, with the nodes they are made from.
    (What only the device's kernels read stays theirs: AdamW's bias corrections of the new step
    counts are a dozen ops a parameter, each a host call of some microseconds.)"""
    if device.type == "cpu":
        return set()
    capable, position = set(), 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if position not in frozen and _cpu_scalar(input_values[position]):
                capable.add(node)
            position += 1
        elif node.op == "call_function" and _cpu_scalar(node.meta.get("val")) and _host_op(node.target):
            if _encodable((node.args, node.kwargs), capable):
                capable.add(node)
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    wanted = [n for n in output.all_input_nodes if n in capable and n.op == "call_function"]
    host = set()
    while wanted:
        node = wanted.pop()
        if node not in host:
            host.add(node)
            wanted.extend(n for n in node.all_input_nodes if n in capable)
    return host


def _cpu_scalar(value):
    return isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() == 0 and not value.is_complex()


def _host_op(target):
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return False
    schema = target._schema
    return not schema.is_mutable and len(schema.returns) == 1 and torch.Tag.nondeterministic_seeded not in target.tags


def _encodable(value, host):
    """Whether an argument is host values and plain numbers only (what the prologue's JSON holds)."""
    if isinstance(value, torch.fx.Node):
        return value in host
    if isinstance(value, (list, tuple)):
        return all(_encodable(v, host) for v in value)
    if isinstance(value, dict):
        return all(_encodable(v, host) for v in value.values())
    return value is None or type(value) in (bool, int, float)


def prologue(nodes, placeholders):
    """The JSON form of the host nodes `nodes` (call_function ones, in order): per node its op and
    its arguments, a reference being {"arg": placeholder position} or {"host": index in `nodes`}."""
    index = {n: i for i, n in enumerate(nodes)}

    def encode(value):
        if isinstance(value, torch.fx.Node):
            return {"arg": placeholders[value]} if value in placeholders else {"host": index[value]}
        if isinstance(value, (list, tuple)):
            return [encode(v) for v in value]
        return value

    return [{"op": str(n.target), "args": encode(list(n.args)), "kwargs": {k: encode(v) for k, v in n.kwargs.items()}}
            for n in nodes]


class Prologue:
    """A graph's prologue (prologue()'s JSON), run on a call's arguments."""

    def __init__(self, steps):
        self.steps = []
        for step in steps:
            namespace, name, overload = step["op"].split(".")
            self.steps.append((getattr(getattr(getattr(torch.ops, namespace), name), overload), step["args"], step["kwargs"]))

    def __call__(self, args):
        values = []

        def decode(value):
            if isinstance(value, dict):
                return args[value["arg"]] if "arg" in value else values[value["host"]]
            if isinstance(value, list):
                return [decode(v) for v in value]
            return value

        for op, op_args, kwargs in self.steps:
            values.append(op(*decode(op_args), **{k: decode(v) for k, v in kwargs.items()}))
        return values


def to_device(values, device):
    """The CPU 0-d tensors `values` on `device`: one copy per dtype, staged in pinned memory (so
    it waits for nothing), each value at a 16-byte aligned element of it (coil's kernels take
    their buffers so aligned)."""
    out = [None] * len(values)
    by_dtype = {}
    for i, v in enumerate(values):
        by_dtype.setdefault(v.dtype, []).append(i)
    for dtype, indices in by_dtype.items():
        lanes = max(1, 16 // dtype.itemsize)
        try:
            stage = torch.empty((len(indices), lanes), dtype=dtype, pin_memory=True)
        except RuntimeError:  # no pinned memory to be had: pageable, which the copy stages at once
            stage = torch.empty((len(indices), lanes), dtype=dtype)
        stage[:, 0] = torch.stack([values[i] for i in indices])
        moved = stage.to(device, non_blocking=True)
        for row, i in enumerate(indices):
            out[i] = moved[row, 0]
    return out
