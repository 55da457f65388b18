#include "runtime/cpu_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

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

// An in-order stream on the engine a call's primitive was made on.
struct Cpu {
  dnnl::engine engine;
  dnnl::stream stream{engine};
};

// A tensor as oneDNN memory over its own storage (viewed with `sizes` and `strides`), typed `t`.
memory wrap(const Cpu& cpu, const Tensor& tensor, const Shape& sizes, const Shape& strides, DnnlType t) {
  return memory(memory::desc(dims_of(sizes), t, dims_of(strides)), cpu.engine, tensor.data());
}

memory wrap(const Cpu& cpu, const Tensor& tensor) {
  return wrap(cpu, tensor, tensor.sizes(), tensor.strides(), dnnl_type(tensor.dtype()));
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

// A call's primitive and the memory layouts it wants. `widened`: 16-bit operands computed in
// f32 (coil widens them first; oneDNN has no fast 16-bit kernel here).
struct Prepared {
  dnnl::primitive primitive;
  memory::desc src, weights, bias, dst;
  memory::desc scratchpad;  // given at each execution (user mode: the primitive runs on any thread, in several at once)
  bool widened = false;
  bool usable = true;  // false: a product oneDNN has only a reference loop for (BLAS runs it)
};

// The first of `candidates` (primitive descriptor makers, nullopt where oneDNN declines) that
// is not oneDNN's reference loop; else, when `accept_reference`, the first that exists.
template <typename Pd>
std::optional<Pd> best_of(const std::vector<std::function<std::optional<Pd>()>>& candidates, bool accept_reference) {
  std::optional<Pd> reference;
  for (const auto& make : candidates) {
    std::optional<Pd> pd;
    try {
      pd = make();
    } catch (const dnnl::error&) {
      continue;
    }
    if (!pd) continue;
    if (!reference_kernel(*pd)) return pd;
    if (!reference) reference = std::move(pd);
  }
  return accept_reference ? reference : std::nullopt;
}

// Primitives kept by a plan run on whichever thread runs it, several at once: their scratchpad
// (oneDNN's own, by default, is shared and tied to the creating thread) comes with each execution.
dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A tensor's memory description in its own strides (typed `t`), or oneDNN's choice (`any`).
memory::desc own(const Tensor& x, DnnlType t) { return memory::desc(dims_of(x.sizes()), t, dims_of(x.strides())); }
memory::desc any(const Shape& sizes, DnnlType t) { return memory::desc(dims_of(sizes), t, memory::format_tag::any); }

// The convolution's primitive (`Prim`: convolution_forward or deconvolution_forward) computing
// in `compute` over operands shaped as x, w, y: the input and output in their own layouts first,
// then in the layouts oneDNN picks. nullopt where only a reference loop is offered and
// `accept_reference` is false.
template <typename Prim>
std::optional<Prepared> prepare_conv(const dnnl::engine& engine, dnnl::algorithm algorithm, DnnlType compute, bool accept_reference,
                                     const Tensor& x, const Tensor& w, bool bias, const Tensor& y, const loop::ConvParams& p) {
  Shape w_sizes, w_strides;
  weight_view(w, p, w_sizes, w_strides);
  memory::dims stride, dilation, before, after;
  for (size_t d = 0; d < p.k; ++d) {
    int64_t in = x.sizes()[2 + d], o = y.sizes()[2 + d], kernel = w.sizes()[2 + d];
    stride.push_back(p.stride[d]);
    dilation.push_back(p.dilation[d] - 1);  // oneDNN counts the gaps
    before.push_back(p.padding[d]);
    // A transposed convolution runs the forward formula from the output back to the input.
    after.push_back(p.transposed ? padding_after(o, in, kernel, p.stride[d], p.dilation[d], p.padding[d])
                                 : padding_after(in, o, kernel, p.stride[d], p.dilation[d], p.padding[d]));
  }
  const memory::desc bias_desc = bias ? memory::desc({y.sizes()[1]}, compute, memory::format_tag::a) : memory::desc();
  using Pd = typename Prim::primitive_desc;
  auto with = [&](const memory::desc& src, const memory::desc& dst) {
    return [&, src, dst]() -> std::optional<Pd> {
      return Pd(typename Prim::desc(dnnl::prop_kind::forward_inference, algorithm, src, any(w_sizes, compute), bias_desc, dst, stride,
                                    dilation, before, after),
                user_scratchpad(), engine);
    };
  };
  auto pd = best_of<Pd>({with(own(x, compute), own(y, compute)), with(any(x.sizes(), compute), any(y.sizes(), compute))}, accept_reference);
  if (!pd) return std::nullopt;
  return Prepared{Prim(*pd), pd->src_desc(), pd->weights_desc(), bias_desc, pd->dst_desc(), pd->scratchpad_desc()};
}

// `user` in the layout and dtype `want`: itself when it already is, else a reordered copy.
memory in_layout(Cpu& cpu, memory user, const memory::desc& want) {
  if (user.get_desc() == want) return user;
  memory m(want, cpu.engine);
  dnnl::reorder(user, m).execute(cpu.stream, user, m);
  return m;
}

// Runs `p` on operands already in its dtypes: each reordered into the layout it wants where
// needed, the result reordered back into y's strides.
void execute(Cpu& cpu, const Prepared& p, const memory& x, const memory& w, const memory* bias, memory y) {
  std::unordered_map<int, memory> args;
  args[DNNL_ARG_SRC] = in_layout(cpu, x, p.src);
  args[DNNL_ARG_WEIGHTS] = in_layout(cpu, w, p.weights);
  if (bias) args[DNNL_ARG_BIAS] = in_layout(cpu, *bias, p.bias);
  memory dst = y.get_desc() == p.dst ? y : memory(p.dst, cpu.engine);
  args[DNNL_ARG_DST] = dst;
  if (p.scratchpad.get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = memory(p.scratchpad, cpu.engine);
  p.primitive.execute(cpu.stream, args);
  if (dst != y) dnnl::reorder(dst, y).execute(cpu.stream, dst, y);
  cpu.stream.wait();
}

}  // namespace

struct Primitives::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mutex;  // guards `made`
  std::map<std::pair<size_t, std::vector<int64_t>>, std::shared_ptr<const Prepared>> made;
};

