#include "coil/sym.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "support/check.h"
#include "support/checked.h"

namespace coil {

struct SymInt::Node {
  Kind kind;
  int64_t value = 0;
  std::string name;
  std::vector<SymInt> operands;
  size_t hash = 0;
};

namespace {

size_t mix(size_t seed, size_t v) { return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) fail("division by zero in a size expression");
  if (b == -1) return checked_mul(a, -1, "a size expression");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) { return b == -1 ? 0 : a - floor_div(a, b) * b; }

// A total order on expressions; sums and products sort their operands with it.
int compare(const SymInt& a, const SymInt& b) {
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  switch (a.kind()) {
    case SymInt::Kind::constant:
      return *a.constant() < *b.constant() ? -1 : (*a.constant() > *b.constant() ? 1 : 0);
    case SymInt::Kind::symbol:
      return a.symbol_name().compare(b.symbol_name());
    default:
      break;
  }
  const auto& x = a.operands();
  const auto& y = b.operands();
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    if (int c = compare(x[i], y[i])) return c;
  if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
  return 0;
}

// Splits a product into its constant coefficient and the remaining (sorted) factors.
std::pair<int64_t, std::vector<SymInt>> split_coefficient(const SymInt& e) {
  if (auto c = e.constant()) return {*c, {}};
  if (e.kind() != SymInt::Kind::mul) return {1, {e}};
  std::vector<SymInt> factors = e.operands();
  int64_t coeff = 1;
  if (!factors.empty() && factors.front().is_constant()) {
    coeff = *factors.front().constant();
    factors.erase(factors.begin());
  }
  return {coeff, factors};
}

// a / b when it is exact as an expression (b's factors divide a's); nullopt otherwise.
std::optional<SymInt> exact_quotient(const SymInt& a, const SymInt& b) {
  if (a.kind() == SymInt::Kind::add) {
    SymInt sum = 0;
    for (const auto& term : a.operands()) {
      auto q = exact_quotient(term, b);
      if (!q) return std::nullopt;
      sum = sum + *q;
    }
    return sum;
  }
  auto [ca, fa] = split_coefficient(a);
  auto [cb, fb] = split_coefficient(b);
  if (cb == 0 || ca % cb != 0) return std::nullopt;
  if (b.kind() == SymInt::Kind::add) return a == b ? std::optional<SymInt>(SymInt(1)) : std::nullopt;
  for (const auto& f : fb) {
    auto it = std::find(fa.begin(), fa.end(), f);
    if (it == fa.end()) return std::nullopt;
    fa.erase(it);
  }
  SymInt result = ca / cb;
  for (const auto& f : fa) result = result * f;
  return result;
}

}  // namespace

SymInt::SymInt(int64_t value) {
  auto node = std::make_shared<Node>();
  node->kind = Kind::constant;
  node->value = value;
  node->hash = mix(1, std::hash<int64_t>()(value));
  node_ = std::move(node);
}

SymInt SymInt::symbol(std::string name) {
  auto node = std::make_shared<Node>();
  node->kind = Kind::symbol;
  node->hash = mix(2, std::hash<std::string>()(name));
  node->name = std::move(name);
  return SymInt(std::shared_ptr<const Node>(std::move(node)));
}

SymInt SymInt::make(Kind kind, std::vector<SymInt> operands) {
  auto node = std::make_shared<Node>();
  node->kind = kind;
  size_t h = mix(3, static_cast<size_t>(kind));
  for (const auto& o : operands) h = mix(h, o.hash());
  node->hash = h;
  node->operands = std::move(operands);
  return SymInt(std::shared_ptr<const Node>(std::move(node)));
}

SymInt::Kind SymInt::kind() const { return node_->kind; }

std::optional<int64_t> SymInt::constant() const {
  if (node_->kind != Kind::constant) return std::nullopt;
  return node_->value;
}

const std::string& SymInt::symbol_name() const {
  COIL_CHECK(node_->kind == Kind::symbol) << "not a symbol: " << str();
  return node_->name;
}

const std::vector<SymInt>& SymInt::operands() const { return node_->operands; }

size_t SymInt::hash() const { return node_->hash; }

bool SymInt::operator==(const SymInt& other) const {
  if (node_ == other.node_) return true;
  if (hash() != other.hash()) return false;
  return compare(*this, other) == 0;
}

