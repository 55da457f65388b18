// The lowering driver: sources become buffers, each node lowers by family, multi-use values
// that are not cheap get realized, and graph outputs land in output buffers.
#include "lower/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "arith/simplify.h"
#include "lower/context.h"
#include "lower/cost.h"
#include "coil/tensor.h"
#include "support/check.h"

namespace coil {

namespace lowering {

std::string index_var(int i) { return "i" + std::to_string(i); }

SymShape index_vars(size_t rank) {
  SymShape v;
  for (size_t i = 0; i < rank; ++i) v.push_back(SymInt::symbol(index_var(static_cast<int>(i))));
  return v;
}

SymInt element_offset(const TensorMeta& m, const SymShape& index) {
  SymInt off = m.offset;
  for (size_t k = 0; k < index.size(); ++k) off = off + m.strides[k] * index[k];
  return off;
}

ExprRef Context::at(const Value& v, const SymShape& index) const {
  COIL_CHECK(index.size() == v.meta.sizes.size()) << "index of rank " << index.size() << " for a value of rank " << v.meta.dim();
  if (v.realized()) return Expr::load(v.buffer, element_offset(v.meta, index), v.meta.dtype);
  std::map<std::string, SymInt> r;
  for (size_t k = 0; k < index.size(); ++k) r.emplace(index_var(static_cast<int>(k)), index[k]);
  return loop::substitute(v.body, r);
}

namespace {

bool mentions(const SymInt& e, const std::string& x) {
  std::vector<std::string> names;
  e.collect_symbols(names);
  return std::find(names.begin(), names.end(), x) != names.end();
}

// The coefficient of symbol `x` in `e` where `e` is affine in it, else nothing.
std::optional<int64_t> coefficient(const SymInt& e, const std::string& x) {
  switch (e.kind()) {
    case SymInt::Kind::constant: return 0;
    case SymInt::Kind::symbol: return e.symbol_name() == x ? 1 : 0;
    case SymInt::Kind::add: {
      int64_t sum = 0;
      for (const auto& o : e.operands()) {
        auto c = coefficient(o, x);
        if (!c) return std::nullopt;
        sum += *c;
      }
      return sum;
    }
    case SymInt::Kind::mul: {
      const auto& a = e.operands()[0];
      const auto& b = e.operands()[1];
      if (!mentions(a, x) && !mentions(b, x)) return 0;
      if (a.constant() && !mentions(a, x)) {
        auto c = coefficient(b, x);
        return c ? std::optional<int64_t>(*c * *a.constant()) : std::nullopt;
      }
      if (b.constant() && !mentions(b, x)) {
        auto c = coefficient(a, x);
        return c ? std::optional<int64_t>(*c * *b.constant()) : std::nullopt;
      }
      return std::nullopt;
    }
    default: return mentions(e, x) ? std::nullopt : std::optional<int64_t>(0);
  }
}

// `e` with index variable `x` replaced by the data-dependent `value`: an index or a load offset
// affine in `x` takes it as a dynamic term; nothing where one is not affine in it.
ExprRef substitute_dynamic(const ExprRef& e, const std::string& x, const ExprRef& value) {
  auto term = [&](int64_t c) { return c == 1 ? value : Expr::apply(LoopOp::Mul, {value, Expr::index(c)}); };
  switch (e->kind()) {
    case Expr::Kind::index: {
      if (!mentions(e->offset(), x)) return e;
      auto c = coefficient(e->offset(), x);
      if (!c) return nullptr;
      SymInt rest = coil::substitute(e->offset(), {{x, SymInt(0)}});
      return Expr::apply(LoopOp::Add, {term(*c), Expr::index(rest)});
    }
    case Expr::Kind::load: {
      ExprRef dynamic = e->dynamic();
      if (dynamic) {
        dynamic = substitute_dynamic(dynamic, x, value);
        if (!dynamic) return nullptr;
      }
      SymInt offset = e->offset();
      if (mentions(offset, x)) {
        auto c = coefficient(offset, x);
        if (!c) return nullptr;
        offset = coil::substitute(offset, {{x, SymInt(0)}});
        if (*c != 0) dynamic = dynamic ? Expr::apply(LoopOp::Add, {dynamic, term(*c)}) : term(*c);
      }
      return Expr::load(e->buffer(), offset, e->dtype(), dynamic);
    }
    default: {
      bool failed = false;
      ExprRef out = loop::map_operands(e, [&](const ExprRef& o) {
        ExprRef r = failed ? o : substitute_dynamic(o, x, value);
        if (!r) failed = true;
        return r ? r : o;
      });
      return failed ? nullptr : out;
    }
  }
}

// A value not worth storing only to be read at data-dependent places (a gather from a
// log-softmax reads one element a row of [8192, 50257]): its body at those places, where it
// costs no more than this and its loads are affine in the dims indexed.
constexpr double kInlineDynamicCost = 32;

}  // namespace

ExprRef Context::at_dynamic(Value& v, const std::vector<ExprRef>& index, const std::string& name, ExprRef extra) {
  COIL_CHECK(index.size() == v.meta.sizes.size()) << "index of rank " << index.size() << " for a value of rank " << v.meta.dim();
  bool is_static = !extra && std::all_of(index.begin(), index.end(), [](const ExprRef& e) { return e->kind() == Expr::Kind::index; });
  SymShape fixed;
  for (const auto& e : index) fixed.push_back(e->kind() == Expr::Kind::index ? e->offset() : SymInt(0));
  if (is_static) return at(v, fixed);
  if (!v.realized() && !extra && compute_cost(v.body) <= kInlineDynamicCost) {
    // The dynamic dims' variables renamed first: a static index may name the caller's variables,
    // which share the names i0, i1, ... with the value's own.
    auto dynamic_var = [](size_t k) { return "dynamic" + std::to_string(k); };
    std::map<std::string, SymInt> r;
    for (size_t k = 0; k < index.size(); ++k)
      r.emplace(index_var(static_cast<int>(k)),
                index[k]->kind() == Expr::Kind::index ? index[k]->offset() : SymInt::symbol(dynamic_var(k)));
    // Offsets simplified within the value's bounds first (a view's flattening leaves
    // (50257*i0 + i1) % 50257, affine in i1 only once simplified).
    RangeEnv env;
    for (size_t k = 0; k < v.meta.sizes.size(); ++k)
      if (auto n = v.meta.sizes[k].constant(); n && *n > 0) env[index_var(static_cast<int>(k))] = Range{0, *n - 1};
    ExprRef body = loop::substitute(loop::map_indices(v.body, [&](const SymInt& o) { return simplify(o, env); }), r);
    for (size_t k = 0; body && k < index.size(); ++k)
      if (index[k]->kind() != Expr::Kind::index) body = substitute_dynamic(body, dynamic_var(k), index[k]);
    if (body) return body;
  }
  realize(v, name);
  ExprRef dynamic = extra;
  for (size_t k = 0; k < index.size(); ++k) {
    if (index[k]->kind() == Expr::Kind::index) continue;
    ExprRef term = Expr::apply(LoopOp::Mul, {index[k], Expr::index(v.meta.strides[k])});
    dynamic = dynamic ? Expr::apply(LoopOp::Add, {dynamic, term}) : term;
  }
  return Expr::load(v.buffer, element_offset(v.meta, fixed), v.meta.dtype, dynamic);
}

int Context::add_buffer(std::string name, loop::Buffer::Role role, const TensorMeta& meta) {
  program.buffers.push_back({std::move(name), role, meta.dtype, meta.sizes, meta.strides, meta.offset});
  return static_cast<int>(program.buffers.size()) - 1;
}

std::string Context::kernel_name(const std::string& stem) { return fmt::format("k{}_{}", kernel_count_++, stem); }

void Context::emit_pointwise(const std::string& name, const ExprRef& body, int buffer, const TensorMeta& meta) {
  loop::LoopKernel k;
  k.name = kernel_name(name);
  k.outer = meta.sizes;
  std::map<std::string, SymInt> to_loop;
  RangeEnv ranges;
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    to_loop.emplace(index_var(static_cast<int>(d)), SymInt::symbol(loop::loop_var(static_cast<int>(d))));
    auto n = meta.sizes[d].constant();
    ranges[loop::loop_var(static_cast<int>(d))] = {0, n ? std::max<int64_t>(*n - 1, 0) : Range::kMax};
  }
  auto simplify_index = [&](const SymInt& s) { return simplify(coil::substitute(s, to_loop), ranges); };
  const loop::Buffer& b = program.buffers[static_cast<size_t>(buffer)];
  TensorMeta layout = meta;
  layout.strides = b.strides;
  layout.offset = b.offset;
  k.stores.push_back({buffer, simplify_index(element_offset(layout, index_vars(meta.sizes.size()))),
                      loop::map_indices(cast(body, b.dtype), simplify_index), false});
  k.origins = {name};
  program.kernels.push_back(std::move(k));
}

void Context::realize(Value& v, const std::string& name, loop::Buffer::Role role) {
  if (v.realized()) return;
  // The buffer takes the value's own layout, offset included, so that the metadata of views
  // taken from this value (relative to the same storage) stays valid.
  int b = add_buffer(name, role, v.meta);
  emit_pointwise(name, v.body, b, v.meta);
  v.buffer = b;
  v.body = nullptr;
}

namespace {

// The element count of static sizes; nullopt when a size is symbolic.
std::optional<int64_t> static_elements(const SymShape& sizes) {
  int64_t n = 1;
  for (const auto& s : sizes) {
    if (!s.constant()) return std::nullopt;
    n *= *s.constant();
  }
  return n;
}

}  // namespace

}  // namespace lowering

