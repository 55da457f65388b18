#!/usr/bin/env bash
# Real programs on the GPU machine: the torch.compile semantics, op and complex tests on CUDA,
# PyTorch's OpInfo samples through coil (and through Inductor, the baseline, in the same session)
# and the model zoo. Uses the adapter from .devdeps/bundle.tar.xz (tests/device/bundle.sh).
# Each step's log (and its results, packed) goes to $OUT:
#   tests/device/real_programs.sh STEP...   STEP: semantics | opinfo | opinfo-cpu | opinfo-inductor | zoo | zoo-cpu
# OPINFO_ARGS / ZOO_ARGS add arguments to those steps (e.g. ZOO_ARGS="--only hf_bert --modes eager,coil").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-/tmp/coil-real}"
mkdir -p "$out"
dev=/tmp/coil-dev
if [ -f .devdeps/bundle.tar.xz ] && [ ! -d "$dev/python" ]; then
  mkdir -p "$dev" && tar -C "$dev" -xJf .devdeps/bundle.tar.xz
fi
export LD_LIBRARY_PATH="$dev/lib:${LD_LIBRARY_PATH:-}" PYTHONPATH="$dev/python:$PWD:${PYTHONPATH:-}"
# Wheels the machine lacks (expecttest, which torch's OpInfo module imports), carried in .whl/.
if [ -d .whl ] && [ ! -d /tmp/coil-site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/coil-site .whl/*.whl
fi
[ -d /tmp/coil-site ] && export PYTHONPATH="$PYTHONPATH:/tmp/coil-site"
export COIL_BIN="$dev/bin/coil" COIL_TEST_DEVICE=cuda COIL_CACHE_DIR="${COIL_CACHE_DIR:-$(mktemp -d)}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
jobs="${JOBS:-12}"
status=0
pack() { tar -C "$out" -cJf "$out/$1.tar.xz" "$1" && rm -rf "${out:?}/$1"; }
for step in "$@"; do
  echo "== $step"
  case "$step" in
    semantics)
      python3 -m pytest -q -p no:cacheprovider tests/python/test_torch_compile_semantics.py tests/python/test_torch_compile.py \
        tests/python/test_torch_compile_ops.py tests/python/test_torch_compile_complex.py tests/python/test_library.py \
        2>&1 | tee "$out/semantics.log" | tail -15 ;;
    opinfo)
      python3 -m tests.opinfo.run --device cuda --dtypes f32,bf16 --samples 2 --jobs "$jobs" --out "$out/opinfo-cuda" \
        ${OPINFO_ARGS:-} 2>&1 | tail -30 ; pack opinfo-cuda ;;
    opinfo-cpu)
      python3 -m tests.opinfo.run --device cpu --dtypes f32 --samples 2 --jobs "$jobs" --out "$out/opinfo-cpu" \
        ${OPINFO_ARGS:-} 2>&1 | tail -30 ; pack opinfo-cpu ;;
    opinfo-inductor)
      python3 -m tests.opinfo.run --backend inductor --device cuda --dtypes f32,bf16 --samples 2 --jobs "$jobs" \
        --out "$out/opinfo-inductor" ${OPINFO_ARGS:-} 2>&1 | tail -30 ; pack opinfo-inductor ;;
    zoo)
      OUT="$out/zoo" bench/zoo/device.sh cuda ${ZOO_ARGS:-} 2>&1 | tail -40 ; pack zoo ;;
    zoo-cpu)
      OUT="$out/zoo-cpu" bench/zoo/device.sh cpu ${ZOO_ARGS:-} 2>&1 | tail -40 ; pack zoo-cpu ;;
    *) echo "unknown step $step"; status=1 ;;
  esac
done
exit $status
