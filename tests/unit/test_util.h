// Helpers for hand-computed op tests: tensors from literals, element-wise comparison, and the
// REF_TEST macro that records which ops have a reference test (checked against ops.def).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numbers>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "coil/coil.h"

namespace coil::testing {

// A file of the source tree by its path there; $COIL_SOURCE_DIR at run time where the tests run
// from another checkout (the GPU machine).
inline std::string source_file(const std::string& path) {
  const char* root = std::getenv("COIL_SOURCE_DIR");
  return std::string(root && *root ? root : COIL_SOURCE_DIR) + "/" + path;
}

// A file of tests/fixtures/pt2.
inline std::string pt2_fixture(const std::string& name) { return source_file("tests/fixtures/pt2/" + name); }

// A folder of this test process under the system's temporary folder.
inline std::string temp_dir(const std::string& stem) {
  auto d = std::filesystem::temp_directory_path() / ("coil_" + stem + "_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The message of the coil::Error `body` throws (a test failure when it throws none).
inline std::string message_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a coil::Error";
  return "";
}

using Kw = std::vector<std::pair<std::string, Arg>>;
using Values = std::vector<double>;

inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kE = std::numbers::e;
inline constexpr double kLn2 = std::numbers::ln2;
inline constexpr double kPi = std::numbers::pi;

// A folder of this process for one test file's compile caches (`stem`_<pid> in the temp folder).
inline std::string process_cache_dir(const std::string& stem) {
  auto d = std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

// ---- compiled against expected outputs
// COIL_TEST_DEVICE=cuda (scripts/gpu-check) runs the compiler tests on the GPU.
inline std::string test_device() {
  const char* d = std::getenv("COIL_TEST_DEVICE");
  return d && *d ? d : "cpu";
}

// Element-wise |got - want| <= tol (1 + |want|), tol by dtype (`f32_tol` for f32); NaN matches
// NaN and an infinity only itself.
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what, double f32_tol = 2e-5) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  Tensor a = got.contiguous_copy(), b = want.contiguous_copy();
  double tol = got.dtype() == DType::f64 ? 1e-10 : got.dtype() == DType::f32 ? f32_tol : 2e-2;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.load(i), y = b.load(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(y)) {
      ASSERT_EQ(x, y) << what << " element " << i;
      continue;
    }
    ASSERT_LE(std::fabs(x - y), tol * (1 + std::fabs(y))) << what << " element " << i << ": " << x << " vs " << y;
  }
}

// ---- which ops have tests
// Filled at static-initialisation time by REF_TEST, so the coverage check does not depend on
// which tests a filter selected.
inline std::set<OpKind>& declared_ops() {
  static std::set<OpKind> s;
  return s;
}
inline bool declare_tested(OpKind op) {
  declared_ops().insert(op);
  return true;
}
// Ops of every graph that `run` evaluated during the current test.
inline std::set<OpKind>& evaluated_ops() {
  static std::set<OpKind> s;
  return s;
}

// Each op's tests share a fixture that checks, at the end of a (non-skipped) test, that the
// op was really evaluated by one of the graphs the test ran.
template <OpKind kOp>
class RefTest : public ::testing::Test {
 protected:
  void SetUp() override { evaluated_ops().clear(); }
  void TearDown() override {
    if (IsSkipped() || HasFatalFailure()) return;
    EXPECT_TRUE(evaluated_ops().count(kOp)) << op_schema(kOp).name << " was not evaluated by this test";
  }
};

}  // namespace coil::testing

