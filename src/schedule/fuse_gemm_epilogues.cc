#include "schedule/fuse_gemm_epilogues.h"

#include <optional>

#include "coil/graph.h"
#include "schedule/call_results.h"

namespace coil::schedule {

namespace {

using loop::Activation;
using loop::Expr;
using loop::ExprRef;
using loop::LoopKernel;

// The scan both rewrites share: every place `Self::match` accepts becomes the load it returns
// (the product's, which then holds what the place computed); any other read of the product makes
// the rewrite fail.
template <class Self>
class ProductReads {
 public:
  ProductReads(int buffer, DType dtype) : buffer_(buffer), dtype_(dtype) {}

  void begin_kernel() { matched_ = false; }
  bool failed() const { return failed_; }
  bool matched() const { return matched_; }

  ExprRef operator()(const ExprRef& e) {
    if (auto load = static_cast<Self&>(*this).match(e)) {
      matched_ = true;
      return load;
    }
    if (e->kind() == Expr::Kind::load && e->buffer() == buffer_) failed_ = true;
    return loop::map_operands(e, [this](const ExprRef& o) { return (*this)(o); });
  }

 protected:
  // A half product's value is rounded to its dtype: the expression under that cast, or nullptr.
  ExprRef under_rounding(const ExprRef& e) const {
    if (!is_half(dtype_)) return e;
    return e->kind() == Expr::Kind::cast && e->dtype() == dtype_ ? e->operands()[0] : nullptr;
  }

  int buffer_;
  DType dtype_;

 private:
  bool failed_ = false;
  bool matched_ = false;
};

// `act` of the product's value reads the product instead, which then holds the activation's
// result. For a half product the activation runs in f32 and its result is rounded to the
// product's dtype: cast<bf16>(act(cast<f32>(load))) is what the product now holds.
class Rewriter : public ProductReads<Rewriter> {
 public:
  Rewriter(int buffer, DType dtype, Activation act) : ProductReads(buffer, dtype), act_(act) {}

  ExprRef match(const ExprRef& e) const {
    ExprRef body = under_rounding(e);
    if (!body) return nullptr;
    ExprRef load = first_load(body);
    if (!load || load->dynamic()) return nullptr;
    ExprRef x = is_half(dtype_) ? Expr::cast(load, DType::f32) : load;
    return loop::same(body, loop::activation_expr(act_, x)) ? load : nullptr;
  }

 private:
  ExprRef first_load(const ExprRef& e) const {
    if (e->kind() == Expr::Kind::load && e->buffer() == buffer_) return e;
    for (const auto& o : e->operands())
      if (auto l = first_load(o)) return l;
    return nullptr;
  }

  Activation act_;
};

// Reads of the product as R + P in its dtype — cast<half>(cast<f32>(R) + cast<f32>(P)) for a
// half product — with R another buffer of the product's dtype read at the same offset, the same
// R in every read: they then load the product, which holds R + P (cuBLASLt's C, beta 1).
class ResidualRewriter : public ProductReads<ResidualRewriter> {
 public:
  ResidualRewriter(int buffer, DType dtype) : ProductReads(buffer, dtype) {}
  std::optional<int> residual() const { return residual_; }

  ExprRef match(const ExprRef& e) {
    ExprRef body = under_rounding(e);
    if (!body || body->kind() != Expr::Kind::op || body->op() != loop::LoopOp::Add) return nullptr;
    ExprRef p = operand_load(body->operands()[0]), r = operand_load(body->operands()[1]);
    if (!p || !r) return nullptr;
    if (r->buffer() == buffer_) std::swap(p, r);
    if (p->buffer() != buffer_ || r->buffer() == buffer_ || !(p->offset() == r->offset())) return nullptr;
    if (residual_ && *residual_ != r->buffer()) return nullptr;
    residual_ = r->buffer();
    return p;
  }

