#include "frontend/sympy_expr.h"

#include <cctype>
#include <charconv>
#include <vector>

#include "support/check.h"

namespace coil::frontend {

namespace {

// A recursive-descent reader of srepr's call syntax: Name(arg, ..., key=value, ...).
class Reader {
 public:
  Reader(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  SymInt read() {
    SymInt e = expr(0);
    skip_space();
    if (at_ != text_.size()) error("unexpected text after the expression");
    return e;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("{}: size expression '{}': {} (at {})", where_, std::string(text_.substr(0, 200)), what, at_);
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool eat(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) return ++at_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(std::string("expected '") + c + "'");
  }
  std::string ident() {
    skip_space();
    size_t start = at_;
    while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) ++at_;
    if (start == at_) error("expected a name");
    return std::string(text_.substr(start, at_ - start));
  }
  int64_t integer() {
    skip_space();
    size_t start = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + at_, v);
    if (ec != std::errc() || end != text_.data() + at_) error("expected an integer that fits int64");
    return v;
  }
  std::string quoted() {
    skip_space();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) error("expected a quoted name");
    char q = text_[at_++];
    size_t start = at_;
    while (at_ < text_.size() && text_[at_] != q) ++at_;
    if (at_ >= text_.size()) error("an unterminated name");
    return std::string(text_.substr(start, at_++ - start));
  }
  // The positional arguments of a call, its keyword arguments (Symbol's assumptions) skipped.
  std::vector<SymInt> arguments(int depth) {
    std::vector<SymInt> args;
    expect('(');
    if (eat(')')) return args;
    do {
      skip_space();
      size_t mark = at_;
      if (at_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[at_]))) {
        ident();
        if (eat('=')) {  // key=True
          ident();
          continue;
        }
        at_ = mark;
      }
      args.push_back(expr(depth + 1));
    } while (eat(','));
    expect(')');
    return args;
  }

  SymInt expr(int depth) {
    if (depth > 128) error("nested too deeply");
    skip_space();
    if (at_ < text_.size() && (text_[at_] == '-' || std::isdigit(static_cast<unsigned char>(text_[at_])))) return integer();
    std::string name = ident();
    if (name == "Integer") {
      expect('(');
      int64_t v = integer();
      expect(')');
      return v;
    }
    if (name == "Symbol") {
      expect('(');
      std::string symbol = quoted();
      while (eat(',')) {  // positive=True, integer=True
        ident();
        expect('=');
        ident();
      }
      expect(')');
      return SymInt::symbol(symbol);
    }
    std::vector<SymInt> args = arguments(depth);
    auto fold = [&](auto f) {
      if (args.empty()) error(name + " of no operands");
      SymInt r = args[0];
      for (size_t i = 1; i < args.size(); ++i) r = f(r, args[i]);
      return r;
    };
    auto two = [&] {
      if (args.size() != 2) error(name + " takes two operands");
    };
    if (name == "Add") return fold([](const SymInt& a, const SymInt& b) { return a + b; });
    if (name == "Mul") return fold([](const SymInt& a, const SymInt& b) { return a * b; });
    if (name == "Max") return fold([](const SymInt& a, const SymInt& b) { return max(a, b); });
    if (name == "Min") return fold([](const SymInt& a, const SymInt& b) { return min(a, b); });
    if (name == "FloorDiv") return two(), floordiv(args[0], args[1]);
    if (name == "CeilDiv") return two(), floordiv(args[0] + args[1] - 1, args[1]);
    if (name == "Mod" || name == "PythonMod") return two(), mod(args[0], args[1]);
    if (name == "Pow" || name == "PowByNatural") {
      two();
      auto k = args[1].constant();
      if (!k || *k < 0 || *k > 8) error("a power by other than a small constant");
      SymInt r = 1;
      for (int64_t i = 0; i < *k; ++i) r = r * args[0];
      return r;
    }
    error("'" + name + "' is not an integer size expression coil takes");
  }

  std::string_view text_;
  const std::string& where_;
  size_t at_ = 0;
};

}  // namespace

SymInt parse_sympy_srepr(std::string_view text, const std::string& where) { return Reader(text, where).read(); }

}  // namespace coil::frontend
