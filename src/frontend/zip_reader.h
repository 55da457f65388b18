// Reading entries of a zip archive (libzip), with sizes checked: what the .pt2 reader needs;
// and writing one (coil's packages).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace coil::frontend {

class ZipReader {
 public:
  // Throws coil::Error naming the file when it is missing or not a readable zip.
  static ZipReader open(const std::string& path);
  ~ZipReader();
  ZipReader(ZipReader&&) noexcept;
  ZipReader& operator=(ZipReader&&) noexcept;

  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const;
  // The whole entry; an error when it is absent, larger than `max_bytes`, or unreadable.
  std::string read(const std::string& name, size_t max_bytes = size_t{1} << 34) const;

 private:
  ZipReader() = default;
  struct Handle;
  std::unique_ptr<Handle> handle_;
  std::string path_;
  std::vector<std::string> names_;
};

// Writes a zip of `entries` (name, bytes; stored uncompressed: kernels and weights do not shrink
// much and are read back whole) through a temporary file and a rename. Throws coil::Error.
void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace coil::frontend
