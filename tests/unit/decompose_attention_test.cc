// Grouped-query attention for the fused kernel (graph_passes/decompose_attention.h): the repeat
// spelled out (gpt-fast, Hugging Face's repeat_kv) or given by enable_gqa becomes an attention
// over the unrepeated key and value, one query row a key/value head's rows; the rewritten graph
// computes what the original does (the interpreter, in double, on both).
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "coil/reference.h"
#include "graph_passes/decompose.h"
#include "graph_passes/decompose_attention.h"
#include "test_util.h"

namespace coil::testing {
namespace {

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + body + "}\n"); }

// The key/value cache [2, 2, 40, 64] repeated 4 times for 8 query heads, as gpt-fast writes it.
std::string repeated(const std::string& x, const std::string& out) {
  return "  %" + out + "_u = unsqueeze(%" + x + ", 2)\n  %" + out + "_e = expand(%" + out + "_u, [2, 2, 4, 40, 64])\n  %" + out + "_c = clone(%" +
         out + "_e, memory_format=contiguous_format)\n  %" + out + " = view(%" + out + "_c, [2, 8, 40, 64])\n";
}

const std::string kCaches = "  %kc = input() : bf16[2, 2, 40, 64]\n  %vc = input() : bf16[2, 2, 40, 64]\n" + repeated("kc", "k") + repeated("vc", "v");

std::vector<const Node*> attentions(const Graph& g) {
  std::vector<const Node*> out;
  for (const auto& n : g.nodes)
    if (n.op == OpKind::ScaledDotProductAttention) out.push_back(&n);
  return out;
}

void expect_same_values(const Graph& a, const Graph& b, const std::string& what) {
  TensorMap inputs = random_inputs(a, 5);
  auto want = evaluate_reference(a, inputs), got = evaluate_reference(b, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], what);
}

TEST(DecomposeAttention, OneQueryRowTakesTheRepeatedHeadsAsRows) {
  // decoding: one query row, an added mask over the cache positions
  Graph g = parse("  %q = input() : bf16[2, 8, 1, 64]\n  %m = input() : bf16[1, 1, 1, 40]\n" + kCaches +
                  "  %a = scaled_dot_product_attention(%q, %k, %v, %m)\n  return %a\n");
  Graph d = decompose(g, true);
  auto att = attentions(d);
  ASSERT_EQ(att.size(), 1u) << print_graph(d);
  const TensorMeta& q = d.meta(std::get<ValueRef>(att[0]->arg("query").value));
  const TensorMeta& k = d.meta(std::get<ValueRef>(att[0]->arg("key").value));
  EXPECT_EQ(q.sizes, (SymShape{2, 2, 4, 64})) << print_graph(d);  // the 4 heads of a key/value head are its rows
  EXPECT_EQ(k.sizes, (SymShape{2, 2, 40, 64})) << print_graph(d);  // the cache itself, not repeated
  EXPECT_TRUE(fused_attention_applies(d, *att[0]));
  EXPECT_EQ(d.meta(d.outputs[0]).sizes, (SymShape{2, 8, 1, 64}));
  expect_same_values(g, d, "one query row");
}

TEST(DecomposeAttention, QueryRowsSplitTheHeadsOverAnExpandedKey) {
  const std::string cases[] = {
      // prefill, causal
      "  %q = input() : bf16[2, 8, 40, 64]\n" + kCaches + "  %a = scaled_dot_product_attention(%q, %k, %v, is_causal=true)\n  return %a\n",
      // a bool mask of a batch and positions, the same for every head
      "  %q = input() : bf16[2, 8, 7, 64]\n  %m = input() : bool[2, 1, 7, 40]\n" + kCaches +
          "  %a = scaled_dot_product_attention(%q, %k, %v, %m)\n  return %a\n",
      // one query row, causal (row 0 sees key 0 only): not rows of one attention
      "  %q = input() : bf16[2, 8, 1, 64]\n" + kCaches + "  %a = scaled_dot_product_attention(%q, %k, %v, is_causal=true)\n  return %a\n",
      // enable_gqa, 3-D mask
      "  %q = input() : f16[1, 6, 9, 32]\n  %k = input() : f16[1, 2, 30, 32]\n  %v = input() : f16[1, 2, 30, 32]\n  %m = input() : f16[1, 9, 30]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, %m, enable_gqa=true)\n  return %a\n",
  };
  for (const auto& body : cases) {
    Graph g = parse(body);
    Graph d = decompose(g, true);
    auto att = attentions(d);
    ASSERT_EQ(att.size(), 1u) << body << print_graph(d);
    const TensorMeta& q = d.meta(std::get<ValueRef>(att[0]->arg("query").value));
    const TensorMeta& k = d.meta(std::get<ValueRef>(att[0]->arg("key").value));
    EXPECT_EQ(q.dim(), 5) << body << print_graph(d);
    EXPECT_EQ(k.strides[2], SymInt(0)) << body << print_graph(d);  // the repeat is a stride, not a copy
    EXPECT_TRUE(fused_attention_applies(d, *att[0])) << body;
    expect_same_values(g, d, body);
  }
}

TEST(DecomposeAttention, OtherFormsAreLeftAlone) {
  const std::string cases[] = {
      // a mask per query head
      "  %q = input() : bf16[2, 8, 1, 64]\n  %m = input() : bool[1, 8, 1, 40]\n" + kCaches +
          "  %a = scaled_dot_product_attention(%q, %k, %v, %m)\n  return %a\n",
      // key and value repeated differently: the key repeated, the value given per query head
      "  %q = input() : bf16[2, 8, 1, 64]\n  %kc = input() : bf16[2, 2, 40, 64]\n  %v = input() : bf16[2, 8, 40, 64]\n" + repeated("kc", "k") +
          "  %a = scaled_dot_product_attention(%q, %k, %v)\n  return %a\n",
      // f32: no fused kernel
      "  %q = input() : f32[1, 6, 9, 32]\n  %k = input() : f32[1, 2, 30, 32]\n  %v = input() : f32[1, 2, 30, 32]\n"
      "  %a = scaled_dot_product_attention(%q, %k, %v, enable_gqa=true)\n  return %a\n",
  };
  for (const auto& body : cases) {
    Graph g = parse(body);
    Graph d = decompose(g, true);
    for (const auto& n : d.nodes) EXPECT_EQ(n.name().find("_grouped"), std::string::npos) << body << print_graph(d);
    expect_same_values(g, d, body);
  }
}

}  // namespace
}  // namespace coil::testing
