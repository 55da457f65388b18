#include "coil/dtype.h"

#include <array>
#include <charconv>

namespace coil {

namespace {
struct DTypeInfo {
  std::string_view name;
  int64_t size;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{{"f64", 8},
                                                      {"f32", 4},
                                                      {"f16", 2},
                                                      {"bf16", 2},
                                                      {"i64", 8},
                                                      {"i32", 4},
                                                      {"i16", 2},
                                                      {"i8", 1},
                                                      {"u8", 1},
                                                      {"bool", 1}}};
}  // namespace

std::string_view dtype_name(DType t) { return kInfo[static_cast<size_t>(t)].name; }

std::optional<DType> dtype_from_name(std::string_view s) {
  for (size_t i = 0; i < kInfo.size(); ++i)
    if (kInfo[i].name == s) return static_cast<DType>(i);
  return std::nullopt;
}

int64_t dtype_size(DType t) { return kInfo[static_cast<size_t>(t)].size; }

bool is_float(DType t) { return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16; }

bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

bool is_integral(DType t, bool include_bool) {
  if (t == DType::b8) return include_bool;
  return !is_float(t);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::b8) return b;
  if (b == DType::b8) return a;
  if (is_float(a) != is_float(b)) return is_float(a) ? a : b;
  if (is_float(a)) {
    // f16 and bf16 meet at f32; otherwise the wider type wins.
    if (dtype_size(a) == 2 && dtype_size(b) == 2) return DType::f32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  // Integers: u8 with a signed type needs a signed type that holds 0..255.
  if (a == DType::u8 || b == DType::u8) {
    DType other = a == DType::u8 ? b : a;
    return other == DType::i8 ? DType::i16 : other;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

std::string device_name(const Device& d) {
  if (d.kind == Device::Kind::cpu) return "cpu";
  return "cuda:" + std::to_string(d.index);
}

std::optional<Device> device_from_name(std::string_view s) {
  if (s == "cpu") return Device{};
  if (s == "cuda") return Device{Device::Kind::cuda, 0};
  if (s.substr(0, 5) != "cuda:") return std::nullopt;
  int index = 0;
  auto digits = s.substr(5);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty() || index < 0)
    return std::nullopt;
  return Device{Device::Kind::cuda, index};
}

}  // namespace coil