Primitives::Primitives() : impl_(std::make_unique<Impl>()) {}
Primitives::~Primitives() = default;

namespace {

// The site's primitive, made by `make(engine)` the first time (outside the lock: two threads
// may both make it; the first kept wins), and the engine it runs on.
template <typename Make>
std::pair<std::shared_ptr<const Prepared>, dnnl::engine> prepared(const Site& site, Make make) {
  if (!site.cache) {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return {std::make_shared<const Prepared>(make(engine)), engine};
  }
  Primitives::Impl& impl = site.cache->impl();
  auto key = std::make_pair(site.kernel, site.symbols);
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    if (auto it = impl.made.find(key); it != impl.made.end()) return {it->second, impl.engine};
  }
  auto made = std::make_shared<const Prepared>(make(impl.engine));
  std::lock_guard<std::mutex> lock(impl.mutex);
  return {impl.made.emplace(std::move(key), std::move(made)).first->second, impl.engine};
}

template <typename Prim>
Prepared prepare_any_conv(const dnnl::engine& engine, dnnl::algorithm algorithm, const Tensor& x, const Tensor& w, bool bias,
                          const Tensor& y, const loop::ConvParams& params) {
  // In f32 oneDNN offers at least its reference loop; where it declines even that, the call fails
  // with oneDNN's status (convolution names the call).
  auto in_f32 = [&] {
    auto p = prepare_conv<Prim>(engine, algorithm, DnnlType::f32, true, x, w, bias, y, params);
    if (!p) throw dnnl::error(dnnl_unimplemented, "no convolution kernel for these operands");
    return *p;
  };
  if (y.dtype() == DType::f32) return in_f32();
  // 16 bits natively where the machine has fast kernels for it, else widened to f32.
  if (auto p = prepare_conv<Prim>(engine, algorithm, dnnl_type(y.dtype()), false, x, w, bias, y, params)) return *p;
  Prepared p = in_f32();
  p.widened = true;
  return p;
}

// The types oneDNN computes in.
bool onednn_dtype(DType t) { return t == DType::f32 || is_half(t); }

// `run(x, w, bias, y)` as `p` computes: on the operands as they are, or (widened) on f32 copies,
// the result narrowed into y.
template <typename Run>
void in_compute_dtype(const Prepared& p, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, Run run) {
  if (!p.widened) return run(x, w, bias, y);
  Tensor xf = widen_to_f32(x), wf = widen_to_f32(w), yf = f32_like(y);
  Tensor bf = bias ? widen_to_f32(*bias) : Tensor();
  run(xf, wf, bias ? &bf : nullptr, yf);
  narrow_into(yf, y);
}

}  // namespace

bool takes_convolution(DType dtype) { return onednn_dtype(dtype); }

