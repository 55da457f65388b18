// NumPy .npy files (format versions 1.0, 2.0 and 3.0), and the whole-file read and atomic
// write that both tensor formats go through.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <random>

#include "coil/io.h"
#include "support/check.h"
#include "support/output_path.h"

namespace coil {

namespace {

static_assert(std::endian::native == std::endian::little,
              "tensor files are little-endian and are copied byte for byte; a big-endian host needs swaps");

constexpr std::string_view kMagic = "\x93NUMPY";

// descr without its byte-order character.
struct NpyType {
  std::string_view code;
  DType dtype;
};
constexpr NpyType kTypes[] = {{"f8", DType::f64}, {"f4", DType::f32}, {"f2", DType::f16},
                              {"i8", DType::i64}, {"i4", DType::i32}, {"i2", DType::i16},
                              {"i1", DType::i8},  {"u1", DType::u8},  {"b1", DType::b8}};

DType dtype_from_descr(const std::string& descr, const std::string& what) {
  const NpyType* type = nullptr;
  for (const NpyType& t : kTypes)
    if (descr.size() == 3 && descr.substr(1) == t.code) type = &t;
  char order = descr.empty() ? '?' : descr[0];
  if (!type || std::string_view("<>|=").find(order) == std::string_view::npos)
    fail("{}: unsupported .npy dtype '{}' (coil reads <f8 <f4 <f2 <i8 <i4 <i2 |i1 |u1 |b1)", what, descr);
  // Byte order means nothing for one-byte types, so only wider ones need the check.
  if (order == '>' && dtype_size(type->dtype) > 1)
    fail(
        "{}: dtype '{}' is big-endian; coil reads little-endian .npy files only (in NumPy: "
        "a.astype(a.dtype.newbyteorder('<')))",
        what, descr);
  return type->dtype;
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// The header is a Python dict literal written by repr(); this reads exactly the subset NumPy
// writes: string keys, a string descr, True/False, and a tuple of integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  Header parse() {
    Header h;
    bool seen[3] = {false, false, false};
    expect('{');
    while (!consume('}')) {
      std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '[') error("structured dtypes are not supported");
        h.descr = parse_string();
        seen[0] = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        seen[1] = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        seen[2] = true;
      } else {
        error(fmt::format("unexpected key '{}'", key));
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) error("unexpected text after the closing '}'");
    if (!seen[0] || !seen[1] || !seen[2]) error("it must have the keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void error(const std::string& message) {
    std::string shown(text_.substr(0, 200));
    fail("{}: bad .npy header: {} (at offset {} of \"{}\")", what_, message, pos_, shown);
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) error(fmt::format("expected '{}'", c));
  }

  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) error("expected a quoted string");
    char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      // repr() escapes only the quote and backslash in the names and descrs NumPy writes.
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out += text_[pos_++];
    }
    if (pos_ >= text_.size()) error("unterminated string");
    ++pos_;
    return out;
  }

  bool parse_bool() {
    skip_space();
    for (auto [word, value] :
         {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    error("expected True or False");
  }

  Shape parse_shape() {
    expect('(');
    Shape shape;
    while (!consume(')')) {
      skip_space();
      int64_t d = 0;
      auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), d);
      if (ec != std::errc() || d < 0) error("shape must be a tuple of non-negative integers");
      pos_ = static_cast<size_t>(end - text_.data());
      if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;  // Python 2 longs
      shape.push_back(d);
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view text_;
  const std::string& what_;
  size_t pos_ = 0;
};

uint64_t read_le(const std::string& bytes, size_t at, size_t width) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + at, width);
  return v;
}

