// Reductions on CUDA: rows shared by `threads_per_row` threads (looped, or persistent with the
// row's loads in registers), column reductions with rows of threads splitting the reduction,
// and scans with a thread per row.
#include <fmt/ranges.h>

#include <functional>
#include <set>

#include "codegen/cuda/emitter.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

using loop::ReduceKind;

const char* combiner(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return "coil_rt::Sum()";
    case ReduceKind::prod: return "coil_rt::Prod()";
    case ReduceKind::max: return "coil_rt::Max()";
    case ReduceKind::min: return "coil_rt::Min()";
    case ReduceKind::argmax: return "coil_rt::ArgBest<true>()";
    case ReduceKind::argmin: return "coil_rt::ArgBest<false>()";
    default: return "coil_rt::WelfordMerge()";
  }
}

}  // namespace

// Vectorized rows: the loads of unit stride along the row and the inner stores, which move
// `vector` elements at a time.
void CudaEmitter::find_row_vectors() {
  std::vector<loop::ExprRef> loads;
  for (const auto& r : k_.reductions) collect_loads(r.value, loads);
  const size_t in_reductions = loads.size();
  for (const auto& s : k_.stores)
    if (s.inner) collect_loads(s.value, loads);
  // Store-only loads wait for the store pass, but not with fewer rows than SMs (latency-bound).
  const auto rows = product(k_.outer).constant();
  const bool few = config_.persistent && rows && *rows < device_.sm_count;
  for (size_t i = 0; i < loads.size(); ++i) {
    const auto& l = loads[i];
    if (l->dynamic() || !reads_row(l)) continue;
    if (!staged(l)) row_vec_loads_.push_back({l->buffer(), l->offset(), "L" + std::to_string(row_vec_loads_.size()), i < in_reductions || few});
  }
  for (const auto& s : k_.stores)
    if (s.inner) row_vec_stores_.push_back({s.buffer, s.offset, "S" + std::to_string(row_vec_stores_.size())});
}

// Vectorized columns: the reductions' loads of unit stride along the lanes, staged per row.
void CudaEmitter::find_column_vectors() {
  std::vector<loop::ExprRef> loads;
  for (const auto& r : k_.reductions) collect_loads(r.value, loads);
  for (const auto& l : loads) {
    if (l->dynamic() || affine_stride(l->offset(), lane_var()) != 1 || staged(l)) continue;
    row_vec_loads_.push_back({l->buffer(), l->offset(), "L" + std::to_string(row_vec_loads_.size())});
  }
  hook_staged([this](const Staged& l) { return l.name + ".v[" + lane_var() + "]"; });
}

const CudaEmitter::Staged* CudaEmitter::staged(const loop::ExprRef& load) const {
  for (const auto& l : row_vec_loads_)
    if (l.buffer == load->buffer() && l.offset == load->offset()) return &l;
  return nullptr;
}

// Loads of the staged accesses read `name(access)` instead of memory.
void CudaEmitter::hook_staged(std::function<std::string(const Staged&)> name) {
  printer_->load_hook = [this, name = std::move(name)](const loop::ExprRef& e) -> std::string {
    if (e->dynamic()) return "";
    const Staged* l = staged(e);
    return l ? name(*l) : "";
  };
}

// `vector` elements of `buffer` from `offset` into `dest` (a Vec) as one access: the offset is a
// multiple of `vector` (launch.cc's widest_vector) and buffer bases are kBufferAlignment-aligned.
// Rows keep their loads in L2 over the outputs (whole_load); columns load plainly here, since
// either hint made the split column sum slower with the index recomputed each row (bf16
// 16384x8192 on the H100, two inputs taken in turns: evict_last 0.093 -> 0.112 ms; evict-first
// 0.0922 -> 0.1087, and 0.0910 -> 0.0966 with the column combine in rounds). Columns whose loads
// step a constant per row read through pointers instead (cuda_column.cc), evict-first.
void CudaEmitter::vector_load(const std::string& in, const std::string& dest, int buffer, const SymInt& offset) {
  const auto vec = vec_type(buffer, config_.vector);
  if (column_lanes())
    out("{}{} = *reinterpret_cast<const {}*>(b{} + ({}));", in, dest, vec, buffer, idx(offset));
  else
    out("{}{} = {};", in, dest, whole_load(vec, buffer, idx(offset)));
}

