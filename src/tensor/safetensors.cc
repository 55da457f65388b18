// .safetensors: an 8-byte little-endian header length N, N bytes of JSON naming each tensor's
// dtype, shape and byte range, then one byte buffer that the ranges tile exactly.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "coil/io.h"
#include "support/check.h"
#include "support/json_depth.h"
#include "support/mapped_file.h"

namespace coil {

namespace {

static_assert(std::endian::native == std::endian::little,
              "tensor files are little-endian and are copied byte for byte; a big-endian host needs swaps");

// Ordered so that tensors come back in the header's order rather than sorted by name.
using Json = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";

struct Code {
  std::string_view code;
  DType dtype;
};
constexpr Code kCodes[] = {{"F64", DType::f64}, {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
                           {"I64", DType::i64}, {"I32", DType::i32}, {"I16", DType::i16}, {"I8", DType::i8},
                           {"U8", DType::u8},   {"BOOL", DType::b8}};

std::optional<DType> dtype_from_code(std::string_view code) {
  for (const Code& c : kCodes)
    if (c.code == code) return c.dtype;
  return std::nullopt;
}

std::string_view code_of(DType dtype) {
  for (const Code& c : kCodes)
    if (c.dtype == dtype) return c.code;
  COIL_CHECK(false) << "dtype " << dtype_name(dtype) << " has no safetensors code";
  return {};
}

std::string supported_codes() {
  std::string out;
  for (const Code& c : kCodes) out += (out.empty() ? "" : " ") + std::string(c.code);
  return out;
}

// A JSON value for an error message, cut short so a huge header does not flood the terminal.
std::string brief(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() <= 80 ? s : s.substr(0, 77) + "...";
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

Shape parse_shape(const Json& j, const std::string& what, const std::string& name) {
  if (!j.is_array())
    fail("{}: tensor '{}': shape must be a list of non-negative integers, got {}", what, name, brief(j));
  Shape shape;
  for (const Json& d : j) {
    // Non-negative integers parse as unsigned; negative ones and 2.0 do not.
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: tensor '{}': shape must be a list of non-negative integers, got {}", what, name, brief(j));
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

// Bytes the tensor needs; an overflowing product is a corrupt header, not a huge tensor.
uint64_t byte_size(const Shape& shape, DType dtype, const std::string& what, const std::string& name) {
  uint64_t bytes = static_cast<uint64_t>(dtype_size(dtype));
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      fail("{}: tensor '{}': shape {} is too large to address", what, name, shape_to_string(shape));
  return bytes;
}

Entry parse_entry(const std::string& name, const Json& info, uint64_t buffer_size, const std::string& what) {
  if (!info.is_object())
    fail("{}: tensor '{}': expected an object with dtype, shape and data_offsets, got {}", what, name, brief(info));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) fail("{}: tensor '{}': missing \"{}\"", what, name, key);

  const Json& code = info["dtype"];
  if (!code.is_string()) fail("{}: tensor '{}': dtype must be a string, got {}", what, name, brief(code));
  std::optional<DType> dtype = dtype_from_code(code.get<std::string>());
  if (!dtype)
    fail("{}: tensor '{}': unsupported dtype '{}' (coil reads {})", what, name, code.get<std::string>(),
         supported_codes());

  Entry e{name, *dtype, parse_shape(info["shape"], what, name), 0, 0};

  const Json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail("{}: tensor '{}': data_offsets must be a list of two non-negative integers [begin, end], got {}", what, name,
         brief(offsets));
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end || e.end > buffer_size)
    fail("{}: tensor '{}': data_offsets [{}, {}] are out of range for a data buffer of {} bytes", what, name, e.begin,
         e.end, buffer_size);
  uint64_t needed = byte_size(e.shape, e.dtype, what, name);
  if (e.end - e.begin != needed)
    fail("{}: tensor '{}': size mismatch: data_offsets [{}, {}] span {} bytes but {} {} needs {}", what, name, e.begin,
         e.end, e.end - e.begin, code.get<std::string>(), shape_to_string(e.shape), needed);
  return e;
}

void check_metadata(const Json& metadata, const std::string& what) {
  bool ok = metadata.is_object();
  if (ok)
    for (const auto& [key, value] : metadata.items()) ok = ok && value.is_string();
  if (!ok) fail("{}: __metadata__ must be an object of strings to strings, got {}", what, brief(metadata));
}

// The spec requires the byte ranges to tile the buffer: no overlap (two tensors aliasing one
// another's bytes) and no holes (bytes no tensor owns, which usually means a truncated header).
void check_coverage(const std::vector<Entry>& entries, uint64_t buffer_size, const std::string& what) {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t position = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : sorted) {
    if (e->begin < position)
      fail("{}: tensor '{}' (bytes [{}, {}]) overlaps tensor '{}' (bytes [{}, {}])", what, e->name, e->begin, e->end,
           previous->name, previous->begin, previous->end);
    if (e->begin > position)
      fail("{}: bytes [{}, {}] of the data buffer belong to no tensor (a hole before tensor '{}')", what, position,
           e->begin, e->name);
    position = e->end;
    previous = e;
  }
  if (position != buffer_size)
    fail("{}: bytes [{}, {}] at the end of the data buffer belong to no tensor", what, position, buffer_size);
}

Json parse_header(std::string_view text, const std::string& what) {
  // JSON itself allows repeated keys, but two tensors with one name is a broken file.
  std::optional<std::string> duplicate;
  std::set<std::string> names;
  Json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && !names.insert(parsed.get<std::string>()).second)
      duplicate = duplicate.value_or(parsed.get<std::string>());
    return true;
  };
  check_json_depth(text, fmt::format("{}: the safetensors header", what));
  Json header;
  try {
    header = Json::parse(text, on_event);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past 64 bits
    fail("{}: the safetensors header is not valid JSON: {}", what, e.what());
  }
  if (!header.is_object()) fail("{}: the safetensors header is not a JSON object, got {}", what, brief(header));
  if (duplicate) fail("{}: duplicate tensor name '{}' in the header", what, *duplicate);
  return header;
}


NamedTensors parse_view(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 8)
    fail("{}: file is too short to be safetensors ({} bytes; the 8-byte header length is missing)", what, bytes.size());
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > bytes.size() - 8)
    fail("{}: header length {} is larger than the {} bytes that follow it (truncated or not a safetensors file)", what,
         header_size, bytes.size() - 8);
  const Json header = parse_header(bytes.substr(8, header_size), what);
  const uint64_t data_start = 8 + header_size;
  const uint64_t buffer_size = bytes.size() - data_start;

  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      check_metadata(info, what);
      continue;
    }
    entries.push_back(parse_entry(name, info, buffer_size, what));
  }
  check_coverage(entries, buffer_size, what);

  NamedTensors out;
  for (const Entry& e : entries) {
    Tensor t = Tensor::zeros(e.dtype, e.shape);
    if (e.end > e.begin) std::memcpy(t.data(), bytes.data() + data_start + e.begin, e.end - e.begin);
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace

NamedTensors parse_safetensors(const std::string& bytes, const std::string& what) { return parse_view(bytes, what); }

NamedTensors read_safetensors(const std::string& path) {
  if (std::optional<MappedFile> mapped = MappedFile::open(path)) return parse_view(mapped->bytes(), path);
  return parse_safetensors(read_file(path), path);
}

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                              const std::string& path) {
  Json header = Json::object();
  // The reference writer puts metadata first; readers do not care, people reading headers do.
  if (!metadata.empty()) header[kMetadataKey] = metadata;

  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) fail("cannot write '{}': '{}' is reserved and cannot name a tensor", path, name);
    if (header.contains(name)) fail("cannot write '{}': duplicate tensor name '{}'", path, name);
    if (!tensor.defined()) fail("cannot write '{}': tensor '{}' is undefined", path, name);
    if (tensor.device().kind != Device::Kind::cpu)
      fail("cannot write '{}': tensor '{}' is on {}; copy it to the CPU first", path, name,
           device_name(tensor.device()));
    Tensor t = tensor.is_contiguous() ? tensor : tensor.contiguous_copy();
    uint64_t bytes = static_cast<uint64_t>(t.numel() * dtype_size(t.dtype()));
    header[name] = {
        {"dtype", code_of(t.dtype())}, {"shape", t.sizes()}, {"data_offsets", Json::array({offset, offset + bytes})}};
    offset += bytes;
    data.push_back(std::move(t));
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const Json::type_error& e) {
    fail("cannot write '{}': tensor names and metadata must be valid UTF-8 ({})", path, e.what());
  }
  // Padding keeps the data buffer 8-byte aligned for readers that map the file.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t header_size = text.size();
  out.append(reinterpret_cast<const char*>(&header_size), 8);
  out += text;
  for (const Tensor& t : data)
    out.append(static_cast<const char*>(t.data()), static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata, path));
}

}  // namespace coil
