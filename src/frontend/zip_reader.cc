#include "frontend/zip_reader.h"

#include <zip.h>

#include <algorithm>
#include <cstdio>

#include "support/check.h"
#include "support/output_path.h"

namespace coil::frontend {

struct ZipReader::Handle {
  zip_t* zip = nullptr;
  ~Handle() {
    if (zip) zip_discard(zip);
  }
};

ZipReader::~ZipReader() = default;
ZipReader::ZipReader(ZipReader&&) noexcept = default;
ZipReader& ZipReader::operator=(ZipReader&&) noexcept = default;

ZipReader ZipReader::open(const std::string& path) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (!z) {
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    fail("{}: not a readable zip archive ({})", path, why);
  }
  ZipReader r;
  r.handle_ = std::make_unique<Handle>();
  r.handle_->zip = z;
  r.path_ = path;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(z, static_cast<zip_uint64_t>(i), 0);
    if (!name) fail("{}: entry {} has no readable name", path, i);
    r.names_.emplace_back(name);
  }
  return r;
}

bool ZipReader::contains(const std::string& name) const { return std::find(names_.begin(), names_.end(), name) != names_.end(); }

std::string ZipReader::read(const std::string& name, size_t max_bytes) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(handle_->zip, name.c_str(), 0, &st) != 0) fail("{}: no entry '{}'", path_, name);
  if (!(st.valid & ZIP_STAT_SIZE)) fail("{}: entry '{}' has no size", path_, name);
  if (st.size > max_bytes) fail("{}: entry '{}' is {} bytes, more than the {} allowed", path_, name, st.size, max_bytes);
  zip_file_t* f = zip_fopen(handle_->zip, name.c_str(), 0);
  if (!f) fail("{}: cannot open entry '{}': {}", path_, name, zip_strerror(handle_->zip));
  std::string data(static_cast<size_t>(st.size), '\0');
  zip_int64_t got = data.empty() ? 0 : zip_fread(f, data.data(), st.size);
  // One read past the declared size: libzip checks the entry's CRC-32 when it reaches the end,
  // and a stored entry whose bytes were changed is found only there.
  char past = 0;
  zip_int64_t more = got < 0 ? 0 : zip_fread(f, &past, 1);
  std::string why = got < 0 || more < 0 ? zip_file_strerror(f) : "";
  zip_fclose(f);
  if (got < 0 || static_cast<zip_uint64_t>(got) != st.size)
    fail("{}: entry '{}' is corrupt ({} of {} bytes read{})", path_, name, got < 0 ? 0 : got, st.size, why.empty() ? "" : ": " + why);
  if (more != 0)
    fail("{}: entry '{}' is corrupt ({})", path_, name, more < 0 ? why : "longer than its declared size");
  return data;
}

void write_zip(const std::string& requested, const std::vector<std::pair<std::string, std::string>>& entries) {
  const std::string path = replaceable_output(requested);
  std::string temp = path + ".tmp";
  int code = 0;
  zip_t* z = zip_open(temp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!z) fail("{}: cannot create the archive (libzip error {})", path, code);
  for (const auto& [name, bytes] : entries) {
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    zip_int64_t index = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (index < 0) {
      if (src) zip_source_free(src);
      std::string why = zip_strerror(z);
      zip_discard(z);
      std::remove(temp.c_str());
      fail("{}: cannot add entry '{}' ({})", path, name, why);
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
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

}  // namespace coil::frontend
