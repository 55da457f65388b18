#include "runtime/cpu_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <string_view>

#include "runtime/cpu_convert.h"
#include "support/check.h"

namespace coil::onednn {

namespace {

using dnnl::memory;
using DnnlType = memory::data_type;

DnnlType dnnl_type(DType t) {
  switch (t) {
    case DType::f32: return DnnlType::f32;
    case DType::f16: return DnnlType::f16;
    case DType::bf16: return DnnlType::bf16;
    default: fail("oneDNN takes f32, f16 and bf16 tensors, not {}", dtype_name(t));
  }
}

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

// The CPU engine and an in-order stream on it; both are cheap to make.
struct Cpu {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

// A tensor as oneDNN memory over its own storage (viewed with `sizes` and `strides`), typed `t`.
memory wrap(const Cpu& cpu, const Tensor& tensor, const Shape& sizes, const Shape& strides, DnnlType t) {
  return memory(memory::desc(dims_of(sizes), t, dims_of(strides)), cpu.engine, tensor.data());
}

memory wrap(const Cpu& cpu, const Tensor& tensor) {
  return wrap(cpu, tensor, tensor.sizes(), tensor.strides(), dnnl_type(tensor.dtype()));
}

// `user` in the layout and dtype `want`: itself when it already is, else a reordered copy.
memory in_layout(Cpu& cpu, memory user, const memory::desc& want) {
  if (user.get_desc() == want) return user;
  memory m(want, cpu.engine);
  dnnl::reorder(user, m).execute(cpu.stream, user, m);
  return m;
}

// A broadcast view (stride 0 over more than one element) made dense: oneDNN wants every
// element at its own address.
Tensor addressable(const Tensor& t) {
  for (size_t d = 0; d < t.sizes().size(); ++d)
    if (t.sizes()[d] > 1 && t.strides()[d] == 0) return t.contiguous_copy();
  return t;
}

// Padding after the last element of a spatial dim: what makes oneDNN's size formula give the
// output PyTorch's floor division gave (negative where PyTorch drops trailing input).
int64_t padding_after(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation, int64_t before) {
  return (out - 1) * stride + (kernel - 1) * dilation + 1 - in - before;
}

// The weight as oneDNN's logical layout: forward [oc, ic, k...] or grouped [g, oc/g, ic/g, k...];
// PyTorch's is [oc, ic/g, k...], transposed [ic, oc/g, k...].
void weight_view(const Tensor& w, const loop::ConvParams& p, Shape& sizes, Shape& strides) {
  const Shape& s = w.sizes();
  const Shape& st = w.strides();
  const int64_t g = p.groups;
  if (!p.transposed) {
    if (g == 1) sizes = {s[0], s[1]}, strides = {st[0], st[1]};
    else sizes = {g, s[0] / g, s[1]}, strides = {s[0] / g * st[0], st[0], st[1]};
  } else {
    if (g == 1) sizes = {s[1], s[0]}, strides = {st[1], st[0]};
    else sizes = {g, s[1], s[0] / g}, strides = {s[0] / g * st[0], st[1], st[0]};
  }
  sizes.insert(sizes.end(), s.begin() + 2, s.end());
  strides.insert(strides.end(), st.begin() + 2, st.end());
}

// The output with no products to sum (no input channels): the bias, or zeros.
void fill_with_bias(const Tensor* bias, const Tensor& out) {
  out.for_each_index([&](std::span<const int64_t> idx) {
    const int64_t channel[1] = {idx[1]};
    out.store(out.element_index(idx), bias ? bias->load(bias->element_index(channel)) : 0.0);
  });
}

bool reference_kernel(const dnnl::primitive_desc& pd) { return std::string_view(pd.impl_info_str()).starts_with("ref"); }

// One convolution through the oneDNN primitive `Prim` (convolution_forward or
// deconvolution_forward) computing in `compute`. Returns false when oneDNN offers no kernel
// better than its reference loop for that dtype (the caller then computes in f32).
template <typename Prim>
bool run(Cpu& cpu, dnnl::algorithm algorithm, DnnlType compute, bool accept_reference, const Tensor& input,
         const Tensor& weight, const Tensor* bias, const Tensor& out, const loop::ConvParams& p) {
  auto any = [&](const Shape& sizes) { return memory::desc(dims_of(sizes), compute, memory::format_tag::any); };
  Shape w_sizes, w_strides;
  weight_view(weight, p, w_sizes, w_strides);
  memory::dims stride, dilation, before, after;
  for (size_t d = 0; d < p.k; ++d) {
    int64_t in = input.sizes()[2 + d], o = out.sizes()[2 + d], kernel = weight.sizes()[2 + d];
    stride.push_back(p.stride[d]);
    dilation.push_back(p.dilation[d] - 1);  // oneDNN counts the gaps
    before.push_back(p.padding[d]);
    // A transposed convolution runs the forward formula from the output back to the input.
    after.push_back(p.transposed ? padding_after(o, in, kernel, p.stride[d], p.dilation[d], p.padding[d])
                                 : padding_after(in, o, kernel, p.stride[d], p.dilation[d], p.padding[d]));
  }
  memory::desc bias_desc = bias ? memory::desc({out.sizes()[1]}, compute, memory::format_tag::a) : memory::desc();
  typename Prim::primitive_desc pd;
  try {
    pd = typename Prim::primitive_desc(
        typename Prim::desc(dnnl::prop_kind::forward_inference, algorithm, any(input.sizes()), any(w_sizes), bias_desc,
                            any(out.sizes()), stride, dilation, before, after),
        cpu.engine);
  } catch (const dnnl::error&) {
    if (accept_reference) throw;
    return false;
  }
  if (!accept_reference && reference_kernel(pd)) return false;
  // The operands as oneDNN may read them; these tensors outlive the call (a memory object that
  // needs no reorder points into them).
  const Tensor x = addressable(input), w = addressable(weight), b = bias ? addressable(*bias) : Tensor();
  std::unordered_map<int, memory> args;
  args[DNNL_ARG_SRC] = in_layout(cpu, wrap(cpu, x), pd.src_desc());
  weight_view(w, p, w_sizes, w_strides);
  args[DNNL_ARG_WEIGHTS] = in_layout(cpu, wrap(cpu, w, w_sizes, w_strides, dnnl_type(w.dtype())), pd.weights_desc());
  if (bias) args[DNNL_ARG_BIAS] = in_layout(cpu, wrap(cpu, b), bias_desc);
  memory user_out = wrap(cpu, out);
  memory dst = user_out.get_desc() == pd.dst_desc() ? user_out : memory(pd.dst_desc(), cpu.engine);
  args[DNNL_ARG_DST] = dst;
  Prim(pd).execute(cpu.stream, args);
  if (dst != user_out) dnnl::reorder(dst, user_out).execute(cpu.stream, dst, user_out);
  cpu.stream.wait();
  return true;
}

}  // namespace

bool takes_convolution(DType dtype) { return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16; }

void convolution(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                 const loop::ConvParams& params, const std::string& name) {
  if (out.numel() == 0) return;
  if (input.numel() == 0 || weight.numel() == 0) return fill_with_bias(bias, out);
  try {
    Cpu cpu;
    auto attempt = [&](DnnlType compute, bool accept_reference, const Tensor& x, const Tensor& w, const Tensor* b,
                       const Tensor& y) {
      return params.transposed ? run<dnnl::deconvolution_forward>(cpu, dnnl::algorithm::deconvolution_direct, compute,
                                                                  accept_reference, x, w, b, y, params)
                               : run<dnnl::convolution_forward>(cpu, dnnl::algorithm::convolution_direct, compute,
                                                                accept_reference, x, w, b, y, params);
    };
    if (out.dtype() == DType::f32) {
      attempt(DnnlType::f32, true, input, weight, bias, out);
      return;
    }
    // 16 bits natively where the machine has fast kernels for it, else widened to f32.
    if (attempt(dnnl_type(out.dtype()), false, input, weight, bias, out)) return;
    Tensor x = widen_to_f32(input), w = widen_to_f32(weight), y = f32_like(out);
    Tensor b = bias ? widen_to_f32(*bias) : Tensor();
    attempt(DnnlType::f32, true, x, w, bias ? &b : nullptr, y);
    narrow_into(y, out);
  } catch (const dnnl::error& e) {
    fail("{}: oneDNN could not run this convolution: {}", name, e.what());
  }
}

}  // namespace coil::onednn
