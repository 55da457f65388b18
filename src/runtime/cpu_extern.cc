#include "runtime/cpu_extern.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

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

// `fn(T{})` for a float or double tensor dtype; false for the others (generic element access).
template <typename F>
bool typed(DType t, F&& fn) {
  if (t == DType::f32) fn(float{});
  else if (t == DType::f64) fn(double{});
  else return false;
  return true;
}

// c = alpha * a @ b + beta * c for 2-D views; c is written in place.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  int64_t m = a.sizes()[0], k = a.sizes()[1], n = b.sizes()[1];
  if (m == 0 || n == 0) return;
  bool c_rows = c.strides()[1] == 1 && c.strides()[0] >= std::max<int64_t>(n, 1);
  if (c_rows && k > 0 && typed(a.dtype(), [&](auto tag) {
        using T = decltype(tag);
        Matrix<T> ma = as_matrix<T>(a), mb = as_matrix<T>(b);
        blas_gemm<T>(ma.trans, mb.trans, m, n, k, alpha, ma.data, ma.ld, mb.data, mb.ld, beta, static_cast<T*>(c.data()),
                     c.strides()[0]);
      }))
    return;
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

// Convolution over 1 to 3 spatial dims as one GEMM per (image, group). params: k, then k
// each of stride, padding, dilation, output_padding, then groups and transposed.
// - Forward: im2col gathers the input into cols[c*K + tap, out position] and
//   out[group channels, out positions] = W_g[og, cg*K] @ cols.
// - Transposed: cols[oc*K + tap, in position] = W_g^T @ x_g, then col2im adds each column into
//   output position in*stride - padding + tap*dilation.
struct ConvParams {
  size_t k;
  Shape stride, padding, dilation;
  int64_t groups;
  bool transposed;
};

ConvParams conv_params(const std::vector<double>& params) {
  ConvParams c;
  c.k = static_cast<size_t>(params.at(0));
  auto array = [&](size_t which) {
    Shape v;
    for (size_t d = 0; d < c.k; ++d) v.push_back(static_cast<int64_t>(params.at(1 + which * c.k + d)));
    return v;
  };
  c.stride = array(0), c.padding = array(1), c.dilation = array(2);
  c.groups = static_cast<int64_t>(params.at(1 + 4 * c.k));
  c.transposed = params.at(2 + 4 * c.k) != 0;
  return c;
}

// Row-major position `lin` in `sizes`.
void unravel(int64_t lin, const Shape& sizes, Shape& out) {
  for (size_t d = sizes.size(); d-- > 0;) {
    out[d] = lin % sizes[d];
    lin /= sizes[d];
  }
}

int64_t product_of(const Shape& s) {
  int64_t p = 1;
  for (int64_t v : s) p *= v;
  return p;
}

void convolution(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                 const std::vector<double>& params) {
  ConvParams cp = conv_params(params);
  size_t k = cp.k;
  Shape in_sp(input.sizes().begin() + 2, input.sizes().end()), out_sp(out.sizes().begin() + 2, out.sizes().end());
  Shape ker(weight.sizes().begin() + 2, weight.sizes().end());
  int64_t n_img = input.sizes()[0], c_out = out.sizes()[1], c_in = input.sizes()[1];
  int64_t cg = c_in / cp.groups, og = c_out / cp.groups;
  int64_t taps = product_of(ker), p_in = product_of(in_sp), p_out = product_of(out_sp);
  // f16/bf16 compute in f32 and round once, at the end.
  DType work = out.dtype() == DType::f16 || out.dtype() == DType::bf16 ? DType::f32 : out.dtype();
  auto dense = [&](const Tensor& t) {
    Tensor c = Tensor::zeros(work, t.sizes());
    Shape idx(t.sizes().size());
    for (int64_t lin = 0; lin < c.numel(); ++lin) {
      unravel(lin, t.sizes(), idx);
      c.store(lin, t.load(t.element_index(idx)));
    }
    return c;
  };
  Tensor wc = dense(weight), xc = dense(input);
  Tensor oc = Tensor::zeros(work, out.sizes());  // written whole, then copied into `out`
  Shape tap(k), pos(k);
  // (spatial position, tap) -> the position it meets on the other side, or -1 out of range.
  // Forward: the input position output `at` reads at tap `t`; transposed: the output position
  // input `at` writes at tap `t`. Row-major linear, or -1 when out of range.
  auto meet = [&](const Shape& at, const Shape& t, const Shape& bounds) -> int64_t {
    int64_t lin = 0;
    for (size_t d = 0; d < k; ++d) {
      int64_t v = at[d] * cp.stride[d] - cp.padding[d] + t[d] * cp.dilation[d];
      if (v < 0 || v >= bounds[d]) return -1;
      lin = lin * bounds[d] + v;
    }
    return lin;
  };
  for (int64_t n = 0; n < n_img; ++n) {
    for (int64_t g = 0; g < cp.groups; ++g) {
      if (!cp.transposed) {
        Tensor col = Tensor::zeros(work, {cg * taps, p_out});
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t t = 0; t < taps; ++t) {
            unravel(t, ker, tap);
            for (int64_t o = 0; o < p_out; ++o) {
              unravel(o, out_sp, pos);
              int64_t i = meet(pos, tap, in_sp);
              if (i >= 0) col.store((c * taps + t) * p_out + o, xc.load(((n * c_in) + g * cg + c) * p_in + i));
            }
          }
        Tensor wg = wc.view({og, cg * taps}, {cg * taps, 1}, g * og * cg * taps);
        Tensor dst = oc.view({og, p_out}, {p_out, 1}, (n * c_out + g * og) * p_out);
        gemm(wg, col, dst, 1.0, 0.0);
      } else {
        // W_g is [cg, og*taps]; its transpose times x_g [cg, p_in] gives cols [og*taps, p_in].
        Tensor wg = wc.view({og * taps, cg}, {1, og * taps}, g * cg * og * taps);
        Tensor xg = xc.view({cg, p_in}, {p_in, 1}, (n * c_in + g * cg) * p_in);
        Tensor cols = Tensor::zeros(work, {og * taps, p_in});
        gemm(wg, xg, cols, 1.0, 0.0);
        for (int64_t c = 0; c < og; ++c)
          for (int64_t t = 0; t < taps; ++t) {
            unravel(t, ker, tap);
            for (int64_t i = 0; i < p_in; ++i) {
              unravel(i, in_sp, pos);
              int64_t o = meet(pos, tap, out_sp);
              if (o < 0) continue;
              int64_t at = (n * c_out + g * og + c) * p_out + o;
              oc.store(at, oc.load(at) + cols.load((c * taps + t) * p_in + i));
            }
          }
      }
    }
  }
  Shape idx(out.sizes().size());
  for (int64_t lin = 0; lin < oc.numel(); ++lin) {
    unravel(lin, out.sizes(), idx);
    double v = oc.load(lin) + (bias ? bias->load(bias->element_index(Shape{idx[1]})) : 0.0);
    out.store(out.element_index(idx), v);
  }
}

