"""A worker process of the OpInfo suite: reads (op, dtype) requests as JSON lines on stdin and
answers with JSON lines, one event at a time, so that the parent knows which sample was running
when a worker dies or hangs.

    python -m tests.opinfo.worker --device cpu --backend coil --samples 2 [--grad]

Request: {"op": KEY, "dtype": "f32", "seed": S}. Answers: {"event": "ready"} once op_db is loaded,
then per request {"event": "start", "sample": i} before each sample, {"event": "result", ...}
after it, and {"event": "done"}. The answers go to the process's original stdout; anything the
libraries print goes to stderr (the worker's log), which keeps the protocol clean.
"""
import argparse
import faulthandler
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.opinfo.ops import DTYPES, load_ops  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--samples", type=int, required=True)
    parser.add_argument("--grad", action="store_true", help="compare the samples' gradients")
    options = parser.parse_args()

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    faulthandler.enable()  # a segfault leaves its Python stack in the log the parent reads

    import torch

    from tests.opinfo.check import Backend, run_unit

    ops = load_ops()
    backend = Backend(options.backend)
    answers.write(json.dumps({"event": "ready"}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        units = run_unit(ops[request["op"]], options.device, DTYPES[request["dtype"]], options.samples,
                         backend, request["seed"], options.grad)
        for kind, value in units:
            event = {"event": "start", "sample": value} if kind == "start" else dict(value, event="result")
            answers.write(json.dumps(event, default=str) + "\n")
        answers.write(json.dumps({"event": "done"}) + "\n")
        if options.device == "cuda" and not _cuda_healthy(torch):
            return 3  # a sticky CUDA error poisons every later sample: the parent starts a new worker
    return 0


def _cuda_healthy(torch):
    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


if __name__ == "__main__":
    sys.exit(main())
