#!/usr/bin/env bash
# Fills .devdeps/ (git-ignored; the device call carries it) with what scripts/gpu-check needs on
# the GPU machine, which has the CUDA toolkit, a compiler and PyTorch but none of the -dev
# packages coil builds against: the coil binaries built here (stripped) and the shared
# libraries they link (fmt, xxhash, OpenBLAS and its Fortran runtime, oneDNN), compressed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ninja -C build >/dev/null
rm -rf .devdeps/stage && mkdir -p .devdeps/stage/bin .devdeps/stage/lib
strip -o .devdeps/stage/bin/coil build/tools/coil
strip -o .devdeps/stage/bin/coil_unit_tests build/tests/coil_unit_tests
for lib in $(ldd build/tools/coil | awk '/=> \// {print $3}' | grep -E 'fmt|xxhash|openblas|gfortran|quadmath|libzip|bz2|gomp|dnnl|OpenCL'); do
  cp -L "$lib" .devdeps/stage/lib/
done
# The torch.compile adapter as a build-tree package for the device's Python (3.12): python/coil
# and coil._coil built for that Python (a venv with nanobind made here, a build of its own).
py="${COIL_DEVICE_PYTHON:-/root/.pyenv/versions/3.12.1/bin/python}"
if [ ! -x .devdeps/py312/bin/python ]; then
  "$py" -m venv .devdeps/py312 && .devdeps/py312/bin/pip install -q --disable-pip-version-check "$(grep nanobind requirements.txt)"
fi
# The module links the library of the main build (COIL_CORE_ARCHIVE), compiling only its own source.
core="$PWD/build/src/libcoil_core.a"
if ! grep -qx "COIL_CORE_ARCHIVE:FILEPATH=$core" build/py312/CMakeCache.txt 2>/dev/null; then
  cmake -S . -B build/py312 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_PYTHON=ON -DCOIL_TESTS=OFF -DCOIL_WERROR=OFF \
    -DCOIL_CORE_ARCHIVE="$core" -DPython_EXECUTABLE="$PWD/.devdeps/py312/bin/python" >/dev/null
fi
ninja -C build/py312 _coil | tail -3
mkdir -p .devdeps/stage/python/coil
cp python/coil/*.py .devdeps/stage/python/coil/
strip -o .devdeps/stage/python/coil/"$(basename build/py312/python/coil/_coil*.so)" build/py312/python/coil/_coil*.so
tar -C .devdeps/stage -cJf .devdeps/bundle.tar.xz bin lib python
rm -rf .devdeps/stage
ls -la .devdeps/bundle.tar.xz
