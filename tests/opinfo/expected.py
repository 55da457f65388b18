"""The expected-failures file: every (op, device, dtype) of op_db that does not pass through coil,
with its status. The list only shrinks: a run checked against it fails on a new failure and on
a listed entry that now does better, so that every fix deletes its line.

An entry is "KEY DEVICE DTYPE STATUS" (STATUS one of fallback, mismatch, crash). A run covers the
entries of its device and dtypes for the ops it selected; in a run of all of op_db it also
covers entries of ops no longer in op_db (stale lines, reported as such). Entries a run does
not cover are neither checked nor dropped, so one file holds the CPU and CUDA lists.
"""
from pathlib import Path

from tests.opinfo.check import RANK

FAILURES = ("fallback", "mismatch", "crash")

HEADER = """\
# OpInfo expected failures of coil: every op_db (op, device, dtype) that does not fully compile
# and match eager through torch.compile(backend="coil"), with its worst status over the samples
# run (fallback: parts run in eager; mismatch: wrong values; crash: raised or died).
# Columns: op[.variant] device dtype status. Sorted; one file for every device. A line
# "@samples DEVICE N" says how many samples per op and dtype that device's entries come from:
# a run with another --samples finds other failures, so it is told to use N.
#
# `python -m tests.opinfo.run --expected FILE` fails on any difference: a new non-pass entry (a
# regression) and a listed entry that now does better (a fix: delete or lower its line).
# Regenerate from a run with `--write-expected FILE`: lines of the devices, dtypes and ops the
# run covered are replaced, all other lines are kept (the CPU run keeps the CUDA lines).
"""


def read(path):
    """The entries {(key, device, dtype): status} of an expected-failures file and the samples per
    op and dtype its entries of each device were made with {device: n} (both empty if no file)."""
    entries, samples = {}, {}
    path = Path(path)
    if not path.exists():
        return entries, samples
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if fields[0] == "@samples" and len(fields) == 3 and fields[2].isdigit():
            samples[fields[1]] = int(fields[2])
        elif len(fields) == 4 and fields[3] in FAILURES:
            entries[tuple(fields[:3])] = fields[3]
        else:
            raise ValueError(f"{path}:{number}: want 'op device dtype status' (status: {', '.join(FAILURES)}) "
                             f"or '@samples device n': {line!r}")
    return entries, samples


def write(path, entries, samples):
    lines = [f"@samples {device} {n}" for device, n in sorted(samples.items())] + [""]
    lines += [f"{key} {device} {dtype} {status}" for (key, device, dtype), status in sorted(entries.items())]
    Path(path).write_text(HEADER + "\n" + "\n".join(lines) + "\n")


class Coverage:
    """What one run covered: its device and dtypes, the ops it selected, and whether it
    selected all of op_db (then entries of ops op_db no longer has are covered too)."""

    def __init__(self, device, dtypes, samples, selected, known, whole):
        self.device, self.dtypes, self.samples = device, set(dtypes), samples
        self.selected, self.known, self.whole = set(selected), set(known), whole

    def covers(self, key, device, dtype):
        if device != self.device or dtype not in self.dtypes:
            return False
        return key in self.selected or (self.whole and key not in self.known)


def failures(statuses, device):
    """The entries a run's {(key, dtype): status} make: its non-pass units."""
    return {(key, device, dtype): s for (key, dtype), s in statuses.items() if s in FAILURES}


def differences(expected, samples, statuses, coverage):
    """Lines saying how a run differs from the expected entries it covers; none when it agrees.
    `samples`: the file's samples per device."""
    found = failures(statuses, coverage.device)
    lines = []
    listed = samples.get(coverage.device)
    if listed is not None and listed != coverage.samples:
        lines.append(f"samples: the {coverage.device} entries come from --samples {listed}, this run used "
                     f"--samples {coverage.samples}: rerun with --samples {listed}")
    for entry, want in sorted(expected.items()):
        if not coverage.covers(*entry):
            continue
        got = found.get(entry)
        if got == want:
            continue
        name = " ".join(entry)
        if got is None:
            why = ("no longer runs (op or dtype gone from op_db)" if (entry[0], entry[2]) not in statuses
                   else f"now {statuses[(entry[0], entry[2])]}")
            lines.append(f"fixed: {name}: expected {want}, {why}: delete its line")
        elif RANK[got] < RANK[want]:
            lines.append(f"better: {name}: expected {want}, now {got}: change its line to {got}")
        else:
            lines.append(f"regression: {name}: expected {want}, now {got}")
    for entry, got in sorted(found.items()):
        if entry not in expected:
            lines.append(f"new failure: {' '.join(entry)}: {got} (not in the expected file)")
    return lines


def merge(expected, statuses, coverage):
    """The expected entries with those the run covered replaced by what it found."""
    kept = {entry: s for entry, s in expected.items() if not coverage.covers(*entry)}
    return {**kept, **failures(statuses, coverage.device)}
