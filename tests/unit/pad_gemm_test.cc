// The GPU schedule's row padding of matrix-product results (schedule/pad_gemm_outputs.h): which
// results get padded rows, and how the kernels reading them index the padded layout.
#include <gtest/gtest.h>

#include "coil/coil.h"
#include "driver/compile.h"
#include "runtime/cuda/device_info.h"
#include "schedule/pad_gemm_outputs.h"

namespace coil {
namespace {

loop::Program for_cuda(const std::string& body) {
  Graph g = parse_graph("graph t {\n" + body + "}\n");
  return generate(g, {.cuda = true, .device = cuda::preset_device("sm_90a")}).lowered.program;
}

const loop::Buffer& product_result(const loop::Program& p) {
  for (const auto& k : p.kernels)
    if (const auto* e = std::get_if<loop::ExternCall>(&k)) return p.buffers[static_cast<size_t>(e->output)];
  throw std::runtime_error("no extern call");
}

TEST(PadGemm, UnalignedRowsArePaddedAndTheirReadersFollow) {
  // GPT-2's head in small: 1001 bf16 columns (2002 bytes a row) -> rows of 1008, read back into
  // the [2, 1024, 1001] output and by an exp, both over one flat dim of dense stores
  // (schedule/flatten_dense_pointwise.h), each load at its row's padded offset.
  auto p = for_cuda(
      "  %x = input() : bf16[2, 1024, 64]\n  %w = input() : bf16[1001, 64]\n  %xv = view(%x, [2048, 64])\n"
      "  %wt = permute(%w, [1, 0])\n  %y = mm(%xv, %wt)\n  %o = view(%y, [2, 1024, 1001])\n  %e = exp(%y)\n  return %o, %e\n");
  const loop::Buffer& y = product_result(p);
  EXPECT_EQ(shape_str(y.strides), "[1008, 1]") << loop::to_string(p);
  const std::string text = loop::to_string(p);
  EXPECT_NE(text.find("buf3[x0] = load(buf2, 1008*(x0//1001) + (x0 % 1001))"), std::string::npos) << text;
  EXPECT_NE(text.find("exp(cast<f32>(load(buf2, 1008*(x0//1001) + (x0 % 1001))))"), std::string::npos) << text;
}

TEST(PadGemm, AnOutputViewOfTheProductKeepsItsDenseRows) {
  // Only copied into the output view: the product writes padded rows and the copy stays, since
  // the program may view the output as dense.
  auto p = for_cuda(
      "  %x = input() : bf16[2, 1024, 64]\n  %w = input() : bf16[1001, 64]\n  %xv = view(%x, [2048, 64])\n"
      "  %wt = permute(%w, [1, 0])\n  %y = mm(%xv, %wt)\n  %o = view(%y, [2, 1024, 1001])\n  return %o\n");
  ASSERT_EQ(p.kernels.size(), 2u) << loop::to_string(p);
  EXPECT_EQ(shape_str(product_result(p).strides), "[1008, 1]");
  for (const auto& b : p.buffers) {
    if (b.role == loop::Buffer::Role::output) {
      EXPECT_EQ(shape_str(b.strides), "[1025024, 1001, 1]");
    }
  }
}

TEST(PadGemm, AProductReturnedAndReadIsCopiedOutOfPaddedRows) {
  // The product is the graph output itself and an exp reads it: the product writes padded rows,
  // a kernel copies them into the dense output, and the exp reads the output's dense layout.
  auto p = for_cuda(
      "  %x = input() : bf16[2048, 64]\n  %w = input() : bf16[64, 1001]\n  %y = mm(%x, %w)\n  %e = exp(%y)\n"
      "  return %y, %e\n");
  const loop::Buffer& staged = product_result(p);
  EXPECT_EQ(staged.role, loop::Buffer::Role::temporary);
  EXPECT_EQ(shape_str(staged.strides), "[1008, 1]") << loop::to_string(p);
  for (const auto& b : p.buffers) {
    if (b.role == loop::Buffer::Role::output) {
      EXPECT_EQ(shape_str(b.strides), "[1001, 1]") << loop::to_string(p);
    }
  }
  EXPECT_NE(loop::to_string(p).find("load(buf"), std::string::npos);
  // Returned alone: the same (the output stays dense).
  auto q = for_cuda("  %x = input() : bf16[2048, 64]\n  %w = input() : bf16[64, 1001]\n  %y = mm(%x, %w)\n  return %y\n");
  ASSERT_EQ(q.kernels.size(), 2u) << loop::to_string(q);
  EXPECT_EQ(product_result(q).role, loop::Buffer::Role::temporary);
  EXPECT_EQ(shape_str(product_result(q).strides), "[1008, 1]");
}

TEST(PadGemm, AnOperandALoopKernelWritesIsPadded) {
  // A loss gradient's shape: %g, [2048, 1001] bf16, written by a kernel and read by two products,
  // as it is and transposed, and by a row sum: the kernel stores rows of 1008, the products'
  // views step over them, the sum reads them.
  auto p = for_cuda(
      "  %l = input() : bf16[2048, 1001]\n  %x = input() : bf16[2048, 64]\n  %w = input() : bf16[1001, 64]\n"
      "  %g = mul.Scalar(%l, 2)\n  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n"
      "  %s = sum.dim_IntList(%g, [1])\n  return %d, %e, %s\n");
  std::string text = loop::to_string(p);
  int g = -1;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].name == "g") g = static_cast<int>(b);
  ASSERT_GE(g, 0) << text;
  EXPECT_EQ(shape_str(p.buffers[static_cast<size_t>(g)].strides), "[1008, 1]") << text;
  std::vector<std::string> views;
  for (const auto& k : p.kernels) {
    if (const auto* call = std::get_if<loop::ExternCall>(&k)) {
      for (const auto& v : call->inputs)
        if (v.buffer == g) views.push_back(shape_str(v.strides));
    } else {
      for (const auto& st : std::get<loop::LoopKernel>(k).stores) {
        if (st.buffer == g) {
          EXPECT_NE(st.offset.str().find("1008"), std::string::npos) << text;
        }
      }
    }
  }
  EXPECT_EQ(views, (std::vector<std::string>{"[1008, 1]", "[1, 1008]"})) << text;
}

