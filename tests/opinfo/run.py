"""PyTorch's OpInfo samples (op_db) through torch.compile against eager: coil's differential suite.

    python -m tests.opinfo.run --device cpu --dtypes f32 --samples 1 --jobs 2 --out /tmp/opinfo
    python -m tests.opinfo.run --backend inductor --ops '^(abs|add|sum)$'      # the baseline
    python -m tests.opinfo.run --expected tests/opinfo/expected_failures.txt    # exit 1 on a difference
    python -m tests.opinfo.run --device cuda --jobs 16 --write-expected tests/opinfo/expected_failures.txt
    python -m tests.opinfo.run --grad --dtypes f32 --expected tests/opinfo/expected_grad_failures.txt

Each op of op_db (name and variant), in each dtype it supports on the device, runs its first N
samples in eager and compiled, in worker processes (a sample that segfaults or hangs marks only
its op and dtype crash); see check.py for the statuses. The summary line is printed last. With
--grad, the ops that support autograd, in the dtypes they differentiate, compare the gradients
of their samples' inputs instead (a training graph's backward, compiled by the backend).
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.opinfo import expected, ops, pool, report  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtypes", default=",".join(ops.DEFAULT_DTYPES),
                        help=f"comma-separated, of {','.join(ops.DTYPES)} (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=2, help="samples per op and dtype (default: %(default)s)")
    parser.add_argument("--backend", choices=("coil", "inductor"), default="coil")
    parser.add_argument("--grad", action="store_true", help="compare gradients (ops that support autograd)")
    parser.add_argument("--ops", help="a regex: only ops whose name[.variant] it matches (re.search)")
    parser.add_argument("--shard", type=ops.parse_shard, help="A:B: only the ops whose key hashes to A modulo B")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one sample may take (default: %(default)s)")
    parser.add_argument("--out", type=Path, help="a folder for results.json, summary.md and the workers' logs")
    parser.add_argument("--expected", type=Path, help="an expected-failures file: exit 1 on any difference from it")
    parser.add_argument("--write-expected", type=Path, help="update this expected-failures file from the run")
    args = parser.parse_args(argv)
    args.dtypes = args.dtypes.split(",")
    unknown = [d for d in args.dtypes if d not in ops.DTYPES]
    if unknown:
        parser.error(f"unknown dtype(s) {unknown}; use {','.join(ops.DTYPES)}")
    if args.backend != "coil" and (args.expected or args.write_expected):
        parser.error("the expected-failures file lists coil's failures: use it with --backend coil")
    return args


def main(argv=None):
    began = time.monotonic()
    args = parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("opinfo: --device cuda, but torch sees no GPU")
    all_ops = ops.load_ops()
    keys = ops.select(list(all_ops), args.ops, args.shard)
    units = ops.units(all_ops, keys, args.device, args.dtypes, args.grad)
    if not units:
        sys.exit("opinfo: no op matches the selection")
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="opinfo-"))
    print(f"opinfo: {len(units)} ops·dtypes of {len(keys)} ops, {args.jobs} worker(s), logs in {out_dir / 'logs'}",
          file=sys.stderr)

    progress = _Progress(len(units))
    worker_argv = ["--device", args.device, "--backend", args.backend, "--samples", str(args.samples)] + ["--grad"] * args.grad
    seeds = {u: ops.seed(*u) for u in units}
    records = pool.run_units(units, seeds, worker_argv, args.jobs, args.timeout, out_dir / "logs", progress)
    statuses = report.unit_statuses(records)
    meta = {"backend": args.backend, "grad": args.grad, "device": args.device, "dtypes": args.dtypes, "samples": args.samples,
            "selection": _selection(args), "torch": torch.__version__, "commit": _commit(),
            "jobs": args.jobs, "seconds": round(time.monotonic() - began, 1)}
    summary = report.summary_line(meta, statuses, records)
    if args.out:
        report.write(args.out, meta, records, statuses, summary)

    whole = not (args.ops or args.shard)
    coverage = expected.Coverage(args.device, args.dtypes, args.samples, keys, all_ops, whole)
    status = 0
    if args.expected:
        lines = expected.differences(*expected.read(args.expected), statuses, coverage)
        for line in lines:
            print(f"opinfo: {line}")
        if lines:
            print(f"opinfo: {len(lines)} difference(s) from {args.expected}: fix the regressions; for an entry that "
                  f"now does better, delete or lower its line (or rerun with --write-expected {args.expected})")
            status = 1
    if args.write_expected:
        status = _write_expected(args.write_expected, statuses, coverage) or status
    print(summary)
    return status


def _write_expected(path, statuses, coverage):
    """Merges the run into the expected-failures file; returns an exit status."""
    entries, samples = expected.read(path)
    if samples.get(coverage.device, coverage.samples) != coverage.samples and not coverage.whole:
        print(f"opinfo: not writing {path}: its {coverage.device} entries come from --samples "
              f"{samples[coverage.device]}, and only a run of all ops may change that")
        return 1
    merged = expected.merge(entries, statuses, coverage)
    expected.write(path, merged, dict(samples, **{coverage.device: coverage.samples}))
    print(f"opinfo: wrote {path} ({len(merged)} entries)")
    return 0


class _Progress:
    """Prints each unit that crashed or mismatched, and a count every 50 units, on stderr."""

    def __init__(self, total):
        self.total, self.done = total, 0

    def __call__(self, unit, records):
        self.done += 1
        status = report.unit_statuses(records).get(unit, "skip")
        if status in ("mismatch", "crash"):
            detail = next((r.get("detail", "") for r in records if r["status"] == status), "")
            print(f"opinfo: {unit[0]} {unit[1]}: {status}: {detail[:200]}", file=sys.stderr)
        if self.done % 50 == 0 or self.done == self.total:
            print(f"opinfo: {self.done}/{self.total} ops·dtypes done", file=sys.stderr)


def _selection(args):
    parts = [f"ops matching {args.ops!r}" if args.ops else "", f"shard {args.shard[0]}:{args.shard[1]}" if args.shard else ""]
    return ", ".join(p for p in parts if p) or "all of op_db"


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=pool.ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