// A Vec named after the access, loaded as above.
void CudaEmitter::stage_load(const std::string& in, const Staged& l, const SymInt& offset) {
  out("{}{} {};", in, vec_type(l.buffer, config_.vector), l.name);
  vector_load(in, l.name, l.buffer, offset);
}

std::string CudaEmitter::lane_var() const { return loop::loop_var(static_cast<int>(k_.outer.size())); }

std::string CudaEmitter::acc(size_t i) const {
  return "acc" + std::to_string(i) + (column_lanes() ? "[" + lane_var() + "]" : "");
}

void CudaEmitter::lanes_open(const std::string& indent) {
  out("{}#pragma unroll", indent);
  out("{}for (int {} = 0; {} < {}; ++{}) {{", indent, lane_var(), lane_var(), config_.vector, lane_var());
}

// Opens `for (var = start; active && var < end; var += step)` as a loop with its trip count
// computed first: unrolled, its loads are issued together, where a test of the bound after each
// element would let only one be in flight. Every start is a thread's offset in [0, step), so an
// end known here (`end_value`) that step divides is end / step trips for every thread: a count
// the compiler sees whole, where a count per thread had it reuse one load's registers before the
// next load (a bf16 column sum with 8-byte loads: 2 loads in flight instead of 4, 0.093 -> 0.112 ms).
void CudaEmitter::counted_loop(const std::string& indent, const std::string& var, const std::string& start,
                               const std::string& active, const std::string& end, int64_t step, std::optional<int64_t> end_value) {
  if (end_value && *end_value % step == 0)
    out("{}for (idx_t it = 0, trips = {} ? {} : 0; it < trips; ++it) {{", indent, active, *end_value / step);
  else
    out("{}for (idx_t it = 0, trips = {} && {} < {} ? ({} - ({}) + {}) / {} : 0; it < trips; ++it) {{", indent, active,
        start, end, end, start, step - 1, step);
  out("{}  const idx_t {} = {} + it * {};", indent, var, start, step);
}

