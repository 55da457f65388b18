"""Per-kernel profiles (Nsight Compute) of one call of each workload, for coil and Inductor (each
mode measured): the
kernels launched, their time, the DRAM bytes they moved against the bytes the workload needs,
and achieved occupancy. Runs on the caches the measuring processes filled (no compiling inside
the profiled range). Nsight Compute locks clocks to base, so times read slower than the table's."""
import csv
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread"]


def _ncu():
    bundled = Path("/usr/local/cuda/bin/ncu")
    return shutil.which("ncu") or (str(bundled) if bundled.exists() else None)


def parse(text):
    """Kernels in launch order from ncu's --csv output: [{name, grid, block, metric: value}]."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    kernels = {}
    for row in csv.DictReader(lines[start:]):
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"], "grid": row.get("Grid Size", ""),
                                           "block": row.get("Block Size", "")})
        try:
            k[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            k[row["Metric Name"]] = row["Metric Value"]
    return [kernels[i] for i in sorted(kernels, key=int)]


def summarize(mode, kernels, needed_bytes):
    time_ms = sum(k.get("gpu__time_duration.sum", 0) for k in kernels) / 1e6
    dram = sum(k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0) for k in kernels)
    line = f"- {mode}: {len(kernels)} kernel launches, {time_ms:.3f} ms of kernel time, DRAM {dram / 1e6:.0f} MB"
    if needed_bytes:
        line += f" ({dram / needed_bytes:.2f}x the {needed_bytes / 1e6:.0f} MB the workload needs)"
    out = [line]
    for k in sorted(kernels, key=lambda k: -k.get("gpu__time_duration.sum", 0))[:6]:
        moved = k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)
        out.append(f"  - `{k['name'][:70]}` grid {k['grid']} block {k['block']}: {k.get('gpu__time_duration.sum', 0) / 1e3:.1f} µs, "
                   f"{moved / 1e6:.1f} MB, occupancy {k.get('sm__warps_active.avg.pct_of_peak_sustained_active', 0):.0f}%, "
                   f"{k.get('launch__registers_per_thread', 0):.0f} registers")
    return out


def run(args, names, caches, needed_bytes):
    """{workload: {"lines": [...], mode: [kernels]}} for coil and Inductor (default and max-autotune,
    where measured); needed_bytes:
    {workload: bytes an ideal implementation moves} for the memory-bound ones."""
    ncu = _ncu()
    if ncu is None:
        print("profile: Nsight Compute (ncu) not found", flush=True)
        return {}
    profiles = {}
    for name in names:
        entry = {"lines": []}
        for mode in ("coil", "inductor", "max-autotune"):
            if mode not in caches:
                continue
            cmd = [ncu, "--profile-from-start", "off", "--csv", "--metrics", ",".join(METRICS), sys.executable, "-m",
                   "bench.child", "--mode", mode, "--phase", "profile", "--device", "cuda", "--names", name]
            try:
                p = subprocess.run(cmd + (["--quick"] if args.quick else []), cwd=ROOT, env=caches[mode], capture_output=True,
                                   text=True, timeout=300)
            except subprocess.TimeoutExpired:
                entry["lines"].append(f"- {mode}: the profile took over 300 s (Nsight Compute replays every kernel); skipped")
                continue
            kernels = parse(p.stdout)
            entry[mode] = kernels
            if not kernels:
                entry["lines"].append(f"- {mode}: no kernels profiled: {(p.stderr or p.stdout).strip()[-300:]}")
                continue
            entry["lines"] += summarize(mode, kernels, needed_bytes.get(name))
        profiles[name] = entry
        print(f"profile {name}:\n" + "\n".join(entry["lines"]), flush=True)
    return profiles
