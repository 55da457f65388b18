#include "support/check.h"

namespace coil {

void throw_error(std::string message) { throw Error(std::move(message)); }

namespace detail {
CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << "internal error: check `" << condition << "` failed at " << file << ":" << line << ": ";
}

CheckFailure::~CheckFailure() noexcept(false) { throw Error(stream_.str()); }
}  // namespace detail
}  // namespace coil
