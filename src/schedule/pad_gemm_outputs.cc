#include "schedule/pad_gemm_outputs.h"

#include <algorithm>
#include <map>

#include "arith/simplify.h"
#include "schedule/simplify_indices.h"
#include "coil/dtype.h"
#include "coil/graph.h"

namespace coil::schedule {

namespace {

constexpr int64_t kRowAlignment = 16;  // bytes
constexpr int64_t kMinPaddedRow = 8;    // vectors: padding adds at most an eighth

// Whether `b` is a dense row-major buffer with static sizes and unaligned rows worth padding;
// sets the padded row length.
bool unaligned_rows(const loop::Buffer& b, int64_t min_elements, int64_t& padded) {
  if (b.offset != SymInt(0) || b.sizes.size() < 2) return false;
  auto sizes = constant_shape(b.sizes), strides = constant_shape(b.strides);
  if (!sizes || !strides) return false;
  int64_t expect = 1, elements = 1;
  for (size_t i = sizes->size(); i-- > 0;) {
    if ((*strides)[i] != expect) return false;
    expect *= (*sizes)[i];
    elements *= (*sizes)[i];
  }
  const auto size = static_cast<int64_t>(dtype_size(b.dtype));
  const int64_t n = sizes->back(), per_vector = kRowAlignment / size;
  if (elements < min_elements || per_vector <= 1 || n % per_vector == 0) return false;
  // Rows of a few elements are no product's rows: a buffer with trailing unit dims (ResNet's
  // [1, 32, 7, 7, 2048, 1, 1] weight-gradient operand, read as [1568, 2048]) would have every
  // element padded to a row of its own, 8x the memory and strides no product takes.
  if (n < kMinPaddedRow * per_vector) return false;
  padded = (n + per_vector - 1) / per_vector * per_vector;
  return true;
}

bool wants_padding(const loop::Buffer& b, int64_t min_elements, int64_t& padded) {
  return b.role == loop::Buffer::Role::temporary && unaligned_rows(b, min_elements, padded);
}

// Whether `e` loads `buffer` at a data-dependent index (a load's operands are its dynamic part).
bool has_dynamic_load(const loop::ExprRef& e, int buffer) {
  if (e->kind() == loop::Expr::Kind::load && e->buffer() == buffer && e->dynamic()) return true;
  return std::any_of(e->operands().begin(), e->operands().end(), [&](const loop::ExprRef& o) { return has_dynamic_load(o, buffer); });
}

// Whether only extern products write `buffer` and only loop kernels read it, at static offsets.
bool paddable_uses(const loop::Program& p, int buffer) {
  for (const auto& kernel : p.kernels) {
    if (const auto* call = std::get_if<loop::ExternCall>(&kernel)) {
      if (call->output == buffer && !loop::is_product(call->kind)) return false;
      for (const auto& v : call->inputs)
        if (v.buffer == buffer) return false;
      continue;
    }
    const auto& k = std::get<loop::LoopKernel>(kernel);
    for (const auto& s : k.stores)
      if (s.buffer == buffer || has_dynamic_load(s.value, buffer) || (s.dynamic && has_dynamic_load(s.dynamic, buffer)))
        return false;
    for (const auto& r : k.reductions)
      if (has_dynamic_load(r.value, buffer)) return false;
  }
  return true;
}

// Whether a view over a dense buffer of rows of `n` elements steps by whole rows or single
// elements (so that rows of `np` address the same elements) from a static offset.
bool row_view(const loop::View& v, int64_t n) {
  if (!v.offset.constant()) return false;
  for (size_t d = 0; d < v.strides.size(); ++d) {
    auto st = v.strides[d].constant();
    if (v.sizes[d] == SymInt(1)) continue;
    if (!st || (*st != 1 && *st % n != 0)) return false;
  }
  return true;
}

// The same view over rows of `np` elements.
loop::View repad_view(loop::View v, int64_t n, int64_t np) {
  for (size_t d = 0; d < v.strides.size(); ++d) {
    int64_t st = *v.strides[d].constant();
    if (st % n == 0 && v.sizes[d] != SymInt(1)) v.strides[d] = SymInt(st / n * np);
  }
  int64_t at = *v.offset.constant();
  v.offset = SymInt(at / n * np + at % n);
  return v;
}

// The views of an extern call other than its output's, for reading or rewriting alike.
template <typename Call, typename F>
void each_view(Call& call, F&& f) {
  for (auto& v : call.inputs) f(v);
  for (auto* o : {&call.residual, &call.scale, &call.shift, &call.residual_scale})
    if (*o) f(**o);
}

// Whether temporary `buffer` is a product's operand written by loop kernels (static offsets),
// read by loop kernels at static offsets and by products through views of whole rows: its rows
// can be padded (the stores and loads index the padded layout, the views step over it).
bool paddable_operand(const loop::Program& p, int buffer, int64_t n) {
  bool operand = false;
  for (const auto& kernel : p.kernels) {
    if (const auto* call = std::get_if<loop::ExternCall>(&kernel)) {
      bool reads = false, fits = true;
      each_view(*call, [&](const loop::View& v) {
        if (v.buffer != buffer) return;
        reads = true;
        fits = fits && row_view(v, n);
      });
      if (call->output == buffer || (call->output_view && call->output_view->buffer == buffer)) return false;
      if (reads && (!loop::is_product(call->kind) || !fits)) return false;
      operand = operand || reads;
      continue;
    }
    const auto& k = std::get<loop::LoopKernel>(kernel);
    for (const auto& s : k.stores)
      if ((s.buffer == buffer && s.dynamic) || has_dynamic_load(s.value, buffer) || (s.dynamic && has_dynamic_load(s.dynamic, buffer)))
        return false;
    for (const auto& r : k.reductions)
      if (has_dynamic_load(r.value, buffer)) return false;
  }
  return operand;
}

loop::ExprRef repad_loads(const loop::ExprRef& e, const std::map<int, std::pair<int64_t, int64_t>>& padded,
                          const RangeEnv& env) {
  if (e->kind() == loop::Expr::Kind::load && !e->dynamic()) {
    auto it = padded.find(e->buffer());
    if (it == padded.end()) return e;
    auto [n, np] = it->second;
    SymInt at = simplify(floordiv(e->offset(), SymInt(n)) * SymInt(np) + mod(e->offset(), SymInt(n)), env);
    return loop::Expr::load(e->buffer(), at, e->dtype());
  }
  return loop::map_operands(e, [&](const loop::ExprRef& o) { return repad_loads(o, padded, env); });
}

// Strides of `sizes` with rows of `np` elements: the last dim dense, the others over padded rows.
SymShape padded_strides(const SymShape& sizes, int64_t np) {
  SymShape strides(sizes.size());
  SymInt stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride = stride * (i + 1 == sizes.size() ? SymInt(np) : sizes[i]);
  }
  return strides;
}

SymInt offset_of(const SymShape& strides) {
  SymInt at = 0;
  for (size_t i = 0; i < strides.size(); ++i) at = at + SymInt::symbol(loop::loop_var(static_cast<int>(i))) * strides[i];
  return at;
}

// A product that writes a graph output of unaligned rows writes a temporary instead, copied into
// the output by a kernel after it: the temporary is then padded like any other (GPT-2's
// [8192, 50257] head, returned as the logits: 6.3 ms in an align1 kernel, 0.9 ms padded and
// 0.6 ms for the copy). Outputs keep their dense layout: PyTorch's program may view them as such
// (a padded output was restrided by the adapter, in a slower copy of PyTorch's).
void stage_output_products(loop::Program& p, int64_t min_elements) {
  for (size_t at = 0; at < p.kernels.size(); ++at) {
    auto* call = std::get_if<loop::ExternCall>(&p.kernels[at]);
    if (!call || !loop::is_product(call->kind) || call->output_view) continue;
    const loop::Buffer out = p.buffers[static_cast<size_t>(call->output)];
    int64_t np = 0;
    if (out.role != loop::Buffer::Role::output || !unaligned_rows(out, min_elements, np) || !paddable_uses(p, call->output)) continue;
    loop::Buffer staged = out;
    staged.role = loop::Buffer::Role::temporary;
    staged.name = out.name + "_rows";
    const int temp = static_cast<int>(p.buffers.size());
    p.buffers.push_back(staged);
    const int target = call->output;
    call->output = temp;
    loop::LoopKernel copy;
    copy.name = "copy_" + out.name;
    copy.outer = out.sizes;
    copy.origins = call->origins;
    copy.stores.push_back({target, offset_of(out.strides), loop::Expr::load(temp, offset_of(staged.strides), out.dtype), false});
    p.kernels.insert(p.kernels.begin() + static_cast<std::ptrdiff_t>(at + 1), std::move(copy));
  }
}

// The reach of a product beyond one operand: the dim of the product its elements meet (N for
// A = [M, K], M for B = [K, N]), 0 when unknown. A copy into padded rows costs about four
// bytes of traffic an element (bf16 read and write) while an align1 GEMM runs some 5x slower
// than a padded one, so the copy pays when this dim is above ~100 (H100: 600 dense TFLOPs
// against 3.3 TB/s).
int64_t product_reach(const loop::ExternCall& call, size_t input) {
  const size_t first = call.kind == loop::ExternKind::addmm ? 1 : 0;
  if (input < first || call.inputs.size() < first + 2) return 0;
  const SymShape& a = call.inputs[first].sizes;
  const SymShape& b = call.inputs[first + 1].sizes;
  if (a.size() < 2 || b.size() < 2) return 0;
  auto reach = input == first ? b.back().constant() : a[a.size() - 2].constant();
  return reach ? *reach : 0;
}

constexpr int64_t kPadInputMinReach = 128;

// The dim of operand `input`'s view that is the product's reduction (K): A = [.., M, K]'s last,
// B = [.., K, N]'s second to last.
size_t reduction_dim(const loop::ExternCall& call, size_t input) {
  const size_t first = call.kind == loop::ExternKind::addmm ? 1 : 0;
  const size_t rank = call.inputs[input].sizes.size();
  return input == first ? rank - 1 : rank - 2;
}

loop::ExprRef zero_beyond(const SymInt& x, int64_t n, const loop::ExprRef& value) {
  return loop::Expr::apply(loop::LoopOp::Where, {loop::Expr::apply(loop::LoopOp::Lt, {loop::Expr::index(x), loop::Expr::index(n)}),
                                                 value, loop::Expr::constant(0, value->dtype())});
}

// A kernel before `at` copying view `v` into a dense temporary whose dim `d` (n elements) is
// extended to `np` by zeros; the view of the copy.
loop::View zero_extended_copy(loop::Program& p, size_t at, const loop::View& v, size_t d, int64_t n, int64_t np,
                              const std::string& name, const std::vector<std::string>& origins) {
  loop::Buffer b = p.buffers[static_cast<size_t>(v.buffer)];
  b.role = loop::Buffer::Role::temporary;
  b.name = name;
  b.sizes = v.sizes;
  b.sizes[d] = SymInt(np);
  b.strides = contiguous_strides(b.sizes);
  b.offset = 0;
  const int temp = static_cast<int>(p.buffers.size());
  p.buffers.push_back(b);
  loop::LoopKernel copy;
  copy.name = "pad_" + name;
  copy.outer = b.sizes;
  copy.origins = origins;
  SymInt from = v.offset;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    SymInt x = SymInt::symbol(loop::loop_var(static_cast<int>(i)));
    from = from + (i == d ? min(x, SymInt(n - 1)) : x) * v.strides[i];
  }
  loop::ExprRef value = zero_beyond(SymInt::symbol(loop::loop_var(static_cast<int>(d))), n, loop::Expr::load(v.buffer, from, b.dtype));
  copy.stores.push_back({temp, offset_of(b.strides), value, false});
  p.kernels.insert(p.kernels.begin() + static_cast<std::ptrdiff_t>(at), std::move(copy));
  return loop::View{temp, b.sizes, b.strides, 0};
}

