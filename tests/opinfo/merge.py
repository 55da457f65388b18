"""One report from the results of several runs of the OpInfo suite (shards of op_db run in
separate calls, e.g. Inductor's baseline on the GPU machine, whose commands have a time limit).

    python -m tests.opinfo.merge --out DIR RUN_DIR_OR_RESULTS_JSON...

The runs must share backend, device, dtypes and samples; the summary line is printed last, as
run.py prints it, with the runs' seconds added up.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.opinfo import report  # noqa: E402

SHARED = ("backend", "device", "dtypes", "samples")


def load(path):
    path = Path(path)
    return json.loads((path / "results.json" if path.is_dir() else path).read_text())


def merge(documents):
    """(meta, records) of the runs together; raises ValueError where they differ in SHARED or
    ran one op and dtype twice."""
    first = documents[0]["meta"]
    for doc in documents[1:]:
        differing = [k for k in SHARED if doc["meta"][k] != first[k]]
        if differing:
            raise ValueError(f"the runs differ in {', '.join(differing)}")
    seen, records = set(), []
    for doc in documents:
        units = {(r["op"], r["dtype"]) for r in doc["samples"]}
        twice = units & seen
        if twice:
            raise ValueError(f"{len(twice)} ops·dtypes are in more than one run, e.g. {sorted(twice)[0]}")
        seen |= units
        records += doc["samples"]
    meta = dict(first, seconds=round(sum(d["meta"]["seconds"] for d in documents), 1),
                selection=" + ".join(d["meta"]["selection"] for d in documents),
                commit=",".join(dict.fromkeys(d["meta"]["commit"] for d in documents)))
    return meta, records


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a folder for the merged results.json and summary.md")
    parser.add_argument("runs", nargs="+", help="run folders (--out of run.py) or their results.json")
    args = parser.parse_args(argv)
    try:
        meta, records = merge([load(p) for p in args.runs])
    except ValueError as e:
        parser.error(str(e))
    statuses = report.unit_statuses(records)
    summary = report.summary_line(meta, statuses, records)
    report.write(args.out, meta, records, statuses, summary)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
