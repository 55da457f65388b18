// The text format: print -> parse -> print is a fixed point, and a parsed graph computes
// exactly what the graph it was printed from computes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "coil/coil.h"
#include "random_graph.h"

namespace coil {
namespace {

void expect_same_bytes(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.sizes(), b.sizes());
  Tensor x = a.contiguous_copy(), y = b.contiguous_copy();
  EXPECT_EQ(std::memcmp(x.data(), y.data(), static_cast<size_t>(x.numel() * dtype_size(x.dtype()))), 0);
}

void check_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  Graph parsed = parse_graph(text, g.name);
  EXPECT_EQ(print_graph(parsed), text);
  verify(parsed);
  TensorMap inputs = random_inputs(g, 11);
  auto a = evaluate_reference(g, inputs);
  auto b = evaluate_reference(parsed, inputs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expect_same_bytes(a[i], b[i]);
}

TEST(TextFormat, RandomGraphsRoundTrip) {
  for (uint64_t seed = 0; seed < 150; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_round_trip(testing::random_graph(seed, {.steps = 10, .symbolic_batch = seed % 3 == 0}));
  }
}

TEST(TextFormat, EveryArgumentKindRoundTrips) {
  const char* text = R"(graph kinds {
  sym N = 3
  %x = input(low=-2.5, high=2) : f32[N, 4]
  %i = input(low=0, high=4) : i64[N]
  %c = constant(value=[1.0, -0.5, inf, nan]) : f32[4]
  %a = add.Tensor(%x, %c, alpha=-2) : f32[N, 4]
  %f = full(size=[N, 2], fill_value=true, dtype=bool, device=cpu) : bool[N, 2]
  %g = gelu(%a, approximate="tanh") : f32[N, 4]
  %d = div.Tensor_mode(%g, %c, rounding_mode="floor") : f32[N, 4]
  %e = clone(%d, memory_format=contiguous_format) : f32[N, 4]
  %s = index.Tensor(%e, [none, %i]) : f32[N, N]
  %m = mean.dim(%s, dim=[0], keepdim=true, dtype=f64) : f64[1, N]
  %v = view(%x, size=[2*N, 2]) : f32[2*N, 2]
  %t = permute(%v, dims=[1, 0]) : f32[2, 2*N] strides=[1, 2]
  %r = _to_copy(%t, dtype=bf16, layout=strided) : bf16[2, 2*N] strides=[1, 2]
  %w = where.Scalar(%f, self=1.5, other=0) : f32[N, 2]
  return %m, %r, %w
}
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  check_round_trip(g);
}

// Outputs whose strides the compiler picks (Graph::any_layout_outputs) are marked in the return.
TEST(TextFormat, AnyLayoutOutputsRoundTrip) {
  const char* text = R"(graph saved {
  %x = input() : f32[2, 3]
  %y = relu(%x) : f32[2, 3]
  %z = neg(%x) : f32[2, 3]
  return %y, any_layout %z, any_layout %y
}
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(g.any_layout_outputs, (std::vector<size_t>{1, 2}));
  EXPECT_FALSE(g.any_layout(0));
  EXPECT_TRUE(g.any_layout(2));
  EXPECT_EQ(print_graph(g), text);
  check_round_trip(g);
  g.any_layout_outputs = {3};
  EXPECT_THROW(verify(g), Error);
  g.any_layout_outputs = {2, 1};
  EXPECT_THROW(verify(g), Error);
}

TEST(TextFormat, TypesMayBeOmittedAndAreInferred) {
  Graph g = parse_graph("graph g {\n %x = input() : f32[2, 3]\n %y = sum.dim_IntList(%x, [1])\n return %y\n}\n");
  EXPECT_EQ(g.meta(g.outputs[0]).str(), "f32[2]");
}

TEST(TextFormat, BundledModelsRoundTrip) {
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(COIL_SOURCE_DIR) / "models")) {
    if (entry.path().extension() != ".coil") continue;
    SCOPED_TRACE(entry.path().string());
    Graph g = parse_graph_file(entry.path().string());
    std::string text = print_graph(g);
    EXPECT_EQ(print_graph(parse_graph(text)), text);
  }
}

}  // namespace
}  // namespace coil
