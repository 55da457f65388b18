"""An FX graph (Core ATen, from AOTAutograd) written as the program coil._coil compiles.

Nodes take torch.export's serialized form (arguments by schema name, one-key unions such as
{"as_tensor": {"name": ...}}), so the C++ side binds them with the same code as the .pt2
reader. See src/frontend/fx.h for the program's layout.
"""
import json
import math
import operator

import sympy
import torch

from . import _host, _library, _symbols

# torch/_export/serde/schema.py ScalarType numbers.
DTYPES = {
    torch.uint8: 1, torch.int8: 2, torch.int16: 3, torch.int32: 4, torch.int64: 5,
    torch.float16: 6, torch.float32: 7, torch.float64: 8, torch.bool: 12, torch.bfloat16: 13,
}
# coil's dtype names (torch_call's declared outputs).
COIL_DTYPES = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
               torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}
_MEMORY_FORMATS = {torch.contiguous_format: 1, torch.channels_last: 2, torch.channels_last_3d: 3, torch.preserve_format: 4}

# Attention ops whose first output is scaled_dot_product_attention's (the C++ side maps them).
ATTENTION = {
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
}


class Unsupported(Exception):
    """A node or value coil does not take; the adapter leaves it to PyTorch."""


def target_name(target):
    """'torch.ops.aten.add.Tensor' for an ATen overload (or one of coil's own: torch.ops.coil), None
    for anything else."""
    if isinstance(target, torch._ops.OpOverload) and target.namespace in ("aten", "coil"):
        return f"torch.ops.{target.namespace}.{target._opname}.{target._overloadname}"
    return None


def tensor_meta(t):
    if not isinstance(t, torch.Tensor):
        raise Unsupported(f"a {type(t).__name__} value")
    if t.dtype not in DTYPES:
        raise Unsupported(f"dtype {t.dtype}")
    if t.layout != torch.strided:
        raise Unsupported(f"layout {t.layout}")
    try:  # (symbolic sizes as expressions: _symbols)
        sizes, strides = [_symbols.size_json(s) for s in t.shape], [_symbols.size_json(s) for s in t.stride()]
    except _symbols.NotExpressible as e:
        raise Unsupported(str(e)) from None
    return {"dtype": DTYPES[t.dtype], "sizes": sizes, "strides": strides}


def value_name(node):
    """The program's name of a value: a getitem names its producer's i-th output."""
    if node.op == "call_function" and node.target is operator.getitem:
        return f"{node.args[0].name}__{node.args[1]}"
    return node.name


def _encode(value, type_text, device=None):
    if value is None:
        return {"as_none": None}
    if _symbols.is_size_node(value):
        return {"as_sym_int": _size(value)}
    if isinstance(value, torch.fx.Node):
        return {"as_tensor": {"name": value_name(value)}}
    if isinstance(value, bool):
        return {"as_bool": value}
    if isinstance(value, int):
        return {"as_int": value}
    if isinstance(value, float):
        return {"as_float": value if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))}
    if isinstance(value, str):
        return {"as_string": value}
    if isinstance(value, torch.dtype):
        if value not in DTYPES:
            raise Unsupported(f"dtype {value}")
        return {"as_scalar_type": DTYPES[value]}
    if isinstance(value, torch.memory_format):
        return {"as_memory_format": _MEMORY_FORMATS[value]}
    if isinstance(value, torch.layout):
        if value != torch.strided:
            raise Unsupported(f"layout {value}")
        return {"as_layout": 7}
    if isinstance(value, torch.device):
        # A coil graph runs on one device: values PyTorch keeps on the CPU next to device tensors
        # are 0-d scalars (the adapter takes nothing else), made where the graph runs.
        return {"as_device": {"type": "cpu"}} if device is None else device
    if isinstance(value, (list, tuple)):
        items = list(value)
        if any(_symbols.is_size_node(v) for v in items) and "Tensor" not in type_text:
            if not all(_symbols.is_size_node(v) or (isinstance(v, int) and not isinstance(v, bool)) for v in items):
                raise Unsupported(f"a list of sizes {items!r}")
            return {"as_sym_ints": [_size(v) if _symbols.is_size_node(v) else {"as_int": v} for v in items]}
        if any(isinstance(v, torch.fx.Node) for v in items) or "Tensor" in type_text:
            if any(v is None for v in items):
                return {"as_optional_tensors": [_encode(v, "Tensor?", device) for v in items]}
            if not all(isinstance(v, torch.fx.Node) for v in items):
                raise Unsupported("a tensor list with non-tensors")
            return {"as_tensors": [{"name": value_name(v)} for v in items]}
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items) and "float" not in type_text:
            return {"as_ints": items}
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            return {"as_floats": [float(v) for v in items]}
    raise Unsupported(f"an argument {value!r} of type {type(value).__name__}")


