"""The torch.compile backend: AOTAutograd with the Core ATen decompositions hands each forward
graph here; nodes coil takes are compiled in C++ (coil._coil), the rest stay in PyTorch eager.
"""
import functools
import logging
import operator
import os
import sys
import time
import warnings

import torch

from . import _cache, _coil, _complex, _decompositions, _dynamic, _fx, _library, _random, _rewrites, _runner, _support, _symbols, _updates

_log = logging.getLogger("coil")

_OPTIONS = {"freeze", "autotune", "cache_dir", "fallback", "cuda_graphs"}
_MODES = {None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"}


class FallbackWarning(UserWarning):
    """Part or all of a graph runs in PyTorch eager instead of coil: ops, dtypes or arguments coil
    does not compile. One warning per graph compiled."""


class CudaGraphWarning(UserWarning):
    """A call of a graph compiled with CUDA graphs (mode="reduce-overhead") launches its kernels
    one by one instead of replaying a graph, for the reason given. One warning per reason and graph."""


class CompileErrorWarning(FallbackWarning):
    """coil failed on a graph it had accepted (a bug in coil, please report it); the graph, or the
    part of it coil took, runs in PyTorch eager instead, so the program still gets its answer."""


def _warn(message, category=FallbackWarning):
    warnings.warn(message, category, stacklevel=3)


def _debug(stage=""):
    """Whether COIL_DEBUG asks for the adapter's output: any value does, but "stats" alone asks
    only for each compiled graph's statistics (stage "stats"; bench.train sets it)."""
    value = os.environ.get("COIL_DEBUG", "")
    return bool(value) and (value != "stats" or stage == "stats")


def _check_options(mode, options):
    if mode not in _MODES:
        raise ValueError(f"coil: mode {mode!r} is not supported (use one of {sorted(m for m in _MODES if m)})")
    options = dict(options or {})
    if mode == "reduce-overhead":
        options.setdefault("cuda_graphs", True)
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"coil: unknown option(s) {sorted(unknown)}; coil takes {sorted(_OPTIONS)}")
    if options.get("fallback", "eager") not in ("eager", "error"):
        raise ValueError("coil: option 'fallback' is 'eager' (unsupported nodes run in PyTorch) or 'error'")
    return options


def _graph_device(values, made=(), default="cpu"):
    """The device a graph runs on: that of its tensors, 0-d CPU tensors aside (PyTorch lets such
    a scalar meet tensors of any device); with tensors on several, the accelerator (the nodes on
    other devices run in PyTorch). A graph without tensor inputs runs where it makes its tensors
    (`made`: the values of its nodes, e.g. torch.full(..., device="cuda"))."""
    def devices_of(vs):
        return {v.device for v in vs if isinstance(v, torch.Tensor) and not _runner.is_cpu_scalar(v)}

    devices = devices_of(values) or devices_of(made)
    device = min(devices, key=lambda d: (d.type == "cpu", str(d))) if devices else torch.device(default)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


@functools.cache
def device_memory(index):
    """The caching allocator that coil's compiled graphs on GPU `index` share, one per process
    and GPU as PyTorch's is: a training step's forward, backward and optimizer graphs (and the
    parts of a split graph) reuse one another's freed blocks instead of each caching its own
    peak. `.stats()` tells what it holds."""
    return _coil.DeviceMemory(index)


def _dump(program, folder):
    """Writes `program` (fx JSON) to `folder` as graph-N.json, N the next free number."""
    os.makedirs(folder, exist_ok=True)
    n = 0
    while True:
        try:
            with open(os.path.join(folder, f"graph-{n}.json"), "x") as f:
                f.write(program)
            return
        except FileExistsError:
            n += 1


