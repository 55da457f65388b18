// Common subexpressions (graph_passes/cse.h): repeated work merged, the rest kept; the merged
// graph computes what the original does (the interpreter on both).
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "coil/reference.h"
#include "graph_passes/cse.h"
#include "test_util.h"

namespace coil::testing {
namespace {

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + body + "}\n"); }

size_t count(const Graph& g, OpKind op) {
  size_t n = 0;
  for (const auto& node : g.nodes) n += node.op == op;
  return n;
}

void expect_same_values(const Graph& a, const Graph& b) {
  TensorMap inputs = random_inputs(a, 3);
  auto want = evaluate_reference(a, inputs), got = evaluate_reference(b, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));
}

TEST(Cse, EachLayersCopyOfTheSameWorkIsMergedIntoTheFirst) {
  // Two layers converting the same bool mask, the second through a chain of its own that
  // repeats the first's (merged node by node).
  Graph g = parse(
      "  %m = input() : bool[4, 8]\n  %x = input() : f32[4, 8]\n"
      "  %a = where.ScalarOther(%m, %x, -1.0)\n  %b = exp(%a)\n"
      "  %c = where.ScalarOther(%m, %x, -1.0)\n  %d = exp(%c)\n  %e = add.Tensor(%b, %d)\n"
      "  %f = where.ScalarOther(%m, %x, -2.0)\n  %s = add.Tensor(%e, %f)\n  return %s\n");
  Graph c = eliminate_common_subexpressions(g);
  EXPECT_EQ(count(c, OpKind::WhereScalarOther), 2u) << print_graph(c);  // the -2.0 one differs
  EXPECT_EQ(count(c, OpKind::Exp), 1u) << print_graph(c);
  EXPECT_TRUE(c.find("a").has_value() && !c.find("c").has_value()) << print_graph(c);
  expect_same_values(g, c);
}

TEST(Cse, InputsReturnedValuesAndDistinctRandomStreamsStay) {
  Graph g = parse(
      "  %x = input() : f32[3, 5]\n  %y = input() : f32[3, 5]\n  %s = input() : i64[]\n"
      "  %a = relu(%x)\n  %b = relu(%x)\n"  // %b is returned: kept
      "  %u = philox_random(%s, size=[3, 5], stream=0, distribution=\"uniform\", dtype=f32)\n"
      "  %v = philox_random(%s, size=[3, 5], stream=1, distribution=\"uniform\", dtype=f32)\n"
      "  %w = philox_random(%s, size=[3, 5], stream=0, distribution=\"uniform\", dtype=f32)\n"  // the same draw as %u
      "  %p = add.Tensor(%u, %v)\n  %q = add.Tensor(%p, %w)\n  %r = add.Tensor(%a, %y)\n  return %r, %b, %q\n");
  Graph c = eliminate_common_subexpressions(g);
  EXPECT_EQ(count(c, OpKind::Input), 3u);
  EXPECT_EQ(count(c, OpKind::Relu), 2u) << print_graph(c);
  EXPECT_EQ(count(c, OpKind::PhiloxRandom), 2u) << print_graph(c);
  EXPECT_EQ(c.outputs.size(), 3u);
  expect_same_values(g, c);
}

}  // namespace
}  // namespace coil::testing