// out = beta * b over a 2-D out (b broadcast to its shape through strides).
void fill_scaled(const Tensor& out, const Tensor& b, double beta) {
  const int64_t m = out.sizes()[0], n = out.sizes()[1];
  const int64_t os0 = out.strides()[0], os1 = out.strides()[1], bs0 = b.strides()[0], bs1 = b.strides()[1];
  if (typed(out.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* o = static_cast<T*>(out.data());
        const T* src = static_cast<const T*>(b.data());
        const T scale = static_cast<T>(beta);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) o[i * os0 + j * os1] = beta == 0 ? T(0) : scale * src[i * bs0 + j * bs1];
      }))
    return;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t idx[2] = {i, j};
      out.store(out.element_index(idx), beta == 0 ? 0.0 : beta * b.load(b.element_index(idx)));
    }
}

}  // namespace

void run_extern_cpu(const loop::ExternCall& call, const loop::Program& p, const std::vector<void*>& buffers,
                    const std::map<std::string, int64_t>& symbols) {
  // The CPU target fuses no GEMM epilogues (a generated kernel applies them faster).
  COIL_CHECK(call.activation == loop::Activation::none && !call.residual) << call.name << ": a GEMM epilogue on the CPU";
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(call.output)];
  loop::View out_view{call.output, ob.sizes, ob.strides, ob.offset};
  Tensor out = bind_view(out_view, p, buffers, symbols);
  std::vector<Tensor> in;
  for (const auto& v : call.inputs) in.push_back(bind_view(v, p, buffers, symbols));
  switch (call.kind) {
    case loop::ExternKind::mm:
      gemm(in[0], in[1], out, 1.0, 0.0);
      return;
    case loop::ExternKind::bmm:
      for (int64_t i = 0; i < out.sizes()[0]; ++i) gemm(select0(in[0], i), select0(in[1], i), select0(out, i), 1.0, 0.0);
      return;
    case loop::ExternKind::addmm: {
      double beta = call.params[0], alpha = call.params[1];
      if (is_integral(out.dtype(), true)) {  // PyTorch truncates the scalars for integer tensors
        beta = std::trunc(beta);
        alpha = std::trunc(alpha);
      }
      // out = beta * bias (broadcast), then out += alpha * mat1 @ mat2.
      Shape sizes = out.sizes();
      Tensor bias = in[0];
      Shape bstrides(sizes.size(), 0);
      size_t lead = sizes.size() - static_cast<size_t>(bias.dim());
      for (size_t d = 0; d < static_cast<size_t>(bias.dim()); ++d)
        bstrides[d + lead] = bias.sizes()[d] == 1 ? 0 : bias.strides()[d];
      fill_scaled(out, bias.view(sizes, bstrides, bias.offset()), beta);
      gemm(in[1], in[2], out, alpha, 1.0);
      return;
    }
    case loop::ExternKind::convolution:
      convolution(in[0], in[1], in.size() > 2 ? &in[2] : nullptr, out, call.params);
      return;
    case loop::ExternKind::attention: break;  // the CPU target decomposes attention
  }
  fail("extern {} is not supported on the CPU yet", call.name);
}

}  // namespace coil
