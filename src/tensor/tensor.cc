#include "coil/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "support/check.h"
#include "support/checked.h"
#include "support/half.h"

namespace coil {

Storage::Storage(int64_t bytes, bool zero) : bytes_(bytes) {
  // Aligned for any vector load a kernel may issue; at least one byte so data() is non-null.
  size_t rounded = static_cast<size_t>(checked_add(std::max<int64_t>(bytes, 1), 63, "an allocation") / 64 * 64);
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) fail("out of memory allocating {} bytes", bytes);
  if (zero) std::memset(data_, 0, rounded);
  release_ = [](void* p) { std::free(p); };
}

Storage::Storage(void* data, int64_t bytes, std::function<void(void*)> release)
    : data_(data), bytes_(bytes), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) release_(data_);
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s = checked_mul(s, std::max<int64_t>(sizes[i], 1), "a tensor's element count");
  }
  return strides;
}

int64_t span_of(const Shape& sizes, const Shape& strides, int64_t offset) {
  if (offset < 0) fail("a tensor's storage offset is negative ({})", offset);
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    if (sizes[i] < 0) fail("negative size {} in tensor shape {}", sizes[i], shape_to_string(sizes));
    if (strides[i] < 0) fail("negative strides are not supported (shape {}, strides {})", shape_to_string(sizes),
                             shape_to_string(strides));
    last = checked_add(last, checked_mul(sizes[i] - 1, strides[i], "a tensor's extent"), "a tensor's extent");
  }
  return checked_add(last, 1, "a tensor's extent");
}

Tensor Tensor::zeros(DType dtype, Shape sizes) {
  Shape strides = contiguous_strides(sizes);
  return zeros_strided(dtype, std::move(sizes), std::move(strides));
}

Tensor Tensor::empty_strided(DType dtype, Shape sizes, Shape strides) {
  return allocate(dtype, std::move(sizes), std::move(strides), false);
}

Tensor Tensor::zeros_strided(DType dtype, Shape sizes, Shape strides) {
  return allocate(dtype, std::move(sizes), std::move(strides), true);
}

Tensor Tensor::allocate(DType dtype, Shape sizes, Shape strides, bool zero) {
  COIL_CHECK(sizes.size() == strides.size()) << "sizes and strides differ in rank";
  for (int64_t s : sizes)
    if (s < 0) fail("negative size {} in tensor shape {}", s, shape_to_string(sizes));
  Tensor t;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(
      checked_mul(span_of(sizes, strides), static_cast<int64_t>(dtype_size(dtype)), "a tensor's byte size"), zero);
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  return t;
}

Tensor Tensor::borrow(void* data, DType dtype, Shape sizes, Shape strides, int64_t offset, Device device,
                      std::function<void(void*)> release) {
  COIL_CHECK(sizes.size() == strides.size()) << "sizes and strides differ in rank";
  Tensor t;
  t.dtype_ = dtype;
  int64_t bytes = checked_mul(checked_add(offset, span_of(sizes, strides), "a tensor's extent"),
                              static_cast<int64_t>(dtype_size(dtype)), "a tensor's byte size");
  t.storage_ = std::make_shared<Storage>(data, bytes, std::move(release));
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  t.device_ = device;
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes_) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (sizes_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

void* Tensor::data() const { return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_); }

