# What coil builds against, found in one place. Anything missing stops the configure with one
# message naming all of it and the Debian/Ubuntu packages to install, so a `pip install .` on a
# fresh machine says what it needs (scripts/setup installs these).
set(coil_missing "")
set(coil_apt "")
macro(coil_need found what package)
  if(NOT ${found})
    list(APPEND coil_missing "${what}")
    list(APPEND coil_apt "${package}")
  endif()
endmacro()

find_package(fmt QUIET)
coil_need(fmt_FOUND "fmt (formatting)" libfmt-dev)
find_package(nlohmann_json QUIET)
coil_need(nlohmann_json_FOUND "nlohmann-json (JSON)" nlohmann-json3-dev)
find_package(CLI11 QUIET)
coil_need(CLI11_FOUND "CLI11 (the command line)" libcli11-dev)
find_path(COIL_XXHASH_INCLUDE xxhash.h)
coil_need(COIL_XXHASH_INCLUDE "xxHash (content hashes; header-only)" libxxhash-dev)
# OpenMP: the generated CPU kernels' threads and the matrix products split over them.
find_package(OpenMP QUIET)
coil_need(OpenMP_CXX_FOUND "OpenMP (comes with g++)" g++)
# oneDNN: the CPU's convolutions (found as a library and its header: Debian's CMake config for it
# asks for OpenCL's development files, which coil does not use).
find_library(COIL_DNNL_LIBRARY dnnl)
find_path(COIL_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp)
if(COIL_DNNL_LIBRARY AND COIL_DNNL_INCLUDE)
  set(COIL_DNNL_FOUND TRUE)
endif()
coil_need(COIL_DNNL_FOUND "oneDNN (CPU convolutions)" libdnnl-dev)
find_package(PkgConfig QUIET)
coil_need(PKG_CONFIG_FOUND "pkg-config (finds OpenBLAS and libzip)" pkgconf)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET GLOBAL openblas)
  coil_need(OPENBLAS_FOUND "OpenBLAS (CPU matrix products)" libopenblas-dev)
  pkg_check_modules(LIBZIP QUIET IMPORTED_TARGET GLOBAL libzip)
  coil_need(LIBZIP_FOUND "libzip (.pt2 archives and packages)" libzip-dev)
endif()
if(COIL_TESTS)
  find_package(GTest QUIET)
  coil_need(GTest_FOUND "GoogleTest (the unit tests; or configure with -DCOIL_TESTS=OFF)" libgtest-dev)
endif()
if(coil_missing)
  list(REMOVE_DUPLICATES coil_apt)
  list(JOIN coil_missing "\n  " missing_lines)
  list(JOIN coil_apt " " apt_line)
  message(FATAL_ERROR "coil cannot be built here: missing\n  ${missing_lines}\n"
                      "On Debian or Ubuntu: sudo apt install ${apt_line}\n"
                      "(scripts/setup installs everything coil's build and tests need)")
endif()

# A wheel (pip install, pip wheel) takes fmt header-only, so the extension and the CLI need no
# libfmt at run time; libzip, OpenBLAS and oneDNN are shared libraries that scripts/wheel copies into the
# wheel (auditwheel), as manylinux wheels do.
if(SKBUILD_STATE STREQUAL "wheel")
  set(coil_fmt_default ON)
else()
  set(coil_fmt_default OFF)
endif()
option(COIL_FMT_HEADER_ONLY "Compile fmt into coil instead of linking libfmt" ${coil_fmt_default})
if(COIL_FMT_HEADER_ONLY)
  set(COIL_FMT fmt::fmt-header-only)
else()
  set(COIL_FMT fmt::fmt)
endif()