TEST(PadGemm, AnInputOperandIsCopiedIntoPaddedRows) {
  // A loss gradient that arrives as a graph input (GPT-2's, from the loss's own graph), read by two
  // products and a row sum: one kernel copies it into rows of 1008 (zeros past 1001) before the
  // first product, both products' views step over the copy, the sum reads the input itself.
  auto p = for_cuda(
      "  %g = input() : bf16[2048, 1001]\n  %x = input() : bf16[2048, 256]\n  %w = input() : bf16[1001, 256]\n"
      "  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n  %s = sum.dim_IntList(%g, [1])\n"
      "  return %d, %e, %s\n");
  std::string text = loop::to_string(p);
  int rows = -1;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].name == "g_rows") rows = static_cast<int>(b);
  ASSERT_GE(rows, 0) << text;
  EXPECT_EQ(shape_str(p.buffers[static_cast<size_t>(rows)].strides), "[1008, 1]") << text;
  std::vector<std::string> views;
  int copies = 0;
  bool copied_first = false;
  for (const auto& k : p.kernels) {
    if (const auto* call = std::get_if<loop::ExternCall>(&k)) {
      for (const auto& v : call->inputs) {
        EXPECT_NE(v.buffer, 0) << text;  // the input itself goes to no product
        if (v.buffer == rows) views.push_back(shape_str(v.strides));
      }
      continue;
    }
    const auto& lk = std::get<loop::LoopKernel>(k);
    for (const auto& st : lk.stores) {
      if (st.buffer != rows) continue;
      ++copies;
      copied_first = views.empty();
    }
  }
  EXPECT_EQ(copies, 1) << text;
  EXPECT_TRUE(copied_first) << text;
  EXPECT_EQ(views, (std::vector<std::string>{"[1008, 1]", "[1, 1008]"})) << text;
  // %d reduces over the padded dim: it runs with K = 1008 (the copy's padding is zeros), its
  // other operand copied with 7 zero rows; %e reduces over the rows and keeps K = 2048.
  EXPECT_NE(text.find("where(lt(index(x1), index(1001))"), std::string::npos) << text;
  EXPECT_NE(text.find("mm(buf" + std::to_string(rows) + "[2048, 1008] strides=[1008, 1], buf"), std::string::npos) << text;
  EXPECT_NE(text.find("w_k: bf16[1008, 256]"), std::string::npos) << text;
  EXPECT_NE(text.find("mm(buf" + std::to_string(rows) + "[1001, 2048] strides=[1, 1008]"), std::string::npos) << text;
  // A product that meets few columns is not worth a copy: an align1 kernel does.
  auto q = for_cuda(
      "  %g = input() : bf16[2048, 1001]\n  %w = input() : bf16[1001, 8]\n  %d = mm(%g, %w)\n  return %d\n");
  EXPECT_EQ(loop::to_string(q).find("g_rows"), std::string::npos) << loop::to_string(q);
}

