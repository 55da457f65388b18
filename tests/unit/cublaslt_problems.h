// Matrix-product problems the cuBLASLt tests share.
#pragma once
#include "runtime/cuda/cublaslt.h"

namespace coil::cuda::testing {

// A row-major, contiguous m x k @ k x n product.
inline GemmProblem contiguous(DType dtype, int64_t m, int64_t n, int64_t k) {
  GemmProblem p{.dtype = dtype, .m = m, .n = n, .k = k};
  p.a_rs = k;
  p.b_rs = p.c_rs = p.d_rs = n;
  p.a_cs = p.b_cs = p.c_cs = p.d_cs = 1;
  return p;
}

// x @ w^T as in linear: x is m x k, w is n x k (both contiguous), so B = w^T has strides (1, k).
inline GemmProblem linear(DType dtype, int64_t m, int64_t n, int64_t k) {
  GemmProblem p = contiguous(dtype, m, n, k);
  p.b_rs = 1;
  p.b_cs = k;
  return p;
}

}  // namespace coil::cuda::testing