def _size(node):
    """A size an FX node computes, as an argument ({"as_int"} or {"as_sym"})."""
    try:
        size = _symbols.size_of(node)
    except _symbols.NotExpressible as e:
        raise Unsupported(str(e)) from None
    return size if isinstance(size, dict) else {"as_int": size}


def _layout(value):
    """The sizes and strides PyTorch gives a traced value, when static: coil lays its result out
    the same way, since later views (and the code after the graph) can see the strides."""
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
        return None
    sizes, strides = list(value.shape), list(value.stride())
    if not all(type(s) is int for s in sizes + strides):
        return None
    return {"sizes": sizes, "strides": strides}


def _symbolic_layout(value):
    """A symbolic tensor's sizes and strides as expressions, or None for any other value."""
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided or not _symbols.is_symbolic(value):
        return None
    try:
        return {"sizes": [_symbols.size_json(s) for s in value.shape], "strides": [_symbols.size_json(s) for s in value.stride()]}
    except _symbols.NotExpressible as e:
        raise Unsupported(str(e)) from None


def _output(name, value):
    entry = {"as_tensor": {"name": name}}
    layout = _layout(value) or _symbolic_layout(value)
    if layout is not None:
        entry["layout"] = layout
    return entry


def _outputs(node):
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        return [_output(f"{node.name}__{i}", v) if isinstance(v, torch.Tensor) else {"as_none": None}
                for i, v in enumerate(val)]
    return [_output(node.name, val)]


# Overloads taking a Python number where the traced one has a Tensor (`x * 2` is traced as
# mul.Tensor with a wrapped number): by which arguments hold numbers.
_SCALAR_OVERLOADS = {
    ("Tensor", ("other",)): "Scalar", ("Tensor_Tensor", ("exponent",)): "Tensor_Scalar",
    ("Tensor_Tensor", ("self",)): "Scalar", ("self", ("other",)): "ScalarOther",
    ("self", ("self",)): "ScalarSelf", ("self", ("other", "self")): "Scalar",
    ("Tensor_mode", ("other",)): "Scalar_mode",
}


# A number as `self` of an op whose Scalar overload takes it second (reflection padding's
# decomposition traces `7 - x` as sub.Tensor(7, x)): (overload packet, overload) -> the
# overload that takes (tensor, number) and computes the same, when `alpha` allows it.
_NUMBER_SELF = {("sub", "Tensor"): "rsub.Scalar", ("mul", "Tensor"): "mul.Scalar", ("add", "Tensor"): "add.Scalar"}


def _swap_number_self(target, bound):
    """(target, bound) with a number `self` moved to `other`, or unchanged."""
    number = bound.get("self")
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not isinstance(bound.get("other"), torch.fx.Node):
        return target, bound
    name = _NUMBER_SELF.get((target.overloadpacket.__name__, target._overloadname))
    if name is None or (name == "add.Scalar" and bound.get("alpha", 1) != 1):
        return target, bound
    packet, overload = name.split(".")
    swapped = dict(bound, self=bound["other"], other=bound["self"])
    return getattr(getattr(torch.ops.aten, packet), overload), swapped


def _bound_arguments(target, node):
    schema = target._schema
    bound = {schema.arguments[i].name: v for i, v in enumerate(node.args)}
    bound.update(node.kwargs)
    return bound


def _retarget_numbers(target, bound):
    """The overload that takes the numbers `bound` holds in Tensor arguments, or `target`."""
    numbers = tuple(sorted(a.name for a in target._schema.arguments
                           if str(a.type) == "Tensor" and isinstance(bound.get(a.name), (int, float))))
    if not numbers:
        return target
    overload = _SCALAR_OVERLOADS.get((target._overloadname, numbers))
    if overload is None or not hasattr(target.overloadpacket, overload):
        raise Unsupported(f"a number for tensor argument(s) {', '.join(numbers)} of {target}")
    return getattr(target.overloadpacket, overload)


