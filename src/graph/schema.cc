#include "graph/schema.h"

#include <cctype>
#include <algorithm>
#include <charconv>

#include "support/check.h"

namespace coil {

namespace {

class SchemaReader {
 public:
  explicit SchemaReader(std::string_view text) : text_(text) {}

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  void expect(std::string_view token) {
    COIL_CHECK(eat(token)) << "schema '" << text_ << "': expected '" << token << "' at " << pos_;
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  std::string_view word() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' ||
                                   text_[pos_] == '.'))
      ++pos_;
    COIL_CHECK(pos_ > start) << "schema '" << text_ << "': expected a name at " << start;
    return text_.substr(start, pos_ - start);
  }
  // A default value: everything up to the next top-level ',' or ')'.
  std::string_view default_text() {
    skip_space();
    size_t start = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '[') ++depth;
      if (c == ']') --depth;
      if (depth == 0 && (c == ',' || c == ')')) break;
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  // Skips an alias annotation such as "(a)" or "(a -> *)".
  void skip_alias() {
    if (peek() != '(') return;
    while (pos_ < text_.size() && text_[pos_] != ')') ++pos_;
    expect(")");
  }
  std::string_view text() const { return text_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

ArgType base_type(std::string_view name, std::string_view schema) {
  if (name == "Tensor") return ArgType::Tensor;
  if (name == "int" || name == "SymInt") return ArgType::Int;
  if (name == "float") return ArgType::Float;
  if (name == "bool") return ArgType::Bool;
  if (name == "str") return ArgType::Str;
  if (name == "Scalar") return ArgType::Scalar;
  if (name == "ScalarType") return ArgType::ScalarType;
  if (name == "Layout") return ArgType::Layout;
  if (name == "Device") return ArgType::Device;
  if (name == "MemoryFormat") return ArgType::MemoryFormat;
  COIL_CHECK(false) << "schema '" << schema << "': unknown type '" << name << "'";
}

Arg parse_number(std::string_view s, bool want_float) {
  bool looks_float = s.find_first_of(".eE") != std::string_view::npos;
  if (want_float || looks_float) return std::stod(std::string(s));
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  COIL_CHECK(ec == std::errc() && ptr == s.data() + s.size()) << "bad integer default '" << s << "'";
  return SymInt(v);
}

Arg parse_default(std::string_view s, const ArgSchema& arg) {
  if (s == "None") return Arg();
  if (s == "True") return Arg(true);
  if (s == "False") return Arg(false);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"')) return Arg(std::string(s.substr(1, s.size() - 2)));
  if (s.size() >= 2 && s.front() == '[') {
    IntList items;
    std::string_view body = s.substr(1, s.size() - 2);
    while (!body.empty()) {
      size_t comma = body.find(',');
      items.push_back(*std::get<SymInt>(parse_number(body.substr(0, comma), false).value).constant());
      body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 1);
    }
    return Arg(items);
  }
  if (arg.type == ArgType::Ints) {  // `int[2] stride=1` means [1, 1]
    SymInt v = std::get<SymInt>(parse_number(s, false).value);
    return Arg(IntList(static_cast<size_t>(std::max(arg.fixed_size, 1)), v));
  }
  return parse_number(s, arg.type == ArgType::Float);
}

ArgSchema parse_argument(SchemaReader& r, bool kwarg_only) {
  ArgSchema arg;
  arg.kwarg_only = kwarg_only;
  std::string_view type_name = r.word();
  arg.type = base_type(type_name, r.text());
  r.skip_alias();
  if (r.eat("?")) arg.optional = true;
  if (r.eat("[")) {
    if (r.peek() != ']') arg.fixed_size = static_cast<int>(std::stoi(std::string(r.word())));
    r.expect("]");
    arg.list_elems_optional = arg.optional;
    arg.optional = r.eat("?");
    if (arg.type == ArgType::Tensor) arg.type = ArgType::Tensors;
    else if (arg.type == ArgType::Int) arg.type = ArgType::Ints;
    else if (arg.type == ArgType::Float) arg.type = ArgType::Floats;
    else COIL_CHECK(false) << "schema '" << r.text() << "': unsupported list type";
  }
  arg.name = std::string(r.word());
  if (r.eat("=")) arg.default_value = parse_default(r.default_text(), arg);
  return arg;
}

}  // namespace

OpSchema parse_op_schema(std::string_view text, OpKind kind, OpFamily family) {
  OpSchema schema;
  schema.kind = kind;
  schema.family = family;
  schema.text = std::string(text);
  SchemaReader r(text);
  schema.name = std::string(r.word());
  size_t dot = schema.name.find('.');
  schema.base = schema.name.substr(0, dot);
  schema.overload = dot == std::string::npos ? "" : schema.name.substr(dot + 1);
  r.expect("(");
  bool kwarg_only = false;
  while (!r.eat(")")) {
    if (!schema.args.empty()) r.expect(",");
    if (r.eat("*")) {
      kwarg_only = true;
      continue;
    }
    schema.args.push_back(parse_argument(r, kwarg_only));
  }
  r.expect("->");
  // Returns: "Tensor", "Tensor(a)", "Tensor(a)[]", "(Tensor, Tensor)", "(Tensor values, Tensor indices)".
  if (r.eat("(")) {
    schema.num_returns = 0;
    while (!r.eat(")")) {
      if (schema.num_returns > 0) r.expect(",");
      r.word();
      if (r.peek() != ',' && r.peek() != ')') r.word();
      ++schema.num_returns;
    }
  } else {
    r.word();
    schema.is_view = r.peek() == '(';
    r.skip_alias();
    if (r.eat("[")) {
      r.expect("]");
      schema.num_returns = -1;
    }
  }
  return schema;
}

int OpSchema::arg_index(std::string_view arg_name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == arg_name) return static_cast<int>(i);
  return -1;
}

}  // namespace coil
