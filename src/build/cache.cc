#include "build/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
// Header-only (inlined): no libxxhash at run time, so the wheel carries one shared library fewer.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "support/check.h"

namespace coil::build {

namespace {

constexpr std::string_view kMagic = "COILART1";
constexpr size_t kFooterSize = 40;  // magic, payload size, hash high, hash low, name check

using Footer = std::array<char, kFooterSize>;

void put_u64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Ties the bytes to the name they were stored under, so a file copied or renamed onto another
// entry's name is not mistaken for that entry.
uint64_t name_check(const std::string& key, std::string_view ext) {
  std::string name = key + "." + std::string(ext);
  return XXH3_64bits(name.data(), name.size());
}

Footer make_footer(std::string_view payload, const std::string& key, std::string_view ext) {
  Footer footer{};
  XXH128_hash_t hash = XXH3_128bits(payload.data(), payload.size());
  std::memcpy(footer.data(), kMagic.data(), 8);
  put_u64(footer.data() + 8, payload.size());
  put_u64(footer.data() + 16, hash.high64);
  put_u64(footer.data() + 24, hash.low64);
  put_u64(footer.data() + 32, name_check(key, ext));
  return footer;
}

bool footer_matches(const std::string& file, const std::string& key, std::string_view ext) {
  if (file.size() < kFooterSize) return false;
  size_t payload_size = file.size() - kFooterSize;
  Footer expected = make_footer(std::string_view(file).substr(0, payload_size), key, ext);
  return std::memcmp(expected.data(), file.data() + payload_size, kFooterSize) == 0;
}

bool read_all(int fd, std::string& out) {
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buffer, static_cast<size_t>(n));
  }
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Removes a bad entry, unless another process has just renamed a fresh one into its place
// (then the inode differs and the fresh entry stays). The window between stat and unlink is
// tiny, and losing it only costs a rebuild.
void remove_if_same_file(const std::string& path, const struct stat& bad) {
  struct stat now;
  if (::stat(path.c_str(), &now) != 0) return;
  if (now.st_dev == bad.st_dev && now.st_ino == bad.st_ino) ::unlink(path.c_str());
}

void check_name_part(std::string_view part, std::string_view what, size_t max_size) {
  bool ok = !part.empty() && part.size() <= max_size && part.front() != '.' &&
            part.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
                std::string_view::npos;
  COIL_CHECK(ok) << "artifact cache " << what << " '" << part << "' is not a plain file-name part";
}

// The whole file if its footer verifies; nullopt if absent or bad (a bad file is removed).
std::optional<std::string> load_verified(const std::string& path, const std::string& key, std::string_view ext) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // absent, or unreadable: either way a miss; store reports why
  struct stat st;
  std::string file;
  bool read_ok = ::fstat(fd, &st) == 0 && read_all(fd, file);
  ::close(fd);
  if (!read_ok) return std::nullopt;
  if (footer_matches(file, key, ext)) return file;
  remove_if_same_file(path, st);
  return std::nullopt;
}

// The cache holds code coil loads and runs, so only its owner may write it: a folder another
// user owns, or one that others may write (a shared /tmp folder, a group-writable home), would
// let them plant a library with a valid footer. Symlinks are followed (a cache moved to another
// disk is fine); the folder they reach is what is checked.
void check_private_folder(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // created 0700 by the first store
    fail("cannot use kernel cache folder '{}': {}", dir, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) fail("kernel cache folder '{}' is not a folder; set COIL_CACHE_DIR to a private folder", dir);
  if (st.st_uid != ::geteuid())
    fail("kernel cache folder '{}' belongs to user id {}, not to this user ({}): coil runs the code its cache holds, so it "
         "uses only a folder of its own; set COIL_CACHE_DIR to a private folder",
         dir, st.st_uid, ::geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    fail("kernel cache folder '{}' is writable by {} (mode {:03o}): coil runs the code its cache holds, so it uses only a "
         "folder no one else can write; run `chmod go-w '{}'` or set COIL_CACHE_DIR to a private folder",
         dir, (st.st_mode & S_IWOTH) ? "every user" : "its group", st.st_mode & 0777, dir);
}

// Creates `folder` and the folders above it that are missing, each 0700 (the umask may only
// narrow that).
void create_private_folders(const std::filesystem::path& folder) {
  if (folder.empty() || std::filesystem::exists(folder)) return;
  create_private_folders(folder.parent_path());
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    fail("cannot create kernel cache folder '{}': {}; set COIL_CACHE_DIR to a writable folder", folder.string(),
         std::strerror(errno));
}

}  // namespace

