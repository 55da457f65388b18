// SymInt: an immutable symbolic integer expression (constants, named size symbols, + * // %
// min max). Constructors canonicalize: constants fold, sums and products flatten and sort,
// like terms combine, so structurally equal expressions compare equal. The full simplifier
// with range analysis lives in src/arith and builds on this type.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coil {

class SymInt {
 public:
  enum class Kind : uint8_t { constant, symbol, add, mul, floordiv, mod, min, max };
  struct Node;

  SymInt(int64_t value = 0);  // NOLINT: implicit, so `{4, SymInt("B")}` reads naturally
  SymInt(int value) : SymInt(static_cast<int64_t>(value)) {}  // NOLINT
  static SymInt symbol(std::string name);

  Kind kind() const;
  bool is_constant() const { return kind() == Kind::constant; }
  std::optional<int64_t> constant() const;
  const std::string& symbol_name() const;  // only for Kind::symbol
  const std::vector<SymInt>& operands() const;

  // Evaluates with every symbol bound; throws coil::Error naming an unbound symbol.
  int64_t eval(const std::map<std::string, int64_t>& bindings) const;
  void collect_symbols(std::vector<std::string>& out) const;

  std::string str() const;  // parseable by the text format: "B*768 + 4", "(S + 1)//2"
  size_t hash() const;
  bool operator==(const SymInt& other) const;
  bool operator!=(const SymInt& other) const { return !(*this == other); }

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);
  friend SymInt min(const SymInt& a, const SymInt& b);
  friend SymInt max(const SymInt& a, const SymInt& b);

 private:
  explicit SymInt(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  static SymInt make(Kind kind, std::vector<SymInt> operands);
  std::shared_ptr<const Node> node_;
};

// `e`'s operator applied to new operands, through the canonicalizing constructors.
SymInt with_operands(const SymInt& e, const std::vector<SymInt>& operands);
// Replaces symbols by expressions (e.g. loop variables by index maps).
SymInt substitute(const SymInt& e, const std::map<std::string, SymInt>& replacement);

using SymShape = std::vector<SymInt>;
std::string shape_str(const SymShape& s);  // "[B, 4]"
SymInt product(const SymShape& s);
// Concrete values when every entry is constant.
std::optional<std::vector<int64_t>> constant_shape(const SymShape& s);

}  // namespace coil

template <>
struct std::hash<coil::SymInt> {
  size_t operator()(const coil::SymInt& s) const { return s.hash(); }
};
