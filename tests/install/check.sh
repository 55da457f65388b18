#!/usr/bin/env bash
# What a user of the C++ library does: `cmake --install` coil into a prefix, build examples/ as a
# CMake project of its own that finds it (find_package(coil), coil::coil), then compile a .pt2
# fixture to a package with the installed CLI and run the example program on it, writing its
# outputs to OUT_DIR/out.safetensors (tests/python/test_models.py compares them with eager's).
# Usage: tests/install/check.sh BUILD_DIR OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "$1" && pwd)"
out="$(cd "$2" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" --component dev >/dev/null
test -f "$work/prefix/include/coil/coil.h" && test -f "$work/prefix/bin/coil"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root/examples" -B "$work/examples" "${generator[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/examples" >/dev/null
fixtures="$root/tests/fixtures/pt2"
export COIL_CACHE_DIR="$work/cache"
"$work/prefix/bin/coil" compile "$fixtures/mlp.pt2" -o "$work/mlp.coilpkg" >/dev/null
"$work/examples/run-package" "$work/mlp.coilpkg" "$fixtures/mlp.io.safetensors" "$out/out.safetensors"
echo "install check: find_package(coil) built examples/run-package against $work/prefix, and it ran a package"
