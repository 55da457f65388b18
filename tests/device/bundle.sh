#!/usr/bin/env bash
# Fills .devdeps/ (git-ignored; the device call carries it) with what scripts/gpu-check needs on
# the GPU machine, which has the CUDA toolkit, a compiler and PyTorch but none of the -dev
# packages coil builds against: the coil binaries built here (stripped) and the shared
# libraries they link (fmt, xxhash, OpenBLAS and its Fortran runtime), compressed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ninja -C build >/dev/null
rm -rf .devdeps/stage && mkdir -p .devdeps/stage/bin .devdeps/stage/lib
strip -o .devdeps/stage/bin/coil build/tools/coil
strip -o .devdeps/stage/bin/coil_unit_tests build/tests/coil_unit_tests
strip -o .devdeps/stage/bin/coil-bench build/tools/coil-bench
for lib in $(ldd build/tools/coil | awk '/=> \// {print $3}' | grep -E 'fmt|xxhash|openblas|gfortran|quadmath'); do
  cp -L "$lib" .devdeps/stage/lib/
done
tar -C .devdeps/stage -cJf .devdeps/bundle.tar.xz bin lib
rm -rf .devdeps/stage
ls -la .devdeps/bundle.tar.xz
