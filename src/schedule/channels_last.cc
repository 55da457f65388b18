#include "schedule/channels_last.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "arith/simplify.h"
#include "codegen/kernel_shape.h"
#include "loop/conv_params.h"
#include "coil/graph.h"
#include "schedule/simplify_indices.h"
#include "support/check.h"

namespace coil::schedule {

namespace {

using loop::Expr;
using loop::ExprRef;

// A temporary [N, C, spatial...], or an output whose layout is the compiler's (a saved
// activation: Buffer::any_layout), that is row-major (to be moved) or already channels-last (the
// graph declared that layout: PyTorch gives a convolution of a channels-last input one).
bool planned_temporary(const loop::Buffer& b) {
  const bool free = b.role == loop::Buffer::Role::temporary || (b.role == loop::Buffer::Role::output && b.any_layout);
  return free && (b.sizes.size() == 4 || b.sizes.size() == 5) && b.offset == SymInt(0) &&
         (b.strides == contiguous_strides(b.sizes) || b.strides == channels_last_strides(b.sizes));
}

bool whole(const loop::View& v, const loop::Buffer& b) { return v.sizes == b.sizes && v.strides == b.strides && v.offset == b.offset; }

void dynamic_loads(const ExprRef& e, std::set<int>& out) {
  if (e->kind() == Expr::Kind::load && e->dynamic()) out.insert(e->buffer());
  for (const auto& o : e->operands()) dynamic_loads(o, out);
}

// sum_d ((o // from_d) % size_d) * to_d, simplified with the kernel's ranges (the first dim
// needs no modulo: o is within the buffer).
SymInt relaid(const SymInt& o, const loop::Buffer& b, const SymShape& from, const RangeEnv& env) {
  SymInt out = 0;
  for (size_t d = 0; d < b.sizes.size(); ++d) {
    SymInt digit = floordiv(o, from[d]);
    if (d > 0) digit = mod(digit, b.sizes[d]);
    out = out + digit * b.strides[d];
  }
  return simplify(out, env);
}

ExprRef relay_loads(const ExprRef& e, const loop::Program& p, const std::map<int, SymShape>& from, const RangeEnv& env) {
  if (e->kind() == Expr::Kind::load && !e->dynamic()) {
    auto it = from.find(e->buffer());
    if (it == from.end()) return e;
    return Expr::load(e->buffer(), relaid(e->offset(), p.buffers[static_cast<size_t>(e->buffer())], it->second, env), e->dtype());
  }
  return loop::map_operands(e, [&](const ExprRef& o) { return relay_loads(o, p, from, env); });
}

// `e` with its loads of buffer `from` reading the same elements of `to`, a copy in other strides.
ExprRef read_from_copy(const ExprRef& e, const loop::Program& p, int from, int to, const RangeEnv& env) {
  if (e->kind() == Expr::Kind::load && !e->dynamic() && e->buffer() == from)
    return Expr::load(to, relaid(e->offset(), p.buffers[static_cast<size_t>(to)], p.buffers[static_cast<size_t>(from)].strides, env), e->dtype());
  return loop::map_operands(e, [&](const ExprRef& o) { return read_from_copy(o, p, from, to, env); });
}

int add_temp(loop::Program& p, const std::string& name, DType dtype, const SymShape& sizes) {
  loop::Buffer b;
  b.name = name;
  b.role = loop::Buffer::Role::temporary;
  b.dtype = dtype;
  b.sizes = sizes;
  b.strides = channels_last_strides(sizes);
  p.buffers.push_back(std::move(b));
  return static_cast<int>(p.buffers.size()) - 1;
}

// A pointwise kernel copying view `from` into view `to` of the same sizes, or, where `to` has
// more channels (dim 1: an input padded to whole vectors), zeros in the channels past `from`'s.
loop::LoopKernel copy(const loop::Program& p, const std::string& name, const loop::View& from, const loop::View& to,
                      const std::vector<std::string>& origins) {
  loop::LoopKernel k;
  k.name = name;
  k.origins = origins;
  k.outer = to.sizes;
  std::vector<SymInt> index;
  for (size_t d = 0; d < to.sizes.size(); ++d) index.push_back(SymInt::symbol(loop::loop_var(static_cast<int>(d))));
  const DType dtype = p.buffers[static_cast<size_t>(from.buffer)].dtype;
  ExprRef value;
  if (to.sizes[1] == from.sizes[1]) {
    value = Expr::load(from.buffer, loop::view_offset(from, index), dtype);
  } else {
    std::vector<SymInt> clamped = index;  // loads stay inside `from`; the padding channels read zeros
    clamped[1] = min(index[1], from.sizes[1] - 1);
    value = Expr::apply(loop::LoopOp::Where, {Expr::apply(loop::LoopOp::Lt, {Expr::index(index[1]), Expr::index(from.sizes[1])}),
                                              Expr::load(from.buffer, loop::view_offset(from, clamped), dtype),
                                              Expr::constant(0, dtype)});
  }
  k.stores.push_back({to.buffer, loop::view_offset(to, index), value, false});
  return k;
}

loop::View whole_view(const loop::Program& p, int buffer) {
  const loop::Buffer& b = p.buffers[static_cast<size_t>(buffer)];
  return {buffer, b.sizes, b.strides, b.offset};
}

// The kernel's loads at static offsets (reductions' and stores' values).
std::vector<ExprRef> kernel_loads(const loop::LoopKernel& k) {
  std::vector<ExprRef> loads, out;
  for (const auto& r : k.reductions) codegen::collect_loads(r.value, loads);
  for (const auto& s : k.stores) codegen::collect_loads(s.value, loads);
  for (const auto& l : loads)
    if (!l->dynamic()) out.push_back(l);
  return out;
}

// A kernel over [N, C, spatial...] that reads something channels-last (unit stride along C) and
// nothing row-major (unit stride along the last spatial dim): what it writes of those sizes takes
// the layout of what it reads, as PyTorch's kernels give their outputs their inputs' memory
// format (a depthwise convolution, a coil loop kernel, of a channels-last activation).
bool reads_channels_last(const loop::LoopKernel& k) {
  const size_t rank = k.outer.size();
  if (rank != 4 && rank != 5) return false;
  const std::string c = loop::loop_var(1), w = loop::loop_var(static_cast<int>(rank) - 1);
  bool channels = false;
  for (const auto& l : kernel_loads(k)) {
    if (codegen::affine_stride(l->offset(), w) == 1) return false;
    channels = channels || codegen::affine_stride(l->offset(), c) == 1;
  }
  return channels;
}

// The strides of `sizes` with dim 0 innermost and the others row-major outside it: a weight
// [C_out, C_in / groups, kh, kw] read per output channel by a kernel iterating channels innermost.
SymShape dim0_innermost_strides(const SymShape& sizes) {
  SymShape strides(sizes.size());
  strides[0] = 1;
  SymInt stride = sizes[0];
  for (size_t d = sizes.size(); d-- > 1;) {
    strides[d] = stride;
    stride = stride * sizes[d];
  }
  return strides;
}

// A kernel whose outer nest is [N, C, spatial...] and that touches a channels-last buffer of
// those sizes iterates with C innermost: [N, spatial..., C], so that neighbouring threads (and
// vector lanes) take neighbouring channels, which are neighbours in memory (a pointwise kernel,
// or a reduction per output element such as a pooling window; the outer points are independent,
// so their order is free). Other kernels keep their nests.
bool channels_innermost(loop::LoopKernel& k, const loop::Program& p, const std::set<int>& channels_last) {
  const size_t rank = k.outer.size();
  if (rank != 4 && rank != 5) return false;
  for (const auto& s : k.stores)
    if (s.dynamic) return false;  // its iterations run in order: later writes win
  loop::Access a = loop::access(loop::Kernel(k));
  bool touches = false;
  for (const auto* set : {&a.reads, &a.writes})
    for (int b : *set) touches = touches || (channels_last.count(b) && p.buffers[static_cast<size_t>(b)].sizes == k.outer);
  // A store that lies channels-last by itself (a temporary the graph declared so, which a
  // product also reads: a batch norm's input gradient beside a 1x1 convolution's weight gradient).
  const std::string c = loop::loop_var(1), w = loop::loop_var(static_cast<int>(rank) - 1);
  for (const auto& s : k.stores)
    touches = touches || (codegen::affine_stride(s.offset, c) == 1 && codegen::affine_stride(s.offset, w) != 1);
  if (!touches) return false;
  std::vector<size_t> order = {0};
  for (size_t d = 2; d < rank; ++d) order.push_back(d);
  order.push_back(1);
  std::map<std::string, SymInt> rename;
  SymShape outer(rank);
  for (size_t i = 0; i < rank; ++i) {
    outer[i] = k.outer[order[i]];
    rename[loop::loop_var(static_cast<int>(order[i]))] = SymInt::symbol(loop::loop_var(static_cast<int>(i)));
  }
  k.outer = outer;
  for (auto& r : k.reductions) r.value = loop::substitute(r.value, rename);
  for (auto& s : k.stores) {
    s.offset = substitute(s.offset, rename);
    s.value = loop::substitute(s.value, rename);
    if (s.dynamic) s.dynamic = loop::substitute(s.dynamic, rename);
  }
  return true;
}

// Small operands a reduction iterating channels innermost reads across the channels, one
// channel's values contiguous (a depthwise convolution's weight [C, 1, kh, kw] read at
// c * kh * kw + ...): neighbouring threads would read addresses a channel's size apart, so a copy
// with dim 0 innermost replaces them (made once per run before the first kernel reading it).
constexpr int64_t kCopiedOperandElements = int64_t{1} << 20;

std::vector<int> channel_strided_operands(const loop::LoopKernel& k, const loop::Program& p) {
  std::vector<int> out;
  if (k.reductions.empty()) return out;
  const std::string c = loop::loop_var(static_cast<int>(k.outer.size()) - 1);
  for (const auto& l : kernel_loads(k)) {
    const loop::Buffer& b = p.buffers[static_cast<size_t>(l->buffer())];
    const auto n = product(b.sizes).constant();
    if (b.role == loop::Buffer::Role::temporary || b.role == loop::Buffer::Role::output || b.sizes.size() < 2 || !n ||
        *n > kCopiedOperandElements || b.sizes[0] != k.outer.back() || b.offset != SymInt(0) ||
        b.strides != contiguous_strides(b.sizes) || b.strides[0] == SymInt(1))
      continue;
    // Dim 0 follows the channel: offset steps a whole dim-0 stride per channel.
    if (codegen::affine_stride(l->offset(), c) != b.strides[0].constant()) continue;
    if (std::find(out.begin(), out.end(), l->buffer()) == out.end()) out.push_back(l->buffer());
  }
  return out;
}

// Whether a view's elements lie as channels-last ones would: its strides are those, but for dims
// of size 1, which address nothing.
bool lies_channels_last(const loop::View& v) {
  const SymShape want = channels_last_strides(v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] != SymInt(1) && v.strides[d] != want[d]) return false;
  return true;
}

// The channels a convolution's copied input is padded to (aligned_channels), or nothing: its
// channels fill whole vectors already, it has groups, or its input is a temporary that moves
// (written by the kernels before it, not copied).
std::optional<int64_t> padded_channels(const loop::ExternCall& call, const loop::Program& p, const std::set<int>& chosen) {
  const auto c = call.inputs[0].sizes[1].constant();
  const DType dtype = p.buffers[static_cast<size_t>(call.inputs[0].buffer)].dtype;
  if (loop::conv_params(call.params).groups != 1 || chosen.count(call.inputs[0].buffer) || !c || dtype_size(dtype) > 4) return std::nullopt;
  const int64_t aligned = aligned_channels(*c, dtype);
  if (aligned == *c) return std::nullopt;
  return aligned;
}

std::string view_key(const loop::View& v) {
  std::string key = fmt::format("{}@{}:", v.buffer, v.offset.str());
  for (size_t d = 0; d < v.sizes.size(); ++d) key += fmt::format(" {}/{}", v.sizes[d].str(), v.strides[d].str());
  return key;
}

}  // namespace

