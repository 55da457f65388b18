// The on-disk, content-addressed artifact cache: compiled CPU libraries (.so) today, NVRTC
// cubins later. An entry is one file, `<dir>/<key[0:2]>/<key>.<ext>`: the artifact's bytes
// followed by a 40-byte footer (magic, payload size, xxh3-128 of the payload, a check of the
// entry's own name). ELF loaders ignore trailing bytes, so a cached .so is dlopen-ed in place.
//
// Guarantees:
// - lookup only returns entries whose footer verifies; a truncated, overwritten or misnamed
//   file is a miss, and is removed.
// - store writes a temporary file in the entry's folder and renames it over the entry, so
//   readers see either no entry or a complete one, and two processes storing one key at the
//   same time both succeed (the last rename wins; both files are valid).
// - No fsync: a crash may leave a torn file, which the footer check turns into a miss.
//
// The cache holds no state besides its directory; one object may be shared between threads.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace coil::build {

class ArtifactCache {
 public:
  explicit ArtifactCache(std::string dir);

  // $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else ~/.cache/coil.
  static ArtifactCache from_environment();
  static std::string default_dir();

  // Hex xxh3-128 over the parts, each preceded by its length, so ("ab","c") != ("a","bc").
  static std::string key(std::initializer_list<std::string_view> parts);

  // The path of a valid entry, or nullopt (absent, or corrupted and now removed).
  std::optional<std::string> lookup(const std::string& key, std::string_view ext) const;
  // The payload of a valid entry (without the footer), or nullopt like lookup.
  std::optional<std::string> read(const std::string& key, std::string_view ext) const;
  // Writes the entry atomically and returns its path. Throws coil::Error if it cannot write.
  std::string store(const std::string& key, std::string_view ext, std::string_view bytes) const;

  // Where an entry lives (whether or not it exists).
  std::string entry_path(const std::string& key, std::string_view ext) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace coil::build
