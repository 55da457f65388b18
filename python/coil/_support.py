"""Which traced nodes and inputs coil takes into a compiled graph on a device: the nodes whose
ATen overload coil compiles (coil._coil.supported) over values it can hold, and the inputs it can
hold or copy to the device per call."""
import operator

import torch

from . import _coil, _fx, _runner, _symbols


def takes(value, device):
    """Whether a compiled graph on `device` can hold this traced value."""
    if not isinstance(value, torch.Tensor):
        return True
    try:
        _fx.tensor_meta(value)
    except _fx.Unsupported:
        return False
    return value.device == device or _runner.is_cpu_scalar(value)


def node_supported(node, device):
    if node.op != "call_function":
        return False
    if _symbols.is_size_node(node) or _symbols.is_assertion(node):
        return True  # a size (written as an expression where read) or a check Dynamo's guards made
    if node.target is operator.getitem:
        return node_supported(node.args[0], device)
    try:
        if not _coil.supported(_fx.node_json(node)["target"]):
            return False
    except _fx.Unsupported:
        return False
    if node.target.name() in _fx.ATTENTION and any(u.args[1] != 0 and u.users for u in node.users):
        return False  # its logsumexp (training) is read
    if node.target.name() == "aten::index_put" and not mask_put_supported(node):
        return False
    if node.target.name() == "aten::empty_strided" and _runner.overlaps(node.args[0], node.args[1]):
        return False  # a layout whose elements share memory: coil's outputs have none
    val = node.meta.get("val")
    outputs = list(val) if isinstance(val, (list, tuple)) else [val]
    inputs = [n.meta.get("val") for n in node.all_input_nodes if not cpu_index_of(n, node)]
    return all(takes(v, device) for v in outputs + inputs)


INDEXING = {"aten::index", "aten::index_put", "aten::_unsafe_index", "aten::_unsafe_index_put"}


def cpu_index_of(value, node):
    """Whether `value` is a CPU tensor among the indices of an indexing node: PyTorch copies such
    indices to the indexed tensor's device, and so does coil's runner, once per call."""
    val = value.meta.get("val")
    return (isinstance(val, torch.Tensor) and val.device.type == "cpu" and node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload) and node.target._schema.name in INDEXING
            and len(node.args) > 1 and isinstance(node.args[1], (list, tuple)) and value in node.args[1])


def takes_input(placeholder, device):
    """Whether a compiled graph on `device` can take this placeholder's value as an input: one
    it can hold, or CPU indices that only indexing nodes read (copied to the device per call)."""
    value = placeholder.meta.get("val")
    if isinstance(value, torch.SymInt):
        return True  # a size symbol's value: bound from the inputs' shapes
    if not isinstance(value, torch.Tensor):
        return False
    return takes(value, device) or (takes(value, value.device) and bool(placeholder.users)
                                     and all(cpu_index_of(placeholder, user) for user in placeholder.users))


def mask_put_supported(node):
    """index_put with boolean masks compiles as one mask, the only index, whose values broadcast
    over the selected count (x[mask] = v with one v for every selected row); other masked puts
    depend on how many elements the mask selects."""
    vals = [i.meta.get("val") if isinstance(i, torch.fx.Node) else None for i in node.args[1]]
    if not any(v is not None and v.dtype in (torch.bool, torch.uint8) for v in vals):
        return True
    given = [(p, v) for p, v in enumerate(vals) if v is not None]
    if len(given) != 1:
        return False
    p, mask = given[0]
    self_shape = list(node.args[0].meta["val"].shape)
    values = node.args[2].meta["val"]
    target = self_shape[:p] + [1] + self_shape[p + mask.dim():]
    try:
        return list(torch.broadcast_shapes(target, values.shape)) == target
    except RuntimeError:
        return False
