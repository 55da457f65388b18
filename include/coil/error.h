// Errors. coil::Error is for user mistakes and external failures: its message says what went
// wrong, where, and what to do. COIL_CHECK (src/support/check.h) is for internal invariants.
#pragma once
#include <stdexcept>
#include <string>

namespace coil {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace coil
