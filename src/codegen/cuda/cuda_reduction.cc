// Reductions on CUDA: rows shared by `threads_per_row` threads (looped, or persistent with the
// row's loads in registers), column reductions with rows of threads splitting the reduction,
// and scans with a thread per row.
#include "codegen/cuda/emitter.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

using loop::ReduceKind;

// The largest partial a thread carries between threads: Welford's (mean, M2, count) in double.
constexpr size_t kLargestPartial = 24;

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

// Opens the loop over a row's elements for this thread (r variables decomposed from j); the
// returned indent is inside it.
std::string CudaEmitter::row_loop_open(const std::string& indent, const std::string& active) {
  std::string r = idx(product(k_.inner));
  int tpr = config_.threads_per_row;
  if (config_.form == CudaConfig::Form::column) {
    out("{}if ({}) for (idx_t j = threadIdx.y; j < {}; j += {}) {{", indent, active, r, config_.block_y);
  } else if (config_.persistent) {
    out("{}#pragma unroll", indent);
    out("{}for (int e = 0; e < {}; ++e) {{", indent, config_.persistent);
    out("{}  const idx_t j = lane + e * {};", indent, tpr);
    out("{}  if ({} && j < {}) {{", indent, active, r);
  } else {
    out("{}if ({}) for (idx_t j = lane; j < {}; j += {}) {{", indent, active, r, tpr);
  }
  std::string in = indent + (config_.persistent ? "    " : "  ");
  decompose("j", inner_vars(), std::vector<SymInt>(k_.inner.begin(), k_.inner.end()), in);
  return in;
}

void CudaEmitter::row_loop_close(const std::string& indent) {
  if (config_.persistent && config_.form == CudaConfig::Form::row) out("{}  }}", indent);
  out("{}}}", indent);
}

// Persistent rows: every load that depends on the row position is read once into registers
// (c<n>[e] for this thread's e-th element) and the passes read the registers.
void CudaEmitter::cache_row_loads(const std::string& indent, const std::string& active) {
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

// Folds reduction step i's value into this thread's partial.
void CudaEmitter::accumulate(size_t i, const std::string& in, std::vector<std::string>& lines) {
  const auto& r = k_.reductions[i];
  std::string acc = "acc" + std::to_string(i);
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
  }
}