// Opens the loop over a row's elements for this thread (r variables decomposed from j); the
// returned indent is inside it. Vectorized rows loop over groups of `vector` elements (jv the
// first), then over the group's elements.
std::string CudaEmitter::row_loop_open(const std::string& indent, const std::string& active) {
  std::string r = idx(product(k_.inner));
  const auto length = product(k_.inner).constant();
  int tpr = config_.threads_per_row;
  const int splits = split_pass_ ? config_.splits : 1;
  const int v = config_.form == CudaConfig::Form::row ? config_.vector : 1;
  std::string in = indent + "  ";
  if (config_.form == CudaConfig::Form::column) {
    // A split takes a contiguous share of the rows (whole rows of threads), not every
    // splits-th one: 40 instead of 44 registers, and a bf16 column sum of 16384x8192 0.1015 ->
    // 0.1002 ms on an H100.
    int64_t share = 0;
    if (splits > 1) {
      COIL_CHECK(length) << "split reductions need static sizes";
      share = (*length + splits - 1) / splits;
      share = (share + config_.block_y - 1) / config_.block_y * config_.block_y;
    }
    const std::string first_row = "static_cast<idx_t>(threadIdx.y)";
    if (column_pointers()) open_column_pointers(indent, splits > 1 ? fmt::format("split * {} + {}", share, first_row) : first_row);
    if (nested_row_loops()) {
      // A loop per reduction dim, the innermost unrolled: no division of a flat index per
      // element, and constant offsets along the innermost dim (a depthwise 7x7 convolution's
      // taps: 0.177 -> 0.107 ms with the predicated sum, ConvNeXt-T's first stage, bf16 batch 32, H100).
      const auto vars = inner_vars();
      std::string linear;
      for (size_t d = 0; d < vars.size(); ++d) {
        const std::string at = indent + std::string(2 * d, ' ');
        const int64_t extent = *k_.inner[d].constant();
        if (d + 1 == vars.size()) out("{}#pragma unroll", at);
        if (d == 0)
          out("{}for (idx_t {} = 0, end0 = {} ? {} : 0; {} < end0; ++{}) {{", at, vars[d], active, extent, vars[d], vars[d]);
        else
          out("{}for (idx_t {} = 0; {} < {}; ++{}) {{", at, vars[d], vars[d], extent, vars[d]);
        linear = d == 0 ? vars[d] : fmt::format("({}) * {} + {}", linear, extent, vars[d]);
      }
      in = indent + std::string(2 * vars.size(), ' ');
      out("{}const idx_t j = {};", in, linear);
    } else {
      out("{}#pragma unroll 4", indent);
      if (splits > 1) {
        const bool even = share * splits == *length;
        std::string end = even ? std::to_string(share) : fmt::format("coil_rt::imin(static_cast<idx_t>({} - split * {}), {})", r, share, share);
        counted_loop(indent, "jq", first_row, active, end, config_.block_y,
                     even ? std::optional<int64_t>(share) : std::nullopt);
        out("{}  const idx_t j = split * {} + jq;", indent, share);
      } else {
        counted_loop(indent, "j", "threadIdx.y", active, r, config_.block_y, length);
      }
    }
  } else if (config_.persistent) {
    out("{}#pragma unroll", indent);
    out("{}for (int e = 0; e < {}; ++e) {{", indent, config_.persistent / v);
    if (v > 1) out("{}  const idx_t jv = (lane + e * {}) * {}, r0 = jv;", indent, tpr, v);
    else out("{}  const idx_t j = lane + e * {};", indent, tpr);
    out("{}  if ({} && {} < {}) {{", indent, active, v > 1 ? "jv" : "j", r);
    in += "  ";
    if (v > 1 && store_pass_)  // what only the stores read is loaded here, not kept for the row
      for (const auto& l : row_vec_loads_)
        if (!l.kept) stage_load(in, l, l.offset);
  } else {
    std::string start = splits > 1 ? fmt::format("split * {} + lane", tpr) : "lane";
    out("{}#pragma unroll {}", indent, v > 1 ? 2 : 4);
    if (v > 1) {
      counted_loop(indent, "g", start, active, fmt::format("{} / {}", r, v), tpr * splits,
                   length && *length % v == 0 ? std::optional<int64_t>(*length / v) : std::nullopt);
      out("{}  const idx_t jv = g * {}, r0 = jv;", indent, v);
      // This group's loads, staged in registers.
      for (const auto& l : row_vec_loads_) stage_load(in, l, l.offset);
      hook_staged([](const Staged& l) { return l.name + ".v[u]"; });
    } else {
      counted_loop(indent, "j", start, active, r, tpr * splits, length);
    }
  }
  if (v > 1) {
    if (store_pass_)
      for (const auto& s : row_vec_stores_)
        out("{}{} {};", in, vec_type(s.buffer, v), s.name);
    out("{}#pragma unroll", in);
    out("{}for (int u = 0; u < {}; ++u) {{", in, v);
    in += "  ";
    out("{}const idx_t j = jv + u;", in);
  }
  if (!nested_row_loops()) decompose("j", inner_vars(), std::vector<SymInt>(k_.inner.begin(), k_.inner.end()), in);
  if (column_lanes()) {
    // This row's loads of the thread's adjacent columns, one access each, then the lanes.
    if (column_pointers()) {
      column_pointer_loads(in);
    } else {
      for (const auto& l : row_vec_loads_) stage_load(in, l, substitute(l.offset, {{lane_var(), SymInt(0)}}));
    }
    lanes_open(in);
    in += "  ";
  }
  return in;
}

