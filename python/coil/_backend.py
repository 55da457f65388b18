"""The torch.compile backend: AOTAutograd with the Core ATen decompositions hands each forward
graph here; nodes coil takes are compiled in C++ (coil._coil), the rest stay in PyTorch eager.
"""
import copy
import functools
import operator
import os
import sys
import warnings

import torch

from . import _cache, _coil, _fx

_OPTIONS = {"freeze", "autotune", "cache_dir", "fallback"}
_MODES = {None, "default", "max-autotune", "max-autotune-no-cudagraphs"}
_told = set()


def _say_once(key, message):
    if key not in _told:
        _told.add(key)
        warnings.warn(message, stacklevel=3)


def _debug():
    return bool(os.environ.get("COIL_DEBUG"))


def _check_options(mode, options):
    if mode not in _MODES:
        raise ValueError(f"coil: mode {mode!r} is not supported (use one of "
                         f"{sorted(m for m in _MODES if m)}; CUDA graphs (reduce-overhead) are not there yet)")
    options = dict(options or {})
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"coil: unknown option(s) {sorted(unknown)}; coil takes {sorted(_OPTIONS)}")
    if options.get("fallback", "eager") not in ("eager", "error"):
        raise ValueError("coil: option 'fallback' is 'eager' (unsupported nodes run in PyTorch) or 'error'")
    return options


def _decompositions():
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    # Keep attention whole: coil has a fused kernel for it.
    for op in (torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,):
        table.pop(op, None)
    return table


def _device_of(values):
    """The device type of a graph whose tensors are all on one device, else None."""
    devices = {v.device for v in values if isinstance(v, torch.Tensor)}
    if len(devices) > 1:
        return None
    return devices.pop().type if devices else "cpu"


def _node_supported(node, device):
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return _node_supported(node.args[0], device)
    try:
        if not _coil.supported(_fx.node_json(node)["target"]):
            return False
    except _fx.Unsupported:
        return False
    if node.target.name() in _fx.ATTENTION and any(u.args[1] != 0 for u in node.users):
        return False  # its logsumexp (training) is read
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    try:
        for v in tensors:
            _fx.tensor_meta(v)
    except _fx.Unsupported:
        return False
    return all(v.device.type == device for v in tensors)


def _raw_stream():
    """The current CUDA stream of a device, as a CUstream number: torch's C binding where it has
    one (a fraction of torch.cuda.current_stream's cost per call)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


class _Runner:
    """Calls a compiled graph with data pointers, on PyTorch's current CUDA stream."""

    def __init__(self, compiled, entry, device, keep):
        self.compiled, self.entry = compiled, entry
        self.per_call, self.recipe, self.single = entry["per_call"], entry["recipe"], entry["single"]
        self.cuda = device.index if device.type == "cuda" else None  # the GPU whose current stream runs it
        self.stream = _raw_stream() if self.cuda is not None else None
        self.keep = keep  # frozen tensors the compiled graph reads

    def __call__(self, *args):
        ptrs = [args[i].data_ptr() for i in self.per_call]
        outs = self.compiled.run(ptrs, self.stream(self.cuda) if self.stream is not None else 0)
        results = [outs[i] if kind == "coil" else args[i] if kind == "arg" else i for kind, i in self.recipe]
        return results[0] if self.single else tuple(results)


def _program(gm, values, frozen_positions):
    """What a compiled graph is made from: the program text and how to call it (kept by _cache)."""
    frozen = {i: f"frozen{i}" for i in frozen_positions}  # placeholder position -> weight key
    text, per_call, recipe, single = _fx.program(gm, values, frozen)
    return {"program": text, "per_call": per_call, "recipe": recipe, "single": single}


def _load(entry, device, where, options, frozen_tensors, kept=False):
    """The runner of a program (`entry`) on the device of `where` (a torch.device); `kept`: the
    program came from the cache (AOTAutograd skipped)."""
    if where.type == "cuda" and where.index is None:
        where = torch.device("cuda", torch.cuda.current_device())
    keys = [f"frozen{i}" for i in frozen_tensors]
    ptrs = [t.data_ptr() for t in frozen_tensors.values()]
    allow_tf32 = torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32
    compiled = _coil.Compiled(entry["program"], device, device_index=where.index or 0, allow_tf32=allow_tf32,
                              autotune=options.get("autotune", True), weight_keys=keys, weight_ptrs=ptrs,
                              cache_dir=options.get("cache_dir", ""))
    if _debug():
        how = " (its program kept by an earlier compile: AOTAutograd skipped)" if kept else ""
        print(f"coil: compiled a graph{how} on {compiled.device}: {compiled.stats()}", file=sys.stderr)
        print(compiled.graph_text(), file=sys.stderr)
    return _Runner(compiled, entry, where, list(frozen_tensors.values()))


def _compile_whole(gm, values, device, options, frozen_tensors):
    entry = dict(_program(gm, values, frozen_tensors), device=device)
    where = next((v.device for v in values if isinstance(v, torch.Tensor)), torch.device(device))
    return _load(entry, device, where, options, frozen_tensors)


