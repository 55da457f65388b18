// Row reductions of too few rows to fill the device (a decoding step's RMSNorm of one token) are
// latency-bound: every load of the row, also what only the stores read (the norm's weight), is
// issued before the reduction. With many rows, the store-only loads stay in the store pass (they
// would hold registers across the reduction). Checked on the generated text without a GPU; the
// values are the GPU suites' (test_decode_attention.py, bench.decode's logits).
#include <gtest/gtest.h>

#include <string>

#include "coil/coil.h"
#include "driver/compile.h"

namespace coil {
namespace {

// The RMSNorm of a [rows, 2048] bf16 activation, scaled by its weight.
std::string rms_norm(int rows) {
  return "graph t {\n  %x = input() : bf16[" + std::to_string(rows) +
         ", 2048]\n  %g = input() : bf16[2048]\n  %f = _to_copy(%x, dtype=f32)\n  %s = pow.Tensor_Scalar(%f, exponent=2)\n"
         "  %m = mean.dim(%s, dim=[-1], keepdim=true)\n  %e = add.Scalar(%m, other=1e-05)\n  %r = rsqrt(%e)\n  %n = mul.Tensor(%f, %r)\n"
         "  %b = _to_copy(%n, dtype=bf16)\n  %y = mul.Tensor(%b, %g)\n  return %y\n}\n";
}

// Where the weight (%g, the graph's second input) is loaded in the row kernel's text, against its
// reduction.
struct Order {
  size_t weight_load, reduction;
};

Order order_of(int rows) {
  Target t;
  t.cuda = true;
  t.device = cuda::preset_device("sm_90a");
  Generated gen = generate(parse_graph(rms_norm(rows)), t);
  EXPECT_EQ(gen.cuda.bodies.size(), 1u);
  const std::string& text = gen.cuda.bodies.at(0);
  EXPECT_EQ(gen.cuda.kernels.at(0).config.form, codegen::CudaConfig::Form::row) << text;
  EXPECT_GT(gen.cuda.kernels.at(0).config.persistent, 0) << text;
  const int g = gen.lowered.input_buffers.at(1);
  const size_t load = text.find("(b" + std::to_string(g) + " + ");
  const size_t reduction = text.find("group_allreduce");
  EXPECT_NE(load, std::string::npos) << text;
  EXPECT_NE(reduction, std::string::npos) << text;
  return {load, reduction};
}

TEST(CudaCodegen, FewRowsLoadWhatTheStoresReadBeforeTheirReduction) {
  const Order one = order_of(1);
  EXPECT_LT(one.weight_load, one.reduction);
  const Order many = order_of(4096);
  EXPECT_GT(many.weight_load, many.reduction);
}

}  // namespace
}  // namespace coil