def device_json(device):
    """A torch.device in the program's form."""
    return {"as_device": {"type": device.type, "index": device.index if device.type == "cuda" else None}}


# Ops coil compiles as another that computes the same: a lifted constant's copy is a clone.
_SAME_AS = {"lift_fresh_copy.default": "clone.default"}


def node_json(node, device=None):
    """One call_function node in torch.export's serialized form; `device` (device_json): where
    the graph runs, written for every device argument."""
    if target_name(node.target) is None:
        raise Unsupported(f"target {node.target}")
    target, bound = _swap_number_self(node.target, _bound_arguments(node.target, node))
    same = _SAME_AS.get(f"{target._opname}.{target._overloadname}")
    if same is not None:
        packet, overload = same.split(".")
        target = getattr(getattr(torch.ops.aten, packet), overload)
    target = _retarget_numbers(target, bound)
    types = {a.name: str(a.type) for a in target._schema.arguments}
    inputs = [{"name": key, "arg": _encode(value, types.get(key, ""), device)} for key, value in bound.items()]
    return {"target": target_name(target), "name": node.name, "inputs": inputs, "outputs": _outputs(node)}


def _storage(value):
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(value.untyped_storage())


def _owns_storage(value):
    """Whether a traced tensor is its storage's whole and only layout: no view, offset 0, every
    byte of the storage its own."""
    return (isinstance(value, torch.Tensor) and not value._is_view() and value.storage_offset() == 0
            and value.untyped_storage().nbytes() == value.numel() * value.element_size())


def _owners(gm, placeholders):
    """Per storage an FX node's value owns (see _owns_storage), the first such node (views come
    after their base); inputs' storages aside (views of inputs are AOTAutograd's to remake)."""
    inputs = {_storage(p.meta["val"]) for p in placeholders if isinstance(p.meta.get("val"), torch.Tensor)}
    owners = {}
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        if node.op == "call_function" and _owns_storage(value) and _layout(value) is not None \
                and _storage(value) not in inputs:
            owners.setdefault(_storage(value), node)
    return owners


