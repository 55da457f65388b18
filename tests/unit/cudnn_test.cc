// cuDNN's binding: the values written out in cudnn_api.h against the real header, loading (what
// is tried, and why it fails without a GPU), and a convolution as cuDNN's problem (1-D given a
// unit dim, the padding after the input that gives PyTorch's output size, channels-last
// strides, the bias left to a kernel). Running convolutions is tested on the GPU machine
// (tests/python/test_convolution.py, the CudaGpu tests).
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen/cuda/launch.h"
#include "coil/coil.h"
#include "driver/compile.h"
#include "driver/conv_choice.h"
#include "loop/conv_params.h"
#include "runtime/cuda/cudnn.h"
#include "runtime/cuda/cudnn_api.h"
#include "runtime/cuda/gpu_plan.h"
#include "schedule/channels_last.h"
#include "test_util.h"

#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>
#define COIL_HAVE_CUDNN_HEADER 1
#endif

namespace coil::cuda {
namespace {

using coil::testing::message_of;

TEST(CudnnAbi, WrittenOutValuesMatchTheHeader) {
#ifdef COIL_HAVE_CUDNN_HEADER
  static_assert(dnn::kSuccess == CUDNN_STATUS_SUCCESS);
  static_assert(dnn::kConvolutionDescriptor == CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR &&
                dnn::kEngineDescriptor == CUDNN_BACKEND_ENGINE_DESCRIPTOR &&
                dnn::kEngineConfigDescriptor == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR &&
                dnn::kEngineHeuristicDescriptor == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR &&
                dnn::kExecutionPlanDescriptor == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
                dnn::kConvolutionForwardDescriptor == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR &&
                dnn::kOperationGraphDescriptor == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR &&
                dnn::kVariantPackDescriptor == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR &&
                dnn::kTensorDescriptor == CUDNN_BACKEND_TENSOR_DESCRIPTOR &&
                dnn::kKnobChoiceDescriptor == CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR &&
                dnn::kPointwiseDescriptor == CUDNN_BACKEND_POINTWISE_DESCRIPTOR &&
                dnn::kOperationPointwiseDescriptor == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  static_assert(dnn::kTypePointwiseMode == CUDNN_TYPE_POINTWISE_MODE && dnn::kPointwiseMode == CUDNN_ATTR_POINTWISE_MODE &&
                dnn::kPointwiseMathPrecision == CUDNN_ATTR_POINTWISE_MATH_PREC &&
                dnn::kOperationPointwisePwDescriptor == CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR &&
                dnn::kOperationPointwiseX == CUDNN_ATTR_OPERATION_POINTWISE_XDESC &&
                dnn::kOperationPointwiseB == CUDNN_ATTR_OPERATION_POINTWISE_BDESC &&
                dnn::kOperationPointwiseY == CUDNN_ATTR_OPERATION_POINTWISE_YDESC && dnn::kTensorIsVirtual == CUDNN_ATTR_TENSOR_IS_VIRTUAL &&
                dnn::kPointwiseAdd == CUDNN_POINTWISE_ADD && dnn::kPointwiseMul == CUDNN_POINTWISE_MUL &&
                dnn::kPointwiseReluForward == CUDNN_POINTWISE_RELU_FWD);
  static_assert(dnn::kTypeHandle == CUDNN_TYPE_HANDLE && dnn::kTypeDataType == CUDNN_TYPE_DATA_TYPE &&
                dnn::kTypeBoolean == CUDNN_TYPE_BOOLEAN && dnn::kTypeInt64 == CUDNN_TYPE_INT64 &&
                dnn::kTypeFloat == CUDNN_TYPE_FLOAT && dnn::kTypeVoidPtr == CUDNN_TYPE_VOID_PTR &&
                dnn::kTypeConvolutionMode == CUDNN_TYPE_CONVOLUTION_MODE && dnn::kTypeHeuristicMode == CUDNN_TYPE_HEUR_MODE &&
                dnn::kTypeNumericalNote == CUDNN_TYPE_NUMERICAL_NOTE && dnn::kTypeKnobType == CUDNN_TYPE_KNOB_TYPE &&
                dnn::kTypeBackendDescriptor == CUDNN_TYPE_BACKEND_DESCRIPTOR);
  static_assert(dnn::kConvolutionComputeType == CUDNN_ATTR_CONVOLUTION_COMP_TYPE &&
                dnn::kConvolutionMode == CUDNN_ATTR_CONVOLUTION_CONV_MODE &&
                dnn::kConvolutionDilations == CUDNN_ATTR_CONVOLUTION_DILATIONS &&
                dnn::kConvolutionFilterStrides == CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES &&
                dnn::kConvolutionPostPaddings == CUDNN_ATTR_CONVOLUTION_POST_PADDINGS &&
                dnn::kConvolutionPrePaddings == CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS &&
                dnn::kConvolutionSpatialDims == CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS);
  static_assert(dnn::kHeuristicMode == CUDNN_ATTR_ENGINEHEUR_MODE &&
                dnn::kHeuristicOperationGraph == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH &&
                dnn::kHeuristicResults == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
                dnn::kEngineConfigEngine == CUDNN_ATTR_ENGINECFG_ENGINE &&
                dnn::kEngineConfigKnobChoices == CUDNN_ATTR_ENGINECFG_KNOB_CHOICES &&
                dnn::kKnobChoiceKnobType == CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE &&
                dnn::kKnobChoiceKnobValue == CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE &&
                dnn::kExecutionPlanHandle == CUDNN_ATTR_EXECUTION_PLAN_HANDLE &&
                dnn::kExecutionPlanEngineConfig == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG &&
                dnn::kExecutionPlanWorkspaceSize == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE &&
                dnn::kExecutionPlanJson == CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION && dnn::kTypeChar == CUDNN_TYPE_CHAR);
  static_assert(dnn::kConvolutionForwardAlpha == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA &&
                dnn::kConvolutionForwardBeta == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA &&
                dnn::kConvolutionForwardDescriptor_ == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC &&
                dnn::kConvolutionForwardW == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W &&
                dnn::kConvolutionForwardX == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X &&
                dnn::kConvolutionForwardY == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y);
  static_assert(dnn::kConvolutionBackwardDataDescriptor == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR &&
                dnn::kConvolutionBwdDataAlpha == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA &&
                dnn::kConvolutionBwdDataBeta == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA &&
                dnn::kConvolutionBwdDataDescriptor_ == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC &&
                dnn::kConvolutionBwdDataW == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W &&
                dnn::kConvolutionBwdDataDx == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX &&
                dnn::kConvolutionBwdDataDy == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY);
  static_assert(dnn::kOperationGraphHandle == CUDNN_ATTR_OPERATIONGRAPH_HANDLE &&
                dnn::kOperationGraphOps == CUDNN_ATTR_OPERATIONGRAPH_OPS);
  static_assert(dnn::kTensorByteAlignment == CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT &&
                dnn::kTensorDataType == CUDNN_ATTR_TENSOR_DATA_TYPE && dnn::kTensorDimensions == CUDNN_ATTR_TENSOR_DIMENSIONS &&
                dnn::kTensorStrides == CUDNN_ATTR_TENSOR_STRIDES && dnn::kTensorUniqueId == CUDNN_ATTR_TENSOR_UNIQUE_ID);
  static_assert(dnn::kVariantPackUniqueIds == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS &&
                dnn::kVariantPackDataPointers == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS &&
                dnn::kVariantPackWorkspace == CUDNN_ATTR_VARIANT_PACK_WORKSPACE &&
                dnn::kEngineNumericalNote == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE &&
                dnn::kEngineGlobalIndex == CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  static_assert(dnn::kDataFloat == CUDNN_DATA_FLOAT && dnn::kDataDouble == CUDNN_DATA_DOUBLE &&
                dnn::kDataHalf == CUDNN_DATA_HALF && dnn::kDataBfloat16 == CUDNN_DATA_BFLOAT16);
  static_assert(dnn::kCrossCorrelation == CUDNN_CROSS_CORRELATION && dnn::kHeuristicModeA == CUDNN_HEUR_MODE_A &&
                dnn::kHeuristicModeFallback == CUDNN_HEUR_MODE_FALLBACK);
  static_assert(dnn::kNoteTensorCore == CUDNN_NUMERICAL_NOTE_TENSOR_CORE &&
                dnn::kNoteDownConvertInputs == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS &&
                dnn::kNoteReducedPrecisionReduction == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION &&
                dnn::kNoteFft == CUDNN_NUMERICAL_NOTE_FFT && dnn::kNoteNondeterministic == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
  static_assert(sizeof(cudnnStatus_t) == sizeof(dnn::Status) && sizeof(cudnnBackendDescriptor_t) == sizeof(void*));
#else
  GTEST_SKIP() << "cudnn_graph.h is not on the include path; the values in cudnn_api.h go unchecked here";
#endif
}

TEST(CudnnLoad, AMissingOverrideIsNamed) {
  ::setenv("COIL_CUDNN", "/nonexistent/libcudnn.so.9", 1);
  std::string message = message_of([] { Cudnn::load(); });
  ::unsetenv("COIL_CUDNN");
  EXPECT_NE(message.find("cannot load cuDNN"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/libcudnn.so.9: "), std::string::npos) << message;
  EXPECT_NE(message.find("COIL_CUDNN"), std::string::npos) << message;
}

// Without a GPU the library either is not found (the message lists what was tried) or loads and
// cudnnCreate fails; with one it loads.
TEST(CudnnLoad, LoadsOrSaysWhy) {
  std::string message;
  try {
    EXPECT_FALSE(Cudnn::load()->version().empty());
    return;
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_TRUE(message.find("cannot load cuDNN") != std::string::npos || message.rfind("cudnnCreate failed: ", 0) == 0)
      << message;
}

Graph parse(const std::string& body) { return parse_graph("graph t {\n" + body + "}\n"); }

const loop::ExternCall& only_convolution(const Generated& gen) {
  for (const auto& k : gen.lowered.program.kernels)
    if (const auto* call = std::get_if<loop::ExternCall>(&k); call && call->kind == loop::ExternKind::convolution) return *call;
  throw std::runtime_error("no convolution call");
}

// A library that takes every convolution: what the CUDA target generates once cuDNN offers plans.
Generated generate_with_library(const Graph& g) {
  Target target;
  target.cuda = true;
  target.device = preset_device("sm_90a");
  target.library_convolution = [](const loop::ExternCall&, const loop::Program&) { return true; };
  return generate(g, target);
}

TEST(CudnnProblem, OneDimensionGetsAUnitDimAndPaddingGivesPyTorchsSize) {
  // L = 10, k = 3, stride 3, dilation 2, padding 1 on both sides: (10 + 2 - 5) // 3 + 1 = 3
  // outputs, by PyTorch's formula and cuDNN's alike.
  Generated gen = generate_with_library(parse(
      "  %x = input() : bf16[2, 4, 10]\n  %w = input() : bf16[6, 2, 3]\n"
      "  %y = convolution(%x, %w, none, [3], [1], [2], false, [0], 2)\n  return %y\n"));
  ConvProblem p = conv_problem(only_convolution(gen), gen.lowered.program, {}, false);
  EXPECT_EQ(p.dtype, DType::bf16);
  EXPECT_EQ(p.x_dims, (std::vector<int64_t>{2, 4, 1, 10}));
  EXPECT_EQ(p.w_dims, (std::vector<int64_t>{6, 2, 1, 3}));
  EXPECT_EQ(p.y_dims, (std::vector<int64_t>{2, 6, 1, 3}));
  // The input, copied into a channels-last temporary (schedule/channels_last.h), with the
  // unit dim's stride the packed one.
  EXPECT_EQ(p.x_strides, (std::vector<int64_t>{40, 1, 40, 4}));
  EXPECT_EQ(p.stride, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(p.dilation, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(p.pre_padding, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p.post_padding, (std::vector<int64_t>{0, 1}));
}

TEST(CudnnProblem, ChannelsLastInputAndTheBiasInAKernelAfter) {
  // A channels-last input over 3 channels (6 bytes a pixel) is copied with zero channels up to 8
  // (16 bytes), and the weight with zero taps for them; the bias moves into a kernel reading the
  // call's result (a channels-last temporary); trailing input PyTorch drops (7 with k 2, stride
  // 3: 2 outputs, from positions 0 and 3) is dropped by cuDNN's formula too, with no padding.
  Generated gen = generate_with_library(parse(
      "  %t = input() : f16[2, 7, 7, 3]\n  %x = permute(%t, [0, 3, 1, 2])\n  %w = input() : f16[5, 3, 2, 2]\n"
      "  %b = input() : f16[5]\n  %y = convolution(%x, %w, %b, [3, 3], [0, 0], [1, 1], false, [0, 0], 1)\n  return %y\n"));
  const loop::ExternCall& call = only_convolution(gen);
  EXPECT_EQ(call.inputs.size(), 2u) << "the bias stays with the call";
  ConvProblem p = conv_problem(call, gen.lowered.program, {}, false);
  EXPECT_EQ(p.x_dims, (std::vector<int64_t>{2, 8, 7, 7}));
  EXPECT_EQ(p.x_strides, (std::vector<int64_t>{392, 1, 56, 8}));
  EXPECT_EQ(p.w_dims, (std::vector<int64_t>{5, 8, 2, 2}));
  EXPECT_EQ(p.y_dims, (std::vector<int64_t>{2, 5, 2, 2}));
  EXPECT_EQ(p.y_strides, (std::vector<int64_t>{20, 1, 10, 5}));
  EXPECT_EQ(p.post_padding, (std::vector<int64_t>{0, 0}));
  int bias_kernels = 0;
  for (const auto& k : gen.lowered.program.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) bias_kernels += lk->name.ends_with("_out");
  EXPECT_EQ(bias_kernels, 1) << loop::to_string(gen.lowered.program);
}

TEST(CudnnProblem, OnlyPackedLayoutsGoToCudnn) {
  // NCHW and NHWC packed (size-1 dims' strides made the packed ones); a slice, a permuted weight
  // and a broadcast are not.
  using V = std::vector<int64_t>;
  EXPECT_EQ(packed_conv_strides({2, 3, 4, 5}, {60, 20, 5, 1}), V({60, 20, 5, 1}));
  EXPECT_EQ(packed_conv_strides({2, 3, 4, 5}, {60, 1, 15, 3}), V({60, 1, 15, 3}));
  EXPECT_EQ(packed_conv_strides({1, 3, 1, 5}, {7, 5, 99, 1}), V({15, 5, 5, 1}));
  EXPECT_EQ(packed_conv_strides({2, 3, 4, 5, 6}, {360, 1, 90, 18, 3}), V({360, 1, 90, 18, 3}));
  EXPECT_FALSE(packed_conv_strides({2, 3, 6, 5}, {198, 66, 11, 2}));
  EXPECT_FALSE(packed_conv_strides({4, 3, 3, 2}, {1, 4, 12, 36}));
  EXPECT_FALSE(packed_conv_strides({2, 3, 4, 5}, {0, 20, 5, 1}));
}

}  // namespace
}  // namespace coil::cuda

namespace coil::cuda {
namespace {

// A chain in the layout PyTorch declares for ConvNeXt (a convolution's result copied into
// channels-last, then read by a depthwise convolution): the temporaries go channels-last and no
// loop kernel is left between the two calls.
// ResNet's first block: the 1x1 convolution and the downsample one read the same NCHW input, which
// is copied into channels-last once for both; 1x1 weights [K, C, 1, 1] already lie channels-last
// and are read in place; the 3x3 weight is copied.
TEST(CudnnProblem, OperandCopiesAreSharedAndSkippedWhereTheLayoutIsAlreadyChannelsLast) {
  Generated gen = generate_with_library(parse(
      "  %x = input() : bf16[2, 8, 6, 5]\n  %w1 = input() : bf16[8, 8, 1, 1]\n  %w2 = input() : bf16[8, 8, 3, 3]\n"
      "  %wd = input() : bf16[16, 8, 1, 1]\n  %w3 = input() : bf16[16, 8, 1, 1]\n"
      "  %a = convolution(%x, %w1, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %ra = relu(%a)\n"
      "  %b = convolution(%ra, %w2, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %rb = relu(%b)\n"
      "  %c = convolution(%rb, %w3, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n"
      "  %d = convolution(%x, %wd, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %s = add.Tensor(%c, %d)\n  return %s\n"));
  const loop::Program& p = gen.lowered.program;
  const std::string program = loop::to_string(p);
  int input_copies = 0, weight_copies = 0;
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k))
      for (const auto& s : lk->stores) {
        const std::string& name = p.buffers[static_cast<size_t>(s.buffer)].name;
        input_copies += name.ends_with("_input_nhwc");
        weight_copies += name.ends_with("_weight_nhwc");
      }
  EXPECT_EQ(input_copies, 1) << program;
  EXPECT_EQ(weight_copies, 1) << program;
  std::vector<int> x_reads;
  for (const auto& k : p.kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&k); c && c->kind == loop::ExternKind::convolution) {
      const loop::Buffer& w = p.buffers[static_cast<size_t>(c->inputs[1].buffer)];
      if (w.sizes[2] == SymInt(1)) {
        EXPECT_EQ(w.role, loop::Buffer::Role::input) << program;
      }
      if (p.buffers[static_cast<size_t>(c->inputs[0].buffer)].name.ends_with("_input_nhwc")) x_reads.push_back(c->inputs[0].buffer);
    }
  ASSERT_EQ(x_reads.size(), 2u) << program;
  EXPECT_EQ(x_reads[0], x_reads[1]) << program;
}

TEST(CudnnProblem, DeclaredChannelsLastChainsHaveNoCopies) {
  Generated gen = generate_with_library(parse(
      "  %x = input() : bf16[2, 8, 6, 5]\n  %w = input() : bf16[8, 8, 1, 1]\n  %b = input() : bf16[8]\n"
      "  %c = convolution(%x, %w, %b, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %o = permute(%c, [0, 2, 3, 1])\n"
      "  %d = clone(%o, memory_format=contiguous_format)\n  %l = permute(%d, [0, 3, 1, 2])\n  %v = input() : bf16[8, 1, 3, 3]\n"
      "  %e = convolution(%l, %v, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 8)\n  %r = relu(%e)\n  return %r\n"));
  const auto& kernels = gen.lowered.program.kernels;
  std::vector<std::string> between;
  bool after_first = false;
  for (const auto& k : kernels) {
    if (std::holds_alternative<loop::ExternCall>(k)) {
      if (after_first) break;
      after_first = true;
      continue;
    }
    if (after_first) between.push_back(std::get<loop::LoopKernel>(k).name);
  }
  std::string program = loop::to_string(gen.lowered.program);
  // No kernel: the bias joined the first call's epilogue (its vector made before the call) and
  // the copy into the declared layout went with it. The depthwise weight [8, 1, 3, 3] already
  // lies as channels-last would (its channel dim has size 1): read in place, not copied.
  EXPECT_TRUE(between.empty()) << program;
  size_t calls = 0;
  for (const auto& k : kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&k); c && ++calls == 2) {
      EXPECT_EQ(gen.lowered.program.buffers[static_cast<size_t>(c->inputs[1].buffer)].role, loop::Buffer::Role::input) << program;
    }
  EXPECT_EQ(calls, 2u);
  for (const auto& b : gen.lowered.program.buffers) {
    if (b.role == loop::Buffer::Role::temporary && b.sizes.size() == 4 && b.sizes[0] == SymInt(2)) {
      EXPECT_EQ(b.strides, schedule::channels_last_strides(b.sizes)) << b.name << "\n" << program;
    }
  }
}

// A kernel writing a temporary the graph declared channels-last, which a product reads too (so
// the layout planning does not move it: a batch norm's input gradient before a 1x1
// convolution's input and weight gradients), iterates channels innermost all the same: its
// stores are neighbours in memory.
TEST(CudnnProblem, KernelsStoringChannelsLastIterateChannelsInnermost) {
  Generated gen = generate_with_library(parse(
      "  %x = input() : bf16[2, 8, 6, 5]\n  %p = permute(%x, [0, 2, 3, 1])\n  %d = clone(%p, memory_format=contiguous_format)\n"
      "  %l = permute(%d, [0, 3, 1, 2])\n  %y = _to_copy(%l, dtype=f32)\n"
      "  %w = input() : f32[4, 8, 1, 1]\n  %c = convolution(%y, %w, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n"
      "  %t = permute(%y, [0, 2, 3, 1])\n  %f = view(%t, [60, 8])\n  %v = input() : f32[8, 3]\n  %m = mm(%f, %v)\n"
      "  return %c, %m\n"));
  const loop::Program& p = gen.lowered.program;
  bool found = false;
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k); lk && std::find(lk->origins.begin(), lk->origins.end(), "y") != lk->origins.end()) {
      found = true;
      EXPECT_EQ(lk->outer, (SymShape{2, 6, 5, 8})) << loop::to_string(p);
    }
  EXPECT_TRUE(found) << loop::to_string(p);
}

// What the GPU compile does with cuDNN, which takes the ungrouped convolutions and leaves the
// depthwise ones to coil's loop kernels.
Generated generate_with_ungrouped_library(const Graph& g) {
  Target target;
  target.cuda = true;
  target.device = preset_device("sm_90a");
  target.library_convolution = [](const loop::ExternCall& c, const loop::Program&) { return loop::conv_params(c.params).groups == 1; };
  return generate(g, target);
}

const loop::Buffer& buffer_named(const loop::Program& p, const std::string& name) {
  for (const auto& b : p.buffers)
    if (b.name == name) return b;
  throw std::runtime_error("no buffer " + name);
}

// A depthwise convolution in a chain: its result goes channels-last with the chain, its loop
// kernel iterates channels innermost and reads the weight through a copy with the channels
// innermost (not 49 elements apart), and its first CUDA forms are flat columns: a thread per few
// adjacent channels walking the 49 taps alone.
TEST(CudnnProblem, DepthwiseLoopKernelsJoinTheChannelsLastChain) {
  Generated gen = generate_with_ungrouped_library(parse(
      "  %x = input() : bf16[8, 16, 58, 60]\n  %w = input() : bf16[96, 16, 1, 1]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  %v = input() : bf16[96, 1, 7, 7]\n"
      "  %b = input() : bf16[96]\n  %d = convolution(%c, %v, %b, [1, 1], [3, 3], [1, 1], false, [0, 0], 96)\n  %r = relu(%d)\n"
      "  return %r\n"));
  const loop::Program& p = gen.lowered.program;
  const std::string program = loop::to_string(p);
  const loop::Buffer& d = buffer_named(p, "d");
  EXPECT_EQ(d.strides, schedule::channels_last_strides(d.sizes)) << program;
  const loop::Buffer& copy = buffer_named(p, "v_channels_inner");
  EXPECT_EQ(copy.strides, (SymShape{1, 96 * 49, 96 * 7, 96})) << program;
  bool found = false;
  for (const auto& k : gen.cuda.kernels) {
    const auto* lk = std::get_if<loop::LoopKernel>(&p.kernels[k.program_index]);
    if (!lk || lk->name != "k1_d") continue;
    found = true;
    EXPECT_EQ(lk->outer, (SymShape{8, 58, 60, 96})) << program;
    // 4 adjacent outputs along the window a thread (jam.h), 4 channels each: the widest vector
    // that leaves half a wave of threads.
    EXPECT_EQ(k.config.form, codegen::CudaConfig::Form::column);
    EXPECT_EQ(k.config.block_y, 1);
    EXPECT_EQ(k.config.vector, 4);
    EXPECT_EQ(k.config.jam, 4);
    EXPECT_EQ(k.launch.per_block, k.config.block) << "a thread per 4 channels of 4 outputs";
    EXPECT_EQ(k.launch.units, SymInt(8 * 58 * 15 * 24));
    // then 2 outputs of 8 channels a thread, and unjammed flat columns of 8 channels
    const auto configs = codegen::candidate_configs(p, *lk, preset_device("sm_90a"));
    ASSERT_GE(configs.size(), 3u);
    EXPECT_EQ(codegen::to_string(configs[1]), "column block=128 vector=8 jam=2");
    EXPECT_EQ(codegen::to_string(configs[2]), "column block=128 vector=8");
  }
  EXPECT_TRUE(found) << program;
}

// A depthwise convolution reading a softmax over the channels through a permute (the
// activation's layout is channels-last, a different shape from the chain's): its result takes
// that layout, as PyTorch's would.
TEST(CudnnProblem, ResultsTakeTheLayoutTheyAreReadIn) {
  Generated gen = generate_with_ungrouped_library(parse(
      "  %x = input() : f32[2, 4, 10, 9]\n  %w = input() : f32[8, 4, 2, 2]\n"
      "  %c = convolution(%x, %w, none, [2, 2], [0, 0], [1, 1], false, [0, 0], 1)\n  %p = permute(%c, [0, 2, 3, 1])\n"
      "  %m = _softmax(%p, -1, false)\n  %l = permute(%m, [0, 3, 1, 2])\n  %v = input() : f32[8, 1, 3, 3]\n"
      "  %d = convolution(%l, %v, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 8)\n  %r = relu(%d)\n  return %r\n"));
  const loop::Buffer& d = buffer_named(gen.lowered.program, "d");
  EXPECT_EQ(d.strides, schedule::channels_last_strides(d.sizes)) << loop::to_string(gen.lowered.program);
}

}  // namespace
}  // namespace coil::cuda

namespace coil::cuda {
namespace {

const char* kResidualBlock =
    "  %x = input() : bf16[2, 8, 6, 5]\n  %w1 = input() : bf16[8, 8, 3, 3]\n"
    "  %m = input() : bf16[8]\n  %v = input() : bf16[8]\n  %g = input() : bf16[8]\n  %b = input() : bf16[8]\n"
    "  %c = convolution(%x, %w1, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n"
    "  %n, %n1, %n2 = _native_batch_norm_legit_no_training(%c, %g, %b, %m, %v, 0.1, 1e-05)\n  %r = relu(%n)\n"
    "  %w2 = input() : bf16[8, 8, 1, 1]\n  %d = convolution(%r, %w2, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n"
    "  %s = add.Tensor(%d, %r)\n  %o = relu(%s)\n  %w3 = input() : bf16[8, 8, 1, 1]\n"
    "  %e = convolution(%o, %w3, none, [1, 1], [0, 0], [1, 1], false, [0, 0], 1)\n  return %o, %e\n";

// conv -> batch norm -> relu, then conv + r -> relu (ResNet's identity shortcut): both epilogues
// go into the calls, each with a kernel over the channels before it, and no loop kernel is left
// reading a result back but the copy of the last call's result into the graph's output layout.
TEST(ConvEpilogues, BatchNormReluAndTheShortcutJoinTheConvolutions) {
  Generated gen = generate_with_library(parse(kResidualBlock));
  const loop::Program& p = gen.lowered.program;
  const std::string program = loop::to_string(p);
  std::vector<const loop::ExternCall*> calls;
  for (const auto& k : p.kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&k)) calls.push_back(c);
  ASSERT_EQ(calls.size(), 3u) << program;
  EXPECT_EQ(calls[0]->activation, loop::Activation::relu) << program;
  EXPECT_TRUE(calls[0]->scale && calls[0]->shift && !calls[0]->residual) << program;
  EXPECT_EQ(calls[1]->activation, loop::Activation::relu) << program;
  ASSERT_TRUE(calls[1]->residual) << program;
  EXPECT_EQ(calls[1]->residual->buffer, calls[0]->output) << program;
  EXPECT_FALSE(calls[1]->scale || calls[1]->shift || calls[1]->residual_scale) << program;
  EXPECT_EQ(calls[2]->activation, loop::Activation::none) << program;  // its raw result is the graph's
  int coefficient_kernels = 0;
  for (const auto& k : p.kernels)
    if (const auto* lk = std::get_if<loop::LoopKernel>(&k)) {
      coefficient_kernels += lk->name.ends_with("_epilogue");
      if (lk->name.ends_with("_epilogue")) {
        EXPECT_EQ(lk->outer, SymShape({SymInt(8)})) << program;
      }
    }
  EXPECT_EQ(coefficient_kernels, 1) << program;
  // The first call writes the temporary the second reads: its ReLU's, not a raw one.
  EXPECT_EQ(calls[1]->inputs[0].buffer, calls[0]->output) << program;
}

// A result read raw besides through the epilogue, an f32 one, or one a library that takes no
// fused call computes, keeps its kernels.
TEST(ConvEpilogues, NoFusionWhereTheRawResultIsReadOrTheLibraryDeclines) {
  Generated raw = generate_with_library(parse(
      "  %x = input() : bf16[2, 8, 6, 5]\n  %w = input() : bf16[8, 8, 3, 3]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %r = relu(%c)\n"
      "  %s = add.Tensor(%r, %c)\n  return %s\n"));
  for (const auto& k : raw.lowered.program.kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&k)) {
      EXPECT_EQ(c->activation, loop::Activation::none) << loop::to_string(raw.lowered.program);
    }
  // f32 results keep their epilogue kernels (schedule/fuse_conv_epilogues.h).
  Generated f32 = generate_with_library(parse(
      "  %x = input() : f32[2, 8, 6, 5]\n  %w = input() : f32[8, 8, 3, 3]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %r = relu(%c)\n  return %r\n"));
  for (const auto& k : f32.lowered.program.kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&k)) {
      EXPECT_EQ(c->activation, loop::Activation::none) << loop::to_string(f32.lowered.program);
    }
  Target target;
  target.cuda = true;
  target.device = preset_device("sm_90a");
  target.library_convolution = [](const loop::ExternCall& c, const loop::Program&) { return !c.scale && !c.shift && !c.residual; };
  Generated declined = generate(parse(kResidualBlock), target);
  for (const auto& k : declined.lowered.program.kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&k)) {
      EXPECT_FALSE(c->scale || c->shift || c->residual) << loop::to_string(declined.lowered.program);
    }
}

}  // namespace
}  // namespace coil::cuda