ArtifactCache::ArtifactCache(std::string dir) : dir_(std::move(dir)) {
  COIL_CHECK(!dir_.empty()) << "artifact cache directory is empty";
  check_private_folder(dir_);
}

std::string ArtifactCache::default_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "";
  };
  if (std::string dir = env("COIL_CACHE_DIR"); !dir.empty()) return dir;
  // The XDG spec says relative values are invalid and must be ignored.
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/') return xdg + "/coil";
  if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/coil";
  // No fallback to a shared /tmp folder: anyone could plant a library there that we would load.
  fail("cannot choose a kernel cache folder: HOME, XDG_CACHE_HOME and COIL_CACHE_DIR are all unset; set "
       "COIL_CACHE_DIR to a private writable folder");
}

ArtifactCache ArtifactCache::from_environment() { return ArtifactCache(default_dir()); }

std::string ArtifactCache::key(std::initializer_list<std::string_view> parts) {
  XXH3_state_t* state = XXH3_createState();
  COIL_CHECK(state) << "out of memory";
  XXH3_128bits_reset(state);
  for (std::string_view part : parts) {
    char length[8];
    put_u64(length, part.size());
    XXH3_128bits_update(state, length, sizeof length);
    XXH3_128bits_update(state, part.data(), part.size());
  }
  XXH128_hash_t hash = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

std::string ArtifactCache::entry_path(const std::string& key, std::string_view ext) const {
  check_name_part(key, "key", 128);
  check_name_part(ext, "extension", 16);
  std::string shard = key.size() >= 2 ? key.substr(0, 2) : key;
  return fmt::format("{}/{}/{}.{}", dir_, shard, key, ext);
}

std::optional<std::string> ArtifactCache::lookup(const std::string& key, std::string_view ext) const {
  std::string path = entry_path(key, ext);
  if (!load_verified(path, key, ext)) return std::nullopt;
  return path;
}

std::optional<std::string> ArtifactCache::read(const std::string& key, std::string_view ext) const {
  std::optional<std::string> file = load_verified(entry_path(key, ext), key, ext);
  if (file) file->resize(file->size() - kFooterSize);
  return file;
}

std::string ArtifactCache::store(const std::string& key, std::string_view ext, std::string_view bytes) const {
  std::string path = entry_path(key, ext);
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  create_private_folders(folder);
  check_private_folder(dir_);  // created by this call, or checked when this object was made

  // Unique per process and per call, in the entry's own folder so the rename is atomic.
  std::random_device random;
  std::string temp = fmt::format("{}/.{}.{}.tmp.{}.{:08x}{:08x}", folder.string(), key, ext, ::getpid(), random(), random());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write kernel cache entry '{}': {}", temp, std::strerror(errno));
  Footer footer = make_footer(bytes, key, ext);
  bool written = write_all(fd, bytes) && write_all(fd, std::string_view(footer.data(), footer.size()));
  int write_errno = errno;
  if (::close(fd) != 0 && written) {
    written = false;
    write_errno = errno;
  }
  if (written && std::rename(temp.c_str(), path.c_str()) == 0) return path;
  if (written) write_errno = errno;
  ::unlink(temp.c_str());
  fail("cannot write kernel cache entry '{}': {}", path, std::strerror(write_errno));
}

}  // namespace coil::build
