// IEEE half (f16) and bfloat16 conversions, rounding to nearest even straight from double so
// the reference interpreter never rounds twice.
#pragma once
#include <cstdint>

namespace coil {

uint16_t f16_bits_from_double(double x);
double f16_bits_to_double(uint16_t bits);
uint16_t bf16_bits_from_double(double x);
double bf16_bits_to_double(uint16_t bits);

}  // namespace coil