#define COIL_REF_CONCAT2(a, b) a##b
#define COIL_REF_CONCAT(a, b) COIL_REF_CONCAT2(a, b)
// REF_TEST(Exp, Values) { ... }: a test of OpKind::Exp in suite Reference_Exp.
#define REF_TEST(op, name)                                                                        \
  using Reference_##op = ::coil::testing::RefTest<::coil::OpKind::op>;                           \
  [[maybe_unused]] static const bool COIL_REF_CONCAT(coil_ref_declared_##op##_##name##_, __LINE__) = \
      ::coil::testing::declare_tested(::coil::OpKind::op);                                        \
  TEST_F(Reference_##op, name)

namespace coil::testing {

// ---- making tensors
inline void store_value(const Tensor& t, int64_t element, double v) {
  if (is_integral(t.dtype(), true)) t.store_int(element, static_cast<int64_t>(v));
  else t.store(element, v);
}

// A contiguous tensor holding `values` in row-major order.
inline Tensor make(DType dtype, const Shape& sizes, const Values& values) {
  Tensor t = Tensor::zeros(dtype, sizes);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel()) << "make(): wrong number of values";
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    store_value(t, static_cast<int64_t>(i), values[i]);
  return t;
}
inline Tensor f32(const Shape& sizes, const Values& values) { return make(DType::f32, sizes, values); }
inline Tensor i64(const Shape& sizes, const Values& values) { return make(DType::i64, sizes, values); }
inline Tensor b8(const Shape& sizes, const Values& values) { return make(DType::b8, sizes, values); }

// A non-contiguous view over a fresh storage holding `storage` (element units), with the
// given sizes, strides and offset: an input that the graph sees as strided.
inline Tensor strided(DType dtype, const Shape& sizes, const Shape& strides, const Values& storage, int64_t offset = 0) {
  Tensor base = make(dtype, {static_cast<int64_t>(storage.size())}, storage);
  return base.view(sizes, strides, offset);
}

// ---- comparing
inline std::vector<double> read_all(const Tensor& t) {
  std::vector<double> out;
  t.for_each_index([&](std::span<const int64_t> idx) {
    int64_t e = t.element_index(idx);
    out.push_back(is_integral(t.dtype(), true) ? static_cast<double>(t.load_int(e)) : t.load(e));
  });
  return out;
}

// Checks dtype, sizes and every element (row-major). NaN matches NaN, infinities match
// exactly, finite floats within rtol*|want| + atol; integers and bools exactly.
inline void expect_tensor(const Tensor& got, DType dtype, const Shape& sizes, const Values& want, double rtol = 2e-6,
                          double atol = 1e-6) {
  ASSERT_TRUE(got.defined());
  EXPECT_EQ(dtype_name(got.dtype()), dtype_name(dtype));
  ASSERT_EQ(shape_to_string(got.sizes()), shape_to_string(sizes));
  std::vector<double> have = read_all(got);
  ASSERT_EQ(have.size(), want.size()) << "element count";
  bool exact = is_integral(dtype, true);
  for (size_t i = 0; i < want.size(); ++i) {
    double g = have[i], w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "element " << i << ": want nan, got " << g;
    } else if (std::isinf(w) || exact) {
      EXPECT_EQ(g, w) << "element " << i;
    } else {
      EXPECT_NEAR(g, w, rtol * std::fabs(w) + atol) << "element " << i;
    }
  }
}

// ---- running graphs
inline void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.sizes(), b.sizes());
  std::vector<double> x = read_all(a), y = read_all(b);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    EXPECT_EQ(x[i], y[i]) << "element " << i;
  }
}

// Verifies `g`, checks print -> parse -> print is a fixed point, evaluates it, and checks the
// parsed graph evaluates to the same values. Returns the outputs of `g`.
inline std::vector<Tensor> run(const Graph& g, const TensorMap& inputs = {}, const TensorMap& weights = {}) {
  for (const auto& n : g.nodes) evaluated_ops().insert(n.op);
  try {
    verify(g);
  } catch (const Error& e) {
    ADD_FAILURE() << "verify() rejected the built graph: " << e.what() << "\n" << print_graph(g);
  }
  std::string text = print_graph(g);
  std::vector<Tensor> out = evaluate_reference(g, inputs, weights);
  try {
    Graph parsed = parse_graph(text, g.name);
    EXPECT_EQ(print_graph(parsed), text) << "print -> parse -> print is not a fixed point";
    std::vector<Tensor> again = evaluate_reference(parsed, inputs, weights);
    EXPECT_EQ(again.size(), out.size());
    for (size_t i = 0; i < std::min(again.size(), out.size()); ++i) expect_same(again[i], out[i]);
  } catch (const Error& e) {
    ADD_FAILURE() << "parse_graph(print_graph(g)) failed: " << e.what() << "\n" << text;
  }
  return out;
}

// Runs a graph with one output.
inline Tensor run1(const Graph& g, const TensorMap& inputs = {}, const TensorMap& weights = {}) {
  auto out = run(g, inputs, weights);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Tensor() : out[0];
}

}  // namespace coil::testing
