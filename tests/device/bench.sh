#!/usr/bin/env bash
# bench/run on the lent GPU machine, which has PyTorch, Triton and the CUDA toolkit but none of
# coil's build dependencies: it unpacks the bundle tests/device/bundle.sh made (coil's binaries
# and the adapter built for the machine's Python), installs the chart's wheels from
# .devdeps/wheels when matplotlib is missing (the machine reaches no package index), then runs
# bench/run with the given options, e.g. `tests/device/bench.sh --quick --out "$OUT"`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dev=/tmp/coil-dev
[ -d "$dev/python/coil" ] || { mkdir -p "$dev" && tar -C "$dev" -xJf .devdeps/bundle.tar.xz; }
export PYTHONPATH="$dev/python:$dev/site:${PYTHONPATH:-}" LD_LIBRARY_PATH="$dev/lib:${LD_LIBRARY_PATH:-}" PYTHON=python3
if ! python3 -c "import matplotlib" 2>/dev/null && compgen -G ".devdeps/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$dev/site" .devdeps/wheels/*.whl
fi
exec bench/run "$@"
