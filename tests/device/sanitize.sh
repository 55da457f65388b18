#!/usr/bin/env bash
# scripts/test-sanitize on the GPU machine, for its cores: the ASan/UBSan build of the whole
# compiler takes some 80 CPU-minutes, 40 minutes on two cores and a few on sixteen. That machine
# has a compiler, CMake and Ninja but none of the -dev packages coil builds against, so the
# Debian packages are downloaded here (`tests/device/sanitize.sh --fetch`, into .devdeps/debs,
# which the device call carries) and unpacked there into a private prefix that the build is
# pointed at (CMAKE_PREFIX_PATH, and pkg-config with that prefix as its sysroot).
#
#   tests/device/sanitize.sh --fetch          here, once: download the packages
#   tests/device/sanitize.sh [CTEST_ARGS...]  there: unpack, build build-asan, run scripts/test-sanitize
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
debs=(libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev libgtest-dev libxxhash-dev libzip-dev libzip4 libopenblas-dev
      libopenblas0-pthread libopenblas-pthread-dev libgfortran5 pkgconf pkgconf-bin libpkgconf3 zlib1g-dev libbz2-dev
      libdnnl-dev libdnnl2 ocl-icd-libopencl1)
if [ "${1:-}" = "--fetch" ]; then
  mkdir -p .devdeps/debs
  (cd .devdeps/debs && apt-get download "${debs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  ls .devdeps/debs | wc -l
  exit 0
fi

prefix=/tmp/coil-sysroot
if [ ! -d "$prefix/usr/include/fmt" ]; then
  for f in .devdeps/debs/*.deb; do dpkg -x "$f" "$prefix"; done
  arch="$prefix/usr/lib/x86_64-linux-gnu"
  # What Debian's alternatives would have made: libopenblas.so and openblas.pc.
  ln -sf openblas-pthread/libopenblas.so.0 "$arch/libopenblas.so"
  ln -sf openblas-pthread/libopenblas.so.0 "$arch/libopenblas.so.0"
  mkdir -p "$arch/pkgconfig"
  cat > "$arch/pkgconfig/openblas.pc" <<'PC'
libdir=/usr/lib/x86_64-linux-gnu/openblas-pthread
includedir=/usr/include/x86_64-linux-gnu/openblas-pthread
Name: openblas
Description: OpenBLAS (pthread)
Version: 0.3.21
Libs: -L${libdir} -lopenblas
Cflags: -I${includedir}
PC
fi
export PATH="$prefix/usr/bin:$PATH"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export PKG_CONFIG_LIBDIR="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig"
export CMAKE_PREFIX_PATH="$prefix/usr"
g++ --version | head -1
exec scripts/test-sanitize "$@"