void CudaEmitter::row_loop_close(const std::string& indent) {
  const size_t nest = nested_row_loops() ? k_.inner.size() - 1 : 0;  // loops inside the first
  if (column_lanes()) out("{}  {}}}", indent, std::string(2 * nest, ' '));
  const bool row_form = config_.form == CudaConfig::Form::row;
  const int v = row_form ? config_.vector : 1;
  std::string in = indent + (config_.persistent && row_form ? "    " : "  ");
  if (v > 1) {
    out("{}}}", in);
    if (store_pass_)
      for (const auto& s : row_vec_stores_) {
        out("{}*reinterpret_cast<{}*>(b{} + ({})) = {};", in, vec_type(s.buffer, v), s.buffer, idx(s.offset), s.name);
      }
    if (!config_.persistent) printer_->load_hook = nullptr;
  }
  if (config_.persistent && row_form) out("{}  }}", indent);
  for (size_t d = nest; d > 0; --d) out("{}{}}}", indent, std::string(2 * d, ' '));
  out("{}}}", indent);
}

// Persistent rows: every load that depends on the row position is read once into registers
// (c<n>[e] for this thread's e-th element, or c<n>[e].v[u] for the u-th element of its e-th
// group) and the passes read the registers.
void CudaEmitter::cache_row_loads(const std::string& indent, const std::string& active) {
  const int v = config_.vector;
  if (v > 1) {
    const int groups = config_.persistent / v;
    for (const auto& l : row_vec_loads_)
      if (l.kept) out("{}{} c{}[{}];", indent, vec_type(l.buffer, v), l.name, groups);
    out("{}#pragma unroll", indent);
    out("{}for (int e = 0; e < {}; ++e) {{", indent, groups);
    out("{}  const idx_t jv = (lane + e * {}) * {}, r0 = jv;", indent, config_.threads_per_row, v);
    out("{}  if ({} && jv < {}) {{", indent, active, idx(product(k_.inner)));
    for (const auto& l : row_vec_loads_)
      if (l.kept) vector_load(indent + "    ", "c" + l.name + "[e]", l.buffer, l.offset);
    out("{}  }}", indent);
    out("{}}}", indent);
    hook_staged([](const Staged& l) { return (l.kept ? "c" + l.name + "[e]" : l.name) + ".v[u]"; });
    return;
  }
  std::vector<loop::ExprRef> loads, cached;
  for (const auto& r : k_.reductions) collect_loads(r.value, loads);
  for (const auto& s : k_.stores)
    if (s.inner) collect_loads(s.value, loads);
  for (const auto& l : loads)
    if (!l->dynamic() && reads_row(l)) cached.push_back(l);
  for (size_t i = 0; i < cached.size(); ++i)
    out("{}{} c{}[{}];", indent, storage_type(cached[i]->dtype()), i, config_.persistent);
  std::string in = row_loop_open(indent, active);
  for (size_t i = 0; i < cached.size(); ++i) out("{}c{}[e] = b{}[{}];", in, i, cached[i]->buffer(), idx(cached[i]->offset()));
  row_loop_close(indent);
  printer_->load_hook = [cached](const loop::ExprRef& e) -> std::string {
    if (e->dynamic()) return "";
    for (size_t i = 0; i < cached.size(); ++i)
      if (loop::same(cached[i], e)) return "c" + std::to_string(i) + "[e]";
    return "";
  };
}

// At most 32 registers of a thread's values carried between passes.
void CudaEmitter::declare_carried(const std::string& indent) {
  carried_ = carried_values(k_, static_cast<size_t>(32 / config_.persistent));
  const int v = config_.vector;
  for (size_t i = 0; i < carried_.size(); ++i) {
    const char* t = value_type(carried_[i].value->dtype());
    if (v > 1) out("{}{} k{}[{}][{}];", indent, t, i, config_.persistent / v, v);
    else out("{}{} k{}[{}];", indent, t, i, config_.persistent);
  }
}

std::string CudaEmitter::carried_name(size_t i) const { return fmt::format("k{}[e]{}", i, config_.vector > 1 ? "[u]" : ""); }

// In the row loop of the pass starting at reduction step `pass`: keeps the values it carries.
void CudaEmitter::keep_carried(size_t pass, const std::string& indent, std::vector<std::string>& lines) {
  for (size_t c = 0; c < carried_.size(); ++c) {
    if (carried_[c].pass != pass) continue;
    std::string v = printer_->emit(carried_[c].value, lines, indent);
    flush(lines);
    out("{}{} = {};", indent, carried_name(c), v);
  }
}