def _load(entry, device, options, frozen_tensors, kept=False, eager=None, check_inputs=False, host_calls=()):
    """The runner of a program (`entry`) on `device` (a torch.device); `kept`: the program came
    from the cache (AOTAutograd skipped); `eager`: the graph in PyTorch, run where coil fails;
    `host_calls`: the functions of its torch_call nodes (_library.torch_call)."""
    keys = [f"frozen{i}" for i in frozen_tensors]
    ptrs = [t.data_ptr() for t in frozen_tensors.values()]
    allow_tf32 = torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32
    if os.environ.get("COIL_DUMP_DIR"):  # each program, for `coil compile FILE.json`
        _dump(entry["program"], os.environ["COIL_DUMP_DIR"])
    started = time.perf_counter()
    compiled = _coil.Compiled(entry["program"], device.type, device_index=device.index or 0, allow_tf32=allow_tf32,
                              autotune=options.get("autotune", True), weight_keys=keys, weight_ptrs=ptrs,
                              cache_dir=options.get("cache_dir", ""),
                              memory=device_memory(device.index or 0) if device.type == "cuda" else None,
                              host_calls=list(host_calls))
    if options.get("cuda_graphs") and device.type == "cuda":
        compiled.use_cuda_graphs(lambda message: warnings.warn(f"coil: {message}", CudaGraphWarning, stacklevel=2))
    if _debug("stats"):
        how = " (its program kept by an earlier compile: AOTAutograd skipped)" if kept else ""
        print(f"coil: compiled a graph{how} on {compiled.device} in {(time.perf_counter() - started) * 1e3:.0f} ms: "
              f"{compiled.stats()}", file=sys.stderr)
    if _debug():
        print(compiled.graph_text(), file=sys.stderr)
    warn = functools.partial(_warn, category=CompileErrorWarning)
    return _runner.Runner(compiled, entry, device, list(frozen_tensors.values()), warn, eager, check_inputs)


def _compile_whole(gm, values, device, options, frozen_tensors, check_inputs=False, any_layout=(), hosted=False, eager=None):
    """The runner of `gm` compiled whole; where coil fails on it, `gm` itself (in PyTorch eager,
    with a warning), unless fallback="error". `any_layout`: results whose strides coil picks (a
    training forward's saved activations), reported to AOTAutograd. `hosted`: its library calls
    run as steps of coil's plan (torch_call). `eager`: the graph to run in PyTorch instead of
    `gm` (whose constants were made weights: _dynamic.constants_as_weights)."""
    eager = gm if eager is None else eager
    try:
        frozen = {i: f"frozen{i}" for i in frozen_tensors}  # placeholder position -> weight key
        host_calls = [] if hosted else None
        entry = dict(_fx.program(gm, values, frozen, device, input_views=check_inputs, any_layout=any_layout,
                                 host_calls=host_calls), device=device.type, hosted=bool(host_calls))
        runner = _load(entry, device, options, frozen_tensors, eager=eager, check_inputs=check_inputs, host_calls=host_calls or ())
        if any_layout:
            _report_output_strides(runner)
        return runner
    except (_coil.CoilError, _fx.Unsupported) as e:
        if options.get("fallback", "eager") == "error":
            raise
        if isinstance(e, _coil.LimitError):  # a valid graph too large to compile at once: not a bug
            _warn(f"coil: a graph runs in PyTorch eager instead: {str(e).splitlines()[0]}")
            return eager
        _warn(f"coil: failed to compile a graph, which runs in PyTorch eager instead (a bug in coil; please report "
              f"it): {str(e).splitlines()[0]}", CompileErrorWarning)
        if _debug():
            print(f"coil: {e}", file=sys.stderr)
        return eager


def _report_output_strides(runner):
    """Tells AOTAutograd the strides of a training forward's results (TracingContext.output_strides,
    as Inductor does after its layout choices), so that the backward graph is traced with its
    saved tensors as coil lays them out: those coil picked, None (as traced) for the others."""
    context = torch._guards.TracingContext.try_get()
    if context is None or context.output_strides is None:
        return
    strides = runner.compiled.output_strides()
    picked = dict(runner.entry["any_layout"])
    count = len(runner.recipe) - len(runner.updates)  # the forward's own results (see _updates)
    context.output_strides.extend(
        tuple(strides[picked[i]]) if i in picked and strides[picked[i]] is not None else None for i in range(count))


def _saved_for_backward(gm):
    """The positions among the results of `gm`, a training forward, of the tensors its backward
    reads (from AOTAutograd's metadata of the graph being compiled), or none where it has no such
    metadata."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    try:
        saved = meta.tensors_saved_for_backwards_slice
    except (AttributeError, AssertionError):
        return ()
    results = next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0]
    return range(*saved.indices(len(results))) if isinstance(results, (list, tuple)) else ()


def _placeholder_values(gm):
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _laid_out_as_given(gm, inputs):
    """`gm` with its placeholders' values given the strides of `inputs`: AOTAutograd gives the
    backward compiler its saved tensors as the forward laid them out (_report_output_strides),
    while the graph's own metadata keeps the traced strides."""
    for node, value in zip([n for n in gm.graph.nodes if n.op == "placeholder"], inputs):
        traced = node.meta.get("val")
        if isinstance(value, torch.Tensor) and isinstance(traced, torch.Tensor) and value.stride() != traced.stride():
            node.meta["val"] = value
    return gm


