#!/usr/bin/env bash
# The zoo on the GPU machine: CUDA in bf16 at full size, the CPU in f32 at small size; results
# (markdown, JSON, logs) to $OUT (default /tmp/coil-zoo), copied into bench/results. The caller
# makes coil importable (PYTHONPATH, as scripts/gpu-check does); $PYTHON picks the interpreter.
#   bench/zoo/device.sh [cuda|cpu|all] [I/N] [more arguments of python -m bench.zoo.run]
# I/N runs every N-th model from the I-th, for a run in parts that each fit a time limit; join
# the parts' JSON files with `python -m bench.zoo.run --merge FILES` (no GPU needed). The results
# are rewritten after every model, so a run cut short keeps what it measured; a model's process
# gets 8 minutes (--timeout 480, overridable).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-/tmp/coil-zoo}"
which="${1:-all}"
[ $# -gt 0 ] && shift
part=()
[[ "${1:-}" =~ ^[0-9]+/[0-9]+$ ]] && { part=(--part "$1"); shift; }
mkdir -p "$out" bench/results
nvidia-smi -L 2>/dev/null | tee "$out/device.log"
status=0
for device in cuda cpu; do
  [ "$which" = all ] || [ "$which" = "$device" ] || continue
  if [ "$device" = cuda ]; then args=(--dtype bf16 --size full); else args=(--dtype f32 --size small); fi
  "${PYTHON:-python3}" -m bench.zoo.run --device "$device" "${args[@]}" "${part[@]}" --timeout 480 --out "$out" "$@" 2>&1 |
    tee -a "$out/zoo-$device.log" || status=1
done
cp "$out"/zoo-*.md "$out"/zoo-*.json bench/results/ 2>/dev/null
exit $status
