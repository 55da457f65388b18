"""The zoo's results: each model's record judged per mode, the markdown table, the JSON and the
summary lines. The machine and version header is the yardstick's (bench/report.py)."""
import datetime
import importlib
import json
import math
import os
import sys

from bench import report as bench_report

COMPILED = ["inductor", "coil"]


def brief(step):
    """One progress line for a child's step."""
    if "error" in step:
        return f"{step.get('mode', step['step'])}: error: {step['error'][:160]}"
    if step["step"] == "first":
        said = f" fallbacks={step['fallback_nodes']} errors={len(step['compile_errors'])}" if step["mode"] == "coil" else ""
        return (f"{step['mode']}: first call {step['cold_s']:.2f} s, ok={step['ok']} cosine={step['cosine']:.5f} "
                f"max_abs={step['max_abs']:.3g} graph_breaks={step['graph_breaks']}{said}")
    if step["step"] == "turns":
        return "ms: " + " ".join(f"{m}={ms:.4g}" for m, ms in step["ms"].items())
    return step["step"] + (f" {step['mode']}" if "mode" in step else "")


def status(record, mode):
    """pass | FAIL (an exception) | FELL BACK (coil failed on a graph and ran it in eager) |
    INACCURATE | - (not run)."""
    cell = record["eager"] if mode == "eager" else record["modes"].get(mode)
    if cell is None:
        return "-"
    if "error" in cell:
        return "FAIL"
    if cell.get("compile_errors"):
        return "FELL BACK"
    return "pass" if mode == "eager" or cell["ok"] else "INACCURATE"


def speedup(record, mode):
    """Eager's median over the mode's, both timed taking turns in the model's process; None where
    the mode did not pass or was not timed."""
    ms = record.get("ms", {})
    if status(record, mode) != "pass" or mode not in ms or "eager" not in ms:
        return None
    return ms["eager"] / ms[mode]


def _versions():
    found = {}
    for name in ("torchvision", "timm", "transformers"):
        try:
            found[name] = importlib.import_module(name).__version__
        except ImportError:
            found[name] = "-"
    return found


def collect(args, load_before):
    """The run's data, its models to come; `load_before`: the 1/5/15-minute load averages when it
    began (with those at its end, they tell whether other work shared the CPU while it ran)."""
    environment = dict(bench_report._environment(args.device), **_versions())
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "device": args.device, "dtype": args.dtype,
            "size": args.size, "modes": args.modes, "command": " ".join(["python -m bench.zoo.run"] + sys.argv[1:]),
            "cpus": os.cpu_count(), "threads": args.threads, "part": args.part, "wall_s": 0.0, "load_before": load_before, "load_after": load_before,
            "environment": environment, "models": []}


def merge(parts):
    """One run's data from its parts (run.py --part), the models in the zoo's order."""
    from bench.zoo.models import NAMES

    first = parts[0]
    if len({(d["device"], d["dtype"], d["size"]) for d in parts}) > 1:
        raise SystemExit("--merge: the parts differ in device, dtype or size")
    records = sorted((r for d in parts for r in d["models"]), key=lambda r: NAMES.index(r["name"]))
    return dict(first, part=None, models=records, wall_s=sum(d["wall_s"] for d in parts), load_after=parts[-1]["load_after"],
                command=" + ".join(d["command"] for d in parts))


def _geomean(values):
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary_lines(data):
    rows, compiled = data["models"], [m for m in COMPILED if m in data["modes"]]
    head = f"zoo {data['device']} {data['dtype']} ({data['size']}): "
    head += ", ".join(f"{m} {sum(status(r, m) == 'pass' for r in rows)}/{len(rows)} pass" for m in compiled)
    speeds = {m: [s for s in (speedup(r, m) for r in rows) if s] for m in compiled}
    head += "; geomean speedup over eager " + " ".join(f"{m} {_geomean(speeds[m]):.2f}x ({len(speeds[m])} models)"
                                                        if speeds[m] else f"{m} - (none timed)" for m in compiled)
    lines = [head]
    both = [r for r in rows if all("cold_s" in r["modes"].get(m, {}) for m in compiled)]
    if len(compiled) == 2 and both:
        ratio = _geomean([r["modes"]["inductor"]["cold_s"] / r["modes"]["coil"]["cold_s"] for r in both])
        lines.append(f"cold compile (first call, empty caches), inductor / coil: geomean {ratio:.2f}x over {len(both)} models")
    if "coil" in compiled:
        fell = [r for r in rows if r["modes"].get("coil", {}).get("fallback_nodes")]
        ops = sorted({op for r in fell for op in r["modes"]["coil"]["fallback_ops"]})
        lines.append(f"coil sent ops to eager on {len(fell)} models" + (f" ({', '.join(r['name'] for r in fell)}): "
                                                                          f"{', '.join(ops)}" if fell else ""))
        failed = [r["name"] for r in rows if status(r, "coil") in ("FAIL", "FELL BACK", "INACCURATE")]
        lines.append(f"coil failed on {len(failed)} models" + (f": {', '.join(failed)}" if failed else ""))
    broken = [f"{r['name']} ({r['modes'][m]['graph_breaks']})" for r in rows for m in compiled[-1:]
              if r["modes"].get(m, {}).get("graph_breaks")]
    lines.append(f"graph breaks: {len(broken)} models" + (f": {', '.join(broken)}" if broken else ""))
    return lines


def _accuracy(cell, dtype):
    if "ok" not in cell:
        return "-"
    return f"cos {cell['cosine']:.5f}" if dtype == "bf16" else f"{cell['rel']:.1e}"


def _num(value, form):
    return "-" if value is None else format(value, form)