// Graph inputs of unaligned rows read by products: a kernel copies such an input into padded
// rows (zeros past the row's end) before the first product that reads it, and the products read
// the copy (GPT-2's logits gradient arrives from the loss's graph as [8192, 50257] and is read
// by both of the head's backward products, in align1 kernels: 4.5 and 3.8 ms). Loop kernels
// keep reading the input. Where the padded dim is the product's reduction, the product runs over
// the padded length (cuBLASLt has no fast kernel for K = 50257: 4.7 ms), with the other operand
// copied with zero rows to match.
void pad_input_operands(loop::Program& p, int64_t min_elements) {
  const size_t buffers = p.buffers.size();
  for (size_t b = 0; b < buffers; ++b) {
    const loop::Buffer in = p.buffers[b];
    int64_t np = 0;
    if (in.role != loop::Buffer::Role::input || !unaligned_rows(in, min_elements, np)) continue;
    const int64_t n = *in.sizes.back().constant();
    const int buffer = static_cast<int>(b);
    int64_t reach = 0;
    size_t first = p.kernels.size();
    for (size_t at = 0; at < p.kernels.size(); ++at) {
      const auto* call = std::get_if<loop::ExternCall>(&p.kernels[at]);
      if (!call || !loop::is_product(call->kind)) continue;
      for (size_t i = 0; i < call->inputs.size(); ++i) {
        if (call->inputs[i].buffer != buffer || !row_view(call->inputs[i], n)) continue;
        reach += product_reach(*call, i);
        first = std::min(first, at);
      }
    }
    if (reach < kPadInputMinReach) continue;
    // The copy's padding is zeros, so a product may reduce over it.
    const int temp = static_cast<int>(p.buffers.size());
    zero_extended_copy(p, first, loop::View{buffer, in.sizes, in.strides, in.offset}, in.sizes.size() - 1, n, np, in.name + "_rows",
                       std::get<loop::ExternCall>(p.kernels[first]).origins);
    ++first;  // (the products follow the copy)
    std::vector<std::pair<size_t, size_t>> reductions;  // (kernel, operand) whose K is the padded dim
    for (size_t at = first; at < p.kernels.size(); ++at) {
      auto* call = std::get_if<loop::ExternCall>(&p.kernels[at]);
      if (!call || !loop::is_product(call->kind)) continue;
      for (size_t i = 0; i < call->inputs.size(); ++i) {
        loop::View& v = call->inputs[i];
        if (v.buffer != buffer || !row_view(v, n)) continue;
        v = repad_view(v, n, np);
        v.buffer = temp;
        const size_t first_operand = call->kind == loop::ExternKind::addmm ? 1 : 0;
        if (i < first_operand || i > first_operand + 1) continue;
        const size_t d = reduction_dim(*call, i);
        if (v.strides[d] == SymInt(1) && v.sizes[d] == SymInt(n) && v.offset == SymInt(0)) reductions.emplace_back(at, i);
      }
    }
    // The products reducing over the padded dim: K becomes np on both operands. Latest first, so
    // that each copy inserted leaves the earlier products where they are.
    std::sort(reductions.rbegin(), reductions.rend());
    for (auto [at, i] : reductions) {
      auto& call = std::get<loop::ExternCall>(p.kernels[at]);
      const size_t other = i == (call.kind == loop::ExternKind::addmm ? 1u : 0u) ? i + 1 : i - 1;
      const loop::View w = call.inputs[other];
      if (w.buffer == temp) continue;  // both operands read the copy: K as it is
      const size_t wd = reduction_dim(call, other);
      const std::vector<std::string> origins = call.origins;
      loop::View zeros = zero_extended_copy(p, at, w, wd, n, np, p.buffers[static_cast<size_t>(w.buffer)].name + "_k", origins);
      auto& product = std::get<loop::ExternCall>(p.kernels[at + 1]);
      product.inputs[i].sizes[reduction_dim(product, i)] = SymInt(np);
      product.inputs[other] = zeros;
    }
  }
}