using namespace lowering;

namespace {

// Whether static sizes and strides address every element of their span once (a permutation of
// a contiguous layout), none of them empty.
bool dense_layout(const SymShape& sym_sizes, const SymShape& sym_strides) {
  auto sizes = constant_shape(sym_sizes), strides = constant_shape(sym_strides);
  if (sizes && strides) {
    auto n = static_elements(sym_sizes);
    return n && *n > 0 && span_of(*sizes, *strides) == *n;
  }
  // Symbolic: the dims (size-1 ones aside) in some order, each stride the product of the sizes
  // inside it, as expressions (a transpose of a [S, T] value: strides [1, T]).
  if (sym_strides.size() != sym_sizes.size()) return false;
  std::vector<bool> placed(sym_sizes.size(), false);
  size_t left = 0;
  for (size_t d = 0; d < sym_sizes.size(); ++d) {
    if (sym_sizes[d] == SymInt(0)) return false;
    if (sym_sizes[d] != SymInt(1)) ++left;
  }
  SymInt expect = 1;
  while (left > 0) {
    size_t d = 0;
    while (d < sym_sizes.size() && (placed[d] || sym_sizes[d] == SymInt(1) || sym_strides[d] != expect)) ++d;
    if (d == sym_sizes.size()) return false;
    placed[d] = true, --left;
    expect = expect * sym_sizes[d];
  }
  return true;
}

bool dense(const TensorMeta& m) { return dense_layout(m.sizes, m.strides); }

// Whether an output that is a view of a realized temporary (a permute of it: the adapter's
// traced layouts are written that way, export_layout.h) may take the temporary over, described
// by the view's sizes and strides: the view is dense over all of the temporary, which no extern
// call writes (an extern writes its output in the buffer's own layout; loop kernels address
// buffers by explicit offsets). Saves the copy into a contiguous output and the caller's copy
// back into the traced layout.
bool takes_over_as_view(const loop::Program& p, const Value& v) {
  if (!v.realized()) return false;
  const loop::Buffer& b = p.buffers[static_cast<size_t>(v.buffer)];
  if (b.role != loop::Buffer::Role::temporary || !(v.meta.offset == SymInt(0)) || !(b.offset == SymInt(0))) return false;
  if (!dense(v.meta) || !dense_layout(b.sizes, b.strides) || !(product(v.meta.sizes) == product(b.sizes))) return false;
  for (const auto& k : p.kernels)
    if (const auto* call = std::get_if<loop::ExternCall>(&k); call && call->output == v.buffer) return false;
  return true;
}

}  // namespace