// Fortran-order data: scatter each element's bytes to its row-major place. Bytes rather than
// values, so NaN payloads survive. Not empty: the strides are partial products of the element
// count, which the file's length bounds.
Tensor from_fortran_order(DType dtype, const Shape& shape, const char* data) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  Tensor out = Tensor::zeros(dtype, shape);
  Tensor source = out.view(shape, strides, 0);  // only for its element_index arithmetic
  const int64_t size = dtype_size(dtype);
  char* dst = static_cast<char*>(out.data());
  int64_t i = 0;
  out.for_each_index([&](std::span<const int64_t> idx) {
    std::memcpy(dst + size * i++, data + size * source.element_index(idx), static_cast<size_t>(size));
  });
  return out;
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < kMagic.size() || std::string_view(bytes).substr(0, kMagic.size()) != kMagic)
    fail("{}: not a .npy file (bad magic: it does not start with \\x93NUMPY)", what);
  if (bytes.size() < 10) fail("{}: the .npy file is truncated inside its preamble", what);
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3)
    fail("{}: unsupported .npy format version {}.{} (coil reads 1.0, 2.0 and 3.0)", what, major, minor);
  const size_t width = major == 1 ? 2 : 4;
  const size_t header_start = 8 + width;
  if (bytes.size() < header_start) fail("{}: the .npy file is truncated inside its preamble", what);
  const uint64_t header_size = read_le(bytes, 8, width);
  if (header_size > bytes.size() - header_start)
    fail("{}: the .npy header length {} runs past the end of the file (truncated)", what, header_size);

  Header h = HeaderParser(std::string_view(bytes).substr(header_start, header_size), what).parse();
  DType dtype = dtype_from_descr(h.descr, what);
  uint64_t needed = static_cast<uint64_t>(dtype_size(dtype));
  for (int64_t d : h.shape)
    if (__builtin_mul_overflow(needed, static_cast<uint64_t>(d), &needed))
      fail("{}: shape {} is too large to address", what, shape_to_string(h.shape));
  const size_t data_start = header_start + header_size;
  const uint64_t available = bytes.size() - data_start;
  if (available < needed)
    fail("{}: the .npy data is truncated: '{}' {} needs {} bytes but the file holds {}", what, h.descr,
         shape_to_string(h.shape), needed, available);
  if (available > needed)
    fail("{}: {} unexpected bytes after the .npy data ('{}' {} needs {})", what, available - needed, h.descr,
         shape_to_string(h.shape), needed);

  const char* data = bytes.data() + data_start;
  // An empty array has nothing to reorder, and its Fortran strides (products of the other
  // dims, which no byte count bounds) may not fit int64.
  if (h.fortran_order && h.shape.size() > 1 && needed > 0) return from_fortran_order(dtype, h.shape, data);
  Tensor t = Tensor::zeros(dtype, h.shape);
  if (needed > 0) std::memcpy(t.data(), data, needed);
  return t;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

void write_npy(const std::string& path, const Tensor& tensor) {
  if (!tensor.defined()) fail("cannot write '{}': the tensor is undefined", path);
  if (tensor.device().kind != Device::Kind::cpu)
    fail("cannot write '{}': the tensor is on {}; copy it to the CPU first", path, device_name(tensor.device()));
  if (tensor.dtype() == DType::bf16)
    fail("cannot write '{}': .npy has no bfloat16 dtype; convert to f32 or write safetensors", path);
  std::string descr;
  for (const NpyType& t : kTypes)
    if (t.dtype == tensor.dtype()) descr = std::string(dtype_size(t.dtype) == 1 ? "|" : "<") + std::string(t.code);

  // The dict text NumPy writes (NumPy also pads for in-place growth, which nothing here needs).
  std::string shape;
  for (int64_t d : tensor.sizes()) shape += fmt::format("{}, ", d);
  if (tensor.dim() > 1)
    shape.resize(shape.size() - 2);
  else if (tensor.dim() == 1)
    shape.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);

  // Version 1.0 has a 2-byte header length; 2.0 widens it for very high-rank shapes. The
  // header ends in '\n' and is space-padded so the data starts 64-byte aligned.
  int version = 1;
  size_t preamble = 10;
  if (header.size() + 1 + 64 > std::numeric_limits<uint16_t>::max()) {
    version = 2;
    preamble = 12;
  }
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';

  Tensor t = tensor.is_contiguous() ? tensor : tensor.contiguous_copy();
  const size_t data_size = static_cast<size_t>(t.numel() * dtype_size(t.dtype()));
  std::string out(kMagic);
  out += static_cast<char>(version);
  out += '\0';
  uint32_t header_size = static_cast<uint32_t>(header.size());
  out.append(reinterpret_cast<const char*>(&header_size), preamble - 8);
  out += header;
  out.append(static_cast<const char*>(t.data()), data_size);
  write_file_atomic(path, out);
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
  // A regular file is read at its size; anything else (a pipe, /dev/stdin, a device) up to a
  // bound, so `weights "/dev/zero"` is an error instead of reading until memory runs out.
  constexpr size_t kMaxStreamBytes = size_t{256} << 20;
  struct stat st;
  bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  std::string out;
  if (regular) out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail("cannot read '{}': {}", path, std::strerror(err));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
    if (!regular && out.size() > kMaxStreamBytes) {
      ::close(fd);
      fail("cannot read '{}': it is not a regular file and gives more than {} bytes", path, kMaxStreamBytes);
    }
  }
  ::close(fd);
  return out;
}

void write_file_atomic(const std::string& requested, const std::string& bytes) {
  const std::string path = replaceable_output(requested);
  // Same folder as the target, so the rename stays on one filesystem and is atomic.
  std::random_device random;
  const std::string temp = fmt::format("{}.tmp.{}.{:08x}", path, ::getpid(), random());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail("cannot write '{}': cannot create temporary file '{}': {}", path, temp, std::strerror(errno));

  auto give_up = [&](const char* step, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    fail("cannot write '{}': {} failed: {}", path, step, std::strerror(err));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) give_up("write", errno);
    done += static_cast<size_t>(n);
  }
  // Without fsync a crash soon after the rename can leave an empty file under the final name.
  if (::fsync(fd) != 0) give_up("fsync", errno);
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) give_up("close", errno);
  if (std::rename(temp.c_str(), path.c_str()) != 0) give_up("rename", errno);
}

}  // namespace coil
