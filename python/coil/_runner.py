"""Calling a compiled graph: data pointers in, on PyTorch's current CUDA stream; coil's outputs
handed back in the layout PyTorch gives them. Where coil fails at run time, the graph runs in
PyTorch eager instead (with one warning), so the program still gets its answer.
"""
import json

import torch

from . import _coil, _fx, _host, _symbols, _updates

_DTYPES = {code: dtype for dtype, code in _fx.DTYPES.items()}
_COIL_DTYPES = _fx.COIL_DTYPES

def raw_stream():
    """The current CUDA stream of a device, as a CUstream number: torch's C binding where it has
    one (a fraction of torch.cuda.current_stream's cost per call)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def is_cpu_scalar(value):
    """A 0-d CPU tensor: PyTorch lets it meet tensors of any device as a scalar."""
    return isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() == 0


def _significant(sizes, strides):
    """The strides that decide a layout: those of dims longer than 1 (a size-1 dim's stride is
    never read), none for an empty tensor."""
    if any(s == 0 for s in sizes):
        return ()
    return tuple(st for n, st in zip(sizes, strides) if n != 1)


def same_layout(sizes, strides, other_strides):
    return _significant(sizes, strides) == _significant(sizes, other_strides)


def overlaps(sizes, strides):
    """Whether two elements of this layout share memory (each dim's stride, innermost first,
    must step past everything the dims inside it span)."""
    span = 0
    for st, n in sorted((st, n) for n, st in zip(sizes, strides) if n > 1):
        if st <= span:
            return True
        span += (n - 1) * st
    return False


def restride(t, sizes, strides):
    """`t`'s values in a tensor of exactly these sizes and strides (a copy), or None where the
    layout cannot be written (dims overlapping other than by a stride of 0)."""
    if any(n == 0 for n in sizes):
        return torch.empty_strided(sizes, strides, dtype=t.dtype, device=t.device)
    # Broadcast dims (stride 0, from an expand): one slice of them carries every value.
    kept = [d for d, (n, st) in enumerate(zip(sizes, strides)) if not (st == 0 and n > 1)]
    if overlaps([sizes[d] for d in kept], [strides[d] for d in kept]) or any(st < 0 for st in strides):
        return None
    span = 1 + sum((n - 1) * st for n, st in zip(sizes, strides))
    memory = torch.empty(span, dtype=t.dtype, device=t.device)
    memory.as_strided([sizes[d] for d in kept], [strides[d] for d in kept]).copy_(
        t[tuple(slice(None) if d in kept else 0 for d in range(len(sizes)))])
    return memory.as_strided(sizes, strides)


class LayoutError(Exception):
    """coil's output is not what PyTorch traced (dtype or sizes): a bug in coil."""


def _output_fixup(out, want, device, out_device=None):
    """What makes coil's output `out` the tensor PyTorch gives (`want`: the traced dtype, sizes,
    strides and device type; `device`: the graph's): None when it is already, else a function of
    `out`. `out_device`: the device type of coil's output, where `out` is its meta twin."""
    if want is None:
        return None
    if list(out.shape) != want["sizes"] or str(out.dtype).removeprefix("torch.") != want["dtype"]:
        raise LayoutError(f"coil returned {out.dtype}{list(out.shape)} where PyTorch traced {want['dtype']}{want['sizes']}")
    steps = []
    if not same_layout(want["sizes"], want["strides"], out.stride()):
        sizes, strides = want["sizes"], want["strides"]
        if restride(out, sizes, strides) is None:
            raise LayoutError(f"coil cannot lay out an output with strides {strides}")
        steps.append(lambda t: restride(t, sizes, strides))
    if (out_device or out.device.type) != want["device"]:
        # A 0-d CPU value computed on the device; or a value of a graph without inputs, which
        # coil's plan returns on the host (it keeps outputs on the device of its inputs).
        steps.append(lambda t: t.cpu() if want["device"] == "cpu" else t.to(device))
    if not steps:
        return None

    def fix(t):
        for step in steps:
            t = step(t)
        return t
    return fix


