// The part of cuBLASLt's C API that coil calls, written out from CUDA 13's cublasLt.h,
// cublas_api.h and library_types.h so that no CUDA header is needed to build coil (the library
// itself is loaded with dlopen, see cublaslt.h). Handles and descriptors are opaque pointers and
// the C enums are ints, as in the C ABI. tests/unit/cublaslt_test.cc checks every value and
// struct layout here against the real headers when they are on the include path.
#pragma once
#include <cstddef>
#include <cstdint>

namespace coil::cuda::lt {

using Status = int;  // cublasStatus_t
inline constexpr Status kSuccess = 0;

// cudaDataType_t
inline constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
// cublasComputeType_t
inline constexpr int kCompute32F = 68, kCompute64F = 70, kCompute32FFastTf32 = 77;
// cublasOperation_t
inline constexpr int32_t kOpN = 0, kOpT = 1;

// cublasLtMatmulDescAttributes_t
inline constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8, kDescBiasDataType = 26;
// cublasLtEpilogue_t
inline constexpr uint32_t kEpilogueDefault = 1, kEpilogueRelu = 2, kEpilogueBias = 4, kEpilogueReluBias = 6,
                          kEpilogueGelu = 32, kEpilogueGeluBias = 36;
// cublasLtMatrixLayoutAttribute_t
inline constexpr int kLayoutBatchCount = 5, kLayoutStridedBatchOffset = 6;
// cublasLtMatmulPreferenceAttributes_t
inline constexpr int kPrefMaxWorkspaceBytes = 1, kPrefMinAlignmentA = 5, kPrefMinAlignmentB = 6, kPrefMinAlignmentC = 7,
                     kPrefMinAlignmentD = 8;

struct MatmulAlgo {  // cublasLtMatmulAlgo_t
  uint64_t data[8];
};

struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
  MatmulAlgo algo;
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

}  // namespace coil::cuda::lt
