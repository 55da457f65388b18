// Reading entries of a zip archive (libzip), with sizes checked: what the .pt2 reader needs;
// and writing one (coil's packages).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace coil::frontend {

class ZipReader {
 public:
  // Throws coil::Error naming the file when it is missing or not a readable zip.
  static ZipReader open(const std::string& path);
  // An archive held in memory (the fuzz targets, archives that never touch the disk); `name`
  // stands for the file in error messages.
  static ZipReader from_bytes(std::string bytes, std::string name);
  ~ZipReader();
  ZipReader(ZipReader&&) noexcept;
  ZipReader& operator=(ZipReader&&) noexcept;

  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const;
  // Whether the entry is stored uncompressed (its size is bytes on disk, not an inflation).
  bool is_stored(const std::string& name) const;
  // The whole entry; an error when it is absent, larger than `max_bytes`, or unreadable.
  // Memory grows with the bytes actually read, not with the size the archive declares.
  std::string read(const std::string& name, size_t max_bytes = size_t{1} << 34) const;

 private:
  ZipReader() = default;
  struct Handle;
  // Takes the opened archive (or fails with libzip's `why`) and lists its entries.
  static ZipReader adopt(std::unique_ptr<Handle> handle, std::string name, const std::string& why);
  std::unique_ptr<Handle> handle_;
  std::string path_;
  std::vector<std::string> names_;
};

using ZipEntries = std::vector<std::pair<std::string, std::string>>;

// Writes a zip of `entries` (name, bytes; stored uncompressed: kernels and weights do not shrink
// much and are read back whole) through a temporary file and a rename. Throws coil::Error.
void write_zip(const std::string& path, const ZipEntries& entries);
// The bytes of the same archive, built in memory.
std::string zip_bytes(const ZipEntries& entries);

}  // namespace coil::frontend
