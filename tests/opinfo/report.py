"""What a run of the OpInfo suite says: the status of each (op, dtype), the one-line summary that
closing notes quote, and the JSON and markdown files of --out.
"""
import collections
import json

from tests.opinfo.check import STATUSES, worst


def unit_statuses(records):
    """{(key, dtype): status}, each the worst over its samples."""
    grouped = collections.defaultdict(list)
    for r in records:
        grouped[(r["op"], r["dtype"])].append(r["status"])
    return {unit: worst(s) for unit, s in grouped.items()}


def fully_compiled(statuses):
    """(ops whose every sample of every dtype passes, ops with any sample that was not skipped)."""
    per_op = collections.defaultdict(list)
    for (key, _), status in statuses.items():
        if status != "skip":
            per_op[key].append(status)
    return sum(all(s == "pass" for s in v) for v in per_op.values()), len(per_op)


def aten_call_units(records):
    """The units in which the backend ran some op as an ATen kernel (coil's library calls,
    Inductor's ATen fallbacks)."""
    return {(r["op"], r["dtype"]) for r in records if r.get("aten_calls")}


def own_kernels_only(statuses, records):
    """The fully compiled ops none of whose samples called an ATen kernel."""
    calling = {key for key, _ in aten_call_units(records)}
    return fully_compiled({u: s for u, s in statuses.items() if u[0] not in calling})[0]


def summary_line(meta, statuses, records):
    counts = collections.Counter(statuses.values())
    full, ran = fully_compiled(statuses)
    return (f"opinfo {meta['backend']} {meta['device']} {','.join(meta['dtypes'])}: {len(statuses)} ops·dtypes, "
            f"{counts['pass']} pass, {counts['fallback']} fallback, {counts['mismatch']} mismatch, "
            f"{counts['crash']} crash, {counts['skip']} skip ({meta['seconds']:.0f} s); "
            f"ops fully compiled: {full} of {ran}, {own_kernels_only(statuses, records)} of them without ATen "
            f"kernels (ATen calls in {len(aten_call_units(records))} ops·dtypes)")


def write(out_dir, meta, records, statuses, summary):
    """results.json (every sample) and summary.md (counts and every non-pass unit)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    units = [{"op": k, "dtype": d, "status": s} for (k, d), s in statuses.items()]
    document = {"meta": meta, "summary": summary, "units": units, "samples": records}
    (out_dir / "results.json").write_text(json.dumps(document, indent=1, default=str) + "\n")
    (out_dir / "summary.md").write_text(markdown(meta, records, statuses, summary))


def markdown(meta, records, statuses, summary):
    lines = [f"# OpInfo: {meta['backend']} on {meta['device']}", "",
             f"torch {meta['torch']}, coil {meta['commit']}, {meta['samples']} sample(s) per op and dtype, "
             f"selection: {meta['selection']}.", "", "```", summary, "```", "",
             "| dtype | " + " | ".join(STATUSES[::-1]) + " |", "|---" * (len(STATUSES) + 1) + "|"]
    for dtype in meta["dtypes"]:
        counts = collections.Counter(s for (_, d), s in statuses.items() if d == dtype)
        lines.append(f"| {dtype} | " + " | ".join(str(counts[s]) for s in STATUSES[::-1]) + " |")
    graphless = sorted({(r["op"], r["dtype"]) for r in records if r["status"] == "pass" and r.get("graphs") == []}
                       & {u for u, s in statuses.items() if s == "pass"})
    if graphless:
        lines += ["", f"{len(graphless)} passing ops·dtypes handed the backend no graph (Dynamo ran them itself: "
                  f"no-ops, graph breaks): {', '.join(f'{k} {d}' for k, d in graphless)}."]
    first = _first_non_pass(records)
    for status in ("crash", "mismatch", "fallback"):
        chosen = sorted(u for u, s in statuses.items() if s == status)
        if not chosen:
            continue
        lines += ["", f"## {status} ({len(chosen)})", "", "| op | dtype | sample | detail |", "|---|---|---|---|"]
        for unit in chosen:
            r = first[unit]
            detail = r.get("detail", "").replace("|", "\\|")
            lines.append(f"| {unit[0]} | {unit[1]} | {r.get('sample')} | {detail} |")
    blockers = _eager_ops(records)
    if blockers:
        lines += ["", "## ATen ops coil sent to eager, by the ops·dtypes they appear in", ""]
        lines += [f"- {op}: {n}" for op, n in blockers.most_common()]
    by_unit = collections.defaultdict(set)
    for r in records:
        by_unit[(r["op"], r["dtype"])].update(r.get("aten_calls") or ())
    if any(by_unit.values()):
        what = "library calls of coil" if meta["backend"] == "coil" else "ATen fallbacks of Inductor"
        lines += ["", f"## ATen kernels: {what}", ""]
        lines += [f"- {k} {d}: {', '.join(sorted(ops))}" for (k, d), ops in sorted(by_unit.items()) if ops]
    return "\n".join(lines) + "\n"


def _eager_ops(records):
    """Counts the ATen ops named by coil's fallback warnings ("... ops coil does not compile: a, b)"),
    once per op·dtype: the ops whose support would turn the most fallbacks into passes."""
    per_unit = collections.defaultdict(set)
    for r in records:
        _, found, rest = r.get("detail", "").partition("ops coil does not compile: ")
        if r["status"] == "fallback" and found:
            per_unit[(r["op"], r["dtype"])].update(op.strip() for op in rest.split(")")[0].split(","))
    return collections.Counter(op for ops in per_unit.values() for op in ops)


def _first_non_pass(records):
    """Per unit, its first sample of the unit's (worst) status: the one the report shows."""
    statuses = unit_statuses(records)
    first = {}
    for r in records:
        unit = (r["op"], r["dtype"])
        if unit not in first and r["status"] == statuses[unit]:
            first[unit] = r
    return first
