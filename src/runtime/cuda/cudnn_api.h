// The part of cuDNN's backend (graph) API that coil calls, written out from cuDNN 9's
// cudnn_graph.h so that no cuDNN or CUDA header is needed to build coil (the library itself is
// loaded with dlopen, see cudnn.h). Handles and descriptors are opaque pointers and the C enums
// are ints, as in the C ABI. tests/unit/cudnn_test.cc checks every value here against the real
// header when it is on the include path.
#pragma once
#include <cstdint>

namespace coil::cuda::dnn {

using Status = int;  // cudnnStatus_t
inline constexpr Status kSuccess = 0;

// cudnnBackendDescriptorType_t
inline constexpr int kPointwiseDescriptor = 0, kOperationPointwiseDescriptor = 13, kConvolutionDescriptor = 1, kEngineDescriptor = 2, kEngineConfigDescriptor = 3,
                     kEngineHeuristicDescriptor = 4, kExecutionPlanDescriptor = 5, kKnobChoiceDescriptor = 7, kConvolutionForwardDescriptor = 10,
                     kConvolutionBackwardDataDescriptor = 12,
                     kOperationGraphDescriptor = 15, kVariantPackDescriptor = 16, kTensorDescriptor = 17;

// cudnnBackendAttributeType_t
inline constexpr int kTypeHandle = 0, kTypeDataType = 1, kTypeBoolean = 2, kTypeInt64 = 3, kTypeFloat = 4,
                     kTypeVoidPtr = 6, kTypeConvolutionMode = 7, kTypeHeuristicMode = 8, kTypeKnobType = 9, kTypeNumericalNote = 11, kTypePointwiseMode = 14,
                     kTypeBackendDescriptor = 15, kTypeChar = 24;

// cudnnBackendAttributeName_t
inline constexpr int kPointwiseMode = 0, kPointwiseMathPrecision = 1;
inline constexpr int kOperationPointwisePwDescriptor = 750, kOperationPointwiseX = 751, kOperationPointwiseB = 752,
                     kOperationPointwiseY = 753;
inline constexpr int kConvolutionComputeType = 100, kConvolutionMode = 101, kConvolutionDilations = 102,
                     kConvolutionFilterStrides = 103, kConvolutionPostPaddings = 104, kConvolutionPrePaddings = 105,
                     kConvolutionSpatialDims = 106;
inline constexpr int kHeuristicMode = 200, kHeuristicOperationGraph = 201, kHeuristicResults = 202;
inline constexpr int kEngineConfigEngine = 300, kEngineConfigKnobChoices = 302;
inline constexpr int kKnobChoiceKnobType = 600, kKnobChoiceKnobValue = 601;
inline constexpr int kExecutionPlanHandle = 400, kExecutionPlanEngineConfig = 401, kExecutionPlanWorkspaceSize = 402,
                     kExecutionPlanJson = 405;
inline constexpr int kConvolutionForwardAlpha = 700, kConvolutionForwardBeta = 701, kConvolutionForwardDescriptor_ = 702,
                     kConvolutionForwardW = 703, kConvolutionForwardX = 704, kConvolutionForwardY = 705;
inline constexpr int kConvolutionBwdDataAlpha = 706, kConvolutionBwdDataBeta = 707, kConvolutionBwdDataDescriptor_ = 708,
                     kConvolutionBwdDataW = 709, kConvolutionBwdDataDx = 710, kConvolutionBwdDataDy = 711;
inline constexpr int kOperationGraphHandle = 800, kOperationGraphOps = 801;
inline constexpr int kTensorByteAlignment = 900, kTensorDataType = 901, kTensorDimensions = 902, kTensorStrides = 903,
                     kTensorUniqueId = 906, kTensorIsVirtual = 907;
inline constexpr int kVariantPackUniqueIds = 1000, kVariantPackDataPointers = 1001, kVariantPackWorkspace = 1003;
inline constexpr int kEngineGlobalIndex = 1301, kEngineNumericalNote = 1303;

// cudnnDataType_t
inline constexpr int kDataFloat = 0, kDataDouble = 1, kDataHalf = 2, kDataBfloat16 = 9;
// cudnnPointwiseMode_t
inline constexpr int kPointwiseAdd = 0, kPointwiseMul = 1, kPointwiseReluForward = 100;
// cudnnConvolutionMode_t
inline constexpr int kCrossCorrelation = 1;
// cudnnBackendHeurMode_t
inline constexpr int kHeuristicModeA = 3, kHeuristicModeFallback = 2;
// cudnnBackendNumericalNote_t
inline constexpr int kNoteTensorCore = 0, kNoteDownConvertInputs = 1, kNoteReducedPrecisionReduction = 2, kNoteFft = 3,
                     kNoteNondeterministic = 4;

}  // namespace coil::cuda::dnn
