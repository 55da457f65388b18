// Internal invariant checks: `COIL_CHECK(cond) << "context";` throws coil::Error naming the
// source location. User-facing failures use coil::fail with a message written for the user.
#pragma once
#include <fmt/format.h>

#include <sstream>
#include <string>

#include "coil/error.h"

namespace coil {

[[noreturn]] void throw_error(std::string message);

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw_error(fmt::format(format, std::forward<Args>(args)...));
}

namespace detail {
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure() noexcept(false);
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
}  // namespace detail
}  // namespace coil

#define COIL_CHECK(cond) \
  if (cond) {            \
  } else                 \
    ::coil::detail::CheckFailure(__FILE__, __LINE__, #cond)
