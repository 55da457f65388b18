#!/usr/bin/env bash
# The GPU checks, on the device machine (which has the CUDA toolkit and a compiler but not the
# -dev packages coil's full build uses): builds tests/device/cuda_smoke.cc with the few coil
# sources it needs, fmt header-only and xxhash inlined from headers carried in .devdeps/
# (tests/device/carry.sh fills it), and runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-/tmp}"
g++ -std=c++20 -O2 -DFMT_HEADER_ONLY -DXXH_INLINE_ALL -Iinclude -Isrc -isystem .devdeps/include \
  tests/device/cuda_smoke.cc src/runtime/cuda/driver.cc src/build/nvrtc.cc src/build/cache.cc src/build/failure.cc \
  src/tensor/npy.cc src/tensor/tensor.cc src/tensor/dtype.cc src/support/half.cc src/support/error.cc \
  -ldl -lpthread -o "$out/cuda_smoke"
"$out/cuda_smoke"
