// The text parser: recursive descent over tokens, directed by each op's schema, so a bare
// word means what the argument's type says (a dtype, a device, a size symbol). Each statement
// is checked as soon as it is read, so errors point at the line that caused them.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "coil/graph.h"
#include "coil/io.h"
#include "graph/lexer.h"
#include "graph/text_util.h"
#include "support/check.h"

namespace coil {

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string source) : source_(std::move(source)), tokens_(tokenize(text, source_)) {}

  Graph parse() {
    expect_word("graph");
    graph_.name = expect(Token::Kind::ident, "a graph name").text;
    expect_punct("{");
    while (!at_word("return")) {
      if (peek().kind == Token::Kind::end || at_punct("}")) error(peek(), "expected a statement or 'return', found " + describe(peek()));
      statement();
    }
    const Token& return_token = next();
    if (at_punct("}")) error(return_token, "the graph returns nothing; list its outputs after 'return'");
    do {
      if (at_word("any_layout")) {  // the compiler picks its strides
        next();
        graph_.any_layout_outputs.push_back(graph_.outputs.size());
      }
      graph_.outputs.push_back(value_ref());
    } while (eat_punct(","));
    expect_punct("}");
    if (peek().kind != Token::Kind::end) error(peek(), "expected end of file after the graph, found " + describe(peek()));
    return std::move(graph_);
  }

 private:
  // ---- token helpers
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool at_punct(std::string_view p) const { return peek().kind == Token::Kind::punct && peek().text == p; }
  bool at_word(std::string_view w) const { return peek().kind == Token::Kind::ident && peek().text == w; }
  bool eat_punct(std::string_view p) {
    if (!at_punct(p)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const Token& at, const std::string& what) const {
    fail("{}:{}:{}: error: {}", source_, at.line, at.col, what);
  }
  const Token& expect(Token::Kind kind, std::string_view what) {
    if (peek().kind != kind) error(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  void expect_punct(std::string_view p) {
    if (!at_punct(p)) error(peek(), fmt::format("expected '{}', found {}", p, describe(peek())));
    next();
  }
  void expect_word(std::string_view w) {
    if (!at_word(w)) error(peek(), fmt::format("expected '{}', found {}", w, describe(peek())));
    next();
  }
  // Between the items of a list closed by `closer`: a ',' unless this is the first item.
  void separator(bool first, std::string_view closer) {
    if (first || eat_punct(",")) return;
    error(peek(), fmt::format("expected ',' or '{}', found {}", closer, describe(peek())));
  }
  int64_t integer_literal() {
    bool negative = eat_punct("-");
    const Token& t = expect(Token::Kind::integer, "an integer");
    try {
      int64_t v = std::stoll(t.text);
      return negative ? -v : v;
    } catch (const std::exception&) {
      error(t, "integer " + t.text + " is out of range");
    }
  }

  // ---- statements
  void statement() {
    if (at_word("sym")) {
      next();
      const Token& name = expect(Token::Kind::ident, "a symbol name");
      if (symbols_.count(name.text)) error(name, "size symbol '" + name.text + "' is declared twice");
      if (is_reserved_symbol_name(name.text))
        error(name, "size symbol name '" + name.text + "' is reserved for loop variables; choose another name");
      SymbolDecl decl{name.text, std::nullopt};
      if (at_word("in")) {  // its range: in [min, max|inf]
        next();
        expect_punct("[");
        const Token& low = peek();
        decl.min = integer_literal();
        if (decl.min < 0) error(low, "a size symbol's least value must be non-negative");
        expect_punct(",");
        if (at_word("inf")) {
          next();
        } else {
          const Token& high = peek();
          decl.max = integer_literal();
          if (*decl.max < decl.min) error(high, "a size symbol's range is empty");
        }
        expect_punct("]");
      }
      if (eat_punct("=")) {
        const Token& at = peek();
        decl.hint = integer_literal();
        if (*decl.hint < 0) error(at, "a size hint must be non-negative");
      }
      symbols_.insert(name.text);
      graph_.symbols.push_back(decl);
      return;
    }
    if (at_word("weights")) {
      next();
      if (!graph_.weights_file.empty()) error(peek(), "the weights file is named twice");
      graph_.weights_file = expect(Token::Kind::string, "a quoted file name").text;
      return;
    }
    node_statement();
  }

  void node_statement() {
    const Token& start = peek();
    if (start.kind != Token::Kind::value)
      error(start, "expected a statement (`%name = op(...)`, `sym`, `weights` or `return`), found " + describe(start));
    std::vector<Token> names;
    do {
      names.push_back(expect(Token::Kind::value, "a value name such as %x"));
    } while (eat_punct(","));
    for (const auto& n : names) {
      if (defined_.count(n.text)) error(n, "value %" + n.text + " is defined twice");
      defined_.insert(n.text);
    }
    expect_punct("=");
    const Token& op_token = expect(Token::Kind::ident, "an op name");
    auto kind = op_from_name(op_token.text);
    if (!kind) unknown_op(op_token);
    const OpSchema& schema = op_schema(*kind);
    Node node;
    node.op = *kind;
    node.args = arguments(schema, op_token);
    std::vector<std::pair<TensorMeta, Token>> declared;
    if (eat_punct(":")) {
      do {
        const Token& at = peek();
        declared.emplace_back(tensor_type(), at);
      } while (eat_punct(","));
    }
    if (schema.family == OpFamily::source) {
      if (declared.size() != 1) error(op_token, schema.base + " needs exactly one type, e.g. `: f32[4, 8]`");
      if (names.size() != 1) error(names[1], schema.base + " defines one value");
      node.outputs.push_back({names[0].text, declared[0].first});
    } else {
      std::vector<TensorMeta> inferred;
      try {
        inferred = infer_outputs(graph_, node);
      } catch (const Error& e) {
        error(op_token, e.what());
      }
      if (names.size() != inferred.size())
        error(names[0], fmt::format("{} here has {} output{}, but {} name{} given", schema.name, inferred.size(),
                                    inferred.size() == 1 ? "" : "s", names.size(), names.size() == 1 ? " is" : "s are"));
      if (!declared.empty() && declared.size() != inferred.size())
        error(declared[0].second, fmt::format("{} here has {} output{}, but {} types are given", schema.name,
                                              inferred.size(), inferred.size() == 1 ? "" : "s", declared.size()));
      for (size_t i = 0; i < inferred.size(); ++i)
        node.outputs.push_back({names[i].text, declared.empty() ? inferred[i] : declared[i].first});
    }
    graph_.append(std::move(node));  // names checked above: defined once
    try {
      verify_node(graph_, graph_.nodes.size() - 1, symbols_);
    } catch (const Error& e) {
      error(declared.empty() ? start : declared[0].second, e.what());
    }
  }

  [[noreturn]] void unknown_op(const Token& op_token) const {
    std::string_view name = op_token.text;
    for (std::string_view prefix : {"aten::", "aten.", "torch.ops.aten."})
      if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
    std::string overloads;
    for (const auto& s : all_op_schemas())
      if (s.base == name) overloads += (overloads.empty() ? "" : ", ") + s.name;
    if (!overloads.empty())
      error(op_token, fmt::format("op '{}' needs an overload: one of {}", op_token.text, overloads));
    error(op_token, "unknown op '" + op_token.text + "' (see include/coil/ops.def for the op set)");
  }

  // ---- arguments, directed by the schema
  std::vector<Arg> arguments(const OpSchema& schema, const Token& op_token) {
    expect_punct("(");
    std::vector<Arg> positional;
    std::vector<std::pair<std::string, Arg>> keywords;
    std::set<std::string> seen;
    while (!at_punct(")")) {
      separator(positional.empty() && keywords.empty(), ")");
      const Token& at = peek();
      if (peek().kind == Token::Kind::ident && peek(1).kind == Token::Kind::punct && peek(1).text == "=") {
        std::string name = next().text;
        next();
        int index = schema.arg_index(name);
        if (index < 0) {
          std::string names;
          for (const auto& a : schema.args) names += (names.empty() ? "" : ", ") + a.name;
          error(at, fmt::format("{} has no argument '{}' (its arguments: {})", schema.name, name, names.empty() ? "none" : names));
        }
        if (!seen.insert(name).second) error(at, fmt::format("argument '{}' is given twice", name));
        keywords.emplace_back(name, value(schema, schema.args[static_cast<size_t>(index)]));
        continue;
      }
      if (!keywords.empty()) error(at, "positional argument after a keyword argument");
      size_t index = positional.size();
      if (index >= schema.args.size() || schema.args[index].kwarg_only) {
        std::string keywords_left;
        for (size_t k = index; k < schema.args.size(); ++k)
          if (!seen.count(schema.args[k].name)) keywords_left += (keywords_left.empty() ? "" : ", ") + schema.args[k].name + "=";
        error(at, fmt::format("too many positional arguments for {} (it takes {}{})", schema.name, index,
                              keywords_left.empty() ? "" : "; pass " + keywords_left + " by name"));
      }
      seen.insert(schema.args[index].name);
      positional.push_back(value(schema, schema.args[index]));
    }
    expect_punct(")");
    try {
      return bind_arguments(schema, std::move(positional), std::move(keywords));
    } catch (const Error& e) {
      error(op_token, e.what());
    }
  }

  // Whether the next token can start a value of type `t` (so a mismatch names the argument).
  bool can_start(ArgType t) const {
    const Token& at = peek();
    bool word = at.kind == Token::Kind::ident;
    bool size_expr = at.kind == Token::Kind::integer || word || at_punct("(") || at_punct("-");
    switch (t) {
      case ArgType::Tensor: return at.kind == Token::Kind::value;
      case ArgType::Tensors:
      case ArgType::Floats: return at_punct("[");
      case ArgType::Int: return size_expr;
      case ArgType::Ints: return size_expr || at_punct("[");
      case ArgType::Float:
      case ArgType::Scalar: return size_expr || at.kind == Token::Kind::real;
      case ArgType::Bool: return at_word("true") || at_word("false");
      case ArgType::Str: return at.kind == Token::Kind::string;
      case ArgType::ScalarType:
      case ArgType::Layout:
      case ArgType::Device:
      case ArgType::MemoryFormat: return word;
    }
    return true;
  }
  static std::string_view expected_value(ArgType t) {
    switch (t) {
      case ArgType::Tensor: return "a tensor such as %x";
      case ArgType::Tensors: return "a tensor list such as [%a, %b]";
      case ArgType::Int: return "an int";
      case ArgType::Ints: return "an int list such as [0, 1]";
      case ArgType::Float: return "a float";
      case ArgType::Floats: return "a float list such as [1.0, 2.0]";
      case ArgType::Bool: return "true or false";
      case ArgType::Str: return "a quoted string";
      case ArgType::Scalar: return "a number";
      case ArgType::ScalarType: return "a dtype such as f32";
      case ArgType::Layout: return "a layout (strided)";
      case ArgType::Device: return "a device (cpu or cuda:N)";
      case ArgType::MemoryFormat: return "a memory format such as contiguous_format";
    }
    return "a value";
  }

  Arg value(const OpSchema& op, const ArgSchema& s) {
    if (at_word("none")) {
      next();
      return Arg();
    }
    const Token& at = peek();
    if (!can_start(s.type))
      error(at, fmt::format("argument '{}' of {} expects {}, found {}", s.name, op.name, expected_value(s.type), describe(at)));
    switch (s.type) {
      case ArgType::Tensor: return Arg(value_ref());
      case ArgType::Tensors: {
        TensorList list;
        expect_punct("[");
        while (!at_punct("]")) {
          separator(list.empty(), "]");
          if (at_word("none")) {
            next();
            list.emplace_back(std::nullopt);
          } else {
            list.emplace_back(value_ref());
          }
        }
        next();
        return Arg(std::move(list));
      }
      case ArgType::Int: return Arg(expr());
      case ArgType::Ints: {
        if (!at_punct("[")) return Arg(expr());
        IntList list;
        next();
        while (!at_punct("]")) {
          separator(list.empty(), "]");
          list.push_back(expr());
        }
        next();
        return Arg(std::move(list));
      }
      case ArgType::Float: return Arg(real());
      case ArgType::Floats: {
        FloatList list;
        expect_punct("[");
        while (!at_punct("]")) {
          separator(list.empty(), "]");
          list.push_back(real());
        }
        next();
        return Arg(std::move(list));
      }
      case ArgType::Bool:
        if (at_word("true") || at_word("false")) return Arg(next().text == "true");
        error(at, fmt::format("argument '{}' of {} expects true or false, found {}", s.name, op.name, describe(at)));
      case ArgType::Str: return Arg(expect(Token::Kind::string, "a quoted string").text);
      case ArgType::Scalar: {
        if (at_word("true") || at_word("false")) return Arg(next().text == "true");
        bool negative = at_punct("-") && (peek(1).kind == Token::Kind::real || peek(1).text == "inf" || peek(1).text == "nan");
        if (negative || peek().kind == Token::Kind::real || at_word("inf") || at_word("nan")) return Arg(real());
        return Arg(expr());
      }
      case ArgType::ScalarType: {
        const Token& t = expect(Token::Kind::ident, "a dtype");
        auto dt = dtype_from_name(t.text);
        if (!dt) error(t, "unknown dtype '" + t.text + "' (expected f64, f32, f16, bf16, i64, i32, i16, i8, u8 or bool)");
        return Arg(*dt);
      }
      case ArgType::Device: return Arg(device());
      case ArgType::Layout:
      case ArgType::MemoryFormat: return Arg(std::string(expect(Token::Kind::ident, "a name").text));
    }
    error(at, "unsupported argument type");
  }

  ValueRef value_ref() {
    const Token& t = expect(Token::Kind::value, "a value such as %x");
    auto ref = graph_.find(t.text);
    if (!ref) error(t, "unknown value %" + t.text + " (values must be defined before use)");
    return *ref;
  }

  double real() {
    bool negative = eat_punct("-");
    const Token& t = peek();
    double v;
    if (t.kind == Token::Kind::real || t.kind == Token::Kind::integer) {
      errno = 0;
      v = std::strtod(t.text.c_str(), nullptr);
      if (errno == ERANGE && std::isinf(v)) error(t, "number " + t.text + " is out of range for a float (write inf)");
    } else if (t.kind == Token::Kind::ident && (t.text == "inf" || t.text == "nan")) {
      v = t.text == "inf" ? INFINITY : NAN;
    } else {
      error(t, "expected a number, found " + describe(t));
    }
    next();
    return negative ? -v : v;
  }

  Device device() {
    const Token& t = expect(Token::Kind::ident, "a device (cpu or cuda:N)");
    std::string name = t.text;
    if (name == "cuda" && eat_punct(":")) name += ":" + std::to_string(integer_literal());
    auto d = device_from_name(name);
    if (!d) error(t, "unknown device '" + name + "' (expected cpu or cuda:N)");
    return *d;
  }

  // ---- size expressions: + - * // % min max, parentheses, ints and declared symbols
  SymInt expr() {
    SymInt v = term();
    while (at_punct("+") || at_punct("-")) {
      bool plus = next().text == "+";
      SymInt rhs = term();
      v = plus ? v + rhs : v - rhs;
    }
    return v;
  }
  SymInt term() {
    SymInt v = unary();
    while (at_punct("*") || at_punct("//") || at_punct("%")) {
      const Token& op = next();
      SymInt rhs = unary();
      try {
        v = op.text == "*" ? v * rhs : (op.text == "//" ? floordiv(v, rhs) : mod(v, rhs));
      } catch (const Error& e) {
        error(op, e.what());
      }
    }
    return v;
  }
  SymInt unary() {
    // Recursion depth is bounded so that a pathological file is an error, not a stack overflow.
    struct Depth {
      int& d;
      explicit Depth(int& depth) : d(depth) { ++d; }
      ~Depth() { --d; }
    } depth(expr_depth_);
    if (expr_depth_ > 256) error(peek(), "size expression is nested too deeply");
    if (eat_punct("-")) return SymInt(0) - unary();
    const Token& t = peek();
    if (t.kind == Token::Kind::integer) return integer_literal();
    if (eat_punct("(")) {
      SymInt v = expr();
      expect_punct(")");
      return v;
    }
    if (t.kind == Token::Kind::ident && (t.text == "min" || t.text == "max") && peek(1).text == "(") {
      next();
      next();
      SymInt a = expr();
      expect_punct(",");
      SymInt b = expr();
      expect_punct(")");
      return t.text == "min" ? min(a, b) : max(a, b);
    }
    if (t.kind == Token::Kind::ident) {
      if (!symbols_.count(t.text)) error(t, "unknown size symbol '" + t.text + "' (declare it with `sym " + t.text + "`)");
      next();
      return SymInt::symbol(t.text);
    }
    error(t, "expected an integer or a size expression, found " + describe(t));
  }

  // ---- types: f32[B, 4] strides=[4, 1] offset=0 device=cuda:0
  TensorMeta tensor_type() {
    const Token& t = expect(Token::Kind::ident, "a tensor type such as f32[4, 8]");
    auto dt = dtype_from_name(t.text);
    if (!dt) error(t, "unknown dtype '" + t.text + "' (expected f64, f32, f16, bf16, i64, i32, i16, i8, u8 or bool)");
    expect_punct("[");
    SymShape sizes;
    while (!at_punct("]")) {
      separator(sizes.empty(), "]");
      const Token& at = peek();
      sizes.push_back(expr());
      if (sizes.back().is_constant() && *sizes.back().constant() < 0) error(at, "a size must be non-negative");
    }
    next();
    TensorMeta m;
    try {
      m = TensorMeta::contiguous(*dt, sizes);
    } catch (const Error& e) {
      error(t, e.what());
    }
    while (peek().kind == Token::Kind::ident && peek(1).text == "=") {
      const Token& key = next();
      next();
      if (key.text == "strides") {
        expect_punct("[");
        m.strides.clear();
        while (!at_punct("]")) {
          separator(m.strides.empty(), "]");
          m.strides.push_back(expr());
        }
        next();
        if (m.strides.size() != m.sizes.size())
          error(key, fmt::format("{} strides given for {} dimensions", m.strides.size(), m.sizes.size()));
      } else if (key.text == "offset") {
        m.offset = expr();
      } else if (key.text == "device") {
        m.device = device();
      } else {
        error(key, "unknown type attribute '" + key.text + "' (expected strides, offset or device)");
      }
    }
    return m;
  }

  std::string source_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  Graph graph_;
  std::set<std::string> symbols_;
  std::set<std::string> defined_;
  int expr_depth_ = 0;
};

}  // namespace

Graph parse_graph(std::string_view text, const std::string& source_name) {
  Graph g = Parser(text, source_name).parse();
  try {
    verify(g);
  } catch (const Error& e) {
    fail("{}: error: {}", source_name, e.what());
  }
  return g;
}

Graph parse_graph_file(const std::string& path) { return parse_graph(read_file(path), path); }

}  // namespace coil
