// Tokens of the text format, with their line and column for error messages.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace coil {

struct Token {
  enum class Kind { ident, value, integer, real, string, punct, end };
  Kind kind;
  std::string text;  // identifier / value name (without %) / literal text / punctuation / decoded string
  int line = 1;
  int col = 1;
};

// Splits `text` into tokens; a character no token starts with is a coil::Error at its
// file:line:col.
std::vector<Token> tokenize(std::string_view text, const std::string& source_name);
std::string describe(const Token& t);  // "identifier 'foo'", "'('", "end of file"

}  // namespace coil
