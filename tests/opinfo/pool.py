"""Worker processes for the OpInfo suite: units (op, dtype) go to whichever worker is free; a
worker that dies (segfault, abort) or runs past the per-sample timeout is killed and replaced,
and only the unit it was running is marked crash, with the tail of its log as the detail.
"""
import collections
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "opinfo" / "worker.py"
STARTUP_SECONDS = 600  # importing torch, op_db and coil; slow on a loaded 2-core machine


class _Worker:
    def __init__(self, argv, log_path, events):
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd=ROOT, text=True, bufsize=1)
        self.ready = False
        self.unit = self.sample = None
        self.deadline = time.monotonic() + STARTUP_SECONDS
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        for line in self.proc.stdout:
            events.put((self, json.loads(line)))
        events.put((self, None))

    def assign(self, unit, seed, timeout):
        self.unit, self.sample = unit, None
        self.deadline = time.monotonic() + timeout
        self.proc.stdin.write(json.dumps({"op": unit[0], "dtype": unit[1], "seed": seed}) + "\n")
        self.proc.stdin.flush()

    def stop(self, kill=False):
        if not kill:
            self.proc.stdin.close()  # the worker's loop ends at the end of its input
            try:
                self.proc.wait(timeout=60)
                return
            except subprocess.TimeoutExpired:
                pass
        self.proc.kill()
        self.proc.wait()

    def last_words(self):
        """The end of the worker's log: faulthandler's report of a segfault (its first line and the
        innermost frames of the crashing thread), else the last lines, e.g. a Python error."""
        text = Path(self.log_path).read_bytes()[-60000:].decode(errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        fatal = max((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), default=None)
        if fatal is None:
            return " | ".join(lines[-3:])[:800]
        thread = next((i for i in range(fatal, len(lines)) if lines[i].startswith("Current thread")), fatal)
        return " | ".join([lines[fatal]] + lines[thread + 1:thread + 4])[:800]


def run_units(units, seeds, argv, jobs, timeout, log_dir, on_unit):
    """Runs every unit, `jobs` at a time; returns the sample records (with "op" and "dtype").

    argv: the worker's options; seeds: {unit: seed}; on_unit(unit, records) is called as each
    unit ends.
    """
    events = queue.Queue()
    pending = collections.deque(units)
    starts = collections.Counter()
    log_dir.mkdir(parents=True, exist_ok=True)

    def start(slot):
        starts[slot] += 1
        log_path = log_dir / f"worker-{slot}-{starts[slot]}.log"
        return _Worker([sys.executable, str(WORKER), *argv], log_path, events)

    workers = {slot: start(slot) for slot in range(max(1, min(jobs, len(units))))}
    records, current = [], collections.defaultdict(list)

    def finish(slot, crash=None):
        worker = workers[slot]
        unit = worker.unit
        if crash:
            current[unit].append({"sample": worker.sample, "status": "crash", "detail": crash})
        unit_records = [dict(r, op=unit[0], dtype=unit[1]) for r in current.pop(unit, [])]
        records.extend(unit_records)
        on_unit(unit, unit_records)
        worker.unit = None

    def replace(slot):
        workers[slot].stop(kill=True)
        workers[slot] = start(slot)

    try:
        while pending or any(w.unit for w in workers.values()):
            for w in workers.values():
                if w.ready and w.unit is None and pending:
                    unit = pending.popleft()
                    w.assign(unit, seeds[unit], timeout)
            try:
                worker, event = events.get(timeout=1.0)
            except queue.Empty:
                worker, event = None, None
            slot = next((s for s, w in workers.items() if w is worker), None)
            if slot is not None:
                _handle(slot, workers[slot], event, current, finish, replace, timeout)
            now = time.monotonic()
            for slot, w in workers.items():  # an idle worker's deadline is infinite
                if now <= w.deadline:
                    continue
                if not w.ready:
                    raise RuntimeError(f"an OpInfo worker did not start in {STARTUP_SECONDS} s; see {w.log_path}")
                finish(slot, crash=f"timed out: sample ran past {timeout} s")
                replace(slot)
    finally:
        for w in workers.values():
            w.stop(kill=bool(w.unit))
    return records


def _handle(slot, worker, event, current, finish, replace, timeout):
    if event is None:  # the worker's stdout closed: it exited or died
        if not worker.ready:
            raise RuntimeError(f"an OpInfo worker failed to start: {worker.last_words()} (log: {worker.log_path})")
        worker.proc.wait()
        if worker.unit:
            finish(slot, crash=f"worker died (exit {worker.proc.returncode}): {worker.last_words()}")
        replace(slot)
    elif event["event"] == "ready":
        worker.ready = True
        worker.deadline = float("inf")
    elif event["event"] == "start":
        worker.sample = event["sample"]
        worker.deadline = time.monotonic() + timeout
    elif event["event"] == "result":
        current[worker.unit].append({k: v for k, v in event.items() if k != "event"})
    elif event["event"] == "done":
        finish(slot)
        worker.deadline = float("inf")
