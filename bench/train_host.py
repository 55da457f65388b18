"""The host's side of a training step in steady state (bench.train's models and step): the
PyTorch calls in one step that synchronize with the GPU (torch.cuda.set_sync_debug_mode, which
PyTorch calls a prototype: it sees PyTorch's own calls, not coil's driver calls), then a loop of
steps with no synchronization between them, which gives the step's wall time and the host's time
to issue each phase (forward with the loss, backward, optimizer with zero_grad). A step whose
wall time is its issue time is host-bound.

    python -m bench.train_host vit_s coil [--steps 10]
"""
import argparse
import statistics
import time
import traceback
import warnings

import torch

from bench import train


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=sorted(train.MODELS))
    parser.add_argument("backend", choices=["inductor", "coil"])
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    if args.backend == "coil":
        import coil

        coil.register()
    torch.backends.cuda.matmul.allow_tf32 = True
    _, loss_of, opt, compiled, update = train.training(args.model, "cuda", args.backend)
    times = {"forward": [], "backward": [], "optimizer": [], "step": []}

    def step(record=False):
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(compiled)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        update()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if record:
            for phase, ms in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2), ("step", t3 - t0)):
                times[phase].append(ms * 1e3)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    syncs = {}  # message -> [count, the first one's stack]

    def show(message, category, filename, lineno, file=None, line=None):
        entry = syncs.setdefault(str(message)[:160], [0, "".join(traceback.format_stack(limit=14)[:-1])])
        entry[0] += 1

    with warnings.catch_warnings():
        warnings.showwarning = show
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    print(f"{args.model} {args.backend}: synchronizing PyTorch calls in a step (the mode's own notice among them):")
    for message, (count, stack) in syncs.items():
        print(f"  {count}x {message}\n{stack}")
    start = time.perf_counter()
    for _ in range(args.steps):
        step(record=True)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) * 1e3 / args.steps
    issued = ", ".join(f"{phase} {statistics.median(ms):.2f}" for phase, ms in times.items())
    print(f"{args.model} {args.backend}: {wall:.2f} ms a step without synchronization between steps; host ms to issue: {issued}")


if __name__ == "__main__":
    main()
