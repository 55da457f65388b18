"""The yardstick's results: one record per workload and mode, the markdown table, the JSON, the
summary lines and the chart."""
import datetime
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OTHERS = ["eager", "inductor", "max-autotune"]


def brief(record):
    if "error" in record:
        return "error: " + record["error"][:160]
    if "turns" in record:
        return " ".join(f"{mode}={ms:.4g}" for mode, ms in record["turns"].items()) + \
            "".join(f" ({mode} skipped: {why[:80]})" for mode, why in record.get("skipped", {}).items())
    parts = [f"{k}={record[k]:.4g}" for k in ("ms", "first_s", "coil_compile_s", "rel_err", "startup_s", "overhead_us",
                                               "copy_gbs", "gemm_tflops") if isinstance(record.get(k), (int, float))]
    return " ".join(parts)


def _run(cmd):
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _environment(device):
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or platform.machine())
    env = {"host": platform.node(), "cpu": f"{cpu} ({os.cpu_count()} threads)", "python": platform.python_version(),
           "torch": torch.__version__, "cuda": torch.version.cuda or "-"}
    if device == "cuda":
        smi = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", "0"]).split(", ")
        env["gpu"], env["driver"] = smi if len(smi) == 2 else (torch.cuda.get_device_name(), "?")
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = "-"
    try:
        import coil

        env["coil"] = coil.__version__
    except ImportError as e:
        env["coil"] = f"not importable ({e})"
    commit = os.environ.get("COIL_COMMIT") or _run(["git", "rev-parse", "--short", "HEAD"])
    if commit and not os.environ.get("COIL_COMMIT") and _run(["git", "status", "--porcelain", "--untracked-files=no"]):
        commit += "+changes"
    env["commit"] = commit or "unknown"
    return env


def _cell(warm, cold, kind, work, ceilings):
    """A mode's numbers for one workload (its warm and cold processes), with its throughput and % of the ceiling."""
    cell = {k: v for k, v in warm.items() if k not in ("first_s", "coil_compile_s", "coil_graphs")}
    for phase, record in (("cold", cold), ("warm", warm)):
        for key in ("first_s", "coil_compile_s", "coil_graphs"):
            if key in record:
                cell[f"{phase}_{key}"] = record[key]
        if "error" in record and "error" not in cell:
            cell["error"] = f"{phase}: {record['error']}"
    errors = [r["rel_err"] for r in (cold, warm) if "rel_err" in r]
    if errors:
        cell["rel_err"] = max(errors)
    if "ms" in cell and work:
        if kind == "memory":
            cell["gbs"] = work / cell["ms"] / 1e6
            cell["pct"] = 100 * cell["gbs"] / ceilings["copy_gbs"]
        else:
            cell["tflops"] = work / cell["ms"] / 1e9
            cell["pct"] = 100 * cell["tflops"] / ceilings["gemm_tflops"]
    return cell


def collect(args, names, results, wall_s):
    """The run's data; where the modes took turns in one process (results["_turns"]), their medians
    there are each cell's "ms", its own process's "ms_alone"."""
    results = dict(results)
    turns = results.pop("_turns", {})
    eager = results["eager"]["warm"]
    ceilings = eager.get("_ceilings", {"copy_gbs": math.nan, "gemm_tflops": math.nan})
    rows = []
    for name in names:
        base = eager.get(name, {})
        kind = base.get("kind", "")
        work = base.get("bytes") or base.get("flops") or 0
        row = {"name": name, "kind": kind, "note": base.get("note", ""), "bytes": base.get("bytes"), "flops": base.get("flops"),
               "modes": {}}
        if turns.get(name, {}).get("skipped"):
            row["turns_skipped"] = turns[name]["skipped"]
        taken = turns.get(name, {}).get("turns", {})
        for mode, phases in results.items():
            warm = phases["warm"].get(name, {"error": "not measured"})
            if mode in taken and "ms" in warm:
                warm = dict(warm, ms=taken[mode], ms_alone=warm["ms"], ms_quartiles=turns[name].get("quartiles", {}).get(mode))
            row["modes"][mode] = _cell(warm, phases.get("cold", {}).get(name, {}), kind, work, ceilings)
        others = [(row["modes"][m]["ms"], m) for m in OTHERS if "ms" in row["modes"].get(m, {})]
        coil = row["modes"].get("coil", {})
        if others and "ms" in coil:
            best_ms, row["best_other"] = min(others)
            row["coil_speedup"] = best_ms / coil["ms"]
        rows.append(row)
    processes = {mode: {"startup_cold_s": phases.get("cold", {}).get("_startup", {}).get("startup_s"),
                        "startup_warm_s": phases["warm"].get("_startup", {}).get("startup_s"),
                        "overhead_us": phases["warm"].get("_startup", {}).get("overhead_us")} for mode, phases in results.items()}
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "device": args.device, "quick": args.quick,
            "command": " ".join(["bench/run"] + sys.argv[1:]), "wall_s": wall_s, "environment": _environment(args.device),
            "ceilings": ceilings, "processes": processes, "workloads": rows}