def _node_values(gm):
    """The tensors the graph's calls make (a tuple-valued node counts with each of its tensors)."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function":
            val = n.meta.get("val")
            out.extend(val if isinstance(val, (list, tuple)) else [val])
    return out


def _op_names(nodes):
    return sorted({str(n.target) for n in nodes if n.target is not operator.getitem})


def _fallback_report(gm, unsupported):
    _warn(f"coil: {len(unsupported)} node(s) of this graph run in PyTorch eager (ops coil does not compile: "
          f"{', '.join(_op_names(unsupported))})")
    if _debug():
        for n in unsupported:
            print(f"coil: eager: {n.format_node()}", file=sys.stderr)


def _library_report(library):
    """Library calls are part of the program (see _library): logged, not warned."""
    _log.info("%d node(s) of this graph call PyTorch's library kernels: %s", len(library),
              ", ".join(_op_names(library)))


def _compile_forward(gm, options, frozen_tensors, check_inputs=False, any_layout=()):
    """AOTAutograd's compiler: the whole graph, or its coil-able partitions. `check_inputs`: the
    graph's inputs are checked against their traced layouts at each call (a backward graph's
    saved tensors and gradients come from wherever autograd made them). `any_layout`: results
    whose strides coil may pick, when it compiles the graph whole."""
    gm, updates = _updates.split(gm)  # inputs' new values: results coil writes over the inputs
    updated = {p for _, p in updates}
    frozen_tensors = {i: t for i, t in frozen_tensors.items() if i not in updated}
    values = _placeholder_values(gm)
    device = _graph_device(values, _node_values(gm))
    if device.type not in ("cpu", "cuda"):
        if options.get("fallback", "eager") == "error":
            raise _coil.CoilError(f"coil: device {device} is not supported")
        _warn(f"coil: this graph runs on {device}, which coil does not compile for; it runs in PyTorch eager")
        return _updates.applied(gm, updates)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if not calls:
        return _updates.applied(gm, updates)
    gm = _complex.as_real_pairs(gm, values) or gm
    unsupported = [n for n in gm.graph.nodes if n.op == "call_function" and not _support.node_supported(n, device)]
    if unsupported:
        gm = _decompositions.decompose_unsupported(gm, values, unsupported) or gm
    gm.meta["coil_updates"] = updates  # (the rewrites above make new modules)
    # Saved activations change layout beside cuDNN's convolutions. On the CPU, where oneDNN's
    # layout conversions are cheap, they keep the traced one: there a batch norm's statistics of a
    # channels-last activation become a one-pass Welford column, less accurate than the row
    # form (the zoo's small ResNet-50, two values a channel in its last batch norms, lost its
    # gradients' accuracy).
    any_layout = any_layout if device.type == "cuda" else ()
    seeded = _random.with_seed(gm, device)  # random nodes drawn by coil from a seed given per call
    if seeded is None:
        # A backward graph split into parts takes its arguments in a list (see _boxed).
        list_call = check_inputs and not updates
        return _applied(_compile_module(gm, options, frozen_tensors, check_inputs, device, any_layout, list_call), updates)
    seeded.meta["coil_updates"] = updates
    return _random.seeded(_applied(_compile_module(seeded, options, frozen_tensors, check_inputs, device, any_layout),
                                   updates), device)


def _applied(compiled, updates):
    """`compiled` giving the graph's own results, its inputs' new values written (a runner of the
    whole graph does that itself)."""
    return compiled if isinstance(compiled, _runner.Runner) else _updates.applied(compiled, updates)


def _compile_module(gm, options, frozen_tensors, check_inputs, device, any_layout=(), list_call=False):
    """`gm` compiled whole, or split into the parts coil takes and the rest (called with its
    arguments in one list where `list_call`)."""
    eager = gm
    if options.get("symbolic") and any(n.op == "get_attr" for n in gm.graph.nodes):
        gm, frozen_tensors = _dynamic.constants_as_weights(gm, frozen_tensors)
    values = _placeholder_values(gm)
    unsupported = [n for n in gm.graph.nodes if n.op == "call_function" and not _support.node_supported(n, device)]
    takes_inputs = all(_support.takes_input(n, device) for n in gm.graph.nodes if n.op == "placeholder")
    if not unsupported and takes_inputs and not any(n.op == "get_attr" for n in gm.graph.nodes):
        return _compile_whole(gm, values, device, options, frozen_tensors, check_inputs, any_layout, eager=eager)
    if options.get("symbolic"):  # (compiled per size instead, where it would not compile whole)
        why = [f"ops coil does not compile: {_op_names(unsupported)}"] if unsupported else []
        why += [] if takes_inputs else [f"inputs coil does not take: {[n.name for n in gm.graph.nodes if n.op == 'placeholder' and not _support.takes_input(n, device)]}"]
        why += [f"constants: {[n.name for n in gm.graph.nodes if n.op == 'get_attr']}"] if not why else []
        raise _fx.Unsupported(f"a graph of symbolic sizes with {'; '.join(why)}")
    library = [n for n in unsupported if _library.is_library_call(n)]
    # Views between complex tensors and their real pairs (see _complex) compute nothing: silent.
    eager = [n for n in unsupported if not _library.is_library_call(n) and str(n.target) not in _complex.BOUNDARY]
    if eager and options.get("fallback", "eager") == "error":
        raise _coil.CoilError(f"coil: ops coil does not compile: {_op_names(eager)}")
    if eager:
        _fallback_report(gm, eager)
    if library:
        _library_report(library)
    if len(library) == len(unsupported) and not any(n.op == "get_attr" for n in gm.graph.nodes):
        split = _library.split_reason(gm, library, device, lambda n: _support.takes_input(n, device))
        if split is None:  # one program, its library calls steps of coil's plan (Llama's step made 27 runs split)
            return _compile_whole(gm, values, device, options, frozen_tensors, check_inputs, any_layout, hosted=True)
        _log.info("the graph is split around its library calls: %s", split)
    return _partition(gm, device, options, list_call)


class _ListCall(torch.fx.graph.CodeGen):
    """Generated code that takes the graph's arguments in one list and empties it: each argument
    then lives only until its last reader in the graph is done (fx drops every value after its
    last use), not until the call returns. A backward graph's saved activations go layer by layer."""

    def gen_fn_def(self, free_vars, maybe_return_annotation, **kwargs):
        names = [v.split(":")[0].split("=")[0].strip() for v in free_vars if v != "self"]
        head = f"def {self._func_name}(self, coil_arguments){maybe_return_annotation}:"
        if not names:
            return head + "\n    coil_arguments.clear()"
        return head + f"\n    {', '.join(names)}, = coil_arguments\n    coil_arguments.clear()"