int64_t SymInt::eval(const std::map<std::string, int64_t>& bindings) const {
  switch (kind()) {
    case Kind::constant:
      return node_->value;
    case Kind::symbol: {
      auto it = bindings.find(node_->name);
      if (it == bindings.end()) fail("size symbol '{}' has no value: bind it from an input shape", node_->name);
      return it->second;
    }
    case Kind::add: {
      int64_t s = 0;
      for (const auto& o : operands()) s = checked_add(s, o.eval(bindings), "a size expression");
      return s;
    }
    case Kind::mul: {
      int64_t p = 1;
      for (const auto& o : operands()) p = checked_mul(p, o.eval(bindings), "a size expression");
      return p;
    }
    case Kind::floordiv:
      return floor_div(operands()[0].eval(bindings), operands()[1].eval(bindings));
    case Kind::mod:
      return floor_mod(operands()[0].eval(bindings), operands()[1].eval(bindings));
    case Kind::min:
      return std::min(operands()[0].eval(bindings), operands()[1].eval(bindings));
    case Kind::max:
      return std::max(operands()[0].eval(bindings), operands()[1].eval(bindings));
  }
  COIL_CHECK(false) << "bad SymInt kind";
}

void SymInt::collect_symbols(std::vector<std::string>& out) const {
  if (kind() == Kind::symbol) {
    if (std::find(out.begin(), out.end(), node_->name) == out.end()) out.push_back(node_->name);
    return;
  }
  for (const auto& o : operands()) o.collect_symbols(out);
}

namespace {
bool is_atom(const SymInt& e) {
  return e.kind() == SymInt::Kind::constant || e.kind() == SymInt::Kind::symbol ||
         e.kind() == SymInt::Kind::min || e.kind() == SymInt::Kind::max;
}
std::string wrap(const SymInt& e) {
  if (is_atom(e) && !(e.is_constant() && *e.constant() < 0)) return e.str();
  return "(" + e.str() + ")";
}
}  // namespace

std::string SymInt::str() const {
  switch (kind()) {
    case Kind::constant:
      return std::to_string(node_->value);
    case Kind::symbol:
      return node_->name;
    case Kind::add: {
      std::string s;
      for (const auto& term : operands()) {
        auto [coeff, factors] = split_coefficient(term);
        bool negative = coeff < 0;
        if (s.empty()) {
          s = negative ? "-" : "";
        } else {
          s += negative ? " - " : " + ";
        }
        int64_t magnitude = negative ? -coeff : coeff;
        std::string body;
        if (magnitude != 1 || factors.empty()) body = std::to_string(magnitude);
        for (const auto& f : factors) body += (body.empty() ? "" : "*") + wrap(f);
        s += body;
      }
      return s;
    }
    case Kind::mul: {
      std::string s;
      for (const auto& f : operands()) s += (s.empty() ? "" : "*") + wrap(f);
      return s;
    }
    case Kind::floordiv:
      return wrap(operands()[0]) + "//" + wrap(operands()[1]);
    case Kind::mod:
      return wrap(operands()[0]) + " % " + wrap(operands()[1]);  // spaced: "%x" names a value
    case Kind::min:
      return "min(" + operands()[0].str() + ", " + operands()[1].str() + ")";
    case Kind::max:
      return "max(" + operands()[0].str() + ", " + operands()[1].str() + ")";
  }
  return "?";
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return checked_add(*a.constant(), *b.constant(), "a size expression");
  // Flatten into (coefficient, factors) terms, combining like terms.
  std::vector<std::pair<int64_t, SymInt>> terms;  // coefficient, base (coefficient-free)
  int64_t constant = 0;
  auto add_term = [&](const SymInt& t) {
    auto [coeff, factors] = split_coefficient(t);
    if (factors.empty()) {
      constant = checked_add(constant, coeff, "a size expression");
      return;
    }
    SymInt base = factors.size() == 1 ? factors[0] : SymInt::make(SymInt::Kind::mul, factors);
    for (auto& [c, existing] : terms) {
      if (existing == base) {
        c = checked_add(c, coeff, "a size expression");
        return;
      }
    }
    terms.emplace_back(coeff, base);
  };
  for (const SymInt* side : {&a, &b}) {
    if (side->kind() == SymInt::Kind::add) {
      for (const auto& t : side->operands()) add_term(t);
    } else {
      add_term(*side);
    }
  }
  std::vector<SymInt> operands;
  for (auto& [coeff, base] : terms)
    if (coeff != 0) operands.push_back(coeff == 1 ? base : SymInt(coeff) * base);
  std::sort(operands.begin(), operands.end(), [](const SymInt& x, const SymInt& y) { return compare(x, y) < 0; });
  if (constant != 0) operands.push_back(constant);
  if (operands.empty()) return 0;
  if (operands.size() == 1) return operands[0];
  return SymInt::make(SymInt::Kind::add, std::move(operands));
}

SymInt operator-(const SymInt& a, const SymInt& b) { return a + SymInt(-1) * b; }

