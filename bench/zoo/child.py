"""One model in one process: eager, then each compiled mode's first call on the empty caches the
parent made for this process, then the steady state with the modes taking turns. One JSON line
per step, so that the parent keeps what was measured before a crash or a timeout.

    python -m bench.zoo.child --name hf_gpt2 --size small --device cpu --dtype f32 --modes eager,inductor,coil

Lines: {"step": "eager"}, {"step": "start", "mode"} just before a mode's first call (a process
that dies after it died in that mode), {"step": "first", "mode", ...} and {"step": "turns", ...}.
"""
import argparse
import json
import sys
import time
import warnings

import torch

from bench import measure
from bench.zoo import check, models

TAG = "@zoo "
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}
COMPILE = {"inductor": {}, "coil": {"backend": "coil"}}
ROUNDS = 21  # turns of each mode: the medians are over at least this many timed calls


def emit(record):
    print(TAG + json.dumps(record), flush=True)


def error_line(e):
    """An exception as `Type: its first line`, and the compiler's first error where it quotes one
    (Inductor's CppCompileError says only "C++ compile error" on its first line)."""
    lines = str(e).strip().splitlines() or [""]
    detail = next((line.split(" error: ", 1)[1] for line in lines[1:] if " error: " in line), "")
    return f"{type(e).__name__}: {lines[0][:300]}" + (f" (error: {detail[:200]})" if detail else "")


def dynamo_counts():
    """(graph breaks, graphs compiled) that Dynamo counted since counters.clear()."""
    counters = torch._dynamo.utils.counters
    return sum(counters["graph_break"].values()), counters["stats"]["unique_graphs"]


def startup(mode, device):
    """A tiny function compiled once before the model: the imports and one-time set-up a process pays
    once (seconds), kept out of the model's cold compile time."""
    x = torch.randn(16, device=device)
    start = time.perf_counter()
    torch.compile(lambda t: t + 1, **COMPILE[mode])(x)
    measure.sync(device)
    return time.perf_counter() - start


def first_call(mode, model, inputs, want, dtype, device):
    """The mode's first call (tracing and compiling on empty caches, then the run): its record, and
    the compiled model (None where it raised)."""
    record = {"step": "first", "mode": mode, "startup_s": startup(mode, device)}
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, **COMPILE[mode])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            got = compiled(*inputs)
            measure.sync(device)
        except Exception as e:  # the other modes still run
            record["error"] = error_line(e)
            compiled = got = None
        record["cold_s"] = time.perf_counter() - start
    record["graph_breaks"], record["graphs"] = dynamo_counts()
    if mode == "coil":
        record.update(check.coil_messages(caught))
    if got is not None:
        record.update(check.compare(got, want, dtype))
    return record, compiled


def turns(fns, inputs, device):
    """{"step": "turns", "ms": {mode: median}, "quartiles": {mode: [q1, q3]}}: the modes taking turns
    in this process, each call on the next of several input sets (bench.measure.interleaved_ms)."""
    before = dynamo_counts()[1]
    taken = measure.interleaved_ms(fns, measure.input_sets(inputs, device), device, rounds=ROUNDS)
    return {"step": "turns", "ms": {m: ms for m, (ms, _, _) in taken.items()},
            "quartiles": {m: [q1, q3] for m, (_, q1, q3) in taken.items()},
            "recompiled": dynamo_counts()[1] - before}  # graphs compiled again while timing: a guard that failed


def run(a):
    dtype, device = DTYPES[a.dtype], a.device
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 stays f32 (PyTorch's default)
    if "coil" in a.modes:
        import coil

        coil.register()  # a build tree on PYTHONPATH has no entry point
    with torch.no_grad():
        try:
            model, inputs = models.make(a.name, a.size, device, dtype)
            want = model(*inputs)
            measure.sync(device)
        except Exception as e:
            emit({"step": "eager", "error": error_line(e)})
            return
        emit({"step": "eager", "params": sum(p.numel() for p in model.parameters()),
              "outputs": [list(t.shape) for t in measure.outputs(want)]})
        fns = {"eager": model} if "eager" in a.modes else {}
        for mode in [m for m in a.modes if m in COMPILE]:
            emit({"step": "start", "mode": mode})
            record, compiled = first_call(mode, model, inputs, want, dtype, device)
            emit(record)
            if compiled is not None:
                fns[mode] = compiled
        emit(turns(fns, inputs, device))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True, choices=models.NAMES)
    p.add_argument("--size", choices=["full", "small"], required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], required=True)
    p.add_argument("--dtype", choices=sorted(DTYPES), required=True)
    p.add_argument("--modes", required=True, type=lambda s: [m for m in s.split(",") if m])
    run(p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