void convolution(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                 const loop::ConvParams& params, const std::string& name, const Site& site) {
  if (out.numel() == 0) return;
  if (input.numel() == 0 || weight.numel() == 0) return fill_with_bias(bias, out);
  try {
    // The operands as oneDNN may read them; these tensors outlive the call (a memory object that
    // needs no reorder points into them).
    const Tensor x = addressable(input), w = addressable(weight), b = bias ? addressable(*bias) : Tensor();
    auto [p, engine] = prepared(site, [&](const dnnl::engine& e) {
      return params.transposed
                 ? prepare_any_conv<dnnl::deconvolution_forward>(e, dnnl::algorithm::deconvolution_direct, x, w, bias, out, params)
                 : prepare_any_conv<dnnl::convolution_forward>(e, dnnl::algorithm::convolution_direct, x, w, bias, out, params);
    });
    Cpu cpu{engine};
    auto run = [&](const Tensor& xs, const Tensor& ws, const Tensor* bs, const Tensor& ys) {
      Shape w_sizes, w_strides;
      weight_view(ws, params, w_sizes, w_strides);
      memory bm = bs ? wrap(cpu, *bs) : memory();
      execute(cpu, *p, wrap(cpu, xs), wrap(cpu, ws, w_sizes, w_strides, dnnl_type(ws.dtype())), bs ? &bm : nullptr, wrap(cpu, ys));
    };
    in_compute_dtype(*p, x, w, bias ? &b : nullptr, out, run);
  } catch (const dnnl::error& e) {
    fail("{}: oneDNN could not run this convolution: {}", name, e.what());
  }
}

namespace {

// The bias as oneDNN's matmul takes it: out's rank, size 1 along the dims it is broadcast over.
Tensor bias_operand(const Tensor& bias) {
  Shape sizes = bias.sizes(), strides = bias.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (strides[d] == 0) sizes[d] = 1;
  return bias.view(sizes, strides, bias.offset());
}

Prepared prepare_matmul(const dnnl::engine& engine, const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out) {
  using Pd = dnnl::matmul::primitive_desc;
  auto make = [&](DType operands, DType result, bool reference_ok) -> std::optional<Prepared> {
    const DnnlType t = dnnl_type(operands), r = dnnl_type(result);
    const DType bias_type = !bias ? result : operands == DType::f32 ? DType::f32 : bias->dtype();  // widened with the operands
    const memory::desc bias_desc = bias ? own(bias_operand(*bias), dnnl_type(bias_type)) : memory::desc();
    auto with = [&](const memory::desc& ad, const memory::desc& bd) {
      return [&, ad, bd]() -> std::optional<Pd> { return Pd(dnnl::matmul::desc(ad, bd, bias_desc, own(out, r)), user_scratchpad(), engine); };
    };
    // The operands as they lie (a transposed weight is free), then packed as oneDNN likes.
    auto pd = best_of<Pd>({with(own(a, t), own(b, t)), with(own(a, t), any(b.sizes(), t)), with(any(a.sizes(), t), any(b.sizes(), t))},
                          reference_ok);
    if (!pd) return std::nullopt;
    return Prepared{dnnl::matmul(*pd), pd->src_desc(), pd->weights_desc(), bias_desc, pd->dst_desc(), pd->scratchpad_desc()};
  };
  const DType t = a.dtype();
  if (auto p = make(t, out.dtype(), false)) return *p;
  if (is_half(t))
    if (auto p = make(DType::f32, DType::f32, false)) {
      p->widened = true;
      return *p;
    }
  Prepared none;
  none.usable = false;
  return none;
}

}  // namespace

bool matmul(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out, const std::string& name, const Site& site) {
  for (const Tensor* t : {&a, &b, &out})
    if (!onednn_dtype(t->dtype()) || t->numel() == 0) return false;  // f64, ints; empty products
  if (bias && bias->dtype() != out.dtype() && bias->dtype() != DType::f32) return false;
  try {
    const Tensor x = addressable(a), w = addressable(b);
    auto [p, engine] = prepared(site, [&](const dnnl::engine& e) { return prepare_matmul(e, x, w, bias, out); });
    if (!p->usable) return false;
    Cpu cpu{engine};
    auto run = [&](const Tensor& xs, const Tensor& ws, const Tensor* bs, const Tensor& ys) {
      memory bm = bs ? wrap(cpu, bias_operand(*bs)) : memory();
      execute(cpu, *p, wrap(cpu, xs), wrap(cpu, ws), bs ? &bm : nullptr, wrap(cpu, ys));
    };
    in_compute_dtype(*p, x, w, bias, out, run);
    return true;
  } catch (const dnnl::error& e) {
    fail("{}: oneDNN could not run this product: {}", name, e.what());
  }
}

}  // namespace coil::onednn
