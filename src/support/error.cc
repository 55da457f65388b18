#include "support/check.h"

#include <cstdio>
#include <cstdlib>

namespace coil {

void throw_error(std::string message) { throw Error(std::move(message)); }

namespace detail {
CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << "internal error: check `" << condition << "` failed at " << file << ":" << line << ": ";
}

CheckFailure::~CheckFailure() noexcept(false) {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // Built to be fuzzed (tests/fuzz): outside input reaching a state the code assumed impossible
  // is a finding, even where a caller would catch the error and carry on.
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::abort();
#endif
  throw Error(stream_.str());
}
}  // namespace detail
}  // namespace coil
