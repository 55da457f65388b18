// Where an output file may go: coil writes a temporary file beside the target and renames it over
// the target, which replaces whatever has that name. Only regular files (or nothing) may be
// replaced; a symbolic link is followed to the file it names. A device (/dev/full, /dev/null), a
// FIFO, a socket or a directory is refused with a clear error instead of being swapped for a file.
#pragma once
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "support/check.h"

namespace coil {

inline std::string replaceable_output(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target(path);
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    fs::path resolved = fs::weakly_canonical(target, ec);
    if (ec) fail("cannot write '{}': cannot follow the symbolic link: {}", path, ec.message());
    target = resolved;
  }
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) return target.string();  // nothing there yet
  if (S_ISREG(st.st_mode)) return target.string();
  const char* kind = S_ISDIR(st.st_mode) ? "directory" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device"
                     : S_ISFIFO(st.st_mode)                                                          ? "FIFO"
                     : S_ISSOCK(st.st_mode)                                                          ? "socket"
                                                                                                     : "special file";
  fail("cannot write '{}': it is a {}, and coil replaces only regular files", path, kind);
}

}  // namespace coil
