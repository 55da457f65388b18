// The pure half of src/runtime/cuda/cublaslt, no library or GPU needed: the row-major ->
// column-major mapping of GemmProblem onto cuBLASLt's operands (contiguous, linear's transposed
// weight, transposed A, padded leading dimensions, batches and shared operands, extents of 1),
// what is supported and why not, and the cuBLASLt values written out in cublaslt_api.h checked
// against the real cublasLt.h where it is on the include path.
#include <gtest/gtest.h>

#include <cstddef>
#include <functional>

#include "coil/error.h"
#include "runtime/cuda/cublaslt.h"
#include "cublaslt_problems.h"
#include "test_util.h"
#include "runtime/cuda/cublaslt_api.h"

#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define COIL_HAVE_CUBLASLT_HEADER 1
#endif

namespace coil::cuda {
namespace {

using coil::testing::message_of;
using testing::contiguous;
using testing::linear;

LtMatrix matrix(int64_t rows, int64_t cols, int64_t ld, bool transpose, int64_t batch_stride = 0) {
  return LtMatrix{.rows = rows, .cols = cols, .ld = ld, .transpose = transpose, .batch_stride = batch_stride};
}

TEST(CublasLtLayout, ContiguousProductSwapsTheOperands) {
  LtOperands ops = to_column_major(contiguous(DType::f32, 64, 128, 32));
  EXPECT_EQ(ops.a, matrix(128, 32, 128, false)) << "cuBLASLt's A is our B^T, stored as is";
  EXPECT_EQ(ops.b, matrix(32, 64, 32, false)) << "cuBLASLt's B is our A^T, stored as is";
  EXPECT_EQ(ops.d, matrix(128, 64, 128, false));
  EXPECT_EQ(ops.c, ops.d) << "beta == 0: D stands in for C";
  EXPECT_EQ(ops.batch, 1);
}

TEST(CublasLtLayout, LinearWeightIsTransposedA) {
  LtOperands ops = to_column_major(linear(DType::f16, 64, 128, 32));
  EXPECT_EQ(ops.a, matrix(32, 128, 32, true)) << "w (n x k, contiguous) is column-major k x n, used transposed";
  EXPECT_EQ(ops.b, matrix(32, 64, 32, false));
}

TEST(CublasLtLayout, TransposedAAndPaddedLeadingDimensions) {
  GemmProblem p = contiguous(DType::bf16, 64, 128, 32);
  p.a_rs = 1;  // A = x^T for a contiguous x of k x m
  p.a_cs = 64;
  p.b_rs = 136;  // B rows padded
  p.d_rs = 144;  // D a slice of a wider buffer
  LtOperands ops = to_column_major(p);
  EXPECT_EQ(ops.b, matrix(64, 32, 64, true));
  EXPECT_EQ(ops.a, matrix(128, 32, 136, false));
  EXPECT_EQ(ops.d, matrix(128, 64, 144, false));
  p.a_cs = 100;  // padded column-major A
  EXPECT_EQ(to_column_major(p).b, matrix(64, 32, 100, true));
}

TEST(CublasLtLayout, BatchStridesAndASharedWeight) {
  GemmProblem p = contiguous(DType::f32, 16, 8, 4);
  p.batch = 3;
  p.a_bs = 16 * 4;
  p.b_bs = 0;  // one B for every batch
  p.d_bs = 16 * 8;
  LtOperands ops = to_column_major(p);
  EXPECT_EQ(ops.batch, 3);
  EXPECT_EQ(ops.b, matrix(4, 16, 4, false, 64));
  EXPECT_EQ(ops.a, matrix(8, 4, 8, false, 0));
  EXPECT_EQ(ops.d, matrix(8, 16, 8, false, 128));
  // D interleaved by batch ([m, batch, n] memory viewed as [batch, m, n]) is fine.
  p.d_rs = 3 * 8;
  p.d_bs = 8;
  EXPECT_EQ(to_column_major(p).d, matrix(8, 16, 24, false, 8));
  // One batch: batch strides are not used, whatever they are.
  p.batch = 1;
  EXPECT_EQ(to_column_major(p).b.batch_stride, 0);
}

TEST(CublasLtLayout, DimensionsOfExtentOneTakeAnyStride) {
  // A row vector times a matrix: A (1 x k) and D (1 x n) have meaningless row strides.
  GemmProblem p = contiguous(DType::f32, 1, 128, 32);
  p.a_rs = 0;
  p.d_rs = 7;
  LtOperands ops = to_column_major(p);
  EXPECT_EQ(ops.b, matrix(32, 1, 32, false));
  EXPECT_EQ(ops.d, matrix(128, 1, 128, false));
  // A matrix times a column vector with a non-unit stride (a strided view of a vector).
  p = contiguous(DType::f32, 64, 1, 32);
  p.b_rs = 5;
  p.b_cs = 0;
  p.d_cs = 3;
  ops = to_column_major(p);
  EXPECT_EQ(ops.a, matrix(1, 32, 5, false));
  EXPECT_EQ(ops.d, matrix(1, 64, 1, false));
}

TEST(CublasLtLayout, CIsReadWithItsOwnLayoutWhenBetaIsNonZero) {
  GemmProblem p = contiguous(DType::f16, 64, 128, 32);
  p.beta = 1;
  p.c_rs = 0;  // a bias row broadcast over the rows of C
  EXPECT_FALSE(gemm_supported(p));
  p.c_rs = 256;
  p.batch = 2;
  p.a_bs = 64 * 32;
  p.d_bs = 64 * 128;
  p.c_bs = 0;
  LtOperands ops = to_column_major(p);
  EXPECT_EQ(ops.c, matrix(128, 64, 256, false, 0));
  EXPECT_EQ(ops.d, matrix(128, 64, 128, false, 64 * 128));
}

TEST(CublasLtLayout, UnsupportedLayoutsSayWhy) {
  auto reason = [](const GemmProblem& p) { return gemm_unsupported_reason(p).value_or("supported"); };
  GemmProblem p = contiguous(DType::f32, 64, 128, 32);
  EXPECT_TRUE(gemm_supported(p));

  GemmProblem q = p;
  q.a_rs = 64;  // every other column of a wider matrix: no unit stride
  q.a_cs = 2;
  EXPECT_EQ(reason(q),
            "A (64x32, strides 64, 2) has neither a unit row stride nor a unit column stride with the other "
            "covering its extent");
  q = p;
  q.b_rs = 100;  // rows overlap: a leading dimension under the extent
  EXPECT_NE(reason(q).find("B (32x128, strides 100, 1)"), std::string::npos) << reason(q);
  q = p;
  q.a_rs = 0;  // rows broadcast (expand)
  EXPECT_FALSE(gemm_supported(q));
  q = p;
  q.d_rs = 1;  // D column-major
  q.d_cs = 64;
  EXPECT_EQ(reason(q),
            "D (64x128, strides 1, 64) is not row-major with a unit column stride and a row stride covering "
            "its columns");
  q = p;
  q.c_rs = 1;  // C column-major: fine while it is not read ...
  q.c_cs = 64;
  EXPECT_TRUE(gemm_supported(q));
  q.beta = 1;  // ... and not once it is
  EXPECT_NE(reason(q).find("C (64x128, strides 1, 64) is not row-major"), std::string::npos) << reason(q);
  q = p;
  q.dtype = DType::i32;
  EXPECT_EQ(reason(q), "cuBLASLt takes f32, f16, bf16 and f64 products, not i32");
  q = p;
  q.k = 0;
  EXPECT_EQ(reason(q), "k == 0: D = beta * C (+ epilogue) is no product, the caller computes it");
  q = p;
  q.b_cs = -1;
  EXPECT_EQ(reason(q), "negative strides");
  q = p;
  q.batch = 2;
  q.d_bs = 0;
  EXPECT_EQ(reason(q), "D's batches overlap (batch stride 0)");
  q.batch = int64_t{1} << 31;
  EXPECT_NE(reason(q).find("int32 batch count"), std::string::npos) << reason(q);
  q = p;
  q.m = -1;
  EXPECT_EQ(reason(q), "negative sizes");
  std::string message = message_of([&] { to_column_major(q); });
  EXPECT_EQ(message.rfind("cuBLASLt cannot take the f32 gemm batch 1 m -1 n 128 k 32", 0), 0u) << message;
  EXPECT_NE(message.find(": negative sizes"), std::string::npos) << message;
}

TEST(CublasLtLayout, EmptyProblemsAreSupportedAndHaveNoOperands) {
  GemmProblem p = contiguous(DType::f32, 0, 128, 32);
  p.a_rs = p.a_cs = 5;  // strides of an empty operand do not matter
  EXPECT_TRUE(gemm_supported(p));
  p = contiguous(DType::f32, 64, 128, 0);
  p.m = 0;
  EXPECT_TRUE(gemm_supported(p)) << "m == 0 with k == 0 is still nothing to do";
  p.batch = 0;
  EXPECT_TRUE(gemm_supported(p));
  EXPECT_THROW(to_column_major(p), Error);
}

TEST(CublasLtLayout, ProblemsPrintOnOneLine) {
  GemmProblem p = linear(DType::f32, 4, 8, 2);
  p.epilogue = Epilogue::bias_gelu;
  p.tf32 = true;
  EXPECT_EQ(str(p),
            "f32 gemm batch 1 m 4 n 8 k 2 (strides batch/row/col: A 0/2/1, B 0/1/2, C 0/8/1, D 0/8/1), "
            "alpha 1 beta 0, epilogue bias_gelu, tf32");
  EXPECT_EQ(epilogue_name(Epilogue::bias_relu), "bias_relu");
  EXPECT_TRUE(epilogue_has_bias(Epilogue::bias));
  EXPECT_FALSE(epilogue_has_bias(Epilogue::gelu));
}

TEST(CublasLtAbi, WrittenOutValuesMatchTheHeader) {
#ifdef COIL_HAVE_CUBLASLT_HEADER
  static_assert(lt::kSuccess == CUBLAS_STATUS_SUCCESS);
  static_assert(lt::kR32F == CUDA_R_32F && lt::kR64F == CUDA_R_64F && lt::kR16F == CUDA_R_16F &&
                lt::kR16BF == CUDA_R_16BF);
  static_assert(lt::kCompute32F == CUBLAS_COMPUTE_32F && lt::kCompute64F == CUBLAS_COMPUTE_64F &&
                lt::kCompute32FFastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32);
  static_assert(lt::kOpN == CUBLAS_OP_N && lt::kOpT == CUBLAS_OP_T);
  static_assert(lt::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && lt::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
                lt::kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE &&
                lt::kDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER &&
                lt::kDescBiasDataType == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
  static_assert(lt::kEpilogueDefault == CUBLASLT_EPILOGUE_DEFAULT && lt::kEpilogueRelu == CUBLASLT_EPILOGUE_RELU &&
                lt::kEpilogueBias == CUBLASLT_EPILOGUE_BIAS && lt::kEpilogueReluBias == CUBLASLT_EPILOGUE_RELU_BIAS &&
                lt::kEpilogueGelu == CUBLASLT_EPILOGUE_GELU && lt::kEpilogueGeluBias == CUBLASLT_EPILOGUE_GELU_BIAS);
  static_assert(lt::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
                lt::kLayoutStridedBatchOffset == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
  static_assert(lt::kPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
                lt::kPrefMinAlignmentA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
                lt::kPrefMinAlignmentB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
                lt::kPrefMinAlignmentC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
                lt::kPrefMinAlignmentD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
  static_assert(sizeof(lt::MatmulAlgo) == sizeof(cublasLtMatmulAlgo_t));
  static_assert(sizeof(lt::HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t));
  static_assert(offsetof(lt::HeuristicResult, workspace_size) ==
                offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
  static_assert(offsetof(lt::HeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
  static_assert(offsetof(lt::HeuristicResult, waves_count) == offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));
  static_assert(sizeof(cublasStatus_t) == sizeof(lt::Status) && sizeof(cublasLtHandle_t) == sizeof(void*));
#else
  GTEST_SKIP() << "cublasLt.h is not on the include path; the values in cublaslt_api.h go unchecked here";
#endif
}
}  // namespace
}  // namespace coil::cuda