// After a row's steps [first, end) are combined: the reciprocals later divisions multiply by.
void CudaEmitter::emit_reciprocals(size_t first, size_t end, const std::string& indent) {
  for (size_t i = first; i < end; ++i) {
    if (!reciprocal_slots_.count(static_cast<int>(i))) continue;
    std::string name = "inv" + std::to_string(i);
    out("{}const float {} = 1.0f / {};", indent, name, printer_->reduced.at(static_cast<int>(i)));
    printer_->reciprocals[static_cast<int>(i)] = name;
  }
}

// Folds reduction step i's value into this thread's partial.
void CudaEmitter::accumulate(size_t i, const std::string& in, std::vector<std::string>& lines) {
  const auto& r = k_.reductions[i];
  std::string acc = this->acc(i);
  // A sum of where(c, v, 0) adds v under c: the product and the add fuse, and no select is
  // left per element (a convolution's padded taps: the depthwise 7x7 of ConvNeXt).
  if (r.kind == ReduceKind::sum && r.value->kind() == loop::Expr::Kind::op && r.value->op() == loop::LoopOp::Where) {
    const auto& zero = r.value->operands()[2];
    if (zero->kind() == loop::Expr::Kind::constant && zero->value() == 0) {
      std::string c = printer_->emit(r.value->operands()[0], lines, in);
      std::string added = printer_->emit(r.value->operands()[1], lines, in);
      flush(lines);
      out("{}if ({}) {}", in, c, fold_statement(r.kind, r.acc, acc, added));
      return;
    }
  }
  std::string v = printer_->emit(r.value, lines, in);
  flush(lines);
  switch (r.kind) {
      case ReduceKind::sum:
      case ReduceKind::prod:
      case ReduceKind::max:
      case ReduceKind::min: out("{}{}", in, fold_statement(r.kind, r.acc, acc, v)); break;
    case ReduceKind::argmax:
    case ReduceKind::argmin: {
      // In this thread's (increasing) order the first extreme wins; NaN counts as the extreme.
      const char* cmp = r.kind == ReduceKind::argmax ? ">" : "<";
      out("{}if ({}.i < 0 || (!({}.v != {}.v) && ({} != {} || {} {} {}.v))) {{ {}.v = {}; {}.i = j; }}", in, acc, acc, acc, v, v, v,
          cmp, acc, acc, v, acc);
      break;
    }
    case ReduceKind::welford_mean: out("{}coil_rt::welford_add({}, {});", in, acc, v); break;
    case ReduceKind::welford_m2: break;  // the pair's first step updates both
    case ReduceKind::carry: COIL_CHECK(false) << "carry is a scan step"; break;
  }
}

// Combines the partials of steps [first, end) across the threads of each row; afterwards every
// thread of the row holds the results.
void CudaEmitter::combine(size_t first, size_t end, const std::string& in) {
  if (config_.threads_per_row <= 1) return;
  for (size_t i = first; i < end; ++i) {
    if (k_.reductions[i].kind == ReduceKind::welford_m2) continue;
    out("{}{} = coil_rt::group_allreduce({}, {}, {}, {}, {}, scratch);", in, acc(i), acc(i), combiner_of(i), config_.threads_per_row,
        device_.warp_size, mask_);
  }
}

// Names the combined results of steps [first, end) for the later passes and the stores.
void CudaEmitter::name_reduced(size_t first, size_t end, const std::string& in) {
  for (size_t i = first; i < end; ++i) {
    const auto& r = k_.reductions[i];
    if (r.kind == ReduceKind::welford_m2) continue;
    std::string acc = this->acc(i);
    std::string t = value_type(r.acc);
    if (r.kind == ReduceKind::argmax || r.kind == ReduceKind::argmin) {
      printer_->reduced[static_cast<int>(i)] = acc + ".i";
    } else if (r.kind == ReduceKind::welford_mean && column_lanes()) {
      printer_->reduced[static_cast<int>(i)] = fmt::format("({}.n ? {}.mean : coil_rt::nan<{}>())", acc, acc, t);
      printer_->reduced[static_cast<int>(i) + 1] = acc + ".m2";
    } else if (r.kind == ReduceKind::welford_mean) {
      // The mean of nothing is NaN, as in PyTorch.
      out("{}const {} {}_mean = {}.n ? {}.mean : coil_rt::nan<{}>();", in, t, acc, acc, acc, t);
      printer_->reduced[static_cast<int>(i)] = acc + "_mean";
      printer_->reduced[static_cast<int>(i) + 1] = acc + ".m2";
    } else {
      printer_->reduced[static_cast<int>(i)] = acc;
    }
  }
}