def _geomean(values):
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def _overlap(row):
    """Whether coil's rounds and the best other mode's overlap (their quartile ranges meet)."""
    coil, best = row["modes"].get("coil", {}), row["modes"].get(row.get("best_other"), {})
    if not coil.get("ms_quartiles") or not best.get("ms_quartiles"):
        return False
    return coil["ms_quartiles"][0] <= best["ms_quartiles"][1] and best["ms_quartiles"][0] <= coil["ms_quartiles"][1]


def summary_lines(data):
    rows = [r for r in data["workloads"] if "coil_speedup" in r]
    slower = [r["name"] for r in rows if r["coil_speedup"] < 1]
    close = [r["name"] for r in rows if r["coil_speedup"] < 1 and _overlap(r)]
    failed = [r["name"] for r in data["workloads"] if "coil_speedup" not in r]
    lines = [f"coil vs the best other mode (median time; >1 means coil is faster): geomean {_geomean([r['coil_speedup'] for r in rows]):.2f}x "
             f"over {len(rows)} workloads; coil slower on {len(slower)}" + (f" ({', '.join(slower)})" if slower else "")
             + (f", {len(close)} of them with quartile ranges overlapping the best other's in the turns ({', '.join(close)})"
                if close else "")
             + (f"; no comparison for {', '.join(failed)}" if failed else "")]
    for other in ("inductor", "max-autotune", "capture"):
        for phase in ("cold", "warm"):
            key = "cold_first_s" if phase == "cold" else "warm_first_s"
            ratios = [r["modes"][other][key] / r["modes"]["coil"][key] for r in data["workloads"]
                      if key in r["modes"].get(other, {}) and key in r["modes"].get("coil", {})]
            if ratios and other == "capture":
                lines.append(f"share of coil's first call ({phase} caches) that Dynamo + AOTAutograd alone take (the capture "
                             f"floor, no code generated): geomean {_geomean(ratios):.2f} over {len(ratios)} workloads")
            elif ratios:
                lines.append(f"compile time (first call, {phase} caches), {other} / coil: geomean {_geomean(ratios):.2f}x "
                             f"over {len(ratios)} workloads")
    return lines


def _rate(value, unit):
    """value in units of 1e9 (GB/s, GFLOP/s) in a readable prefix."""
    for scale, prefix in ((1e3, "T"), (1, "G"), (1e-3, "M")):
        if value >= scale or scale == 1e-3:
            return f"{value / scale:.{1 if value / scale < 100 else 0}f} {prefix}{unit}"


def _ms_cell(cell):
    if "ms" not in cell:
        return "error" if "error" in cell else "-"
    rate = _rate(cell["gbs"], "B/s") if "gbs" in cell else _rate(cell["tflops"] * 1e3, "FLOP/s") if "tflops" in cell else ""
    return f"{cell['ms']:.3f} · {rate} · {cell['pct']:.0f}%" if rate else f"{cell['ms']:.3f}"


def _compile_cell(cell):
    if "cold_first_s" not in cell and "warm_first_s" not in cell:
        return "error: " + cell.get("error", "-")[:120].replace("|", "/") if "error" in cell else "-"
    text = f"{cell.get('cold_first_s', math.nan):.2f} / {cell.get('warm_first_s', math.nan):.2f}"
    if "cold_coil_compile_s" in cell:
        text += f" (C++ {cell['cold_coil_compile_s']:.2f} / {cell.get('warm_coil_compile_s', math.nan):.2f})"
    return text + f" · {cell['rel_err']:.1e}" if "rel_err" in cell else text