def markdown(data):
    env, rows = data["environment"], data["models"]
    compiled = [m for m in COMPILED if m in data["modes"]]
    gpu = data["device"] == "cuda"
    where = f"{env['gpu']} (driver {env['driver']}), host {env['host']} with {env['cpu']}" if gpu else f"{env['cpu']}, host {env['host']}"
    accuracy = ("cosine similarity of the flattened outputs (pass: >= 0.99, no new NaN)" if data["dtype"] == "bf16" else
                "max |compiled - eager| / max |eager| (pass: allclose, rtol 1e-3, atol 1e-3 x max |eager|)")
    threads = f", OMP_NUM_THREADS={data['threads']}" if data.get("threads") else ""
    lines = [f"# coil model zoo: {data['device']}, {data['dtype']}, {data['size']}, {data['date'][:10]}", "",
             f"{where}; torch {env['torch']} (CUDA {env['cuda']}), torchvision {env['torchvision']}, timm {env['timm']}, "
             f"transformers {env['transformers']}, triton {env['triton']}, Python {env['python']}, coil {env['coil']} "
             f"(commit {env['commit']}).", "",
             f"`{data['command']}` took {data['wall_s'] / 60:.1f} min (load average {data['load_before'][0]:.1f} "
             f"before, {data['load_after'][0]:.1f} after){threads}. Random weights from configs (bench/zoo/models.py), "
             "inference under torch.no_grad(). Each model in a process of its own on empty caches; the steady state with "
             f"the modes taking turns there ({'CUDA events' if gpu else 'wall clock'}, median of at least 21 rounds).", "",
             "## Summary", ""]
    busy = max(data["load_before"][0], data["load_after"][0])
    if data["device"] == "cpu" and not data.get("threads") and busy > data.get("cpus", busy):
        lines += [f"Other work shared the {data['cpus']} cores (load average {busy:.1f}): OpenMP's barriers then wait on "
                  "threads the system put aside, which slows the modes that run many small parallel regions (eager, "
                  "Inductor) far more than those that run few; `--threads 1` gives times that compare.", ""]
    lines += [f"- {line}" for line in summary_lines(data)]
    lines += ["", "## Models", "",
              f"Accuracy ({' / '.join(compiled)}): {accuracy}. Speedup: eager's median time over the mode's. Cold compile: "
              "the first call (trace, compile, run) on empty caches, after a tiny function compiled in the same process "
              "(imports, one-time set-up). Fallbacks: the nodes coil sent to PyTorch eager. Graph breaks: Dynamo's, "
              f"with {compiled[-1] if compiled else 'no compiled mode'} (graphs compiled in parentheses).", "",
              "| model | " + " | ".join(["eager"] + compiled) + " | accuracy | eager ms | " +
              " | ".join(f"speedup {m}" for m in compiled) + " | cold compile s " + " / ".join(compiled) +
              " | fallbacks | graph breaks |", "|---" * (len(compiled) * 2 + 7) + "|"]
    for r in rows:
        cells = {m: r["modes"].get(m, {}) for m in compiled}
        coil = cells.get("coil", {})
        breaks = cells[compiled[-1]] if compiled else {}
        lines.append(" | ".join([
            f"| {r['name']}", *[status(r, m) for m in ["eager"] + compiled],
            " / ".join(_accuracy(cells[m], data["dtype"]) for m in compiled),
            _num(r.get("ms", {}).get("eager"), ".3f"), *[_num(speedup(r, m), ".2f") + ("x" if speedup(r, m) else "") for m in compiled],
            " / ".join(_num(cells[m].get("cold_s"), ".1f") for m in compiled),
            f"{coil['fallback_nodes']}" + (f" ({', '.join(coil['fallback_ops'])})" if coil.get("fallback_ops") else "")
            if "fallback_nodes" in coil else "-",
            f"{breaks['graph_breaks']} ({breaks['graphs']})" if "graph_breaks" in breaks else "-"]) + " |")
    problems = [(r["name"], m, why) for r in rows for m in ["eager"] + compiled for why in _problems(r, m)]
    problems += [(r["name"], "timing", r["timing_error"]) for r in rows if "timing_error" in r]
    if problems:
        lines += ["", "## Failures", ""] + [f"- {name} / {mode}: {why}" for name, mode, why in problems]
    return "\n".join(lines) + "\n"


def _problems(record, mode):
    """Why the mode did not pass on the model, and what else coil said."""
    cell = record["eager"] if mode == "eager" else record["modes"].get(mode, {})
    found = [cell["error"]] if "error" in cell else []
    found += [f"fell back: {m}" for m in cell.get("compile_errors", [])] + cell.get("other", [])
    if cell.get("ok") is False:
        found.append(f"inaccurate: {cell['why']}")
    return found


def paths(data, out):
    """Where the markdown and the JSON go: named by device, dtype, date, the size where not the
    device's default, the part (-part1of3), and -run2, ... where the name is taken."""
    out.mkdir(parents=True, exist_ok=True)
    default_size = "full" if data["device"] == "cuda" else "small"
    stem = base = f"zoo-{data['device']}-{data['dtype']}-{data['date'][:10]}" + \
        ("" if data["size"] == default_size else f"-{data['size']}") + \
        (f"-part{data['part'].replace('/', 'of')}" if data.get("part") else "")
    n = 1
    while (out / f"{stem}.json").exists():
        n += 1
        stem = f"{base}-run{n}"
    return out / f"{stem}.md", out / f"{stem}.json"


def write(data, where):
    md, js = where
    md.write_text(markdown(data))
    js.write_text(json.dumps(data, indent=1))
