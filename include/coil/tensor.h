// A small strided tensor: dtype, sizes, strides (in elements), storage offset and device over
// shared storage that is either owned or borrowed. Views share storage.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "coil/dtype.h"

namespace coil {

class Storage {
 public:
  // Owned host memory, 64-byte aligned; zero-filled unless `zero` is false.
  explicit Storage(int64_t bytes, bool zero = true);
  // Borrowed memory: `release` runs when the last tensor referring to it goes away.
  Storage(void* data, int64_t bytes, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  std::function<void(void*)> release_;
};

using Shape = std::vector<int64_t>;

class Tensor {
 public:
  Tensor() = default;
  // A new zero-filled, contiguous tensor.
  static Tensor zeros(DType dtype, Shape sizes);
  // A new zero-filled tensor with the given strides; the storage covers every addressed element.
  static Tensor zeros_strided(DType dtype, Shape sizes, Shape strides);
  // Like zeros_strided, with the memory left uninitialized (for results a kernel overwrites).
  static Tensor empty_strided(DType dtype, Shape sizes, Shape strides);
  // Wraps memory owned elsewhere. The caller keeps it alive (or passes a release function).
  static Tensor borrow(void* data, DType dtype, Shape sizes, Shape strides, int64_t offset = 0,
                       Device device = {}, std::function<void(void*)> release = nullptr);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  const Device& device() const { return device_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Pointer to element [0, 0, ...] (storage base plus offset).
  void* data() const;

  // A view over the same storage.
  Tensor view(Shape sizes, Shape strides, int64_t offset) const;
  // A contiguous copy (new storage).
  Tensor contiguous_copy() const;

  // Element access by storage element index (offset and strides already applied).
  double load(int64_t element) const;
  int64_t load_int(int64_t element) const;
  void store(int64_t element, double value) const;
  void store_int(int64_t element, int64_t value) const;
  // Storage element index of a multi-index.
  int64_t element_index(std::span<const int64_t> index) const;

  // Visits every multi-index in row-major order; the callback gets the index.
  void for_each_index(const std::function<void(std::span<const int64_t>)>& fn) const;

 private:
  static Tensor allocate(DType dtype, Shape sizes, Shape strides, bool zero);
  DType dtype_ = DType::f32;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  Device device_;
  std::shared_ptr<Storage> storage_;
};

Shape contiguous_strides(const Shape& sizes);
// Storage elements a layout addresses, offset included: offset + 1 + sum((size - 1) * stride),
// 0 when it has no elements. Strides must not be negative.
int64_t span_of(const Shape& sizes, const Shape& strides, int64_t offset = 0);
// Rounds a double to what the dtype can hold (fp rounding to nearest even, integer wrap-around,
// bool as != 0), the way a PyTorch op writes its result.
double round_to_dtype(double value, DType dtype);
std::string shape_to_string(const Shape& s);

}  // namespace coil