// Combines the partials of steps [first, end) across the threads of each row; afterwards every
// thread of the row holds the results (reduced values for the following passes and stores).
void CudaEmitter::combine(size_t first, size_t end, const std::string& in, bool column_form) {
  for (size_t i = first; i < end; ++i) {
    const auto& r = k_.reductions[i];
    if (r.kind == ReduceKind::welford_m2) continue;
    std::string acc = "acc" + std::to_string(i);
    if (column_form) {
      out("{}{} = coil_rt::column_allreduce({}, {}, scratch);", in, acc, acc, combiner(r.kind));
    } else if (config_.threads_per_row > 1) {
      out("{}{} = coil_rt::group_allreduce({}, {}, {}, {}, {}, scratch);", in, acc, acc, combiner(r.kind), config_.threads_per_row,
          device_.warp_size, mask_);
    }
    std::string t = value_type(r.acc);
    if (r.kind == ReduceKind::argmax || r.kind == ReduceKind::argmin) {
      printer_->reduced[static_cast<int>(i)] = acc + ".i";
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

void CudaEmitter::reduction_passes(const std::string& indent, const std::string& active, bool column_form) {
  std::vector<std::string> lines;
  for (size_t first = 0; first < k_.reductions.size();) {
    size_t end = loop::pass_end(k_, first);
    for (size_t i = first; i < end; ++i) {
      const auto& r = k_.reductions[i];
      std::string t = value_type(r.acc), acc = "acc" + std::to_string(i);
      if (r.kind == ReduceKind::argmax || r.kind == ReduceKind::argmin) out("{}coil_rt::Arg<{}> {} = {{{}(0), -1}};", indent, t, acc, t);
      else if (r.kind == ReduceKind::welford_mean) out("{}coil_rt::Welford<{}> {} = {{{}(0), {}(0), 0}};", indent, t, acc, t, t);
      else if (r.kind != ReduceKind::welford_m2) out("{}{} {} = {};", indent, t, acc, reduce_init(r.kind, r.acc));
    }
    std::string in = row_loop_open(indent, active);
    printer_->reset();
    for (size_t i = first; i < end; ++i) accumulate(i, in, lines);
    row_loop_close(indent);
    combine(first, end, indent, column_form);
    first = end;
  }
  // Per-row results: one thread of the row writes them.
  printer_->reset();
  std::string writer = column_form ? "threadIdx.y == 0" : "lane == 0";
  bool any_outer = std::any_of(k_.stores.begin(), k_.stores.end(), [](const loop::StoreStep& s) { return !s.inner; });
  if (any_outer) {
    out("{}if ({} && {}) {{", indent, active, writer);
    for (const auto& s : k_.stores)
      if (!s.inner) store(s, indent + "  ", lines);
    out("{}}}", indent);
  }
  bool any_inner = std::any_of(k_.stores.begin(), k_.stores.end(), [](const loop::StoreStep& s) { return s.inner; });
  if (!any_inner) return;
  std::string in = row_loop_open(indent, active);
  printer_->reset();
  for (const auto& s : k_.stores)
    if (s.inner) store(s, in, lines);
  row_loop_close(indent);
}

void CudaEmitter::row() {
  const int tpr = config_.threads_per_row, rows_per_block = config_.block / tpr;
  if (tpr > device_.warp_size)
    out("  __shared__ __align__(16) unsigned char scratch[{}];", static_cast<size_t>(config_.block / device_.warp_size) * kLargestPartial);
  else
    out("  void* const scratch = nullptr;");
  out("  const idx_t rows = {};", idx(product(k_.outer)));
  out("  const int lane = static_cast<int>(threadIdx.x) % {};", tpr);
  out("  for (idx_t base = static_cast<idx_t>(blockIdx.x) * {}; base < rows; base += static_cast<idx_t>(gridDim.x) * {}) {{",
      rows_per_block, rows_per_block);
  out("    const idx_t row = base + static_cast<idx_t>(threadIdx.x) / {};", tpr);
  out("    const bool active = row < rows;");
  decompose("row", outer_vars(k_.outer.size()), std::vector<SymInt>(k_.outer.begin(), k_.outer.end()), "    ");
  if (config_.persistent) cache_row_loads("    ", "active");
  reduction_passes("    ", "active", false);
  printer_->load_hook = nullptr;
  out("  }}");
}

void CudaEmitter::column() {
  const size_t m = k_.outer.size();
  out("  __shared__ __align__(16) unsigned char scratch[{}];", static_cast<size_t>(config_.block * config_.block_y) * kLargestPartial);
  std::vector<std::string> vars = outer_vars(m);
  std::string last = vars.back();
  vars.back() = "tile_x";
  std::vector<SymInt> extents(k_.outer.begin(), k_.outer.end());
  extents.back() = floordiv(extents.back() + SymInt(config_.block - 1), SymInt(config_.block));
  out("  const idx_t tiles = {};", idx(product(extents)));
  out("  for (idx_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{");
  decompose("tile", vars, extents, "    ");
  out("    const idx_t {} = tile_x * {} + static_cast<idx_t>(threadIdx.x);", last, config_.block);
  out("    const bool active = {} < {};", last, idx(k_.outer.back()));
  reduction_passes("    ", "active", true);
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
    COIL_CHECK(r.kind == ReduceKind::sum || r.kind == ReduceKind::prod) << "unsupported scan " << reduce_name(r.kind);
    out("    {} acc{} = {};", value_type(r.acc), i, reduce_init(r.kind, r.acc));
  }
  out("    for (idx_t j = 0; j < {}; ++j) {{", idx(product(k_.inner)));
  decompose("j", inner_vars(), std::vector<SymInt>(k_.inner.begin(), k_.inner.end()), "      ");
  std::vector<std::string> lines;
  printer_->reset();
  for (size_t i = 0; i < k_.reductions.size(); ++i) {
    std::string v = printer_->emit(k_.reductions[i].value, lines, "      ");
    flush(lines);
    out("      acc{} {}= {};", i, k_.reductions[i].kind == ReduceKind::sum ? "+" : "*", v);
    printer_->reduced[static_cast<int>(i)] = "acc" + std::to_string(i);
  }
  for (const auto& s : k_.stores) store(s, "      ", lines);
  out("    }}");
  out("  }}");
}

}  // namespace coil::codegen
