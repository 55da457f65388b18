// Element types and devices, with PyTorch's names and promotion lattice.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coil {

// The order is the printing order of the text format; do not rely on it for promotion.
enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, b8 };
inline constexpr int kNumDTypes = 10;

std::string_view dtype_name(DType t);                      // "f32", "bool", ...
std::optional<DType> dtype_from_name(std::string_view s);  // inverse of dtype_name
int64_t dtype_size(DType t);                               // bytes per element
bool is_float(DType t);
bool is_half(DType t);  // f16 or bf16: 16-bit floats, accumulated in f32
bool is_integral(DType t, bool include_bool);
// torch.promote_types.
DType promote_types(DType a, DType b);

struct Device {
  enum class Kind : uint8_t { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};
std::string device_name(const Device& d);                     // "cpu", "cuda:0"
std::optional<Device> device_from_name(std::string_view s);  // "cpu", "cuda", "cuda:1"

}  // namespace coil
