// Graphs of symbolic sizes from the torch.compile adapter (python/coil/_symbols.py): sizes,
// strides and integer arguments as expression trees of Dynamo's size symbols with their ranges,
// compiled once and run at many sizes against the reference interpreter; symbol ranges in the
// text form; the errors for sizes outside a range and for symbols no input gives.
#include <gtest/gtest.h>

#include <string>

#include "coil/coil.h"
#include "frontend/fx.h"
#include "test_util.h"

namespace coil {
namespace {

using testing::expect_close;
using testing::test_device;

std::string cache() {
  static const std::string dir = testing::process_cache_dir("coil_symbolic_fx_test");
  return dir;
}

// x: f32[s0, s1] -> (view(x, [s0 * s1, 1]) * 2).sum(1), exp(x[1:]) laid out column-major as
// the program says PyTorch has it, and softmax over s1.
const char* kProgram = R"({"name": "fx",
  "symbols": [{"name": "s0", "hint": 6, "min": 2, "max": null}, {"name": "s1", "hint": 4, "min": 2, "max": 4096}],
  "inputs": [{"name": "x", "meta": {"dtype": 7, "sizes": [{"as_sym": {"sym": "s0"}}, {"as_sym": {"sym": "s1"}}],
                                    "strides": [{"as_sym": {"sym": "s1"}}, 1]}}],
  "nodes": [
    {"target": "torch.ops.aten.view.default", "name": "v",
     "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}},
                {"name": "size", "arg": {"as_sym_ints": [{"as_sym": {"mul": [{"sym": "s0"}, {"sym": "s1"}]}}, {"as_int": 1}]}}],
     "outputs": [{"as_tensor": {"name": "v"}}]},
    {"target": "torch.ops.aten.mul.Scalar", "name": "m",
     "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "v"}}}, {"name": "other", "arg": {"as_float": 2.0}}],
     "outputs": [{"as_tensor": {"name": "m"}}]},
    {"target": "torch.ops.aten.sum.dim_IntList", "name": "s",
     "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "m"}}}, {"name": "dim", "arg": {"as_ints": [1]}}],
     "outputs": [{"as_tensor": {"name": "s"}}]},
    {"target": "torch.ops.aten.slice.Tensor", "name": "sl",
     "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}}, {"name": "dim", "arg": {"as_int": 0}},
                {"name": "start", "arg": {"as_int": 1}}, {"name": "end", "arg": {"as_sym_int": {"as_sym": {"sym": "s0"}}}}],
     "outputs": [{"as_tensor": {"name": "sl"}}]},
    {"target": "torch.ops.aten.exp.default", "name": "t",
     "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "sl"}}}],
     "outputs": [{"as_tensor": {"name": "t"},
                  "layout": {"sizes": [{"as_sym": {"add": [{"sym": "s0"}, -1]}}, {"as_sym": {"sym": "s1"}}],
                             "strides": [1, {"as_sym": {"max": [1, {"add": [{"sym": "s0"}, -1]}]}}]}}]},
    {"target": "torch.ops.aten._softmax.default", "name": "sm",
     "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}}, {"name": "dim", "arg": {"as_int": 1}},
                {"name": "half_to_float", "arg": {"as_bool": false}}],
     "outputs": [{"as_tensor": {"name": "sm"}}]}],
  "outputs": ["s", "t", "sm"]})";

TEST(SymbolicFx, OneCompileRunsEverySizeInItsRanges) {
  Graph g = graph_from_fx(kProgram);
  ASSERT_EQ(g.symbols.size(), 2u);
  EXPECT_EQ(g.symbols[0].min, 2);
  EXPECT_EQ(g.symbols[1].max, 4096);
  // The slice's size is s0 - 1, not max(0, s0 - 1): shape inference simplifies by the ranges.
  EXPECT_EQ(g.meta(*g.find("sl")).sizes[0], SymInt::symbol("s0") - 1);
  // The exp is laid out as PyTorch traced it: column-major, its strides PyTorch's expressions.
  EXPECT_EQ(g.meta(g.outputs[1]).strides, (SymShape{1, SymInt::symbol("s0") - 1}));
  Executable exe = compile(g, {.cache_dir = cache(), .device = test_device()});
  // ...and the run returns it so (a dense permuted layout of symbolic strides is an output's
  // own), so the adapter copies nothing per call.
  EXPECT_EQ(exe.output_layouts()[1].strides, (SymShape{1, SymInt::symbol("s0") - 1}));
  for (auto [s0, s1] : {std::pair<int64_t, int64_t>{2, 2}, {7, 4}, {13, 6}, {2, 31}, {64, 3}}) {
    TensorMap inputs = random_inputs(g, 7, {{"s0", s0}, {"s1", s1}});
    auto got = exe.run(inputs, {});
    auto want = evaluate_reference(g, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].sizes(), want[i].sizes());
      if (i == 1) {
        EXPECT_EQ(got[i].strides(), (Shape{1, s0 - 1}));
      }
      expect_close(got[i], want[i], "s0=" + std::to_string(s0) + " s1=" + std::to_string(s1) + " output " + std::to_string(i));
    }
  }
}

