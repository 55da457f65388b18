"""One measuring process: one mode, one phase, a list of workloads; one JSON line per result.

    python -m bench.child --mode coil --phase cold|warm|eager --device cuda --names a,b [--quick]
    python -m bench.child --phase turns --modes eager,inductor,coil --device cuda --names a,b

Phases: "eager" measures the ceilings and eager; "cold" runs each workload's first call on the
empty caches the parent made for this mode; "warm" runs the first call again in a new process
on the caches "cold" filled, then times the steady state; "turns" times the steady state of
several modes in one process, taking turns (measure.interleaved_ms); "profile" runs one call
inside cudaProfilerStart/Stop for Nsight Compute. Before the workloads, each process
compiles a tiny function once ("startup": imports and one-time set-up a user pays once per
process, reported apart) and times its per-call cost.
"""
import argparse
import json
import sys
import time
import warnings

import torch

from . import measure, workloads

MODES = {"eager": None, "inductor": {}, "max-autotune": {"mode": "max-autotune-no-cudagraphs"}, "coil": {"backend": "coil"},
         "capture": {}}
# "capture" is the floor under every torch.compile backend's first call: Dynamo's trace and
# AOTAutograd with the Core ATen decompositions coil asks for, then the captured graph run as
# it is (no code generated). Its steady state is not a competitor (see report.OTHERS).
TAG = "@bench "


def emit(record):
    print(TAG + json.dumps(record), flush=True)


def compiler(mode):
    """torch.compile for `mode`, and a function giving the seconds coil's C++ compile took so far
    and the stats of the graphs it compiled (taken by that call)."""
    inside, stats = [0.0], []
    if mode == "coil":
        import coil
        from coil import _backend

        coil.register()  # a no-op where the package is installed (its entry point registers "coil")
        original = _backend._load  # every compiled graph, AOTAutograd's or kept by an earlier process

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                runner = original(*args, **kwargs)
                stats.append(_summary(runner.compiled.stats()))
                return runner
            finally:
                inside[0] += time.perf_counter() - start

        _backend._load = timed

    def taken():
        out = list(stats)
        stats.clear()
        return inside[0], out

    if mode == "capture":
        return (lambda fn: torch.compile(fn, backend=_capture_backend())), taken

    return (lambda fn: torch.compile(fn, **MODES[mode])), taken


def _capture_backend():
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from coil import _decompositions

    def run_as_captured(gm, _example_inputs):
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=run_as_captured, inference_compiler=run_as_captured,
                                     decompositions=_decompositions.core())

    return backend


def _summary(stats):
    """A compile's stats without the per-unit kernel lists: unit count, NVRTC ms (sum and slowest)."""
    units = stats.pop("units", [])
    stats["nvrtc_ms_sum"] = sum(ms for _, ms, _ in units)
    stats["nvrtc_ms_max"] = max((ms for _, ms, _ in units), default=0.0)
    return stats


