#!/usr/bin/env bash
# Copies the headers tests/device/run.sh needs (fmt, xxhash) into .devdeps/, which git ignores
# and the device call carries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p .devdeps/include
cp -r /usr/include/fmt .devdeps/include/
cp /usr/include/xxhash.h .devdeps/include/