def _result(step, outs, args, held, stash, host):
    """A graph result from coil's outputs, the call's arguments, the inputs coil was given
    (`held`, in their traced layouts), the values the library calls passed around coil (`stash`)
    and those its prologue computed on the host (`host`), as _fx.program's recipe says."""
    kind = step[0]
    if kind == "coil":
        return outs[step[1]]
    if kind == "host":
        return host[step[1]]
    if kind == "stash":
        return stash.values[step[1]]
    if kind in ("view", "input_view"):  # sharing the memory of a coil output or of an input, as in eager
        _, i, sizes, strides, offset = step
        base = outs[i] if kind == "view" else held[i]
        return base.as_strided(sizes, strides, base.storage_offset() + offset)
    if kind == "arg":
        return args[step[1]]
    return step[1]


class Runner:
    """Calls a compiled graph with data pointers.

    `entry` is what _fx.program made (how to call the program and what PyTorch traced for its
    outputs). `eager`, where given, is the same graph in PyTorch: it runs instead when coil fails,
    and when `check_inputs` (a partition fed by PyTorch ops) finds an input whose layout differs
    from the traced one in a way a copy cannot mend."""

    def __init__(self, compiled, entry, device, keep, warn, eager=None, check_inputs=False):
        self.compiled, self.entry = compiled, entry
        self.per_call, self.recipe, self.single = entry["per_call"], entry["recipe"], entry["single"]
        program = json.loads(entry["program"])
        names = [s["name"] for s in program.get("symbols", ())]  # the size symbols, in symbol_at's order
        self.moves = set(entry.get("moves", ()))
        self.moved = [i for i in self.per_call if i in self.moves]  # (in coil's input order)
        # what the graph computes on the host before the run (0-d CPU values: _host)
        self.prologue = _host.Prologue(entry["prologue"]) if entry.get("prologue") else None
        self.layouts = entry.get("layouts", [])
        self.device = device
        self.stash = entry.get("stash")  # what its library calls pass around coil (_library.Stash)
        self.cuda = device.index if device.type == "cuda" else None  # the GPU whose current stream runs it
        self.stream = raw_stream() if self.cuda is not None else None
        self.keep = keep  # frozen tensors the compiled graph reads
        self.warn, self.eager = warn, eager
        self.fixups = None  # per coil output, found at the first call
        self.broken = False
        self.lean = False  # calls take _lean's path (after a first call that found they may: lean_next)
        self.lean_next = False
        self.updates = [tuple(u) for u in entry.get("updates", ())]
        # (result index, placeholder position, its index among the inputs coil is given) of the
        # updates coil may compute over their inputs, as its step order allows
        self.over_inputs = [(i, p, self.per_call.index(p)) for i, p in self.updates
                            if self.recipe[i][0] == "coil" and p in self.per_call]
        if self.over_inputs:
            wanted = [-1] * len(self.layouts)
            for index, _, k in self.over_inputs:
                wanted[self.recipe[index][1]] = k
            compiled.compute_outputs_in_inputs(wanted)
        self.inputs = None  # per input passed per call, the sizes and strides it was compiled for
        self.symbolic_inputs = None  # the same where they are expressions of size symbols: evaluated per call's sizes
        if check_inputs:
            metas = [i["meta"] for i in program["inputs"]]
            if any(_symbols.is_symbolic_layout(m) for m in metas):
                self.symbolic_inputs = (metas, names, {})
                self.inputs = []  # (set per call)
            else:
                self.inputs = [(tuple(m["sizes"]), tuple(m["strides"]), _DTYPES[m["dtype"]]) for m in metas]
        self.device_index = self.cuda if self.cuda is not None else -1  # Tensor.get_device()'s
        # per result, the coil output it is (most are), else None: _result's recipe
        self.direct = [step[1] if step[0] == "coil" else None for step in self.recipe]
        # The inputs (by their index among those coil is given) a boxed call hands over to the
        # run, which frees each once its last reader is enqueued: those of a graph fed by PyTorch
        # (a backward graph's saved activations and gradients; their layouts checked per call)
        # that no result or update reads after the run.
        self.consumable = []
        if check_inputs and self.cuda is not None:
            kept = {p for _, p in self.updates} | {step[1] for step in self.recipe if step[0] == "arg"}
            kept |= {self.per_call[step[1]] for step in self.recipe if step[0] == "input_view"}
            self.consumable = [k for k, i in enumerate(self.per_call) if i not in kept and i not in self.moves]
        # per size symbol of a graph of dynamic sizes, (the input among those coil is given, the
        # dim, 0 or 1) whose size (0) or stride (1) is its value at a call
        self.symbol_at = [tuple(at) for at in entry.get("symbol_at", ())]
        # the symbols' names, when an output's layout is one of their expressions (evaluated per call)
        self.symbol_names = names if any(_symbols.is_symbolic_layout(w) for w in self.layouts) else None
        self.sized_fixups = {}  # symbol values -> the fixups at those sizes
        self.plain_sizes = set()  # symbol values at which every result is a coil output as it comes (_lean's)
        # results that are sizes (a training forward's, saved for its backward): their values at
        # this call's symbols, by name
        self.size_names = names if any(step[0] == "size" for step in self.recipe) else None
        self.planned = None  # coil's output layouts, where the fixups were found from them before a first call
        if self.consumable:
            self._plan_fixups()

    def _pointer(self, i, arg, k, inputs):
        """Argument `i` (coil's input `k`) mended: moved to the graph's device, or, for a part fed
        by PyTorch ops, cast and copied into the layout it was traced with (`inputs[k]`)."""
        if i in self.moves:
            return arg.to(self.device)
        sizes, strides, dtype = inputs[k]
        if arg.device != self.device or tuple(arg.shape) != sizes:
            raise LayoutError(f"input {i} is {arg.dtype}{list(arg.shape)} on {arg.device}")
        if arg.dtype != dtype:  # an eager kernel that returns another dtype than its meta says
            arg = arg.to(dtype)
        if not same_layout(sizes, strides, arg.stride()):
            arg = restride(arg, sizes, strides)
            if arg is None:
                raise LayoutError(f"input {i} has strides coil cannot copy into")
        return arg

    def _held(self, args):
        """The tensors coil is given: the arguments it takes, mended where they need it (a
        backward graph takes hundreds a call: one that is as traced costs one comparison of each
        of its properties)."""
        if not self.moves and self.inputs is None:
            return [args[i] for i in self.per_call]
        held = []
        inputs, moves, index = self.inputs, self.moves, self.device_index
        if self.symbolic_inputs is not None:
            inputs = self._inputs_at(args)
        # 0-d CPU values to the device together (one copy a dtype, waiting for nothing), not each
        # in a copy that waits for the stream
        scalars = [i for i in self.moved if args[i].dim() == 0 and args[i].device.type == "cpu"]
        moved = dict(zip(scalars, _host.to_device([args[i] for i in scalars], self.device))) if scalars else {}
        for k, i in enumerate(self.per_call):
            arg = args[i]
            if i in moved:
                arg = moved[i]
            elif i in moves:
                arg = self._pointer(i, arg, k, inputs)
            elif inputs is not None:
                sizes, strides, dtype = inputs[k]
                if not (arg.dtype is dtype and arg.stride() == strides and arg.shape == sizes and arg.get_device() == index):
                    arg = self._pointer(i, arg, k, inputs)
            held.append(arg)
        return held

    def _inputs_at(self, args):
        """The layouts the inputs were compiled for, at this call's sizes (read from the arguments
        as they come; kept per sizes)."""
        metas, names, known = self.symbolic_inputs
        key = self._symbol_values(args, [args[i] for i in self.per_call])
        found = known.get(key)
        if found is None:
            values = dict(zip(names, key))
            found = [(tuple(_symbols.evaluate(s, values) for s in m["sizes"]), tuple(_symbols.evaluate(s, values) for s in m["strides"]),
                      _DTYPES[m["dtype"]]) for m in metas]
            if len(known) < 1024:
                known[key] = found
        return found

    def _symbol_values(self, args, tensors):
        """Each size symbol's value at this call (symbol_at): a size or a stride of one of the
        tensors coil is given, or the call's size argument that is the symbol itself (kind 2)."""
        return tuple(args[k] if kind == 2 else tensors[k].stride(d) if kind else tensors[k].shape[d] for k, d, kind in self.symbol_at)

    def _plan_fixups(self):
        """The fixups found from the compiled program's output layouts, so that a first call too
        hands its inputs over (the first backward of a training loop holds no more memory than
        the next ones); the first run checks its outputs against those layouts."""
        layouts = self.compiled.output_layouts()
        if any(layout is None for layout in layouts) or len(layouts) != len(self.layouts):
            return
        dtypes = {name: dtype for dtype, name in _COIL_DTYPES.items()}
        fixups = []
        for (sizes, strides, dtype), want in zip(layouts, self.layouts):
            twin = torch.empty_strided(sizes, strides, dtype=dtypes[dtype], device="meta")
            fixups.append(_output_fixup(twin, want, self.device, out_device=self.device.type))
        self.fixups, self.planned = fixups, [(tuple(sizes), tuple(strides), dtypes[dtype]) for sizes, strides, dtype in layouts]

    def _check_planned(self, outs):
        for out, (sizes, strides, dtype) in zip(outs, self.planned):
            if out is not None and (tuple(out.shape) != sizes or out.dtype != dtype or (out.numel() and out.stride() != strides)):
                raise LayoutError(f"coil returned {out.dtype}{list(out.shape)} strides {out.stride()} where its program "
                                  f"declares {dtype}{list(sizes)} strides {list(strides)}")
        self.planned = None

    def _run(self, args, handing=False):
        host = self.prologue(args) if self.prologue is not None else ()
        full = [*args, *host] if host else args  # (the prologue's values passed after the arguments)
        held = self._held(full)
        ptrs = [t.data_ptr() for t in held]
        sizes = self._symbol_values(args, held) if self.symbol_at else ()  # (before the inputs are handed over)
        owners = None
        if handing:  # `args` is the caller's list: the run gets the only references
            owners = [None] * len(held)
            per_call = self.per_call
            for k in self.consumable:
                owners[k], held[k], args[per_call[k]], full[per_call[k]] = held[k], None, None, None
        stash = self.stash
        if stash is None:
            outs = self.compiled.run(ptrs, self.stream(self.cuda) if self.stream is not None else 0, owners, sizes)
        else:
            stash.args = args
            try:
                outs = self.compiled.run(ptrs, self.stream(self.cuda) if self.stream is not None else 0, owners, sizes)
            except BaseException:
                stash.values = {}
                raise
            finally:
                stash.args = None
        if self.planned is not None:
            self._check_planned(outs)
        if self.symbol_names is not None:  # the layouts PyTorch gives at this call's sizes (kept per sizes)
            key = tuple(sizes)
            self.fixups = self.sized_fixups.get(key)
            if self.fixups is None:
                values = dict(zip(self.symbol_names, sizes))
                self.fixups = [_output_fixup(o, w if w is None else _symbols.layout_at(w, values), self.device)
                               for o, w in zip(outs, self.layouts)]
                if len(self.sized_fixups) < 1024:
                    self.sized_fixups[key] = self.fixups
                    if self._lean_enough():
                        self.plain_sizes.add(key)
                        self.lean_next = True
        elif self.fixups is None:
            self.fixups = [_output_fixup(o, w, self.device) for o, w in zip(outs, self.layouts)] if self.layouts else []
            self.lean_next = self._lean_enough()
        for k, fix in enumerate(self.fixups):
            if fix is not None:
                outs[k] = fix(outs[k])
        values = dict(zip(self.size_names, sizes)) if self.size_names is not None else None
        results = [outs[d] if d is not None else _symbols.evaluate(step[1], values) if step[0] == "size"
                   else _result(step, outs, args, held, stash, host) for d, step in zip(self.direct, self.recipe)]
        if stash is not None:
            stash.values = {}
        for index, position, k in self.over_inputs:
            if results[index] is None and held[k] is not args[position]:
                results[index] = held[k]  # written over the copy coil was given
        return results

    def _finish(self, results, args):
        results = _updates.finish(results, args, self.updates)
        return results[0] if self.single else tuple(results)

    def _eager(self, args):
        results = self.eager(*args)
        return results if self.single else _updates.finish(results, args, self.updates)

    def _lean_enough(self):
        """Whether calls after the first need none of _run's steps but the run: every result a coil
        output as it comes back (at the sizes of the call that found the fixups), nothing moved,
        checked, computed first, stashed or written back."""
        return (self.prologue is None and not self.moves and self.inputs is None and self.stash is None
                and self.size_names is None and not self.updates and self.planned is None
                and all(f is None for f in self.fixups) and all(d is not None for d in self.direct))

    def _lean(self, args):
        """A call of a runner _lean_enough: a tiny graph's call costs its run and little more. A
        graph of symbolic sizes reads its symbols' values; at sizes whose outputs' layouts a first
        call has not yet found plain (`plain_sizes`) it takes the whole path."""
        tensors = [args[i] for i in self.per_call]
        stream = self.stream(self.cuda) if self.stream is not None else 0
        if self.symbol_at:
            sizes = self._symbol_values(args, tensors)
            if self.symbol_names is not None and sizes not in self.plain_sizes:
                return self._finish(self._run(args), args)
            outs = self.compiled.run([t.data_ptr() for t in tensors], stream, None, sizes)
        else:
            outs = self.compiled.run([t.data_ptr() for t in tensors], stream)
        return outs[self.direct[0]] if self.single else tuple([outs[d] for d in self.direct])

    def __call__(self, *args):
        if self.lean:
            try:
                return self._lean(args)
            except (LayoutError, _coil.CoilError) as e:
                if self.eager is None:
                    raise
                return self._fall_back(e, args)
        if self.broken:
            return self._eager(args)
        if self.eager is None:
            results = self._finish(self._run(args), args)
            self.lean = self.lean_next
            return results
        try:
            results = self._finish(self._run(args), args)
            self.lean = self.lean_next
            return results
        except (LayoutError, _coil.CoilError) as e:
            return self._fall_back(e, args)

    def _fall_back(self, error, args):
        self.warn(f"coil: a compiled graph runs in PyTorch eager from here on: {error} (a bug in coil)")
        self.broken, self.lean = True, False
        return self._eager(args)

    def boxed(self, args):
        """A call with the arguments in a list the call owns (AOTAutograd's boxed convention):
        the inputs in `consumable` are freed as soon as the run is done with them. Not on a first
        call whose outputs' layouts were not known before it (it may still fall back to eager);
        an earlier run's error is raised before anything is handed over, so eager can still run
        instead."""
        if self.broken or not self.consumable or self.fixups is None:
            return self(*args)
        try:
            self.compiled.check_pending()
        except _coil.CoilError as e:
            if self.eager is None:
                raise
            return self._fall_back(e, args)
        try:
            return self._finish(self._run(args, handing=True), args)
        except (LayoutError, _coil.CoilError) as e:
            self.broken, self.lean = True, False
            raise RuntimeError(f"coil: a compiled graph failed after freeing its inputs, so PyTorch eager cannot run "
                               f"it instead: {e} (a bug in coil)") from e