 private:
  // The load of the product's dtype under the cast a half operand takes to f32, or nullptr.
  ExprRef operand_load(const ExprRef& x) const {
    ExprRef l = x;
    if (is_half(dtype_)) {
      if (x->kind() != Expr::Kind::cast || x->dtype() != DType::f32) return nullptr;
      l = x->operands()[0];
    }
    return l->kind() == Expr::Kind::load && !l->dynamic() && l->dtype() == dtype_ ? l : nullptr;
  }

  std::optional<int> residual_;
};

// The kernels after `at` with every read of the product rewritten by `rw`, or nothing when a
// read does not match (or an extern reads it).
template <typename Rewrite>
std::optional<std::vector<loop::Kernel>> rewrite_readers(const loop::Program& p, size_t at, int buffer, Rewrite& rw) {
  std::vector<loop::Kernel> out;
  bool any = false;
  for (size_t i = at + 1; i < p.kernels.size(); ++i) {
    const loop::Kernel& k = p.kernels[i];
    if (!reads(k, buffer)) {
      out.push_back(k);
      continue;
    }
    const auto* lk = std::get_if<LoopKernel>(&k);
    if (!lk) return std::nullopt;
    rw.begin_kernel();
    LoopKernel n = *lk;
    for (auto& r : n.reductions) r.value = rw(r.value);
    for (auto& s : n.stores) {
      s.value = rw(s.value);
      if (s.dynamic) s.dynamic = rw(s.dynamic);
    }
    if (rw.failed() || !rw.matched()) return std::nullopt;
    any = true;
    out.push_back(std::move(n));
  }
  if (!any) return std::nullopt;
  return out;
}

// R + P with R complete before the product and the same elements as it: the product adds R
// itself (its C), and the add kernel, now a copy, goes where the result has the product's
// elements.
void fuse_residual(loop::Program& p, size_t at) {
  auto& call = std::get<loop::ExternCall>(p.kernels[at]);
  const loop::Buffer product = p.buffers[static_cast<size_t>(call.output)];
  ResidualRewriter rw(call.output, product.dtype);
  auto later = rewrite_readers(p, at, call.output, rw);
  if (!later || !rw.residual()) return;
  const int r = *rw.residual();
  const loop::Buffer& rb = p.buffers[static_cast<size_t>(r)];
  if (!same_elements(product, rb) && !same_elements(rb, product)) return;
  for (size_t j = at; j < p.kernels.size(); ++j)
    if (loop::access(p.kernels[j]).writes.count(r)) return;
  loop::ExternCall fused = call;
  elide_copy(p, fused, *later);
  const loop::Buffer& ob = p.buffers[static_cast<size_t>(fused.output)];
  fused.residual = loop::View{r, ob.sizes, ob.strides, 0};
  replace_from(p, at, std::move(fused), std::move(*later));
}

}  // namespace

loop::Program fuse_gemm_epilogues(const loop::Program& program) {
  loop::Program p = program;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    auto* call = std::get_if<loop::ExternCall>(&p.kernels[i]);
    if (!call || call->activation != Activation::none || !loop::is_product(call->kind)) continue;
    const loop::Buffer& out = p.buffers[static_cast<size_t>(call->output)];
    if (out.role != loop::Buffer::Role::temporary || (!is_half(out.dtype) && out.dtype != DType::f32)) continue;
    // An f32 sum of f16/bf16 operands (a convolution's, its bias still to add) takes no epilogue.
    if (p.buffers[static_cast<size_t>(call->inputs.back().buffer)].dtype != out.dtype) continue;
    bool fused_activation = false;
    for (Activation act : {Activation::relu, Activation::gelu_tanh}) {
      Rewriter rw(call->output, out.dtype, act);
      auto later = rewrite_readers(p, i, call->output, rw);
      if (!later) continue;
      loop::ExternCall fused = *call;
      fused.activation = act;
      elide_copy(p, fused, *later);
      replace_from(p, i, std::move(fused), std::move(*later));
      fused_activation = true;
      break;
    }
    if (!fused_activation && (call->kind == loop::ExternKind::mm || call->kind == loop::ExternKind::addmm)) fuse_residual(p, i);
  }
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