std::string CudaEmitter::combiner_of(size_t i) const { return combiner(k_.reductions[i].kind); }

// Step i's partials in a split kernel's device scratch, as a typed pointer.
std::string CudaEmitter::split_partials(const SplitLayout& layout, size_t i) const {
  return fmt::format("reinterpret_cast<{}*>(W + {})", partial_type(i).first, layout.partial_offset[i]);
}

// The type of reduction step i's partial and its identity.
std::pair<std::string, std::string> CudaEmitter::partial_type(size_t i) const {
  const auto& r = k_.reductions[i];
  std::string t = value_type(r.acc);
  if (r.kind == ReduceKind::argmax || r.kind == ReduceKind::argmin) return {"coil_rt::Arg<" + t + ">", fmt::format("{{{}(0), -1}}", t)};
  if (r.kind == ReduceKind::welford_mean) return {"coil_rt::Welford<" + t + ">", fmt::format("{{{}(0), {}(0), 0}}", t, t)};
  return {t, reduce_init(r.kind, r.acc)};
}

// A split row: this block's partials go to scratch; the last block of the row to arrive merges
// all of them, sets the row's ticket back to zero (the runtime zeroes a stream's scratch once,
// not before every launch) and alone goes on to the stores. Ends with the merged results
// combined across the block, as `combine` leaves them. (Column tiles: column_combine.)
void CudaEmitter::merge_splits(const std::string& in) {
  SplitLayout layout = split_layout(k_, config_);
  const int splits = config_.splits;
  std::vector<size_t> steps;
  for (size_t i = 0; i < k_.reductions.size(); ++i)
    if (layout.partial_offset[i] >= 0) steps.push_back(i);
  out("{}if (lane == 0) {{", in);
  for (size_t i : steps) out("{}  {}[row * {} + split] = {};", in, split_partials(layout, i), splits, acc(i));
  out("{}  __threadfence();", in);
  out("{}}}", in);
  out("{}__syncthreads();", in);
  out("{}if (threadIdx.x == 0) last_split = atomicAdd(reinterpret_cast<unsigned*>(W) + row, 1u) == {}u;", in, splits - 1);
  out("{}__syncthreads();", in);
  out("{}if (!last_split) continue;", in);
  out("{}__threadfence();", in);
  for (size_t i : steps) out("{}{} = {};", in, acc(i), partial_type(i).second);
  out("{}for (int q = lane; q < {}; q += {}) {{", in, splits, config_.threads_per_row);
  for (size_t i : steps) out("{}  {} = {}({}, coil_rt::load_l2({} + row * {} + q));", in, acc(i), combiner_of(i), acc(i), split_partials(layout, i),
                            splits);
  out("{}}}", in);
  out("{}if (threadIdx.x == 0) reinterpret_cast<unsigned*>(W)[row] = 0u;", in);
}

