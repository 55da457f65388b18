#include "runtime/cpu_extern.h"

#include <cblas.h>

#include "coil/tensor.h"
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
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, double beta, T* c, int64_t ldc) {
  auto i = [](int64_t v) { return static_cast<blasint>(v); };
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), static_cast<float>(alpha), a, i(lda), b, i(ldb), static_cast<float>(beta), c, i(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), alpha, a, i(lda), b, i(ldb), beta, c, i(ldc));
  }
}

// c = alpha * a @ b + beta * c for 2-D views; c is written in place.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  int64_t m = a.sizes()[0], k = a.sizes()[1], n = b.sizes()[1];
  if (m == 0 || n == 0) return;
  bool c_rows = c.strides()[1] == 1 && c.strides()[0] >= std::max<int64_t>(n, 1);
  if (c_rows && (a.dtype() == DType::f32 || a.dtype() == DType::f64) && k > 0) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      Matrix<T> ma = as_matrix<T>(a), mb = as_matrix<T>(b);
      blas_gemm<T>(ma.trans, mb.trans, m, n, k, alpha, ma.data, ma.ld, mb.data, mb.ld, beta, static_cast<T*>(c.data()), c.strides()[0]);
    };
    if (a.dtype() == DType::f32) run(float{});
    else run(double{});
    return;
  }
  // Other dtypes and layouts: accumulate in double, round once.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a.load(a.element_index(Shape{i, p})) * b.load(b.element_index(Shape{p, j}));
      int64_t at = c.element_index(Shape{i, j});
      double prior = beta == 0 ? 0.0 : beta * c.load(at);
      c.store(at, alpha * acc + prior);
    }
}

Tensor select0(const Tensor& t, int64_t i) {
  Shape sizes(t.sizes().begin() + 1, t.sizes().end()), strides(t.strides().begin() + 1, t.strides().end());
  return t.view(sizes, strides, t.offset() + i * t.strides()[0]);
}

}  // namespace

void run_extern_cpu(const loop::ExternCall& call, const loop::Program& p, const std::vector<void*>& buffers,
                    const std::map<std::string, int64_t>& symbols) {
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(call.output)];
  loop::View out_view{call.output, ob.sizes, ob.strides, ob.offset};
  Tensor out = bind_view(out_view, p, buffers, symbols);
  std::vector<Tensor> in;
  for (const auto& v : call.inputs) in.push_back(bind_view(v, p, buffers, symbols));
  switch (call.kind) {
    case loop::ExternKind::mm: gemm(in[0], in[1], out, 1.0, 0.0); return;
    case loop::ExternKind::bmm:
      for (int64_t i = 0; i < out.sizes()[0]; ++i) gemm(select0(in[0], i), select0(in[1], i), select0(out, i), 1.0, 0.0);
      return;
    case loop::ExternKind::addmm: {
      double beta = call.params[0], alpha = call.params[1];
      // out = beta * bias (broadcast), then out += alpha * mat1 @ mat2.
      Shape sizes = out.sizes();
      Tensor bias = in[0];
      Shape bstrides(sizes.size(), 0);
      size_t lead = sizes.size() - static_cast<size_t>(bias.dim());
      for (size_t d = 0; d < static_cast<size_t>(bias.dim()); ++d)
        bstrides[d + lead] = bias.sizes()[d] == 1 ? 0 : bias.strides()[d];
      Tensor b = bias.view(sizes, bstrides, bias.offset());
      for (int64_t i = 0; i < sizes[0]; ++i)
        for (int64_t j = 0; j < sizes[1]; ++j) {
          Shape idx = {i, j};
          out.store(out.element_index(idx), beta == 0 ? 0.0 : beta * b.load(b.element_index(idx)));
        }
      gemm(in[1], in[2], out, alpha, 1.0);
      return;
    }
    case loop::ExternKind::convolution: break;
  }
  fail("extern {} is not supported on the CPU yet", call.name);
}

}  // namespace coil