// Whether kernel `at` is the only one writing `buffer` (its stores or an extern's output).
bool only_writer(const loop::Program& p, int buffer, size_t at) {
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (k == at) continue;
    if (const auto* call = std::get_if<loop::ExternCall>(&p.kernels[k])) {
      if (call->output == buffer || (call->output_view && call->output_view->buffer == buffer)) return false;
      for (int o : call->more_outputs)
        if (o == buffer) return false;
      continue;
    }
    for (const auto& s : std::get<loop::LoopKernel>(p.kernels[k]).stores)
      if (s.buffer == buffer) return false;
  }
  return true;
}

// A product [M, K] x [K, N] of unaligned M whose A is a transposed view over rows that already
// hold the padding (a copy with zero-extended rows: GPT-2's head weight gradient, A = the logits
// gradient's copy, [50264 columns] read as [50257, 8192] strides [1, 50264]) runs over the
// padded M, into a temporary result of that many rows whose first M are the product (the
// others, zeros, are read by no one): with every extent aligned cuBLASLt offers its sm90 kernels
// (an sm80 CUTLASS kernel for M = 50257: 1.27 ms against Inductor's padded 0.79).
void pad_product_rows(loop::Program& p, int64_t min_elements) {
  for (size_t at = 0; at < p.kernels.size(); ++at) {
    auto* call = std::get_if<loop::ExternCall>(&p.kernels[at]);
    if (!call || call->kind != loop::ExternKind::mm || call->output_view || call->inputs.size() != 2) continue;
    loop::Buffer& out = p.buffers[static_cast<size_t>(call->output)];
    loop::View& a = call->inputs[0];
    const loop::Buffer& rows = p.buffers[static_cast<size_t>(a.buffer)];
    auto sizes = constant_shape(out.sizes);
    auto a_strides = constant_shape(a.strides);
    auto row_sizes = constant_shape(rows.sizes), row_strides = constant_shape(rows.strides);
    if (out.role != loop::Buffer::Role::temporary || out.offset != SymInt(0) || !sizes || sizes->size() != 2 ||
        out.strides.back() != SymInt(1) || !a_strides || (*a_strides)[0] != 1 || !a.offset.constant() || !row_sizes ||
        !row_strides || row_sizes->size() < 2 || row_strides->back() != 1)
      continue;
    const int64_t m = (*sizes)[0], n = (*sizes)[1], per_vector = kRowAlignment / static_cast<int64_t>(dtype_size(rows.dtype));
    const int64_t row = (*row_strides)[row_strides->size() - 2], padded_m = (m + per_vector - 1) / per_vector * per_vector;
    // A's columns step over whole rows of the buffer, and each holds the padded M from A's start.
    if (m % per_vector == 0 || m * n < min_elements || (*a_strides)[1] != row || row < row_sizes->back() ||
        *a.offset.constant() % row + padded_m > row_sizes->back() || !only_writer(p, call->output, at))
      continue;
    a.sizes[0] = SymInt(padded_m);
    out.sizes[0] = SymInt(padded_m);
  }
}

}  // namespace