// A persistent row's mean and M2 in two passes over the registers (the sum, then the squared
// deviations from the mean) instead of Welford's per-element division: exact two-pass numerics,
// and the row is still read from memory once.
void CudaEmitter::two_pass_moments(size_t i, const std::string& indent, const std::string& active) {
  const auto& r = k_.reductions[i];
  std::string t = value_type(r.acc), acc = "acc" + std::to_string(i);
  std::string n = idx(product(k_.inner));
  std::vector<std::string> lines;
  auto pass = [&](const std::string& name, const std::function<std::string(const std::string&)>& update) {
    out("{}{} {} = {}(0);", indent, t, name, t);
    std::string in = row_loop_open(indent, active);
    printer_->reset();
    std::string v = printer_->emit(r.value, lines, in);
    flush(lines);
    out("{}{}", in, update("static_cast<" + t + ">(" + v + ")"));
    row_loop_close(indent);
    if (config_.threads_per_row > 1)
      out("{}{} = coil_rt::group_allreduce({}, coil_rt::Sum(), {}, {}, {}, scratch);", indent, name, name, config_.threads_per_row,
          device_.warp_size, mask_);
  };
  pass(acc + "_sum", [&](const std::string& v) { return acc + "_sum += " + v + ";"; });
  out("{}const {} {}_mean = {}_sum / static_cast<{}>({});", indent, t, acc, acc, t, n);
  pass(acc + "_m2", [&](const std::string& v) { return "{ const " + t + " d = " + v + " - " + acc + "_mean; " + acc + "_m2 += d * d; }"; });
  printer_->reduced[static_cast<int>(i)] = acc + "_mean";
  printer_->reduced[static_cast<int>(i) + 1] = acc + "_m2";
}

void CudaEmitter::reduction_passes(const std::string& indent, const std::string& active, bool column_form) {
  std::vector<std::string> lines;
  for (size_t first = 0; first < k_.reductions.size();) {
    size_t end = loop::pass_end(k_, first);
    if (config_.persistent && config_.form == CudaConfig::Form::row && k_.reductions[first].kind == ReduceKind::welford_mean) {
      two_pass_moments(first, indent, active);
      first = end;
      continue;
    }
    for (size_t i = first; i < end; ++i) {
      if (k_.reductions[i].kind == ReduceKind::welford_m2) continue;
      auto [type, init] = partial_type(i);
      if (column_lanes()) {
        out("{}{} acc{}[{}];", indent, type, i, config_.vector);
        out("{}for (int q = 0; q < {}; ++q) acc{}[q] = {};", indent, config_.vector, i, init);
      } else {
        out("{}{} acc{} = {};", indent, type, i, init);
      }
    }
    split_pass_ = config_.splits > 1;
    std::string in = row_loop_open(indent, active);
    printer_->reset();
    for (size_t i = first; i < end; ++i) accumulate(i, in, lines);
    keep_carried(first, in, lines);
    row_loop_close(indent);
    split_pass_ = false;
    for (size_t c = 0; c < carried_.size(); ++c)
      if (carried_[c].pass == first) printer_->carried.emplace_back(carried_[c].value, carried_name(c));
    COIL_CHECK(config_.splits <= 1 || (first == 0 && end == k_.reductions.size())) << "a split reduction has one pass";
    if (column_form) {
      column_combine(first, end, indent);
    } else {
      if (config_.splits > 1) {
        combine(first, end, indent);
        merge_splits(indent);
      }
      combine(first, end, indent);
    }
    name_reduced(first, end, indent);
    if (!column_form) emit_reciprocals(first, end, indent);
    first = end;
  }
  // Per-row results: one thread of the row writes them.
  printer_->reset();
  std::string writer = column_form ? "threadIdx.y == 0" : "lane == 0";
  bool any_outer = std::any_of(k_.stores.begin(), k_.stores.end(), [](const loop::StoreStep& s) { return !s.inner; });
  if (any_outer) {
    out("{}if ({} && {}) {{", indent, active, writer);
    std::string in = indent + "  ";
    if (column_lanes()) {
      lanes_open(in);
      in += "  ";
    }
    for (const auto& s : k_.stores)
      if (!s.inner) store(s, in, lines);
    if (column_lanes()) out("{}  }}", indent);
    out("{}}}", indent);
  }
  bool any_inner = std::any_of(k_.stores.begin(), k_.stores.end(), [](const loop::StoreStep& s) { return s.inner; });
  if (!any_inner) return;
  store_pass_ = true;
  std::string in = row_loop_open(indent, active);
  printer_->reset();
  for (const auto& s : k_.stores) {
    if (!s.inner) continue;
    auto vs = std::find_if(row_vec_stores_.begin(), row_vec_stores_.end(),
                           [&](const Staged& x) { return x.buffer == s.buffer && x.offset == s.offset; });
    if (config_.form != CudaConfig::Form::row || config_.vector == 1 || vs == row_vec_stores_.end()) {
      store(s, in, lines);
      continue;
    }
    std::string value = stored(s.value, p_.buffers[static_cast<size_t>(s.buffer)].dtype, lines, in);
    flush(lines);
    out("{}{}.v[u] = {};", in, vs->name, value);
  }
  row_loop_close(indent);
  store_pass_ = false;
}

