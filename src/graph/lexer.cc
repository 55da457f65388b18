#include "graph/lexer.h"

#include <fmt/format.h>

#include <cctype>

#include "support/check.h"

namespace coil {

namespace {
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
}  // namespace

std::vector<Token> tokenize(std::string_view text, const std::string& source_name) {
  std::vector<Token> out;
  size_t i = 0;
  int line = 1, col = 1;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < text.size(); ++k, ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  auto error = [&](const std::string& what) { fail("{}:{}:{}: error: {}", source_name, line, col, what); };
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance(1);
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    Token t{Token::Kind::punct, "", line, col};
    size_t start = i;
    if (ident_start(c)) {
      while (i < text.size() && (ident_char(text[i]) || (text[i] == ':' && i + 1 < text.size() && text[i + 1] == ':' &&
                                                         text.substr(start, i - start) == "aten"))) {
        advance(text[i] == ':' ? 2 : 1);
      }
      t.kind = Token::Kind::ident;
      t.text = std::string(text.substr(start, i - start));
    } else if (c == '%') {
      advance(1);
      size_t name_start = i;
      while (i < text.size() && ident_char(text[i])) advance(1);
      if (i == name_start) error("expected a value name after '%'");
      t.kind = Token::Kind::value;
      t.text = std::string(text.substr(name_start, i - name_start));
    } else if (digit(c) || (c == '.' && i + 1 < text.size() && digit(text[i + 1]))) {
      bool real = false;
      while (i < text.size() && digit(text[i])) advance(1);
      if (i < text.size() && text[i] == '.') {
        real = true;
        advance(1);
        while (i < text.size() && digit(text[i])) advance(1);
      }
      if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        real = true;
        advance(1);
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) advance(1);
        if (i >= text.size() || !digit(text[i])) error("malformed number: expected digits after the exponent");
        while (i < text.size() && digit(text[i])) advance(1);
      }
      if (i < text.size() && ident_start(text[i])) error("malformed number: unexpected '" + std::string(1, text[i]) + "'");
      t.kind = real ? Token::Kind::real : Token::Kind::integer;
      t.text = std::string(text.substr(start, i - start));
    } else if (c == '"') {
      advance(1);
      t.kind = Token::Kind::string;
      while (true) {
        if (i >= text.size() || text[i] == '\n') fail("{}:{}:{}: error: unterminated string", source_name, t.line, t.col);
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size()) {
          char e = text[i + 1];
          t.text += e == 'n' ? '\n' : e;
          advance(2);
          continue;
        }
        t.text += text[i];
        advance(1);
      }
      advance(1);
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      t.text = "//";
      advance(2);
    } else if (std::string_view("()[]{},=:*+-%").find(c) != std::string_view::npos) {
      t.text = std::string(1, c);
      advance(1);
    } else {
      auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte >= 0x7f)  // never echo a raw control or non-ASCII byte to the terminal
        error(fmt::format("unexpected byte 0x{:02x} (outside strings and comments a graph file is ASCII)", byte));
      error(std::string("unexpected character '") + c + "'");
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{Token::Kind::end, "", line, col});
  return out;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Token::Kind::ident: return "'" + t.text + "'";
    case Token::Kind::value: return "'%" + t.text + "'";
    case Token::Kind::integer:
    case Token::Kind::real: return "number " + t.text;
    case Token::Kind::string: return "string \"" + t.text + "\"";
    case Token::Kind::punct: return "'" + t.text + "'";
    case Token::Kind::end: return "end of file";
  }
  return "?";
}

}  // namespace coil