TEST(SymbolicFx, ASizeOutsideItsRangeIsAnError) {
  Graph g = graph_from_fx(kProgram);
  Executable exe = compile(g, {.cache_dir = cache(), .device = test_device()});
  TensorMap below = random_inputs(g, 1, {{"s0", 1}, {"s1", 4}});
  try {
    exe.run(below, {});
    FAIL() << "a size below the symbol's range ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size symbol s0 is 1, outside the range [2, inf]"), std::string::npos) << e.what();
  }
  TensorMap above = random_inputs(g, 1, {{"s0", 3}, {"s1", 5000}});
  EXPECT_THROW(exe.run(above, {}), Error);
}

// A strided input of symbolic sizes is a flat memory input viewed with its strides; a stride
// that is a symbol of its own appears in no input's size and must be given by the caller.
TEST(SymbolicFx, AStridedInputsSymbolsAreGivenByTheCaller) {
  const char* program = R"({"name": "fx",
    "symbols": [{"name": "s0", "hint": 5, "min": 2}, {"name": "s2", "hint": 16, "min": 2}],
    "inputs": [{"name": "x", "meta": {"dtype": 7, "sizes": [{"as_sym": {"sym": "s0"}}, 4], "strides": [{"as_sym": {"sym": "s2"}}, 1]}}],
    "nodes": [{"target": "torch.ops.aten.neg.default", "name": "n", "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}}],
               "outputs": [{"as_tensor": {"name": "n"}}]}],
    "outputs": ["n"]})";
  Graph g = graph_from_fx(program);
  Executable exe = compile(g, {.cache_dir = cache(), .device = "cpu"});
  // rows of 4 values every 9 elements: flat memory of (s0 - 1) * s2 + 4
  const int64_t rows = 3, stride = 9, span = (rows - 1) * stride + 4;
  std::vector<double> values;
  for (int64_t i = 0; i < span; ++i) values.push_back(static_cast<double>(i));
  Tensor memory = testing::f32({span}, values);
  auto out = exe.run_on_stream({memory}, {}, nullptr, {{"s0", rows}, {"s2", stride}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (Shape{rows, 4}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(out[0].load(r * 4 + c), -static_cast<double>(r * stride + c));
  try {  // without the stride's value: an error, not the hint's layout
    exe.run_on_stream({memory}, {}, nullptr, {{"s0", rows}});
    FAIL() << "ran with a stride symbol taken from its hint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size symbol s2 is part of an input's layout"), std::string::npos) << e.what();
  }
}

TEST(SymbolicFx, MalformedExpressionsAreErrors) {
  auto program = [](const std::string& size) {
    return R"({"name": "fx", "symbols": [{"name": "s0", "hint": 3}],
      "inputs": [{"name": "x", "meta": {"dtype": 7, "sizes": [)" + size + R"(], "strides": [1]}}], "nodes": [], "outputs": ["x"]})";
  };
  EXPECT_NO_THROW(graph_from_fx(program(R"({"as_sym": {"sym": "s0"}})")));
  EXPECT_THROW(graph_from_fx(program(R"({"as_sym": {"pow": [2, 3]}})")), Error);
  EXPECT_THROW(graph_from_fx(program(R"({"as_sym": {"floordiv": [{"sym": "s0"}]}})")), Error);
  EXPECT_THROW(graph_from_fx(program(R"({"as_sym": {"sym": 3}})")), Error);
  EXPECT_THROW(graph_from_fx(program(R"({"as_sym": {"sym": "s9"}})")), Error);  // undeclared
}

// A view of one part of a split ([S, 1, 192] -> [S, 1, 64] of strides [192, 192, 1]) into heads:
// the size-1 dim's stride (192) must not join the last dim's chunk to the first dim's (a GPT-2
// block at one token took every batch row after the first from the wrong memory).
TEST(SymbolicShapes, AViewKeepsTheStridesOfDimsAcrossASizeOneDim) {
  Graph g = parse_graph(R"(graph v {
  sym S in [2, inf] = 3
  %x = input() : f32[S, 1, 192]
  %s0, %s1, %s2 = split_with_sizes(%x, split_sizes=[64, 64, 64], dim=-1)
  %v = view(%s1, size=[S, 1, 4, 16])
  %e = exp(%v)
  return %e
}
)");
  EXPECT_EQ(g.meta(*g.find("v")).strides[0], SymInt(192));
  EXPECT_EQ(g.meta(*g.find("v")).strides[2], SymInt(16));
  Executable exe = compile(g, {.cache_dir = cache(), .device = test_device()});
  for (int64_t n : {2, 3, 7}) {
    TensorMap inputs = random_inputs(g, 3, {{"S", n}});
    expect_close(exe.run(inputs, {})[0], evaluate_reference(g, inputs)[0], "S=" + std::to_string(n));
  }
}

TEST(TextFormat, SymbolRangesRoundTrip) {
  const std::string text =
      "graph t {\n  sym S in [2, inf] = 8\n  sym T in [1, 64]\n  sym U = 3\n  %x = input() : f32[S, T, U]\n  %y = relu(%x) : f32[S, T, U]\n"
      "  return %y\n}\n";
  Graph g = parse_graph(text);
  EXPECT_EQ(g.symbols[0].min, 2);
  EXPECT_FALSE(g.symbols[0].max.has_value());
  EXPECT_EQ(g.symbols[1].max, 64);
  EXPECT_EQ(print_graph(g), text);
  EXPECT_THROW(parse_graph("graph t {\n  sym S in [4, 2]\n  %x = input() : f32[S]\n  return %x\n}\n"), Error);
}

}  // namespace
}  // namespace coil