def _placeholder_values(gm):
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _fallback_report(gm, unsupported):
    ops = sorted({str(n.target) for n in unsupported if n.target is not operator.getitem})
    message = f"coil: {len(unsupported)} node(s) of this graph run in PyTorch eager (ops coil does not compile: {', '.join(ops)})"
    _say_once(("fallback", id(gm)), message)
    if _debug():
        for n in unsupported:
            print(f"coil: eager: {n.format_node()}", file=sys.stderr)


def _compile_forward(gm, options, frozen_tensors):
    """AOTAutograd's forward compiler: the whole graph, or its coil-able partitions."""
    values = _placeholder_values(gm)
    device = _device_of(values)
    if device is None or device not in ("cpu", "cuda") or any(not isinstance(v, torch.Tensor) for v in values):
        _say_once(("inputs", id(gm)), "coil: this graph has inputs coil does not take (mixed devices or "
                  "non-tensor/symbolic values); it runs in PyTorch eager")
        return gm
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    unsupported = [n for n in calls if not _node_supported(n, device)]
    if not calls:
        return gm
    if not unsupported:
        return _compile_whole(gm, values, device, options, frozen_tensors)
    if options.get("fallback", "eager") == "error":
        raise _coil.CoilError(f"coil: ops coil does not compile: {sorted({str(n.target) for n in unsupported})}")
    _fallback_report(gm, unsupported)
    return _partition(gm, device, options)


def _partition(gm, device, options):
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return _node_supported(node, device)

    partitioner = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True)
    split = partitioner.fuse_partitions(partitioner.propose_partitions())
    for node in list(split.graph.nodes):
        if node.op != "call_module":
            continue
        sub = getattr(split, node.target)
        values = [a.meta.get("val") for a in node.args]
        if any(not isinstance(v, torch.Tensor) for v in values):
            continue
        runner = _compile_whole(sub, values, device, options, {})
        delattr(split, node.target)  # a plain attribute from here on, called without nn.Module hooks
        setattr(split, node.target, runner)
    split.recompile()
    return split


def _wants_grad(example_inputs):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def _symbolic(value):
    if isinstance(value, torch.SymInt):
        return True
    return isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape)


class _PerShape:
    """A graph Dynamo traced with symbolic sizes, compiled for each concrete shape it meets
    (coil compiles static shapes; Dynamo's guards still decide when the graph applies)."""

    def __init__(self, gm, options):
        self.gm, self.options, self.compiled = gm, options, {}

    def __call__(self, *args):
        key = tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else a for a in args)
        fn = self.compiled.get(key)
        if fn is None:
            gm, positions = _specialize(self.gm, args)
            fn = backend(gm, [args[i] for i in positions], options=self.options)
            self.compiled[key] = fn = (fn, positions)
        run, positions = fn
        return run(*[args[i] for i in positions])


def _specialize(gm, args):
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


def backend(gm, example_inputs, mode=None, options=None):
    """torch.compile(model, backend="coil"): a Dynamo backend."""
    options = _check_options(mode, options)
    if any(_symbolic(v) for v in example_inputs):
        return _PerShape(gm, options)
    if _wants_grad(example_inputs):
        _say_once("grad", "coil: this graph needs gradients, which coil does not compile yet (training support "
                  "comes later): it runs in PyTorch. Use torch.no_grad() or torch.inference_mode() for coil.")
        return gm.forward
    frozen = {}
    if options.get("freeze"):
        # Prepared here: the forward compiler runs under AOTAutograd's fake mode.
        frozen = {i: t.detach().contiguous() for i, t in enumerate(example_inputs) if isinstance(t, torch.nn.Parameter)}
    key = _cache.graph_key(gm, example_inputs, mode, options)
    entry = _cache.load(key, options.get("cache_dir", "")) if key else None
    if entry is not None:  # a warm start: AOTAutograd made this program before
        where = example_inputs[0].device if example_inputs else torch.device(entry["device"])
        return _load(entry, entry["device"], where, options, frozen, kept=True)
    direct = []  # the runner, when AOTAutograd's wrappers have nothing to do around it
    from torch._functorch.aot_autograd import aot_module_simplified

    def forward_compiler(fx_gm, _inputs):
        compiled = _compile_forward(fx_gm, options, frozen)
        if isinstance(compiled, _Runner) and _cache.runs_directly(fx_gm, example_inputs):
            direct.append(compiled)
            if key:
                _cache.store(key, options.get("cache_dir", ""), compiled.entry)
        return compiled

    wrapped = aot_module_simplified(gm, example_inputs, fw_compiler=forward_compiler,
                                    inference_compiler=forward_compiler, decompositions=_decompositions())
    return direct[0] if direct else wrapped


def compile(model, *, mode=None, options=None, dynamic=False, fullgraph=False, **more_options):
    """torch.compile(model, backend=coil.backend) with coil's options.

    options: freeze (parameters become constants bound at compile time), autotune (measure
    CUDA kernel candidates, default True), cache_dir, fallback ("eager" or "error").
    """
    options = dict(options or {}, **more_options)
    _check_options(mode, options)
    return torch.compile(model, backend=functools.partial(backend, mode=mode, options=options),
                         dynamic=dynamic, fullgraph=fullgraph)
