#include "runtime/cpu_extern.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "coil/tensor.h"
#include "loop/conv_params.h"
#include "runtime/cpu_convert.h"
#include "runtime/cpu_onednn.h"
#include "support/check.h"

namespace coil {

namespace {

Tensor bind_view(const loop::View& v, const loop::Program& p, const std::vector<void*>& buffers,
            const std::map<std::string, int64_t>& symbols) {
  Shape sizes, strides;
  for (const auto& d : v.sizes) sizes.push_back(d.eval(symbols));
  for (const auto& d : v.strides) strides.push_back(d.eval(symbols));
  return Tensor::borrow(buffers[static_cast<size_t>(v.buffer)], p.buffers[static_cast<size_t>(v.buffer)].dtype, sizes,
                        strides, v.offset.eval(symbols));
}

// A 2-D operand as BLAS wants it: a pointer, whether it is transposed, and its leading dim.
template <typename T>
struct Matrix {
  const T* data;
  CBLAS_TRANSPOSE trans;
  int64_t ld;
  Tensor packed;  // keeps a packed copy alive
};

template <typename T>
Matrix<T> as_matrix(const Tensor& t) {
  int64_t rows = t.sizes()[0], cols = t.sizes()[1], rs = t.strides()[0], cs = t.strides()[1];
  const T* base = static_cast<const T*>(t.data());
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) return {base, CblasNoTrans, rs, {}};
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) return {base, CblasTrans, cs, {}};
  Tensor packed = t.contiguous_copy();
  return {static_cast<const T*>(packed.data()), CblasNoTrans, std::max<int64_t>(cols, 1), packed};
}

template <typename T>
void blas_call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, double beta, T* c, int64_t ldc) {
  auto i = [](int64_t v) { return static_cast<blasint>(v); };
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), static_cast<float>(alpha), a, i(lda), b, i(ldb), static_cast<float>(beta), c, i(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
  }
}

// The product on the generated kernels' OpenMP threads: OpenBLAS runs single-threaded on each
// thread's block of rows (or of columns, for a wide and short product). OpenBLAS's own thread
// pool and the OpenMP workers, which spin between kernels, fought over the cores: a
// linear + gelu + linear MLP took 2x as long as the same products through one pool.
template <typename T>
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, double beta, T* c, int64_t ldc) {
  openblas_set_num_threads(1);  // cheap; OpenBLAS's workers then stay asleep
  const int threads = omp_get_max_threads();
  constexpr int64_t kMinFlopsPerThread = int64_t{1} << 21;
  const int64_t parts = std::min<int64_t>(threads, std::max<int64_t>(1, 2 * m * n * k / kMinFlopsPerThread));
  if (parts <= 1) {
    blas_call<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool by_rows = m >= n || m >= 8 * parts;  // split the longer side, rows while there are enough
  const int64_t extent = by_rows ? m : n;
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static)
  for (int64_t part = 0; part < parts; ++part) {
    int64_t first = extent * part / parts, last = extent * (part + 1) / parts;
    if (first == last) continue;
    if (by_rows) {  // rows of op(A) are A's rows (no transpose) or its columns
      const T* ap = a + (ta == CblasNoTrans ? first * lda : first);
      blas_call<T>(ta, tb, last - first, n, k, alpha, ap, lda, b, ldb, beta, c + first * ldc, ldc);
    } else {  // columns of op(B) are B's columns (no transpose) or its rows
      const T* bp = b + (tb == CblasNoTrans ? first : first * ldb);
      blas_call<T>(ta, tb, m, last - first, k, alpha, a, lda, bp, ldb, beta, c + first, ldc);
    }
  }
}

// c = alpha * a @ b + beta * c for 2-D views (beta 0 or 1) through BLAS: f32 and f64 as they
// are; f16 and bf16 widened to f32 and rounded once into c (which may itself be f32, an
// im2col product's sum), so the products accumulate in f32 as PyTorch's do.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  const int64_t m = a.sizes()[0], k = a.sizes()[1], n = b.sizes()[1];
  if (m == 0 || n == 0) return;
  if (is_half(a.dtype())) {
    Tensor sum = c.dtype() == DType::f32 ? c : beta != 0 ? widen_to_f32(c) : f32_like(c);
    gemm(widen_to_f32(a), widen_to_f32(b), sum, alpha, beta);
    if (sum.data() != c.data()) narrow_into(sum, c);
    return;
  }
  const bool c_rows = c.strides()[1] == 1 && c.strides()[0] >= std::max<int64_t>(n, 1);
  if (!c_rows) {  // BLAS writes rows: a dense result, then copied into c's layout
    Tensor dense = beta != 0 ? c.contiguous_copy() : Tensor::empty_strided(c.dtype(), {m, n}, {n, 1});
    gemm(a, b, dense, alpha, beta);
    dense.for_each_index([&](std::span<const int64_t> idx) { c.store(c.element_index(idx), dense.load(dense.element_index(idx))); });
    return;
  }
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(c.data());
    if (k == 0) {  // an empty sum
      if (beta == 0)
        for (int64_t i = 0; i < m; ++i) std::fill_n(out + i * c.strides()[0], n, T(0));
      return;
    }
    Matrix<T> ma = as_matrix<T>(a), mb = as_matrix<T>(b);
    blas_gemm<T>(ma.trans, mb.trans, m, n, k, alpha, ma.data, ma.ld, mb.data, mb.ld, beta, out, c.strides()[0]);
  };
  COIL_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype()) << "gemm: operands of different dtypes";
  if (a.dtype() == DType::f32) run(float{});
  else if (a.dtype() == DType::f64) run(double{});
  else fail("matrix products of {} run as loop kernels on the CPU, not through BLAS", dtype_name(a.dtype()));
}

