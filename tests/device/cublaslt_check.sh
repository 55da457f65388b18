#!/usr/bin/env bash
# The GPU check of src/runtime/cuda/cublaslt, on the device machine: builds
# tests/device/cublaslt_check.cc with the few coil sources it needs (fmt header-only from
# .devdeps/, which tests/device/carry.sh fills) and the CUDA runtime for memory, and runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-/tmp}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
g++ -std=c++20 -O2 -Wno-stringop-overflow -DFMT_HEADER_ONLY -Iinclude -Isrc -isystem .devdeps/include -isystem "$cuda/include" \
  tests/device/cublaslt_check.cc src/runtime/cuda/cublaslt.cc src/tensor/dtype.cc src/support/half.cc src/support/error.cc \
  -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart -ldl -lpthread -o "$out/cublaslt_check"
"$out/cublaslt_check"
