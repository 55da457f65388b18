#include "frontend/zip_reader.h"

#include <zip.h>

#include <algorithm>
#include <cstdio>

#include "support/check.h"
#include "support/output_path.h"

namespace coil::frontend {

struct ZipReader::Handle {
  zip_t* zip = nullptr;
  std::string bytes;  // an archive from memory: libzip reads it in place, so it lives as long
  ~Handle() {
    if (zip) zip_discard(zip);
  }
};

ZipReader::~ZipReader() = default;
ZipReader::ZipReader(ZipReader&&) noexcept = default;
ZipReader& ZipReader::operator=(ZipReader&&) noexcept = default;

ZipReader ZipReader::open(const std::string& path) {
  auto handle = std::make_unique<Handle>();
  int code = 0;
  handle->zip = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string why = zip_error_strerror(&err);
  zip_error_fini(&err);
  return adopt(std::move(handle), path, why);
}

ZipReader ZipReader::from_bytes(std::string bytes, std::string name) {
  auto handle = std::make_unique<Handle>();
  handle->bytes = std::move(bytes);
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* source = zip_source_buffer_create(handle->bytes.data(), handle->bytes.size(), 0, &err);
  if (source) {
    handle->zip = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!handle->zip) zip_source_free(source);  // the archive owns the source only once open
  }
  std::string why = zip_error_strerror(&err);
  zip_error_fini(&err);
  return adopt(std::move(handle), std::move(name), why);
}

ZipReader ZipReader::adopt(std::unique_ptr<Handle> handle, std::string name, const std::string& why) {
  if (!handle->zip) fail("{}: not a readable zip archive ({})", name, why);
  ZipReader r;
  r.handle_ = std::move(handle);
  r.path_ = std::move(name);
  zip_t* z = r.handle_->zip;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* entry = zip_get_name(z, static_cast<zip_uint64_t>(i), 0);
    if (!entry) fail("{}: entry {} has no readable name", r.path_, i);
    r.names_.emplace_back(entry);
  }
  return r;
}

bool ZipReader::contains(const std::string& name) const { return std::find(names_.begin(), names_.end(), name) != names_.end(); }

bool ZipReader::is_stored(const std::string& name) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(handle_->zip, name.c_str(), 0, &st) != 0) fail("{}: no entry '{}'", path_, name);
  return (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE;
}

std::string ZipReader::read(const std::string& name, size_t max_bytes) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(handle_->zip, name.c_str(), 0, &st) != 0) fail("{}: no entry '{}'", path_, name);
  if (!(st.valid & ZIP_STAT_SIZE)) fail("{}: entry '{}' has no size", path_, name);
  if (st.size > max_bytes) fail("{}: entry '{}' is {} bytes, more than the {} allowed", path_, name, st.size, max_bytes);
  zip_file_t* f = zip_fopen(handle_->zip, name.c_str(), 0);
  if (!f) fail("{}: cannot open entry '{}': {}", path_, name, zip_strerror(handle_->zip));
  // Read in chunks, so memory follows the bytes that really come out of the entry: a forged
  // size in the directory costs nothing before the entry turns out shorter.
  constexpr zip_uint64_t kChunk = zip_uint64_t{64} << 20;
  std::string data;
  zip_int64_t got = 0;
  while (static_cast<zip_uint64_t>(data.size()) < st.size) {
    size_t before = data.size();
    data.resize(before + static_cast<size_t>(std::min(kChunk, st.size - before)));
    got = zip_fread(f, data.data() + before, data.size() - before);
    if (got <= 0) {
      data.resize(before);
      break;
    }
    data.resize(before + static_cast<size_t>(got));
  }
  // One read past the declared size: libzip checks the entry's CRC-32 when it reaches the end,
  // and a stored entry whose bytes were changed is found only there.
  char past = 0;
  zip_int64_t more = got < 0 ? 0 : zip_fread(f, &past, 1);
  std::string why = got < 0 || more < 0 ? zip_file_strerror(f) : "";
  zip_fclose(f);
  if (got < 0 || static_cast<zip_uint64_t>(data.size()) != st.size)
    fail("{}: entry '{}' is corrupt ({} of {} bytes read{})", path_, name, data.size(), st.size, why.empty() ? "" : ": " + why);
  if (more != 0)
    fail("{}: entry '{}' is corrupt ({})", path_, name, more < 0 ? why : "longer than its declared size");
  return data;
}

namespace {

// Adds `entries` to `z`, stored uncompressed; libzip's message when one cannot be added.
std::string add_entries(zip_t* z, const ZipEntries& entries) {
  for (const auto& [name, bytes] : entries) {
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    zip_int64_t index = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (index < 0) {
      if (src) zip_source_free(src);
      return fmt::format("cannot add entry '{}' ({})", name, zip_strerror(z));
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
  }
  return "";
}

}  // namespace

void write_zip(const std::string& requested, const ZipEntries& entries) {
  const std::string path = replaceable_output(requested);
  std::string temp = path + ".tmp";
  int code = 0;
  zip_t* z = zip_open(temp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!z) fail("{}: cannot create the archive (libzip error {})", path, code);
  if (std::string why = add_entries(z, entries); !why.empty()) {
    zip_discard(z);
    std::remove(temp.c_str());
    fail("{}: {}", path, why);
  }
  if (zip_close(z) != 0) {
    std::string why = zip_strerror(z);
    zip_discard(z);
    std::remove(temp.c_str());
    fail("{}: cannot write the archive ({})", path, why);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    fail("{}: cannot move the archive into place", path);
  }
}

std::string zip_bytes(const ZipEntries& entries) {
  zip_error_t err;
  zip_error_init(&err);
  // A growing buffer source: kept past zip_close, which writes the archive into it.
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = buffer ? zip_open_from_source(buffer, ZIP_TRUNCATE, &err) : nullptr;
  std::string why = z ? "" : zip_error_strerror(&err);
  zip_error_fini(&err);
  if (!z) {
    if (buffer) zip_source_free(buffer);
    fail("<memory>: cannot create an archive ({})", why);
  }
  zip_source_keep(buffer);
  why = add_entries(z, entries);
  if (why.empty() && zip_close(z) != 0) why = fmt::format("cannot write the archive ({})", zip_strerror(z));
  if (!why.empty()) {
    zip_discard(z);
    zip_source_free(buffer);
    fail("<memory>: {}", why);
  }
  std::string out;
  zip_stat_t st;
  bool ok = zip_source_stat(buffer, &st) == 0 && (st.valid & ZIP_STAT_SIZE) && zip_source_open(buffer) == 0;
  if (ok) {
    out.resize(static_cast<size_t>(st.size));
    ok = zip_source_read(buffer, out.data(), st.size) == static_cast<zip_int64_t>(st.size);
    zip_source_close(buffer);
  }
  zip_source_free(buffer);
  if (!ok) fail("<memory>: cannot read back the archive just written");
  return out;
}

}  // namespace coil::frontend