def _partition(gm, device, options, list_call=False):
    """`gm` split into the parts coil compiles, each called by a runner that checks the layout of
    what PyTorch hands it, and the rest, run by PyTorch. `list_call`: the split graph takes its
    arguments in one list, which it empties (_ListCall)."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return _support.node_supported(node, device)

    partitioner = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True)
    split = partitioner.fuse_partitions(_segments(gm, device))
    for node in list(split.graph.nodes):
        if node.op != "call_module":
            continue
        sub = getattr(split, node.target)
        values = [a.meta.get("val") for a in node.args]
        if any(not isinstance(v, torch.Tensor) for v in values):
            continue
        runner = _compile_whole(sub, values, device, options, {}, check_inputs=True)
        if runner is sub:
            continue
        delattr(split, node.target)  # a plain attribute from here on, called without nn.Module hooks
        setattr(split, node.target, runner)
    if list_call:
        split.graph.set_codegen(_ListCall())
        split.list_call = True
    split.recompile()
    return split


_PRODUCTS = (torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default)


def _segments(gm, device):
    """The parts coil compiles. The nodes it does not take delimit segments, in graph order (a
    tuple's getitems count with their call). Each node coil takes joins the segment of its first
    reader (a dropout mask, a value the backward computes again, a weight's cast: beside what
    reads it). Among the nodes read only by the graph's output or by one another, each joins its
    first reader's segment, and one the output alone reads joins the segment of its last input (a
    weight gradient: beside its input gradient, not in a part at the end that keeps every layer's
    output gradient alive until then); a product among them stays beside its inputs even where its
    first reader comes later."""
    from torch.fx.passes.infra.partitioner import Partition

    level, taken = {}, []
    count = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        parent = node.args[0] if node.target is operator.getitem else None
        if parent is not None and parent in level:
            level[node] = level[parent]
        elif not _support.node_supported(node, device):
            count += 1
            level[node] = count
        else:
            taken.append(node)
    segment = {}
    for node in reversed(taken):  # anchored to a reader
        late = [segment[u] if u in segment else level[u] - 1 for u in node.users if u in segment or u in level]
        if late:
            segment[node] = min(late)
    floating = [n for n in taken if n not in segment]  # read by the output, or by such nodes
    early = {}
    for node in floating:
        early[node] = max([segment.get(a, early.get(a, level.get(a, 0))) for a in node.all_input_nodes], default=0)
    for node in reversed(floating):  # with the first reader among them, else after the inputs
        late = [segment[u] for u in node.users if u in early]
        # A product stays beside its inputs, its (smaller) result carried instead: GPT-2's tied
        # head weight, its gradient added to the embedding's at the end, held the [8192, 50257]
        # logits gradient through the whole backward, and a second part padded it again.
        segment[node] = min(late) if late and node.target not in _PRODUCTS else early[node]
    members = {}
    for node in taken:
        if node.target is operator.getitem and node.args[0] in segment:  # with its tuple: no tuple crosses parts
            segment[node] = segment[node.args[0]]
        members.setdefault(segment[node], []).append(node)
    return [Partition(id=k, nodes=group) for k, group in sorted(members.items())]


def _wants_grad(example_inputs):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def _compile_symbolic(gm, example_inputs, mode, options):
    """A graph Dynamo traced with symbolic sizes compiled once for every size (its sizes
    expressions of the size symbols, bound per call from the inputs' shapes), or None where coil
    cannot take it so: graphs that would not compile whole. A training graph's backward, compiled
    at its first call, is compiled per size where it cannot be compiled so (_symbolic_backward)."""
    try:
        return _compile_graph(gm, example_inputs, mode, dict(options, fallback="error", symbolic=True,
                                                              user_fallback=options.get("fallback", "eager")))
    except _DYNAMO_CONTROL:
        raise
    except Exception as e:  # noqa: BLE001 - compiled per size instead
        _log.info("a graph of symbolic sizes is compiled for each size it meets: %s", str(e).splitlines()[0] if str(e) else e)
        return None


def backend(gm, example_inputs, mode=None, options=None):
    """torch.compile(model, backend="coil"): a Dynamo backend."""
    options = _check_options(mode, options)
    if any(_dynamic.symbolic(v) for v in example_inputs):
        def failed(e):
            if options.get("fallback", "eager") == "error":
                raise e
            _warn(f"coil: a graph runs in PyTorch eager at this shape: compiling it for the shape failed: "
                  f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

        return _compile_symbolic(gm, example_inputs, mode, options) or _dynamic.PerShape(
            gm, functools.partial(backend, options=options), failed)
    try:
        return _compile_graph(gm, example_inputs, mode, options)
    except Exception as e:  # noqa: BLE001 - the program must still run; only fallback="error" raises
        if options.get("fallback", "eager") == "error" or isinstance(e, _DYNAMO_CONTROL):
            raise
        _warn(f"coil: failed on a graph, which runs in PyTorch eager instead (a bug in coil; please report it): "
              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", CompileErrorWarning)
        return gm.forward


# Exceptions Dynamo's compile steps raise to steer Dynamo (restart the trace with a Python
# scalar specialized, skip the frame), and those of fake tensors that Dynamo turns into a graph
# break (AOTAutograd tracing a data-dependent op such as narrow at a tensor's value): theirs to
# catch, not failures of coil.
_DYNAMO_CONTROL = (torch._dynamo.exc.RestartAnalysis, torch._dynamo.exc.SkipFrame,
                   *torch._dynamo.exc.exceptions_allowed_to_be_fallback)


def _compile_graph(gm, example_inputs, mode, options):
    gm = _rewrites.recover_addcdiv(gm)
    training = _wants_grad(example_inputs)
    frozen = {}
    if options.get("freeze") and not training:  # a trained parameter changes: frozen only in inference
        # Prepared here: the forward compiler runs under AOTAutograd's fake mode.
        frozen = {i: t.detach().contiguous() for i, t in enumerate(example_inputs) if isinstance(t, torch.nn.Parameter)}
    key = None if training else _cache.graph_key(gm, example_inputs, mode, options)
    entry = _cache.load(key, options.get("cache_dir", "")) if key else None
    if entry is not None:  # a warm start: AOTAutograd made this program before
        device = _graph_device(example_inputs, default=entry["device"])
        return _load(entry, device, options, frozen, kept=True, eager=gm.forward)
    direct = []  # the runner, when AOTAutograd's wrappers have nothing to do around it
    from torch._functorch.aot_autograd import aot_module_simplified

    # The compilers below outlive this call (AOTAutograd keeps them for a lazy backward): they must
    # not hold Dynamo's example inputs, the first call's tensors (GPT-2's first logits, 785 MiB,
    # stayed alive through training).
    example_layouts = _cache.input_layouts(example_inputs)

    def inference_compiler(fx_gm, _inputs):
        compiled = _compile_forward(fx_gm, options, frozen)
        if isinstance(compiled, _runner.Runner) and _cache.runs_directly(fx_gm, example_layouts):
            direct.append(compiled)
            if key and not compiled.entry.get("hosted"):  # (its host calls are functions: not kept)
                _cache.store(key, options.get("cache_dir", ""), compiled.entry)
        return compiled

    def forward_compiler(fx_gm, _inputs):  # a training graph's forward: its outputs include what backward saves
        return _boxed(_compile_forward(fx_gm, options, {}, any_layout=_saved_for_backward(fx_gm)))

    def backward_compiler(fx_gm, inputs):
        if options.get("symbolic"):
            return _symbolic_backward(_laid_out_as_given(fx_gm, inputs), options)
        return _boxed(_compile_forward(_laid_out_as_given(fx_gm, inputs), options, {}, check_inputs=True))

    wrapped = aot_module_simplified(gm, example_inputs, fw_compiler=forward_compiler, bw_compiler=backward_compiler,
                                    inference_compiler=inference_compiler, partition_fn=_partition_joint,
                                    decompositions=_decompositions.core(training), keep_inference_input_mutations=True)
    return direct[0] if direct else wrapped


def _symbolic_backward(gm, options):
    """A backward graph of symbolic sizes compiled once for every size, or, where coil cannot take
    it so, for each size it meets (it is compiled at the first backward, after the forward: the
    whole graph can no longer be compiled per size instead)."""
    try:
        return _boxed(_compile_forward(gm, options, {}, check_inputs=True))
    except _DYNAMO_CONTROL:
        raise
    except Exception as e:  # noqa: BLE001 - compiled per size instead
        _log.info("a backward graph of symbolic sizes is compiled for each size it meets: %s", str(e).splitlines()[0] if str(e) else e)
    fallback = options.get("user_fallback", "eager")
    static = dict(options, symbolic=False, fallback=fallback)

    def failed(e):
        if fallback == "error":
            raise e
        _warn(f"coil: a backward graph runs in PyTorch eager at this shape: compiling it for the shape failed: "
              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

    def compile_static(g, inputs):
        # (the graph's values traced again at these sizes: its placeholders still hold symbolic ones)
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp

        FakeTensorProp(g, mode=FakeTensorMode()).propagate(*inputs)
        compiled = _compile_forward(_laid_out_as_given(g, inputs), static, {}, check_inputs=True)
        if getattr(compiled, "list_call", False):  # a split graph takes its arguments in a list (_ListCall)
            return lambda *args: compiled(list(args))
        return compiled

    return _boxed(_dynamic.PerShape(gm, compile_static, failed))


def _boxed(fn):
    """`fn` called with AOTAutograd's list of arguments (its boxed convention), which it empties
    once the call holds them: saved activations are freed as soon as the backward is done with
    them, not when autograd drops the list."""
    def call(args):
        held = list(args)
        args.clear()
        if isinstance(fn, _runner.Runner):
            return fn.boxed(held)
        if getattr(fn, "list_call", False):  # a split graph (_ListCall)
            return fn(held)
        return fn(*held)

    call._boxed_call = True
    return call


def _partition_joint(joint, joint_inputs, **kwargs):
    """The joint forward-backward graph split in two: min-cut rematerialization, so cheap
    pointwise work the backward needs is computed again there instead of being saved."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return min_cut_rematerialization_partition(joint, joint_inputs, compiler="inductor", **kwargs)


def compile(model, *, mode=None, options=None, dynamic=None, fullgraph=False, **more_options):
    """torch.compile(model, backend=coil.backend) with coil's options.

    options: freeze (parameters become constants bound at compile time), autotune (measure
    CUDA kernel candidates, default True), cache_dir, fallback ("eager" or "error"),
    cuda_graphs (replay each compiled graph's launches as a CUDA graph; mode="reduce-overhead"
    turns it on).
    dynamic: as torch.compile's (None: sizes become symbolic once an input shows a second one).
    """
    options = dict(options or {}, **more_options)
    _check_options(mode, options)
    return torch.compile(model, backend=functools.partial(backend, mode=mode, options=options),
                         dynamic=dynamic, fullgraph=fullgraph)