namespace coil {
namespace {

// Which convolutions are measured against a loop kernel, and the key their choice is kept under:
// the same for the convolution before and after layout planning and epilogue fusion (the choice
// must not flip between the passes that ask).
TEST(ConvChoice, ShortReductionsAreCandidatesUnderOneKeyInEveryLayout) {
  auto first_call = [](const loop::Program& p) -> const loop::ExternCall& {
    for (const auto& k : p.kernels)
      if (const auto* c = std::get_if<loop::ExternCall>(&k); c && c->kind == loop::ExternKind::convolution) return *c;
    throw std::runtime_error("no convolution");
  };
  const std::string rgb =
      "  %x = input() : bf16[2, 2, 12, 10]\n  %w = input() : bf16[16, 2, 2, 2]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  %r = relu(%c)\n  return %r\n";
  Graph g = cuda::parse(rgb);
  Generated lowered = cuda::generate_with_library(g);  // planned channels-last, the epilogue fused
  const loop::ExternCall& fused = first_call(lowered.lowered.program);
  // 2 channels padded to 8, x 4 taps: 32.
  EXPECT_EQ(fused.inputs[1].sizes[1], SymInt(8));
  EXPECT_TRUE(loop_convolution_candidate(fused, lowered.lowered.program));
  EXPECT_EQ(fused.activation, loop::Activation::relu);
  // The key ignores the epilogue and the padded, channels-last operands.
  loop::ExternCall unfused = fused;
  unfused.activation = loop::Activation::none;
  unfused.scale.reset(), unfused.shift.reset();
  EXPECT_EQ(conv_path_key(fused, lowered.lowered.program, false), conv_path_key(unfused, lowered.lowered.program, false));
  Graph wide = cuda::parse(
      "  %x = input() : bf16[2, 8, 12, 10]\n  %w = input() : bf16[16, 8, 3, 3]\n"
      "  %c = convolution(%x, %w, none, [1, 1], [1, 1], [1, 1], false, [0, 0], 1)\n  return %c\n");
  Generated w = cuda::generate_with_library(wide);
  EXPECT_FALSE(loop_convolution_candidate(first_call(w.lowered.program), w.lowered.program));  // 8 x 9 = 72 > 32
}

}  // namespace
}  // namespace coil