SymInt operator*(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return checked_mul(*a.constant(), *b.constant(), "a size expression");
  int64_t coeff = 1;
  std::vector<SymInt> factors;
  for (const SymInt* side : {&a, &b}) {
    auto [c, f] = split_coefficient(*side);
    coeff = checked_mul(coeff, c, "a size expression");
    factors.insert(factors.end(), f.begin(), f.end());
  }
  if (coeff == 0) return 0;
  // A constant times a sum distributes, so `2*(B + 1)` and `2*B + 2` are one expression.
  if (factors.size() == 1 && factors[0].kind() == SymInt::Kind::add) {
    SymInt sum = 0;
    for (const auto& t : factors[0].operands()) sum = sum + SymInt(coeff) * t;
    return sum;
  }
  // A sum among several factors gives up the common factor of its terms, so `(8*B + 8)*M` and
  // `8*(B + 1)*M` are one expression (Dynamo writes a contiguous stride the first way, a
  // product of sizes makes the second).
  if (factors.size() > 1)
    for (SymInt& f : factors)
      if (f.kind() == SymInt::Kind::add) {
        int64_t g = 0;
        for (const auto& t : f.operands()) g = std::gcd(g, split_coefficient(t).first);
        if (g <= 1) continue;
        SymInt reduced = 0;
        for (const auto& t : f.operands()) {
          auto [c, rest] = split_coefficient(t);
          SymInt term = c / g;
          for (const auto& r : rest) term = term * r;
          reduced = reduced + term;
        }
        coeff = checked_mul(coeff, g, "a size expression");
        f = reduced;
      }
  std::sort(factors.begin(), factors.end(), [](const SymInt& x, const SymInt& y) { return compare(x, y) < 0; });
  if (coeff == 1 && factors.size() == 1) return factors[0];
  if (coeff != 1) factors.insert(factors.begin(), coeff);
  return SymInt::make(SymInt::Kind::mul, std::move(factors));
}

SymInt floordiv(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return floor_div(*a.constant(), *b.constant());
  if (b.is_constant() && *b.constant() == 0) fail("division by zero in size expression {}//0", a.str());
  if (b.is_constant() && *b.constant() == 1) return a;
  if (a.is_constant() && *a.constant() == 0) return 0;
  if (auto q = exact_quotient(a, b)) return *q;
  return SymInt::make(SymInt::Kind::floordiv, {a, b});
}

SymInt mod(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) {
    if (*b.constant() == 0) fail("modulo by zero in a size expression");
    return floor_mod(*a.constant(), *b.constant());
  }
  if (b.is_constant() && *b.constant() == 1) return 0;
  if (exact_quotient(a, b)) return 0;
  return SymInt::make(SymInt::Kind::mod, {a, b});
}

SymInt min(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return std::min(*a.constant(), *b.constant());
  if (a == b) return a;
  return compare(a, b) < 0 ? SymInt::make(SymInt::Kind::min, {a, b}) : SymInt::make(SymInt::Kind::min, {b, a});
}

SymInt max(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return std::max(*a.constant(), *b.constant());
  if (a == b) return a;
  return compare(a, b) < 0 ? SymInt::make(SymInt::Kind::max, {a, b}) : SymInt::make(SymInt::Kind::max, {b, a});
}

SymInt with_operands(const SymInt& e, const std::vector<SymInt>& ops) {
  switch (e.kind()) {
    case SymInt::Kind::constant:
    case SymInt::Kind::symbol: return e;
    case SymInt::Kind::add: {
      SymInt sum = 0;
      for (const auto& o : ops) sum = sum + o;
      return sum;
    }
    case SymInt::Kind::mul: {
      SymInt p = 1;
      for (const auto& o : ops) p = p * o;
      return p;
    }
    case SymInt::Kind::floordiv: return floordiv(ops[0], ops[1]);
    case SymInt::Kind::mod: return mod(ops[0], ops[1]);
    case SymInt::Kind::min: return min(ops[0], ops[1]);
    case SymInt::Kind::max: return max(ops[0], ops[1]);
  }
  return e;
}

SymInt substitute(const SymInt& e, const std::map<std::string, SymInt>& replacement) {
  if (e.kind() == SymInt::Kind::symbol) {
    auto it = replacement.find(e.symbol_name());
    return it == replacement.end() ? e : it->second;
  }
  if (e.is_constant()) return e;
  std::vector<SymInt> ops;
  for (const auto& o : e.operands()) ops.push_back(substitute(o, replacement));
  return with_operands(e, ops);
}

std::string shape_str(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

SymInt product(const SymShape& s) {
  SymInt p = 1;
  for (const auto& d : s) p = p * d;
  return p;
}

std::optional<std::vector<int64_t>> constant_shape(const SymShape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const auto& d : s) {
    auto c = d.constant();
    if (!c) return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

}  // namespace coil