def _base_of(node, owners):
    """The node that owns the storage `node`'s value views (not itself), or None."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or _layout(value) is None:
        return None
    base = owners.get(_storage(value))  # (a functionalized graph's views do not say _is_view())
    if base is None or base is node or base.meta["val"].dtype != value.dtype:
        return None
    return base


def _view_bases(results, owners):
    """Per result that coil returns as a view of another value (which it returns instead), that
    value: a view of another result (eager returns the two sharing memory), or views of an
    intermediate that together are as large as it (a permute or reshape of a training forward's
    activation saved for the backward; attention's q, k and v sliced from one product), which so
    cost no copy and hold no more memory than the copies would. A small part of an intermediate
    is copied out instead of holding the whole alive."""
    bases = {r: _base_of(r, owners) for r in results}
    covered = {}
    for r, base in bases.items():
        if base is not None:
            covered[base] = covered.get(base, 0) + r.meta["val"].numel()
    return {r: base for r, base in bases.items()
            if base is not None and (base in bases or covered[base] >= base.meta["val"].numel())}


def _input_views(results, placeholders, per_call, moves):
    """Per result that views a placeholder passed per call (a partition returning a permute of
    what PyTorch handed it), (that input's index among the call's, the result's storage offset
    from the input's)."""
    storages = {}
    for p, position in placeholders.items():
        value = p.meta.get("val")
        if isinstance(value, torch.Tensor) and position in per_call and position not in moves:
            storages.setdefault(_storage(value), (per_call.index(position), value))
    views = {}
    for r in results:
        value = r.meta.get("val")
        if not isinstance(value, torch.Tensor) or _layout(value) is None:
            continue
        found = storages.get(_storage(value))
        if found is not None and found[1].dtype == value.dtype:
            views[r] = (found[0], value.storage_offset() - found[1].storage_offset())
    return views


def program(gm, input_values, frozen, device, input_views=False, any_layout=(), host_calls=None, host_scalars=True):
    """The JSON program of `gm`, whose placeholders have the given example values, to run on
    `device` (a torch.device), and how to call it.

    `frozen` maps placeholder positions to weight keys. Returns a dict: "program" (json text),
    "per_call" (positions of the placeholders passed per call; past the placeholders', values of
    the prologue), "moves" (those of them that are 0-d CPU tensors, copied to `device` per call),
    "prologue" (where the graph computes 0-d CPU values from such values: what the runner
    computes on the host first, _host.prologue), "recipe" (per result: ("coil", i) for the
    i-th coil output, ("view", i, sizes, strides, offset) for a view of it at that storage
    offset from its own, ("arg", j) for placeholder j returned as is, ("const", v) for a
    non-tensor value, ("host", j) for the prologue's j-th value; with `input_views`,
    ("input_view", k, sizes, strides, offset) for a view of the k-th input passed per call, for a
    runner that holds its inputs in their traced layouts),
    "single" (the graph returns one value, not a tuple), "layouts" (per coil
    output, the sizes, strides and device type PyTorch gives it, for the runner to match) and
    "updates" (gm.meta["coil_updates"]: (result index, placeholder position) of each input's new
    value, see _updates) and "any_layout" (result index -> coil output, for the results among
    `any_layout` whose strides coil picks: a training forward's saved activations, which no view
    and no other result shares; Compiled.output_strides says what they got).

    `host_scalars`: whether 0-d CPU results are computed on the host (_host), where coil has
    other outputs to compute.

    `host_calls`, where given (a list), takes the functions of the library calls the program
    makes as steps of coil's plan (torch_call nodes, _library.torch_call), in their index order;
    the values those calls pass around coil's buffers (_library.Stash) are then not the
    program's: the entry's "stash" holds them, and the recipe has ("stash", name) for a result
    among them.
    """
    inputs, weights, per_call, moves, nodes = [], [], [], [], []
    where = device_json(device)
    placeholders = {}
    stash = _library.Stash() if host_calls is not None else None
    around = {}  # values passed around coil's buffers: node -> ("arg", position) or ("stash", name)
    # 0-d CPU values computed on the host before the run (_host), and those of them the program
    # reads (inputs passed per call, after the call's arguments)
    host = _host.scalars(gm, input_values, frozen, device) if host_scalars else set()
    read = {n for n in host if any(u not in host and u.op != "output" for u in n.users)}
    prologue = []
    arguments = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            position = len(placeholders)
            placeholders[node] = position
            value = input_values[position]
            if isinstance(value, torch.SymInt):  # a size: coil binds it from its inputs' shapes
                continue
            if stash is not None and not _library.static(value, device) and _library.passed_around(node):
                around[node] = ("arg", position)  # (a backward's random state: only library calls read it)
                continue
            if node in host and node not in read:
                continue
            entry = {"name": node.name, "meta": tensor_meta(value)}
            if position in frozen:
                weights.append(dict(entry, key=frozen[position]))
            else:
                inputs.append(entry)
                per_call.append(position)
                if value.device != device:
                    moves.append(position)
        elif node.op == "call_function":
            if node.target is operator.getitem or _symbols.is_size_node(node) or _symbols.is_assertion(node):
                continue  # (sizes are written as expressions where they are read)
            if node in host:
                prologue.append(node)
                if node in read:
                    inputs.append({"name": value_name(node), "meta": tensor_meta(node.meta["val"])})
                    per_call.append(arguments + len(prologue) - 1)
                    moves.append(per_call[-1])
                continue
            if host_calls is not None and _library.is_library_call(node):
                program_node, call = _library.torch_call(node, len(host_calls), COIL_DTYPES, device, stash, around)
                nodes.append(program_node)
                host_calls.append(call)
                continue
            nodes.append(node_json(node, where))
        elif node.op == "output":
            results = node.args[0]
        else:
            raise Unsupported(f"a {node.op} node")
    single = not isinstance(results, (list, tuple))
    outputs, recipe, layouts = [], [], []
    updates = dict(gm.meta.get("coil_updates", ()))  # result index -> the placeholder it updates
    listed = [results] if single else results
    computed = [r for i, r in enumerate(listed)
                if isinstance(r, torch.fx.Node) and r not in placeholders and r not in around and r not in host and i not in updates
                and not _symbols.is_size_node(r)]
    views = _view_bases(computed, _owners(gm, placeholders))
    of_inputs = _input_views(computed, placeholders, per_call, moves) if input_views else {}
    coil_index = {}  # program value name -> its index among coil's outputs

    def coil_output(node):
        name = value_name(node)
        if name not in coil_index:
            coil_index[name] = len(outputs)
            outputs.append(name)
            value = node.meta.get("val")
            layout = _layout(value) or _symbolic_layout(value)  # (a symbolic one evaluated per call: _runner)
            layouts.append(dict(layout, device=value.device.type, dtype=str(value.dtype).removeprefix("torch.")) if layout else None)
        return coil_index[name]

    for index, r in enumerate(listed):
        if _symbols.is_size_node(r) or isinstance(r, torch.SymInt):
            # (a training forward's sizes saved for the backward): its value at a call's sizes
            size = _symbols.size_of(r) if isinstance(r, torch.fx.Node) else _symbols.size_json(r)
            recipe.append(("size", size))
            continue
        if isinstance(r, torch.fx.Node) and r in host and r not in placeholders:
            recipe.append(("host", prologue.index(r)))
        elif index in updates and isinstance(r, torch.fx.Node) and r not in placeholders:
            # An input's new value (see _updates): an output of its own, written over the input.
            recipe.append(("coil", len(outputs)))
            outputs.append(value_name(r))
            layouts.append(None)
        elif isinstance(r, torch.fx.Node) and r in placeholders:
            recipe.append(("arg", placeholders[r]))
        elif isinstance(r, torch.fx.Node) and r in around:  # a library call's result coil does not hold
            recipe.append(around[r])
        elif r in of_inputs:
            value = r.meta["val"]
            recipe.append(("input_view", of_inputs[r][0], list(value.shape), list(value.stride()), of_inputs[r][1]))
        elif isinstance(r, torch.fx.Node):
            base = views.get(r)
            if base is None:
                recipe.append(("coil", coil_output(r)))
                continue
            value = r.meta["val"]
            recipe.append(("view", coil_output(base), list(value.shape), list(value.stride()),
                           value.storage_offset() - base.meta["val"].storage_offset()))
        else:
            recipe.append(("const", r))
    if not outputs and (of_inputs or prologue):
        # every result a view of an input, or the host's: coil computes them (a program has outputs)
        if host_calls is not None:
            host_calls.clear()
        return program(gm, input_values, frozen, device, input_views=input_views and not of_inputs, any_layout=any_layout,
                       host_calls=host_calls, host_scalars=False)
    free = _free_layouts(recipe, any_layout, layouts, device.type)
    for k in free.values():
        layouts[k] = None  # handed back as coil lays them out
    program_json = {"name": "fx", "device": where["as_device"], "inputs": inputs, "weights": weights, "nodes": nodes,
                    "outputs": outputs, "any_layout_outputs": sorted(free.values())}
    symbols = _symbols.declarations([v for v in input_values if isinstance(v, (torch.Tensor, torch.SymInt))])
    if symbols:  # each bound at a call from a size of a tensor passed per call, or from a size argument
        bound = _symbols.bare_symbols([input_values[p] if p < len(input_values) else None for p in per_call])
        for position, value in enumerate(input_values):
            if isinstance(value, torch.SymInt) and isinstance(value.node.expr, sympy.Symbol):
                bound.setdefault(value.node.expr.name, (position, -1, 2))
        unbound = [s["name"] for s in symbols if s["name"] not in bound]
        if unbound:
            raise Unsupported(f"size symbols {', '.join(unbound)} that no input's size carries")
        program_json["symbols"] = symbols
    text = json.dumps(program_json)
    made = {"program": text, "per_call": per_call, "moves": moves, "recipe": recipe, "single": single, "layouts": layouts,
            "updates": sorted(updates.items()), "any_layout": sorted(free.items())}
    if around:
        made["stash"] = stash
    if prologue:
        made["prologue"] = _host.prologue(prologue, placeholders)
    if symbols:  # per size symbol, (the index among the inputs passed per call, the dim, size or stride) holding it
        made["symbol_at"] = [bound[s["name"]] for s in symbols]
    return made


def _free_layouts(recipe, any_layout, layouts, device_type):
    """result index -> coil output, for the results in `any_layout` that are a coil output of
    their own: no other result, and no view, is that output (those rely on its traced strides),
    and it has a traced layout on the graph's device."""
    uses = {}
    for step in recipe:
        if step[0] in ("coil", "view"):
            uses[step[1]] = uses.get(step[1], 0) + 1
    free = {}
    for index in any_layout:
        step = recipe[index] if index < len(recipe) else None
        layout = layouts[step[1]] if step is not None and step[0] == "coil" else None
        if layout is not None and uses[step[1]] == 1 and layout["device"] == device_type:
            free[index] = step[1]
    return free
