// Size, stride and offset arithmetic on values that come from outside the program (graph text,
// --size, .pt2 archives, safetensors, packages): int64 that fails with a message for the user
// instead of wrapping. One helper for every boundary, not a check per site.
#pragma once
#include <cstdint>

#include "support/check.h"

namespace coil {

// a + b; `what` names the quantity in the message ("a size expression", "a tensor's extent").
inline int64_t checked_add(int64_t a, int64_t b, const char* what = "a size") {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("{} is too large: {} + {} overflows int64", what, a, b);
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b, const char* what = "a size") {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("{} is too large: {} * {} overflows int64", what, a, b);
  return r;
}

}  // namespace coil