void CudaEmitter::row() {
  const int tpr = config_.threads_per_row, rows_per_block = config_.block / tpr;
  reciprocal_slots_ = reciprocal_slots(k_);
  if (tpr > device_.warp_size)
    out("  __shared__ __align__(16) unsigned char scratch[{}];", static_cast<int64_t>(config_.block / device_.warp_size) * kLargestPartial);
  else
    out("  void* const scratch = nullptr;");
  out("  const idx_t rows = {};", idx(product(k_.outer)));
  out("  const int lane = static_cast<int>(threadIdx.x) % {};", tpr);
  if (config_.vector > 1) find_row_vectors();
  if (config_.splits > 1) {
    COIL_CHECK(rows_per_block == 1 && !config_.persistent) << "a split row takes a whole block";
    out("  __shared__ bool last_split;");
    out("  for (idx_t unit = blockIdx.x; unit < rows * {}; unit += gridDim.x) {{", config_.splits);
    out("    const idx_t row = unit / {};", config_.splits);
    out("    const int split = static_cast<int>(unit % {});", config_.splits);
    out("    const bool active = true;");
    decompose("row", outer_vars(k_.outer.size()), std::vector<SymInt>(k_.outer.begin(), k_.outer.end()), "    ");
    reduction_passes("    ", "active", false);
    out("  }}");
    return;
  }
  out("  for (idx_t base = static_cast<idx_t>(blockIdx.x) * {}; base < rows; base += static_cast<idx_t>(gridDim.x) * {}) {{",
      rows_per_block, rows_per_block);
  out("    const idx_t row = base + static_cast<idx_t>(threadIdx.x) / {};", tpr);
  out("    const bool active = row < rows;");
  decompose("row", outer_vars(k_.outer.size()), std::vector<SymInt>(k_.outer.begin(), k_.outer.end()), "    ");
  if (config_.persistent) {
    cache_row_loads("    ", "active");
    declare_carried("    ");
  }
  reduction_passes("    ", "active", false);
  printer_->load_hook = nullptr;
  out("  }}");
}

// A scan: the running values and the inner stores advance together, in order, one thread per
// row.
void CudaEmitter::scan() {
  out("  const idx_t rows = {};", idx(product(k_.outer)));
  out("  for (idx_t row = static_cast<idx_t>(blockIdx.x) * {} + static_cast<idx_t>(threadIdx.x); row < rows; row += static_cast<idx_t>(gridDim.x) * {}) {{",
      config_.block, config_.block);
  decompose("row", outer_vars(k_.outer.size()), std::vector<SymInt>(k_.outer.begin(), k_.outer.end()), "    ");
  for (size_t i = 0; i < k_.reductions.size(); ++i) {
    const auto& r = k_.reductions[i];
    out("    {} acc{} = {};", value_type(r.acc), i, reduce_init(r.kind, r.acc));
  }
  out("    for (idx_t j = 0; j < {}; ++j) {{", idx(product(k_.inner)));
  decompose("j", inner_vars(), std::vector<SymInt>(k_.inner.begin(), k_.inner.end()), "      ");
  std::vector<std::string> lines;
  printer_->reset();
  for (size_t i = 0; i < k_.reductions.size(); ++i) printer_->reduced[static_cast<int>(i)] = "acc" + std::to_string(i);
  for (size_t i = 0; i < k_.reductions.size(); ++i) {
    const auto& r = k_.reductions[i];
    std::string v = printer_->emit(r.value, lines, "      ");
    flush(lines);
    out("      {}", fold_statement(r.kind, r.acc, "acc" + std::to_string(i), v));
  }
  for (const auto& s : k_.stores) store(s, "      ", lines);
  out("    }}");
  out("  }}");
}

}  // namespace coil::codegen