LoweredGraph lower(const Graph& g) {
  Context c(g);
  LoweredGraph out;
  for (const auto& node : g.nodes)
    for (const auto& a : node.args) {
      if (auto* r = std::get_if<ValueRef>(&a.value)) ++c.uses[{r->node, r->output}];
      if (auto* l = std::get_if<TensorList>(&a.value))
        for (const auto& e : *l)
          if (e) ++c.uses[{e->node, e->output}];
    }
  for (const auto& r : g.outputs) ++c.uses[{r.node, r.output}];

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    std::vector<Value> vals;
    try {
      switch (node.schema().family) {
        case OpFamily::source: {
          using Role = loop::Buffer::Role;
          Role role = node.op == OpKind::Input ? Role::input : node.op == OpKind::Weight ? Role::weight : Role::constant;
          Value v{node.outputs[0].meta, c.add_buffer(node.name(), role, node.outputs[0].meta), nullptr};
          if (role == Role::input) out.input_buffers.push_back(v.buffer);
          if (role == Role::weight) out.weight_buffers.push_back(v.buffer);
          if (role == Role::constant)
            c.program.buffers.back().data = std::get<FloatList>(node.arg("value").value);
          vals = {v};
          break;
        }
        case OpFamily::creation:
        case OpFamily::copy:
        case OpFamily::unary:
        case OpFamily::binary:
        case OpFamily::ternary: vals = lower_pointwise(c, node); break;
        case OpFamily::view:
        case OpFamily::shape: vals = lower_view(c, node); break;
        case OpFamily::reduction:
        case OpFamily::normalization: vals = lower_reduction(c, node); break;
        case OpFamily::linalg: vals = lower_linalg(c, node); break;
        case OpFamily::indexing: vals = lower_indexing(c, node); break;
      }
    } catch (const Error& e) {
      fail("lowering %{} ({}): {}", node.name(), node.schema().name, e.what());
    }
    COIL_CHECK(vals.size() == node.outputs.size()) << node.schema().name << " lowered to the wrong number of values";
    for (size_t o = 0; o < vals.size(); ++o) {
      Value& v = vals[o];
      int uses = c.uses[{static_cast<int>(i), static_cast<int>(o)}];
      // A value inlined into its consumers is rewritten by each of them; past this depth it is
      // stored and read instead (loop/expr.h).
      if (!v.realized() && v.body && v.body->depth() > loop::kMaxExprDepth) {
        c.realize(v, node.outputs[o].name);
        continue;
      }
      if (v.realized() || uses <= 1) continue;
      // Buffers at least as large as the value (unknown sizes count as large).
      auto mine = static_elements(v.meta.sizes);
      int reads = large_reads(v.body, [&](int b) {
        auto theirs = static_elements(c.program.buffers[static_cast<size_t>(b)].sizes);
        return !mine || !theirs || *theirs >= *mine;
      });
      if (!should_realize(v.body, uses, reads)) continue;
      // A view stored for its readers: its input is stored instead and the view reads that (the
      // same bytes), so the kernel storing it runs over the input's own nest, where the kernels
      // it reads can fuse into it (GPT-2's gelu gradient over [B, T, 3072], read as [B*T, 3072]
      // by three kernels, stored from an [B*T, 3072] kernel that an f32 temporary fed).
      if (vals.size() == 1 && rearranging_view(c, node)) {
        ValueRef in = std::get<ValueRef>(node.arg("self").value);
        realize_through_views(c, in);
        c.realize(c.value(in), c.graph.value_name(in));
        vals = lower_view(c, node);
        continue;
      }
      c.realize(v, node.outputs[o].name);
    }
    c.values[i] = std::move(vals);
  }

  // Outputs get buffers of their own, dense in their declared layout when it is dense.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ValueRef& r = g.outputs[i];
    Value& v = c.value(r);
    const std::string& name = g.value_name(r);
    auto& buffers = c.program.buffers;
    bool own = v.realized() && buffers[static_cast<size_t>(v.buffer)].role == loop::Buffer::Role::temporary &&
               v.meta.offset == SymInt(0) && buffers[static_cast<size_t>(v.buffer)].strides == v.meta.strides &&
               buffers[static_cast<size_t>(v.buffer)].sizes == v.meta.sizes;
    if (own || takes_over_as_view(c.program, v)) {
      loop::Buffer& b = buffers[static_cast<size_t>(v.buffer)];
      b.role = loop::Buffer::Role::output;
      b.name = name;
      b.sizes = v.meta.sizes;
      b.strides = v.meta.strides;
      b.any_layout = g.any_layout(i);
      out.output_buffers.push_back(v.buffer);
      continue;
    }
    TensorMeta layout = TensorMeta::contiguous(v.meta.dtype, v.meta.sizes, v.meta.device);
    if (dense(v.meta)) {  // (a permuted layout is the caller's: the adapter returns it as traced)
      layout.strides = v.meta.strides;
    }
    int b = c.add_buffer(name, loop::Buffer::Role::output, layout);
    c.program.buffers[static_cast<size_t>(b)].any_layout = g.any_layout(i);
    c.emit_pointwise(name, c.at(v, index_vars(layout.sizes.size())), b, layout);
    out.output_buffers.push_back(b);
  }
  out.program = std::move(c.program);
  loop::verify(out.program);
  return out;
}

}  // namespace coil