TEST(PadGemm, ATransposedProductOverPaddedRowsRunsOverThePaddedM) {
  // The head's weight gradient of GPT-2 in small: %e = g^T x, M = 1001 read from the input's
  // zero-padded copy (rows of 1008), its result a temporary read by a kernel: the product runs
  // with M = 1008 into a result of 1008 rows, of which the kernel reads the first 1001.
  auto p = for_cuda(
      "  %g = input() : bf16[2048, 1001]\n  %x = input() : bf16[2048, 1536]\n  %w = input() : bf16[1001, 256]\n"
      "  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n  %f = mul.Scalar(%e, 3)\n  return %d, %f\n");
  std::string text = loop::to_string(p);
  int rows = -1, e = -1;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].name == "g_rows") rows = static_cast<int>(b);
    if (p.buffers[b].name == "e") e = static_cast<int>(b);
  }
  ASSERT_GE(rows, 0) << text;
  ASSERT_GE(e, 0) << text;
  EXPECT_NE(text.find("mm(buf" + std::to_string(rows) + "[1008, 2048] strides=[1, 1008], buf1[2048, 1536] strides=[1536, 1]) -> buf" +
                      std::to_string(e)),
            std::string::npos)
      << text;
  EXPECT_EQ(shape_str(p.buffers[static_cast<size_t>(e)].sizes), "[1008, 1536]") << text;
  EXPECT_EQ(shape_str(p.buffers[static_cast<size_t>(e)].strides), "[1536, 1]") << text;
  EXPECT_NE(text.find("outer=[1001, 1536]"), std::string::npos) << text;
  // Returned (a graph output keeps its rows), or over rows without padding (the operand a
  // kernel writes, whose last row's padding is not allocated): M as it is.
  auto q = for_cuda(
      "  %g = input() : bf16[2048, 1001]\n  %x = input() : bf16[2048, 1536]\n  %w = input() : bf16[1001, 256]\n"
      "  %d = mm(%g, %w)\n  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n  return %d, %e\n");
  EXPECT_NE(loop::to_string(q).find("[1001, 2048] strides=[1, 1008]"), std::string::npos) << loop::to_string(q);
  auto r = for_cuda(
      "  %l = input() : bf16[2048, 1001]\n  %x = input() : bf16[2048, 1536]\n  %g = mul.Scalar(%l, 2)\n"
      "  %gt = permute(%g, [1, 0])\n  %e = mm(%gt, %x)\n  %f = mul.Scalar(%e, 3)\n  return %f\n");
  EXPECT_NE(loop::to_string(r).find("[1001, 2048] strides=[1, 1008]"), std::string::npos) << loop::to_string(r);
}

