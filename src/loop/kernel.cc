#include "loop/kernel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "support/check.h"

namespace coil::loop {

const char* reduce_name(ReduceKind k) {
  static constexpr const char* names[] = {"sum", "prod", "max", "min", "argmax", "argmin", "welford_mean", "welford_m2", "carry"};
  return names[static_cast<size_t>(k)];
}

SymInt view_offset(const View& v, const std::vector<SymInt>& index) {
  SymInt off = v.offset;
  for (size_t d = 0; d < index.size(); ++d) off = off + index[d] * v.strides[d];
  return off;
}

std::string loop_var(int i) { return "x" + std::to_string(i); }
std::string reduce_var(int i) { return "r" + std::to_string(i); }

const char* role_name(Buffer::Role r) {
  static constexpr const char* names[] = {"input", "weight", "constant", "temp", "output"};
  return names[static_cast<size_t>(r)];
}

namespace {

const char* extern_name(ExternKind k) {
  static constexpr const char* names[] = {"mm", "bmm", "addmm", "convolution", "attention", "torch"};
  return names[static_cast<size_t>(k)];
}

std::string kernel_str(const LoopKernel& k) {
  std::string s = fmt::format("kernel {} outer={}", k.name, shape_str(k.outer));
  if (!k.inner.empty()) s += " inner=" + shape_str(k.inner);
  if (!k.free_dims.empty()) s += fmt::format(" free=[{}]", fmt::join(k.free_dims, ", "));
  s += fmt::format("  # from {}\n", fmt::join(k.origins, ", "));
  for (size_t i = 0; i < k.reductions.size(); ++i)
    s += fmt::format("  reduced{} = {}{}<{}>({})\n", i, k.reductions[i].scan ? "scan_" : "", reduce_name(k.reductions[i].kind),
                     dtype_name(k.reductions[i].acc), to_string(k.reductions[i].value));
  for (const auto& st : k.stores)
    s += fmt::format("  {}buf{}[{}{}] = {}\n", st.inner ? "inner " : "", st.buffer, st.offset.str(),
                     st.dynamic ? " + " + to_string(st.dynamic) : "", to_string(st.value));
  return s;
}

std::string extern_str(const ExternCall& e) {
  std::vector<std::string> ins;
  for (const auto& v : e.inputs) {
    std::string s = fmt::format("buf{}{} strides={}", v.buffer, shape_str(v.sizes), shape_str(v.strides));
    if (v.offset != SymInt(0)) s += " offset=" + v.offset.str();
    ins.push_back(s);
  }
  std::string epilogue = e.activation == Activation::none ? "" : fmt::format(" epilogue={}", activation_name(e.activation));
  if (e.residual) epilogue += fmt::format(" residual=buf{}{} strides={}", e.residual->buffer, shape_str(e.residual->sizes), shape_str(e.residual->strides));
  for (auto [name, v] : {std::pair{"scale", &e.scale}, {"residual_scale", &e.residual_scale}, {"shift", &e.shift}})
    if (*v) epilogue += fmt::format(" {}=buf{}", name, (*v)->buffer);
  std::string view = e.output_view ? " strides=" + shape_str(e.output_view->strides) : "";
  if (e.output_view && e.output_view->offset != SymInt(0)) view += " offset=" + e.output_view->offset.str();
  for (int b : e.more_outputs) view += fmt::format(", buf{}", b);
  if (e.gate) epilogue += fmt::format(" gate=buf{}{} strides={}", e.gate->buffer, shape_str(e.gate->sizes), shape_str(e.gate->strides));
  std::string then;
  auto indented = [&](const LoopKernel& k) {
    const std::string text = kernel_str(k);
    for (size_t at = 0, end; at < text.size(); at = end + 1) {
      end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      then += "    " + text.substr(at, end - at) + "\n";
    }
  };
  if (e.prologue) {
    epilogue += " first(A)";
    indented(*e.prologue);
  }
  if (e.epilogue) {
    epilogue += fmt::format(" then({})", fmt::join(e.epilogue_inputs, ", "));
    indented(*e.epilogue);
  }
  return fmt::format("extern {} {}({}) -> buf{}{} params=[{}]{}  # from {}\n{}", e.name, extern_name(e.kind), fmt::join(ins, ", "),
                     e.output, view, fmt::join(e.params, ", "), epilogue, fmt::join(e.origins, ", "), then);
}

void check_vars(const SymInt& index, size_t outer, size_t inner, const std::string& where) {
  std::vector<std::string> used;
  index.collect_symbols(used);
  for (const auto& v : used) {
    if (v.size() < 2 || (v[0] != 'x' && v[0] != 'r') || !std::isdigit(static_cast<unsigned char>(v[1]))) continue;
    size_t n = std::stoul(v.substr(1));
    size_t limit = v[0] == 'x' ? outer : inner;
    COIL_CHECK(n < limit) << where << ": variable " << v << " is out of the kernel's loop nest";
  }
}

void check_expr(const Program& p, const ExprRef& e, size_t outer, size_t inner, size_t slots, const std::string& where) {
  switch (e->kind()) {
    case Expr::Kind::load:
      COIL_CHECK(e->buffer() >= 0 && static_cast<size_t>(e->buffer()) < p.buffers.size()) << where << ": unknown buffer " << e->buffer();
      COIL_CHECK(p.buffers[static_cast<size_t>(e->buffer())].dtype == e->dtype()) << where << ": load dtype differs from its buffer";
      check_vars(e->offset(), outer, inner, where);
      break;
    case Expr::Kind::index: check_vars(e->offset(), outer, inner, where); break;
    case Expr::Kind::reduced:
      COIL_CHECK(static_cast<size_t>(e->slot()) < slots) << where << ": reduced" << e->slot() << " is used before it is computed";
      break;
    default: break;
  }
  for (const auto& o : e->operands()) check_expr(p, o, outer, inner, slots, where);
}

}  // namespace

void loads_of(const ExprRef& e, int buffer, std::vector<ExprRef>& out) {
  if (e->kind() == Expr::Kind::load && e->buffer() == buffer) out.push_back(e);
  for (const auto& o : e->operands()) loads_of(o, buffer, out);
}

void collect_loads(const ExprRef& e, std::set<int>& out) {
  if (e->kind() == Expr::Kind::load) out.insert(e->buffer());
  for (const auto& o : e->operands()) collect_loads(o, out);
}

Access access(const Kernel& k) {
  Access a;
  if (const auto* e = std::get_if<ExternCall>(&k)) {
    // (with a prologue, A is computed from the prologue's reads instead)
    const int computed = e->prologue ? e->inputs[e->kind == ExternKind::addmm ? 1 : 0].buffer : -1;
    for (const auto& v : e->inputs)
      if (v.buffer != computed) a.reads.insert(v.buffer);
    if (e->prologue) {
      const Access more = access(*e->prologue);
      a.reads.insert(more.reads.begin(), more.reads.end());
    }
    for (const auto* v : {&e->residual, &e->scale, &e->shift, &e->residual_scale, &e->gate})
      if (*v) a.reads.insert((*v)->buffer);
    if (e->epilogue) {
      const Access more = access(*e->epilogue);
      for (int b : more.reads)
        if (std::find(e->epilogue_inputs.begin(), e->epilogue_inputs.end(), b) == e->epilogue_inputs.end()) a.reads.insert(b);
    }
    a.writes.insert(e->output);
    a.writes.insert(e->more_outputs.begin(), e->more_outputs.end());
    return a;
  }
  const auto& lk = std::get<LoopKernel>(k);
  for (const auto& r : lk.reductions) collect_loads(r.value, a.reads);
  for (const auto& s : lk.stores) {
    a.writes.insert(s.buffer);
    collect_loads(s.value, a.reads);
    if (s.dynamic) collect_loads(s.dynamic, a.reads);
  }
  return a;
}

bool is_scan(const LoopKernel& k) { return !k.reductions.empty() && k.reductions.front().scan; }

bool reads_slots(const ExprRef& e, int first, int end) {
  if (e->kind() == Expr::Kind::reduced && e->slot() >= first && e->slot() < end) return true;
  return std::any_of(e->operands().begin(), e->operands().end(), [&](const ExprRef& o) { return reads_slots(o, first, end); });
}

ExprRef shift_slots(const ExprRef& e, int by) {
  if (e->kind() == Expr::Kind::reduced) return Expr::reduced(e->slot() + by, e->dtype());
  return map_operands(e, [&](const ExprRef& o) { return shift_slots(o, by); });
}

size_t pass_end(const LoopKernel& k, size_t first) {
  auto welford = [&](size_t i) { return k.reductions[i].kind == ReduceKind::welford_mean; };
  if (welford(first)) return first + 2;
  size_t end = first + 1;
  while (end < k.reductions.size() && !welford(end) && !reads_slots(k.reductions[end].value, static_cast<int>(first))) ++end;
  return end;
}

bool has_dynamic_stores(const LoopKernel& k) {
  return std::any_of(k.stores.begin(), k.stores.end(), [](const StoreStep& s) { return s.dynamic != nullptr; });
}

namespace {
bool expr_may_fail(const ExprRef& e) {
  if (!e) return false;
  if (e->kind() == Expr::Kind::op) {
    switch (e->op()) {
      case LoopOp::CheckIndex: return true;
      case LoopOp::Div: case LoopOp::FloorDiv: case LoopOp::TruncDiv: case LoopOp::Remainder: case LoopOp::Fmod:
        if (!is_float(e->operands()[0]->dtype())) return true;
        break;
      default: break;
    }
  }
  return std::any_of(e->operands().begin(), e->operands().end(), expr_may_fail);
}
}  // namespace

bool may_fail(const LoopKernel& k) {
  for (const auto& r : k.reductions)
    if (expr_may_fail(r.value)) return true;
  for (const auto& s : k.stores)
    if (expr_may_fail(s.value) || expr_may_fail(s.dynamic)) return true;
  return false;
}

std::string to_string(const Program& p) {
  std::string s;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    s += fmt::format("buf{} {} {}: {}{} strides={}", i, role_name(b.role), b.name, dtype_name(b.dtype), shape_str(b.sizes),
                     shape_str(b.strides));
    if (b.offset != SymInt(0)) s += " offset=" + b.offset.str();
    if (b.any_layout) s += " any_layout";
    s += "\n";
  }
  for (const auto& k : p.kernels)
    s += std::holds_alternative<LoopKernel>(k) ? kernel_str(std::get<LoopKernel>(k)) : extern_str(std::get<ExternCall>(k));
  return s;
}

