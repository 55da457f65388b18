"""Graphs Dynamo traced with symbolic sizes (dynamic=True, mark_dynamic, or a second size of an
input): compiled once for every size where coil takes the graph so (_symbols: its sizes
expressions of the size symbols, bound from the inputs' shapes per call), else compiled for each
concrete size it meets (PerShape).
"""
import copy

import torch


def symbolic(value):
    """Whether Dynamo's example input is a size or a tensor of symbolic sizes."""
    if isinstance(value, torch.SymInt):
        return True
    return isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape)


class PerShape:
    """A graph Dynamo traced with symbolic sizes, compiled by `compile_static(gm, example_inputs)`
    for each concrete shape it meets (Dynamo's guards still decide when the graph applies).
    Such a compile happens at a call, where Dynamo no longer catches what its tracing raises (a
    graph reading a tensor's value, `.item()`, fails AOTAutograd's trace outside Dynamo's shape
    environment): `failed(error)` then raises, or warns and the shape's graph runs in PyTorch."""

    def __init__(self, gm, compile_static, failed):
        self.gm, self.compile_static, self.failed, self.compiled = gm, compile_static, failed, {}

    def __call__(self, *args):
        key = tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else a for a in args)
        fn = self.compiled.get(key)
        if fn is None:
            gm, positions = specialize(self.gm, args)
            try:
                compiled = self.compile_static(gm, [args[i] for i in positions])
            except Exception as e:  # noqa: BLE001 - the program must still run (failed() raises under fallback="error")
                self.failed(e)
                compiled = gm.forward
            self.compiled[key] = fn = (compiled, positions)
        run, positions = fn
        return run(*[args[i] for i in positions])


def specialize(gm, args):
    """A copy of `gm` with its non-tensor inputs (symbolic sizes) replaced by their values."""
    graph = copy.deepcopy(gm.graph)
    positions = []
    for i, node in enumerate([n for n in graph.nodes if n.op == "placeholder"]):
        if isinstance(args[i], torch.Tensor):
            positions.append(i)
            continue
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n, node=node, value=args[i]: value if n is node else n)
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n, node=node, value=args[i]: value if n is node else n)
        graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph), positions


def constants_as_weights(gm, frozen):
    """`gm` with its constants (get_attr nodes: tensors the trace made, e.g. a causal mask or
    torch.finfo(dtype).min) made placeholders after its own, and `frozen` (placeholder position
    -> tensor) with those constants added: the compiled graph binds them as weights, so the
    graph compiles whole. The call's arguments are unchanged (weights are not passed per call)."""
    graph = copy.deepcopy(gm.graph)
    frozen = dict(frozen)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    position = len(placeholders)
    last = placeholders[-1] if placeholders else None
    for node in [n for n in graph.nodes if n.op == "get_attr"]:
        value = gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor):
            return gm, frozen
        with graph.inserting_after(last) if last is not None else graph.inserting_before(next(iter(graph.nodes))):
            lifted = graph.placeholder(f"constant_{node.name}")
        with torch._subclasses.fake_tensor.unset_fake_temporarily():  # (compilers run under AOTAutograd's fake mode)
            value = value.detach().contiguous()
        lifted.meta = dict(node.meta, val=value)
        frozen[position] = lifted.meta["val"]
        node.replace_all_uses_with(lifted)
        graph.erase_node(node)
        last, position = lifted, position + 1
    return torch.fx.GraphModule(gm, graph), frozen