TEST(PadGemm, ReductionsAndBatchedProductsReadThePaddedRows) {
  auto p = for_cuda(
      "  %a = input() : f32[4, 700, 32]\n  %b = input() : f32[4, 32, 399]\n  %y = bmm(%a, %b)\n"
      "  %s = sum.dim_IntList(%y, [2])\n  return %s\n");
  const loop::Buffer& y = product_result(p);
  EXPECT_EQ(shape_str(y.strides), "[280000, 400, 1]") << loop::to_string(p);
  EXPECT_NE(loop::to_string(p).find("load(buf2, r0 + 400*x1 + 280000*x0)"), std::string::npos) << loop::to_string(p);
}

TEST(PadGemm, OtherResultsKeepTheirLayout) {
  const char* cases[] = {
      // rows already a multiple of 16 bytes
      "  %x = input() : bf16[2048, 64]\n  %w = input() : bf16[64, 1024]\n  %y = mm(%x, %w)\n  %r = exp(%y)\n  return %r\n",
      // too small to be worth it
      "  %x = input() : bf16[64, 64]\n  %w = input() : bf16[64, 1001]\n  %y = mm(%x, %w)\n  %r = exp(%y)\n  return %r\n",
      // read by another product
      "  %x = input() : f32[2048, 64]\n  %w = input() : f32[64, 1001]\n  %v = input() : f32[1001, 8]\n  %y = mm(%x, %w)\n"
      "  %z = mm(%y, %v)\n  return %z\n",
      // read at a data-dependent index
      "  %x = input() : bf16[2048, 64]\n  %w = input() : bf16[64, 1001]\n  %i = input() : i64[5]\n  %y = mm(%x, %w)\n"
      "  %g = index.Tensor(%y, [%i])\n  return %g\n",
  };
  for (const char* body : cases) {
    auto p = for_cuda(body);
    const loop::Buffer& y = product_result(p);
    EXPECT_EQ(y.strides.back(), SymInt(1)) << body;
    EXPECT_EQ(y.strides[y.strides.size() - 2], y.sizes.back()) << body << loop::to_string(p);
  }
}

// ResNet-50's 1x1 convolution weight gradient: a permuted clone with trailing unit dims, [1, 32,
// 7, 7, 2048, 1, 1] bf16, read by the product as [1568, 2048]. Its "rows" of one element were
// padded to 8 (strides [.., 16384, 8, 8, 1]: 8x the memory and an operand cuBLASLt cannot take,
// which sent the whole backward graph to eager).
TEST(PadGemm, RowsOfAFewElementsAreNotPadded) {
  auto p = for_cuda(
      "  %g = input() : bf16[512, 1568]\n  %x = input() : bf16[32, 2048, 7, 7]\n  %e = exp(%x)\n"
      "  %r = view(%e, [1, 32, 2048, 7, 7, 1, 1])\n  %t = permute(%r, [0, 1, 3, 4, 2, 5, 6])\n"
      "  %c = clone(%t, memory_format=contiguous_format)\n  %v = view(%c, [1568, 2048])\n  %y = mm(%g, %v)\n  return %y\n");
  for (const auto& k : p.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&k);
    if (!call) continue;
    for (const auto& v : call->inputs) {
      EXPECT_TRUE(v.strides.back() == SymInt(1) || v.strides[v.strides.size() - 2] == SymInt(1)) << loop::to_string(p);
      const loop::Buffer& b = p.buffers[static_cast<size_t>(v.buffer)];
      EXPECT_EQ(b.strides.back(), SymInt(1));
      if (b.sizes.size() > 1 && b.sizes.back() == SymInt(1)) {
        EXPECT_EQ(b.strides[b.strides.size() - 2], SymInt(1)) << loop::to_string(p);
      }
    }
  }
}

TEST(PadGemm, TheCpuKeepsDenseRows) {
  Graph g = parse_graph(
      "graph t {\n  %x = input() : bf16[2048, 64]\n  %w = input() : bf16[64, 1001]\n  %y = mm(%x, %w)\n  %r = exp(%y)\n"
      "  return %r\n}\n");
  auto p = generate(g, {}).lowered.program;
  EXPECT_EQ(shape_str(product_result(p).strides), "[1001, 1]");
}

}  // namespace
}  // namespace coil