void verify(const Program& p) {
  for (const auto& kernel : p.kernels) {
    if (const auto* e = std::get_if<ExternCall>(&kernel)) {
      for (const auto& v : e->inputs)
        COIL_CHECK(v.buffer >= 0 && static_cast<size_t>(v.buffer) < p.buffers.size()) << e->name << ": unknown input buffer";
      COIL_CHECK(e->output >= 0 && static_cast<size_t>(e->output) < p.buffers.size()) << e->name << ": unknown output buffer";
      for (int b : e->more_outputs)
        COIL_CHECK(e->kind == ExternKind::torch && b >= 0 && static_cast<size_t>(b) < p.buffers.size())
            << e->name << ": more outputs are a torch call's, in known buffers";
      COIL_CHECK(e->kind != ExternKind::torch || (!e->output_view && !e->residual && e->activation == Activation::none))
          << e->name << ": a torch call writes its results as they come";
      COIL_CHECK(!e->output_view || (e->output_view->buffer == e->output &&
                                     (e->kind == ExternKind::attention || e->kind == ExternKind::convolution)))
          << e->name << ": an output view is for attention or a convolution, into its output buffer";
      const bool conv = e->kind == ExternKind::convolution;
      COIL_CHECK(e->activation == Activation::none || is_product(e->kind) || (conv && e->activation == Activation::relu))
          << e->name << ": an epilogue on a " << extern_name(e->kind);
      COIL_CHECK(!e->residual || ((e->kind == ExternKind::mm || e->kind == ExternKind::addmm) && e->activation == Activation::none) || conv)
          << e->name << ": a residual is for an mm or addmm without an activation, or a convolution";
      for (const auto* v : {&e->residual, &e->scale, &e->shift, &e->residual_scale})
        COIL_CHECK(!*v || ((*v)->buffer >= 0 && static_cast<size_t>((*v)->buffer) < p.buffers.size())) << e->name << ": unknown epilogue buffer";
      COIL_CHECK((!e->scale && !e->shift && !e->residual_scale) || conv) << e->name << ": channel scales are a convolution's";
      COIL_CHECK((!e->gate || e->epilogue) && (!e->epilogue || (e->kind != ExternKind::bmm && is_product(e->kind) && e->epilogue->stores.size() == 1 &&
                                                              e->epilogue->stores[0].buffer == e->output && e->epilogue->reductions.empty() &&
                                                              e->epilogue_inputs.size() == (e->gate ? 2u : 1u))))
          << e->name << ": a gate needs an epilogue; an epilogue is a pointwise kernel of one store, the output, after an mm or addmm";
      COIL_CHECK(!e->prologue || ((e->kind == ExternKind::mm || e->kind == ExternKind::addmm) && !e->prologue->reductions.empty() &&
                                  e->prologue->stores.size() == 1 && e->prologue->stores[0].inner &&
                                  e->prologue->stores[0].buffer == e->inputs[e->kind == ExternKind::addmm ? 1 : 0].buffer))
          << e->name << ": a prologue is a row kernel of one inner store, A's, before an mm or addmm";
      continue;
    }
    const auto& k = std::get<LoopKernel>(kernel);
    COIL_CHECK(!k.stores.empty()) << k.name << ": a kernel without stores";
    COIL_CHECK(k.reductions.empty() || !k.inner.empty()) << k.name << ": reductions need an inner loop";
    for (const auto& r : k.reductions) COIL_CHECK(r.scan == is_scan(k)) << k.name << ": scans mixed with reductions";
    for (size_t i = 0; i < k.reductions.size(); ++i) {
      const auto& r = k.reductions[i];
      bool pair_start = r.kind == ReduceKind::welford_mean;
      bool pair_end = r.kind == ReduceKind::welford_m2;
      if (pair_start) {
        COIL_CHECK(i + 1 < k.reductions.size() && k.reductions[i + 1].kind == ReduceKind::welford_m2 &&
                   same(k.reductions[i + 1].value, r.value) && is_float(r.acc) && !r.scan)
            << k.name << ": welford_mean must be followed by welford_m2 of the same float value";
      }
      if (pair_end) {
        COIL_CHECK(i > 0 && k.reductions[i - 1].kind == ReduceKind::welford_mean) << k.name << ": lone welford_m2";
      }
    }
    for (size_t i = 0; i < k.reductions.size(); ++i) {
      const auto& r = k.reductions[i];
      bool scannable = r.kind == ReduceKind::sum || r.kind == ReduceKind::prod || r.kind == ReduceKind::max ||
                       r.kind == ReduceKind::min || r.kind == ReduceKind::carry;
      COIL_CHECK(!r.scan || scannable) << k.name << ": no scan of " << reduce_name(r.kind);
      COIL_CHECK(r.kind != ReduceKind::carry || r.scan) << k.name << ": carry is a scan step";
      // A carry reads any step's running value; other steps only earlier ones.
      size_t slots = r.kind == ReduceKind::carry ? k.reductions.size() : i;
      check_expr(p, r.value, k.outer.size(), k.inner.size(), slots, k.name);
    }
    for (const auto& st : k.stores) {
      COIL_CHECK(st.buffer >= 0 && static_cast<size_t>(st.buffer) < p.buffers.size()) << k.name << ": store to unknown buffer";
      COIL_CHECK(p.buffers[static_cast<size_t>(st.buffer)].dtype == st.value->dtype())
          << k.name << ": store of " << dtype_name(st.value->dtype()) << " into a " << dtype_name(p.buffers[static_cast<size_t>(st.buffer)].dtype) << " buffer";
      size_t inner = st.inner ? k.inner.size() : 0;
      check_vars(st.offset, k.outer.size(), inner, k.name);
      check_expr(p, st.value, k.outer.size(), inner, k.reductions.size(), k.name);
      if (st.dynamic) {
        COIL_CHECK(st.dynamic->dtype() == DType::i64) << k.name << ": a data-dependent store offset must be i64";
        check_expr(p, st.dynamic, k.outer.size(), inner, k.reductions.size(), k.name);
      }
    }
  }
}

}  // namespace coil::loop