int64_t aligned_channels(int64_t channels, DType dtype) {
  const int64_t per_vector = 16 / static_cast<int64_t>(dtype_size(dtype));
  return (channels + per_vector - 1) / per_vector * per_vector;
}

SymShape channels_last_strides(const SymShape& sizes) {
  SymShape strides(sizes.size());
  SymInt stride = sizes[1];
  strides[1] = 1;
  for (size_t d = sizes.size(); d-- > 2;) {
    strides[d] = stride;
    stride = stride * sizes[d];
  }
  strides[0] = stride;
  return strides;
}

loop::Program convolutions_channels_last(
    const loop::Program& program, const std::function<bool(const loop::ExternCall&, const loop::Program&)>& library_takes) {
  std::set<size_t> convs;
  for (size_t k = 0; k < program.kernels.size(); ++k)
    if (const auto* c = std::get_if<loop::ExternCall>(&program.kernels[k]);
        c && c->kind == loop::ExternKind::convolution && library_takes(*c, program))
      convs.insert(k);
  if (convs.empty()) return program;

  // Buffers that may change layout: row-major temporaries accessed at static offsets, which
  // library calls touch only as a whole convolution input or output.
  std::set<int> movable;
  for (size_t b = 0; b < program.buffers.size(); ++b)
    if (planned_temporary(program.buffers[b])) movable.insert(static_cast<int>(b));
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    if (const auto* c = std::get_if<loop::ExternCall>(&program.kernels[k])) {
      const bool conv = convs.count(k) > 0;
      for (size_t i = 0; i < c->inputs.size(); ++i)
        if (!(conv && i == 0 && whole(c->inputs[i], program.buffers[static_cast<size_t>(c->inputs[i].buffer)])))
          movable.erase(c->inputs[i].buffer);
      if (!conv || c->output_view) movable.erase(c->output);
      if (c->residual) movable.erase(c->residual->buffer);
      continue;
    }
    const auto& lk = std::get<loop::LoopKernel>(program.kernels[k]);
    std::set<int> dynamic;
    for (const auto& r : lk.reductions) dynamic_loads(r.value, dynamic);
    for (const auto& s : lk.stores) {
      dynamic_loads(s.value, dynamic);
      if (s.dynamic) dynamic_loads(s.dynamic, dynamic), dynamic.insert(s.buffer);
    }
    for (int b : dynamic) movable.erase(b);
  }

  // The convolutions' own temporaries, then every movable buffer of the same sizes that a loop
  // kernel touching a chosen one touches.
  std::set<int> chosen;
  for (size_t k : convs) {
    const auto& c = std::get<loop::ExternCall>(program.kernels[k]);
    for (int b : {c.inputs[0].buffer, c.output})
      if (movable.count(b)) chosen.insert(b);
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& kernel : program.kernels) {
      if (!std::holds_alternative<loop::LoopKernel>(kernel)) continue;
      loop::Access a = loop::access(kernel);
      const auto& lk = std::get<loop::LoopKernel>(kernel);
      if (reads_channels_last(lk))
        for (int b : a.writes)
          if (!chosen.count(b) && movable.count(b) && program.buffers[static_cast<size_t>(b)].sizes == lk.outer) {
            chosen.insert(b);
            grew = true;
          }
      std::set<int> touched = a.reads;
      touched.insert(a.writes.begin(), a.writes.end());
      for (int b : touched) {
        if (chosen.count(b) || !movable.count(b)) continue;
        for (int c : touched)
          if (chosen.count(c) && program.buffers[static_cast<size_t>(c)].sizes == program.buffers[static_cast<size_t>(b)].sizes) {
            chosen.insert(b);
            grew = true;
            break;
          }
      }
    }
  }

  loop::Program p = program;
  std::map<int, SymShape> from;  // chosen buffer that moves -> its row-major strides
  for (int b : chosen) {
    loop::Buffer& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.strides == channels_last_strides(buf.sizes)) continue;
    from[b] = buf.strides;
    buf.strides = channels_last_strides(buf.sizes);
  }
  std::vector<loop::Kernel> kernels;
  std::map<int, int> copied;  // operand -> its copy with dim 0 innermost
  std::map<std::string, std::pair<int, int>> copies;  // convolution operand view -> (its buffer, its channels-last copy)
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const std::set<int> written = loop::access(program.kernels[k]).writes;
    std::erase_if(copies, [&](const auto& entry) { return written.count(entry.second.first) > 0; });
    if (auto* lk = std::get_if<loop::LoopKernel>(&program.kernels[k])) {
      loop::LoopKernel out = *lk;
      const RangeEnv env = kernel_ranges(out);
      for (auto& r : out.reductions) r.value = relay_loads(r.value, p, from, env);
      for (auto& s : out.stores) {
        s.value = relay_loads(s.value, p, from, env);
        if (auto it = from.find(s.buffer); it != from.end()) s.offset = relaid(s.offset, p.buffers[static_cast<size_t>(s.buffer)], it->second, env);
      }
      if (channels_innermost(out, p, chosen)) {
        for (int b : channel_strided_operands(out, p)) {
          auto [it, fresh] = copied.try_emplace(b, -1);
          if (fresh) {  // the copy, made before its first reader
            const loop::Buffer from_buffer = p.buffers[static_cast<size_t>(b)];  // a copy: add_temp grows p.buffers
            it->second = add_temp(p, from_buffer.name + "_channels_inner", from_buffer.dtype, from_buffer.sizes);
            p.buffers[static_cast<size_t>(it->second)].strides = dim0_innermost_strides(from_buffer.sizes);
            kernels.push_back(copy(p, p.buffers[static_cast<size_t>(it->second)].name, whole_view(p, b), whole_view(p, it->second), lk->origins));
          }
          const RangeEnv ranges = kernel_ranges(out);
          for (auto& r : out.reductions) r.value = read_from_copy(r.value, p, b, it->second, ranges);
          for (auto& st : out.stores) st.value = read_from_copy(st.value, p, b, it->second, ranges);
        }
      }
      kernels.push_back(std::move(out));
      continue;
    }
    loop::ExternCall call = std::get<loop::ExternCall>(program.kernels[k]);
    if (!convs.count(k)) {
      kernels.push_back(std::move(call));
      continue;
    }
    // Operands that did not move are copied into channels-last temporaries first, once for all
    // the convolutions reading them before they change; one whose elements already lie
    // channels-last (a 1x1 weight [K, C, 1, 1]) is read in place. A copied input whose channels
    // fill no whole 16-byte vector gets zero channels up to the next one, and the weight zero
    // taps for them.
    const std::optional<int64_t> padded = padded_channels(call, p, chosen);
    for (size_t i = 0; i < 2; ++i) {
      loop::View& v = call.inputs[i];
      if (chosen.count(v.buffer)) {
        v = whole_view(p, v.buffer);
        continue;
      }
      if (!padded && lies_channels_last(v)) {
        v.strides = channels_last_strides(v.sizes);
        continue;
      }
      const std::string key = view_key(v) + (padded ? fmt::format(" padded to {}", *padded) : "");
      if (auto it = copies.find(key); it != copies.end()) {
        v = whole_view(p, it->second.second);
        continue;
      }
      SymShape sizes = v.sizes;
      if (padded) sizes[1] = *padded;
      const int t = add_temp(p, call.name + (i == 0 ? "_input_nhwc" : "_weight_nhwc"), p.buffers[static_cast<size_t>(v.buffer)].dtype, sizes);
      const std::string& name = p.buffers[static_cast<size_t>(t)].name;
      loop::LoopKernel in = copy(p, name, v, whole_view(p, t), call.origins);
      channels_innermost(in, p, {t});
      kernels.push_back(std::move(in));
      copies[key] = {v.buffer, t};
      v = whole_view(p, t);
    }
    if (chosen.count(call.output)) {
      kernels.push_back(std::move(call));
      continue;
    }
    const loop::View target = call.output_view ? *call.output_view : whole_view(p, call.output);
    const int t = add_temp(p, call.name + "_nhwc", p.buffers[static_cast<size_t>(call.output)].dtype, target.sizes);
    call.output = t;
    call.output_view.reset();
    const std::string name = call.name + "_laid_out";
    const auto origins = call.origins;
    kernels.push_back(std::move(call));
    loop::LoopKernel out = copy(p, name, whole_view(p, t), target, origins);
    channels_innermost(out, p, {t});
    kernels.push_back(std::move(out));
  }
  p.kernels = std::move(kernels);
  for (const auto& kernel : p.kernels)
    if (const auto* c = std::get_if<loop::ExternCall>(&kernel); c && c->kind == loop::ExternKind::convolution && !library_takes(*c, p))
      return program;
  loop::verify(p);
  return p;
}

}  // namespace coil::schedule