Tensor Tensor::view(Shape sizes, Shape strides, int64_t offset) const {
  COIL_CHECK(defined()) << "view of an undefined tensor";
  int64_t span = span_of(sizes, strides);
  COIL_CHECK(span == 0 || checked_add(offset, span, "a view's extent") <= storage_->bytes() / dtype_size(dtype_))
      << "view " << shape_to_string(sizes) << " at offset " << offset << " runs past its storage";
  Tensor t = *this;
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::contiguous_copy() const {
  // Bytes, not values: NaN payloads and bool bytes survive exactly.
  Tensor out = zeros(dtype_, sizes_);
  const int64_t size = dtype_size(dtype_);
  char* dst = static_cast<char*>(out.data());
  const char* src = static_cast<const char*>(storage_->data());
  int64_t i = 0;
  for_each_index([&](std::span<const int64_t> idx) {
    std::memcpy(dst + size * i++, src + size * element_index(idx), static_cast<size_t>(size));
  });
  return out;
}

namespace {
template <typename T>
T read(const void* base, int64_t element) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + element * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void write(void* base, int64_t element, T v) {
  std::memcpy(static_cast<char*>(base) + element * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

int64_t to_int64(double v) {
  if (std::isnan(v)) return 0;
  constexpr double lim = 9.2233720368547758e18;
  if (v >= lim) return std::numeric_limits<int64_t>::max();
  if (v <= -lim) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}
}  // namespace

double Tensor::load(int64_t element) const {
  const void* base = storage_->data();
  switch (dtype_) {
    case DType::f64: return read<double>(base, element);
    case DType::f32: return read<float>(base, element);
    case DType::f16: return f16_bits_to_double(read<uint16_t>(base, element));
    case DType::bf16: return bf16_bits_to_double(read<uint16_t>(base, element));
    case DType::i64: return static_cast<double>(read<int64_t>(base, element));
    case DType::i32: return read<int32_t>(base, element);
    case DType::i16: return read<int16_t>(base, element);
    case DType::i8: return read<int8_t>(base, element);
    case DType::u8: return read<uint8_t>(base, element);
    case DType::b8: return read<uint8_t>(base, element) != 0;
  }
  return 0;
}

int64_t Tensor::load_int(int64_t element) const {
  const void* base = storage_->data();
  switch (dtype_) {
    case DType::i64: return read<int64_t>(base, element);
    case DType::i32: return read<int32_t>(base, element);
    case DType::i16: return read<int16_t>(base, element);
    case DType::i8: return read<int8_t>(base, element);
    case DType::u8: return read<uint8_t>(base, element);
    case DType::b8: return read<uint8_t>(base, element) != 0;
    default: return to_int64(load(element));
  }
}

void Tensor::store(int64_t element, double v) const {
  void* base = storage_->data();
  switch (dtype_) {
    case DType::f64: return write<double>(base, element, v);
    case DType::f32: return write<float>(base, element, static_cast<float>(v));
    case DType::f16: return write<uint16_t>(base, element, f16_bits_from_double(v));
    case DType::bf16: return write<uint16_t>(base, element, bf16_bits_from_double(v));
    case DType::b8: return write<uint8_t>(base, element, v != 0 ? 1 : 0);
    default: return store_int(element, to_int64(v));
  }
}

void Tensor::store_int(int64_t element, int64_t v) const {
  void* base = storage_->data();
  switch (dtype_) {
    case DType::i64: return write<int64_t>(base, element, v);
    case DType::i32: return write<int32_t>(base, element, static_cast<int32_t>(v));
    case DType::i16: return write<int16_t>(base, element, static_cast<int16_t>(v));
    case DType::i8: return write<int8_t>(base, element, static_cast<int8_t>(v));
    case DType::u8: return write<uint8_t>(base, element, static_cast<uint8_t>(v));
    case DType::b8: return write<uint8_t>(base, element, v != 0 ? 1 : 0);
    default: return store(element, static_cast<double>(v));
  }
}

int64_t Tensor::element_index(std::span<const int64_t> index) const {
  int64_t e = offset_;
  for (size_t i = 0; i < index.size(); ++i) e += index[i] * strides_[i];
  return e;
}

void Tensor::for_each_index(const std::function<void(std::span<const int64_t>)>& fn) const {
  if (numel() == 0) return;
  Shape idx(sizes_.size(), 0);
  while (true) {
    fn(idx);
    size_t d = idx.size();
    while (d > 0) {
      --d;
      if (++idx[d] < sizes_[d]) break;
      idx[d] = 0;
      if (d == 0) return;
    }
    if (idx.empty()) return;
  }
}

double round_to_dtype(double v, DType dtype) {
  switch (dtype) {
    case DType::f64: return v;
    case DType::f32: return static_cast<float>(v);
    case DType::f16: return f16_bits_to_double(f16_bits_from_double(v));
    case DType::bf16: return bf16_bits_to_double(bf16_bits_from_double(v));
    case DType::b8: return v != 0 ? 1 : 0;
    case DType::i64: return static_cast<double>(to_int64(v));
    case DType::i32: return static_cast<int32_t>(to_int64(v));
    case DType::i16: return static_cast<int16_t>(to_int64(v));
    case DType::i8: return static_cast<int8_t>(to_int64(v));
    case DType::u8: return static_cast<uint8_t>(to_int64(v));
  }
  return v;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace coil