loop::Program pad_gemm_outputs(const loop::Program& program, int64_t min_elements) {
  loop::Program p = program;
  stage_output_products(p, min_elements);
  pad_input_operands(p, min_elements);
  std::map<int, std::pair<int64_t, int64_t>> padded;  // buffer -> (row length, padded row length)
  for (const auto& kernel : p.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&kernel);
    if (!call || !loop::is_product(call->kind)) continue;
    loop::Buffer& b = p.buffers[static_cast<size_t>(call->output)];
    int64_t np = 0;
    if (!wants_padding(b, min_elements, np) || !paddable_uses(p, call->output)) continue;
    const int64_t n = *b.sizes.back().constant();
    padded[call->output] = {n, np};
    b.strides = padded_strides(b.sizes, np);
  }
  // Operands that loop kernels write (a loss's gradient of GPT-2's logits, [8192, 50257], read by
  // both of the head's backward products: 4.6 and 3.9 ms in align1 kernels).
  std::map<int, std::pair<int64_t, int64_t>> operands;
  for (const auto& kernel : p.kernels) {
    const auto* call = std::get_if<loop::ExternCall>(&kernel);
    if (!call || !loop::is_product(call->kind)) continue;
    for (const auto& v : call->inputs) {
      loop::Buffer& b = p.buffers[static_cast<size_t>(v.buffer)];
      int64_t np = 0;
      if (padded.count(v.buffer) || operands.count(v.buffer) || !wants_padding(b, min_elements, np)) continue;
      const int64_t n = *b.sizes.back().constant();
      if (!paddable_operand(p, v.buffer, n)) continue;
      operands[v.buffer] = {n, np};
      b.strides = padded_strides(b.sizes, np);
    }
  }
  for (auto& kernel : p.kernels) {
    if (auto* call = std::get_if<loop::ExternCall>(&kernel)) {
      each_view(*call, [&](loop::View& v) {
        if (auto it = operands.find(v.buffer); it != operands.end()) v = repad_view(v, it->second.first, it->second.second);
      });
    }
  }
  for (const auto& [b, rows] : operands) padded[b] = rows;
  pad_product_rows(p, min_elements);
  if (padded.empty()) {
    loop::verify(p);
    return p;
  }
  for (auto& kernel : p.kernels) {
    auto* k = std::get_if<loop::LoopKernel>(&kernel);
    if (!k) continue;
    RangeEnv env = kernel_ranges(*k);
    for (auto& r : k->reductions) r.value = repad_loads(r.value, padded, env);
    for (auto& s : k->stores) {
      s.value = repad_loads(s.value, padded, env);
      if (s.dynamic) s.dynamic = repad_loads(s.dynamic, padded, env);
      if (auto it = operands.find(s.buffer); it != operands.end()) {
        auto [n, np] = it->second;
        s.offset = simplify(floordiv(s.offset, SymInt(n)) * SymInt(np) + mod(s.offset, SymInt(n)), env);
      }
    }
  }
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
