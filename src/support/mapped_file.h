// A file mapped read-only into memory for the time it takes to read it: large inputs (weights)
// are copied once, from the page cache into their tensors, instead of first into a buffer the
// size of the file. Not kept past loading: a mapped file truncated by another writer faults
// (SIGBUS) on access, so nothing that lives on points into the mapping.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "support/check.h"

namespace coil {

class MappedFile {
 public:
  // The mapping of a non-empty regular file; nullopt for anything else (a pipe, a device, an
  // empty file), which the caller reads another way. Throws coil::Error when it cannot open it.
  static std::optional<MappedFile> open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
      ::close(fd);
      return std::nullopt;
    }
    void* data = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);  // the mapping keeps the file
    if (data == MAP_FAILED) return std::nullopt;
    return MappedFile(data, static_cast<size_t>(st.st_size));
  }
  MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr; }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_) ::munmap(data_, size_);
  }
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

}  // namespace coil
