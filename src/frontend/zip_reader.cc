#include "frontend/zip_reader.h"

#include <zip.h>

#include <algorithm>

#include "support/check.h"

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
  std::string why = got < 0 ? zip_file_strerror(f) : "";
  zip_fclose(f);
  if (got < 0 || static_cast<zip_uint64_t>(got) != st.size)
    fail("{}: entry '{}' is corrupt ({} of {} bytes read{})", path_, name, got < 0 ? 0 : got, st.size, why.empty() ? "" : ": " + why);
  return data;
}

}  // namespace coil::frontend
