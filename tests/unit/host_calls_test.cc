// Torch calls (graph op torch_call, CompileOptions::host_calls) as steps of the CPU plan: the
// embedder's results become the plan's buffers, are read by the steps after them, handed on as
// graph outputs or released after their last reader; wrong layouts, failures and a missing
// embedder are errors.
#include <gtest/gtest.h>

#include <atomic>

#include "coil/coil.h"
#include "test_util.h"

namespace coil {
namespace {

std::string cache_dir() {
  static const std::string dir = testing::process_cache_dir("coil_host_calls_test");
  return dir;
}

// Call 0: (2 * a, a + b) of two [4, 6] f32 inputs, the second result in column-major strides
// (as declared) unless `wrong_strides`; it counts the results it hands out that were released.
class Calls : public HostCalls {
 public:
  mutable std::atomic<int> made{0}, released{0};
  bool wrong_strides = false, fail = false;

  std::vector<Tensor> call(int index, const std::vector<Tensor>& inputs, void* stream) const override {
    EXPECT_EQ(index, 0);
    EXPECT_EQ(stream, nullptr);
    if (fail) throw Error("the embedder failed");
    const Tensor& a = inputs.at(0);
    const Tensor& b = inputs.at(1);
    auto keep = [this](const Tensor& t) {
      ++made;
      return Tensor::borrow(t.data(), t.dtype(), t.sizes(), t.strides(), 0, {}, [t, this](void*) { ++released; });
    };
    Tensor twice = Tensor::empty_strided(DType::f32, {4, 6}, {6, 1});
    Tensor sum = Tensor::empty_strided(DType::f32, {4, 6}, wrong_strides ? Shape{6, 1} : Shape{1, 4});
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        double x = a.load(i * a.strides()[0] + j * a.strides()[1]), y = b.load(i * b.strides()[0] + j * b.strides()[1]);
        twice.store(i * twice.strides()[0] + j * twice.strides()[1], 2 * x);
        sum.store(i * sum.strides()[0] + j * sum.strides()[1], x + y);
      }
    return {keep(twice), keep(sum)};
  }
};

// The second input is read transposed (a view of a [6, 4] input): the call gets it as that view.
Graph graph() {
  return parse_graph(
      "graph t {\n"
      "  %x = input() : f32[4, 6]\n"
      "  %w = input() : f32[6, 4]\n"
      "  %e = exp(%x)\n"
      "  %wt = permute(%w, [1, 0])\n"
      "  %a, %b = torch_call([%e, %wt], 0, \"f32:4,6:6,1;f32:4,6:1,4\")\n"
      "  %y = add.Tensor(%a, %b)\n"
      "  %z = mul.Tensor(%y, %e)\n"
      "  return %z, %a\n"
      "}\n");
}

TensorMap inputs() {
  Tensor x = Tensor::empty_strided(DType::f32, {4, 6}, {6, 1}), w = Tensor::empty_strided(DType::f32, {6, 4}, {4, 1});
  for (int64_t i = 0; i < 24; ++i) x.store(i, 0.1 * static_cast<double>(i % 7) - 0.3), w.store(i, 0.05 * static_cast<double>(i) - 0.5);
  return {{"x", x}, {"w", w}};
}

TEST(HostCalls, ResultsAreBuffersReadByLaterSteps) {
  auto calls = std::make_shared<Calls>();
  Executable exe = compile(graph(), {.cache_dir = cache_dir(), .host_calls = calls});
  TensorMap in = inputs();
  {
    std::vector<Tensor> out = exe.run(in);
    ASSERT_EQ(out.size(), 2u);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        double e = std::exp(in["x"].load(i * 6 + j)), wt = in["w"].load(j * 4 + i);
        EXPECT_NEAR(out[0].load(out[0].offset() + i * out[0].strides()[0] + j * out[0].strides()[1]), (2 * e + e + wt) * e, 1e-5);
        EXPECT_NEAR(out[1].load(out[1].offset() + i * out[1].strides()[0] + j * out[1].strides()[1]), 2 * e, 1e-5);
      }
    // The sum was released after its last reader; the product is a graph output, held by it.
    EXPECT_EQ(calls->made, 2);
    EXPECT_EQ(calls->released, 1);
  }
  EXPECT_EQ(calls->released, 2);
}

TEST(HostCalls, ResultsInAnotherLayoutAreAnError) {
  auto calls = std::make_shared<Calls>();
  calls->wrong_strides = true;
  Executable exe = compile(graph(), {.cache_dir = cache_dir(), .host_calls = calls});
  try {
    exe.run(inputs());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("result 1 is f32[4, 6] strides [6, 1] where the compiled graph has f32[4, 6] strides [1, 4]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(calls->released, calls->made);  // nothing kept
}

TEST(HostCalls, AFailingCallFailsTheRun) {
  auto calls = std::make_shared<Calls>();
  calls->fail = true;
  Executable exe = compile(graph(), {.cache_dir = cache_dir(), .host_calls = calls});
  EXPECT_THROW(exe.run(inputs()), Error);
  calls->fail = false;
  EXPECT_EQ(exe.run(inputs()).size(), 2u);  // the plan runs again
}

TEST(HostCalls, AGraphWithATorchCallNeedsItsEmbedder) {
  try {
    compile(graph(), {.cache_dir = cache_dir()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("%a is a torch_call: it runs only inside the program that made it"), std::string::npos) << e.what();
  }
}

TEST(HostCalls, DeclaredOutputsAreChecked) {
  for (const char* spec : {"f32:4,6", "q32:4,6:6,1", "f32:4,6:6", "f32:4,x:6,1", ""}) {
    std::string text = std::string("graph t {\n  %x = input() : f32[4, 6]\n  %a = torch_call([%x], 0, \"") + spec + "\")\n  return %a\n}\n";
    EXPECT_THROW(parse_graph(text), Error) << spec;
  }
}

REF_TEST(TorchCall, TheReferenceHasNoEmbedderToCall) {
  Graph g = parse_graph("graph t {\n  %x = input() : f32[4, 6]\n  %a = torch_call([%x], 0, \"f32:4,6:6,1\")\n  return %a\n}\n");
  Tensor x = Tensor::zeros(DType::f32, {4, 6});
  try {
    testing::run(g, {{"x", x}});  // (prints and parses it back first)
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("which the reference has not"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coil
