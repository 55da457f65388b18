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

// 2-D convolution as im2col + one GEMM per (image, group); params are stride[2], padding[2],
// dilation[2], groups.
void convolution(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                 const std::vector<double>& params) {
  auto p = [&](size_t i) { return static_cast<int64_t>(params[i]); };
  int64_t groups = p(6);
  int64_t n_img = input.sizes()[0], c_in = input.sizes()[1], h = input.sizes()[2], w = input.sizes()[3];
  int64_t c_out = weight.sizes()[0], cg = weight.sizes()[1], kh = weight.sizes()[2], kw = weight.sizes()[3];
  int64_t oh = out.sizes()[2], ow = out.sizes()[3], og = c_out / groups;
  (void)c_in;
  Tensor wc = weight.contiguous_copy();
  Tensor col = Tensor::zeros(input.dtype(), {cg * kh * kw, oh * ow});
  for (int64_t n = 0; n < n_img; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            int64_t row = (c * kh + i) * kw + j;
            for (int64_t y = 0; y < oh; ++y) {
              int64_t iy = y * p(0) - p(2) + i * p(4);
              for (int64_t x = 0; x < ow; ++x) {
                int64_t ix = x * p(1) - p(3) + j * p(5);
                double v = iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0 : input.load(input.element_index(Shape{n, g * cg + c, iy, ix}));
                col.store(row * oh * ow + y * ow + x, v);
              }
            }
          }
      Tensor wg = wc.view({og, cg * kh * kw}, {cg * kh * kw, 1}, g * og * cg * kh * kw);
      Tensor og_view = out.view({og, oh * ow}, {out.strides()[1], out.strides()[3]},
                                out.offset() + n * out.strides()[0] + g * og * out.strides()[1]);
      gemm(wg, col, og_view, 1.0, 0.0);
    }
  }
  if (!bias) return;
  for (int64_t n = 0; n < n_img; ++n)
    for (int64_t o = 0; o < c_out; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          int64_t at = out.element_index(Shape{n, o, y, x});
          out.store(at, out.load(at) + bias->load(bias->element_index(Shape{o})));
        }
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
    case loop::ExternKind::convolution:
      convolution(in[0], in[1], in.size() > 2 ? &in[2] : nullptr, out, call.params);
      return;
  }
  fail("extern {} is not supported on the CPU yet", call.name);
}

}  // namespace coil