Tensor select0(const Tensor& t, int64_t i) {
  Shape sizes(t.sizes().begin() + 1, t.sizes().end()), strides(t.strides().begin() + 1, t.strides().end());
  return t.view(sizes, strides, t.offset() + i * t.strides()[0]);
}

// out = beta * b over a 2-D out of b's dtype (f32 or f64; b broadcast to its shape through strides).
void fill_scaled(const Tensor& out, const Tensor& b, double beta) {
  const int64_t m = out.sizes()[0], n = out.sizes()[1];
  const int64_t os0 = out.strides()[0], os1 = out.strides()[1], bs0 = b.strides()[0], bs1 = b.strides()[1];
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data());
    const T* src = static_cast<const T*>(b.data());
    const T scale = static_cast<T>(beta);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) o[i * os0 + j * os1] = beta == 0 ? T(0) : scale * src[i * bs0 + j * bs1];
  };
  COIL_CHECK(out.dtype() == b.dtype()) << "fill_scaled: dtypes differ";
  if (out.dtype() == DType::f32) run(float{});
  else run(double{});
}

// out[i] = a[i] @ b[i]. 16-bit operands are widened once for all the batch.
void bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const bool half = is_half(a.dtype());
  Tensor wa = half ? widen_to_f32(a) : a, wb = half ? widen_to_f32(b) : b;
  Tensor sum = half && out.dtype() != DType::f32 ? f32_like(out) : out;
  for (int64_t i = 0; i < out.sizes()[0]; ++i) gemm(select0(wa, i), select0(wb, i), select0(sum, i), 1.0, 0.0);
  if (sum.data() != out.data()) narrow_into(sum, out);
}

// `t` viewed at `sizes`, broadcast from the right (stride 0 along the dims it repeats).
Tensor broadcast_to(const Tensor& t, const Shape& sizes) {
  Shape strides(sizes.size(), 0);
  const size_t lead = sizes.size() - static_cast<size_t>(t.dim());
  for (size_t d = 0; d < static_cast<size_t>(t.dim()); ++d) strides[d + lead] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return t.view(sizes, strides, t.offset());
}

// out = beta * bias + alpha * mat1 @ mat2, the bias broadcast from the right. 16-bit operands
// are summed in an f32 result rounded once into out.
void addmm(const Tensor& bias, const Tensor& mat1, const Tensor& mat2, const Tensor& out, double beta, double alpha) {
  const bool half = is_half(out.dtype());
  Tensor sum = half ? f32_like(out) : out;
  Tensor b = half ? widen_to_f32(bias) : bias;
  fill_scaled(sum, broadcast_to(b, out.sizes()), beta);
  gemm(mat1, mat2, sum, alpha, 1.0);
  if (half) narrow_into(sum, out);
}

}  // namespace

void run_extern_cpu(const loop::ExternCall& call, const loop::Program& p, const std::vector<void*>& buffers,
                    const std::map<std::string, int64_t>& symbols, const onednn::Site& site) {
  // The CPU target fuses no GEMM epilogues (a generated kernel applies them faster).
  COIL_CHECK(call.activation == loop::Activation::none && !call.residual) << call.name << ": a GEMM epilogue on the CPU";
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(call.output)];
  loop::View out_view{call.output, ob.sizes, ob.strides, ob.offset};
  Tensor out = bind_view(out_view, p, buffers, symbols);
  std::vector<Tensor> in;
  for (const auto& v : call.inputs) in.push_back(bind_view(v, p, buffers, symbols));
  switch (call.kind) {
    case loop::ExternKind::mm:
    case loop::ExternKind::bmm:
      if (onednn::matmul(in[0], in[1], nullptr, out, call.name, site)) return;
      if (call.kind == loop::ExternKind::mm) gemm(in[0], in[1], out, 1.0, 0.0);
      else bmm(in[0], in[1], out);
      return;
    case loop::ExternKind::addmm: {
      const double beta = call.params[0], alpha = call.params[1];
      if (beta == 1 && alpha == 1) {  // the bias added in oneDNN's kernel
        const Tensor bias = broadcast_to(in[0], out.sizes());
        if (onednn::matmul(in[1], in[2], &bias, out, call.name, site)) return;
      }
      addmm(in[0], in[1], in[2], out, beta, alpha);
      return;
    }
    case loop::ExternKind::convolution:
      onednn::convolution(in[0], in[1], in.size() > 2 ? &in[2] : nullptr, out, loop::conv_params(call.params), call.name, site);
      return;
    case loop::ExternKind::attention: break;  // the CPU target decomposes attention
    case loop::ExternKind::torch: break;      // the plan calls its embedder (runtime/plan.cc)
  }
  fail("extern {} is not supported on the CPU yet", call.name);
}

}  // namespace coil
