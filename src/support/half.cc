#include "support/half.h"

#include <cmath>
#include <cstring>

namespace coil {

namespace {

// A binary floating-point format with `mant` stored mantissa bits and `exp` exponent bits.
struct Format {
  int mant;
  int exp;
  int bias() const { return (1 << (exp - 1)) - 1; }
  uint16_t inf_bits() const { return static_cast<uint16_t>(((1 << exp) - 1) << mant); }
  uint16_t nan_bits() const { return static_cast<uint16_t>(inf_bits() | (1 << (mant - 1))); }
};

uint16_t encode(double x, Format f) {
  if (std::isnan(x)) return f.nan_bits();
  uint16_t sign = std::signbit(x) ? static_cast<uint16_t>(1u << (f.mant + f.exp)) : 0;
  double a = std::fabs(x);
  if (std::isinf(a)) return sign | f.inf_bits();
  int min_normal_exp = 1 - f.bias();
  if (a < std::ldexp(1.0, min_normal_exp)) {
    // Subnormal: a multiple of 2^(min_normal_exp - mant); rounding may carry into the
    // smallest normal, which the bit pattern handles by itself.
    double q = std::nearbyint(std::ldexp(a, f.mant - min_normal_exp));
    return sign | static_cast<uint16_t>(q);
  }
  int e = 0;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exponent = e - 1;
  double mantissa = std::nearbyint((m * 2.0 - 1.0) * static_cast<double>(1 << f.mant));
  if (mantissa >= static_cast<double>(1 << f.mant)) {
    mantissa = 0;
    ++exponent;
  }
  int field = exponent + f.bias();
  if (field >= (1 << f.exp) - 1) return sign | f.inf_bits();
  return sign | static_cast<uint16_t>((field << f.mant) | static_cast<int>(mantissa));
}

double decode(uint16_t bits, Format f) {
  int sign = (bits >> (f.mant + f.exp)) & 1;
  int field = (bits >> f.mant) & ((1 << f.exp) - 1);
  int mantissa = bits & ((1 << f.mant) - 1);
  double value;
  if (field == (1 << f.exp) - 1) {
    value = mantissa ? NAN : INFINITY;
  } else if (field == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - f.bias() - f.mant);
  } else {
    value = std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa), -f.mant), field - f.bias());
  }
  return sign ? -value : value;
}

constexpr Format kF16{10, 5};
constexpr Format kBF16{7, 8};

}  // namespace

uint16_t f16_bits_from_double(double x) { return encode(x, kF16); }
double f16_bits_to_double(uint16_t bits) { return decode(bits, kF16); }
uint16_t bf16_bits_from_double(double x) { return encode(x, kBF16); }
double bf16_bits_to_double(uint16_t bits) { return decode(bits, kBF16); }

}  // namespace coil