def markdown(data):
    env, c = data["environment"], data["ceilings"]
    modes = list(data["processes"])
    compiled = [m for m in modes if m != "eager"]
    gpu = data["device"] == "cuda"
    where = f"{env['gpu']} (driver {env['driver']}), host {env['host']} with {env['cpu']}" if gpu else f"{env['cpu']}, host {env['host']}"
    lines = [f"# coil yardstick: {data['device']}, {data['date'][:10]}{' (quick)' if data['quick'] else ''}", "",
             f"{where}; torch {env['torch']} (CUDA {env['cuda']}), triton {env['triton']}, Python {env['python']}, "
             f"coil {env['coil']} (commit {env['commit']}).", "",
             f"`{data['command']}` took {data['wall_s'] / 60:.1f} min; {'bf16' if gpu else 'fp32'}. Ceilings measured in this run: "
             f"copy {_rate(c['copy_gbs'], 'B/s')} (a large {'device-to-device' if gpu else 'memory'} copy, bytes read + written), "
             f"GEMM {_rate(c['gemm_tflops'] * 1e3, 'FLOP/s')} ({c.get('gemm', '')}).", "", "## Summary", ""]
    lines += [f"- {line}" for line in summary_lines(data)]
    lines += ["", "## Speed", "",
              "Median ms per call (" + ("CUDA events around each call, queue kept full" if gpu else "wall clock per call") +
              "; the modes taking turns in one process, a few calls each round after round, where more than one was "
              "measured — each mode's own process's median is ms_alone in the JSON; each call taking the next of at least "
              "two input sets, enough for 3x the last-level cache where the inputs are smaller), effective GB/s (memory-bound: inputs read and outputs written once) or TFLOP/s "
              "(matrix flops as torch.utils.flop_counter counts them; causal attention counted as full), and % of the ceiling.", "",
              "| workload | " + " | ".join(modes) + " | coil vs best other |", "|---" * (len(modes) + 2) + "|"]
    for r in data["workloads"]:
        ratio = f"{r['coil_speedup']:.2f}x (vs {r['best_other']})" if "coil_speedup" in r else "-"
        lines.append(f"| {r['name']} | " + " | ".join(_ms_cell(r["modes"].get(m, {})) for m in modes) + f" | {ratio} |")
    lines += ["", "## Compile time and error", "",
              "First call (tracing, compiling and the run) in seconds: empty caches / warm caches (a new process); for coil "
              "also the part spent in its C++ compiler; then the max relative error against eager (max |diff| / max |eager|).", "",
              "| workload | " + " | ".join(compiled) + " |", "|---" * (len(compiled) + 1) + "|"]
    for r in data["workloads"]:
        lines.append(f"| {r['name']} | " + " | ".join(_compile_cell(r["modes"].get(m, {})) for m in compiled) + " |")
    lines += ["", "## Per process", "",
              "Start-up: a process's first compile (a tiny function: imports and one-time set-up, paid once per process, "
              "not counted above), empty / warm caches. Per-call cost of that tiny function (x + 1 on 16 elements), wall clock.", "",
              "| mode | start-up (s) | per call (µs) |", "|---|---|---|"]
    for mode, p in data["processes"].items():
        start = "-" if p["startup_cold_s"] is None else f"{p['startup_cold_s']:.2f} / {p['startup_warm_s'] or math.nan:.2f}"
        lines.append(f"| {mode} | {start} | {p['overhead_us'] or math.nan:.1f} |")
    lines += ["", "## Workloads", ""]
    for r in data["workloads"]:
        work = f"{r['bytes'] / 1e6:.1f} MB moved" if r.get("bytes") else f"{r['flops'] / 1e9:.3g} GFLOP" if r.get("flops") else ""
        fallback = r["modes"].get("coil", {}).get("fallback")
        lines.append(f"- {r['name']} ({r['kind']}): {r['note']}; {work}" + (f"; coil fell back: {'; '.join(fallback)}" if fallback else ""))
    for name, prof in data.get("profiles", {}).items():
        lines += ["", f"### Profile: {name}", ""] + prof.get("lines", [])
    return "\n".join(lines) + "\n"


def plot(data, path):
    """A PNG of coil's speed ratio to each other mode per workload (log scale; right of 1: coil faster)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"no chart: matplotlib is not installed (pip install matplotlib, then bench/run --plot {path.with_suffix('.json')})"
    rows = [r for r in data["workloads"] if "ms" in r["modes"].get("coil", {})]
    others = [m for m in OTHERS if any("ms" in r["modes"].get(m, {}) for r in rows)]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6))
    height = 0.8 / max(len(others), 1)
    for i, mode in enumerate(others):
        ys = [len(rows) - 1 - j + (i - (len(others) - 1) / 2) * height for j in range(len(rows))]
        xs = [r["modes"][mode]["ms"] / r["modes"]["coil"]["ms"] if "ms" in r["modes"].get(mode, {}) else math.nan for r in rows]
        ax.barh(ys, [x - 1 for x in xs], height=height, left=1, label=f"vs {mode}")  # from 1 to the ratio
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log", base=2)
    ratios = [r["modes"][m]["ms"] / r["modes"]["coil"]["ms"] for r in rows for m in others if "ms" in r["modes"].get(m, {})]
    ax.set_xlim(min(ratios + [0.5]) / 1.3, max(ratios + [2.0]) * 1.3)
    ax.set_yticks(range(len(rows)), [r["name"] for r in reversed(rows)])
    ax.set_xlabel("speed of coil relative to the mode (time of the mode / time of coil; right of 1: coil faster)")
    env = data["environment"]
    ax.set_title(f"coil vs PyTorch, {env.get('gpu') if data['device'] == 'cuda' else 'CPU'}, {data['date'][:10]} "
                 f"(commit {env['commit']})", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart: {path}"


def write(data, out):
    out.mkdir(parents=True, exist_ok=True)
    stem = f"bench-{data['device']}-{data['date'][:10]}" + ("-quick" if data["quick"] else "")
    n = 1
    while (out / f"{stem}.json").exists():
        n += 1
        stem = stem.rsplit("-run", 1)[0] + f"-run{n}"
    md, js, png = out / f"{stem}.md", out / f"{stem}.json", out / f"{stem}.png"
    md.write_text(markdown(data))
    js.write_text(json.dumps(data, indent=1))
    print(plot(data, png))
    return [p for p in (md, js, png) if p.exists()]
