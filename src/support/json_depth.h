// JSON from outside the program (.pt2 archives, safetensors headers, package manifests, the
// adapter's programs) is checked for nesting depth before it is parsed: nlohmann's parser copes
// with any depth, but printing a value (dump(), as error messages do) and walking it recurse once
// per level, and a megabyte of "[[[[..." overflows the stack there.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "support/check.h"

namespace coil {

inline constexpr size_t kMaxJsonDepth = 512;

// Fails (naming `what`) where arrays and objects nest deeper than `limit` outside strings.
inline void check_json_depth(std::string_view text, const std::string& what, size_t limit = kMaxJsonDepth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) fail("{}: its JSON nests deeper than {} levels", what, limit);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace coil