def first_call(fn, inputs, device):
    """The first call's seconds (tracing, compiling and running) and the coil messages it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        result = fn(*inputs)
        measure.sync(device)
        seconds = time.perf_counter() - start
    return result, seconds, sorted({str(w.message) for w in caught if str(w.message).startswith("coil:")})


def startup(mode, phase, device, compile_fn):
    x = torch.randn(16, device=device)
    tiny = lambda t: t + 1  # noqa: E731
    if mode == "eager":
        return {"workload": "_startup", "overhead_us": measure.per_call_us(lambda: tiny(x), device)}
    fn = compile_fn(tiny)
    _, seconds, _ = first_call(fn, [x], device)
    record = {"workload": "_startup", "startup_s": seconds}
    if phase == "warm":
        record["overhead_us"] = measure.per_call_us(lambda: fn(x), device)
    return record


def one(w, mode, phase, device, compile_fn, coil_seconds):
    record = {"workload": w.name}
    want = w.fn(*w.inputs)
    measure.sync(device)
    if mode == "eager":
        record.update(kind=w.kind, note=w.note)
        if w.kind == "memory":
            record["bytes"] = measure.bytes_moved(w.inputs, want)
        else:
            record["flops"] = measure.flops(w.fn, w.inputs)
        fn = w.fn
    else:
        fn = compile_fn(w.fn)
        before, _ = coil_seconds()
        got, seconds, messages = first_call(fn, w.inputs, device)
        record.update(first_s=seconds, rel_err=measure.rel_error(got, want))
        if mode == "coil":
            after, graphs = coil_seconds()
            record["coil_compile_s"] = after - before
            record["coil_graphs"] = graphs
            record["fallback"] = messages
        del got
    if phase == "profile":  # one call between cudaProfilerStart/Stop, for Nsight Compute (bench/profile.py)
        fn(*w.inputs)
        measure.sync(device)
        torch.cuda.profiler.start()
        fn(*w.inputs)
        measure.sync(device)
        torch.cuda.profiler.stop()
        return record
    if phase != "cold":
        sets = measure.input_sets(w.inputs, device)
        record["ms"], record["reps"] = measure.median_ms(fn, sets, device)
        record["input_sets"] = len(sets)
    return record


def turns(w, compile_fns, device):
    """The steady state of every mode of `compile_fns` ({mode: torch.compile for it, or None for
    eager}) on one workload, taking turns: {workload, turns: {mode: ms}, quartiles: {mode: [q1, q3]}},
    with the modes left out (an error, or a result off eager's) under "skipped"."""
    want = w.fn(*w.inputs)
    fns, record = {}, {"workload": w.name, "turns": {}}
    for mode, compile_fn in compile_fns.items():
        try:
            fn = compile_fn(w.fn) if compile_fn else w.fn
            got = fn(*w.inputs)  # compiled here from the caches the mode's processes filled
            measure.sync(device)
            if measure.rel_error(got, want) > 0.05:
                record.setdefault("skipped", {})[mode] = "its result differs from eager's"
                continue
            fns[mode] = fn
        except Exception as e:  # the other modes still take their turns
            record.setdefault("skipped", {})[mode] = f"{type(e).__name__}: {str(e).strip()[:200]}"
    sets = measure.input_sets(w.inputs, device)
    if fns:
        taken = measure.interleaved_ms(fns, sets, device)
        record["turns"] = {mode: ms for mode, (ms, _, _) in taken.items()}
        record["quartiles"] = {mode: [q1, q3] for mode, (_, q1, q3) in taken.items()}
    return record


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=sorted(MODES))
    p.add_argument("--modes", default="", help="phase turns: the modes taking turns")
    p.add_argument("--phase", choices=["eager", "cold", "warm", "profile", "turns"], required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], required=True)
    p.add_argument("--names", required=True)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32 (PyTorch's default)
    if a.phase == "turns":
        compile_fns = {m: None if m == "eager" else compiler(m)[0] for m in a.modes.split(",") if m}
        with torch.no_grad():
            for name in a.names.split(","):
                try:
                    emit(turns(workloads.build([name], a.device, a.quick)[0], compile_fns, a.device))
                except Exception as e:  # the other workloads still run
                    emit({"workload": name, "error": f"{type(e).__name__}: {str(e).strip()[:300]}"})
                if a.device == "cuda":
                    torch.cuda.empty_cache()
        return 0
    if a.mode is None:
        p.error("--mode is required for this phase")
    compile_fn, coil_seconds = compiler(a.mode)
    with torch.no_grad():
        if a.phase == "eager":
            emit({"workload": "_ceilings", **measure.ceilings(a.device)})
        emit(startup(a.mode, a.phase, a.device, compile_fn))
        for name in a.names.split(","):
            try:
                w = workloads.build([name], a.device, a.quick)[0]
                emit(one(w, a.mode, a.phase, a.device, compile_fn, coil_seconds))
            except Exception as e:  # the other workloads still run
                first_line = (str(e).strip().splitlines() or [""])[0]
                emit({"workload": name, "error": f"{type(e).__name__}: {first_line[:300]}"})
            finally:
                w = None
                if a.device == "cuda":
                    torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
