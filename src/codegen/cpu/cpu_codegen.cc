#include "codegen/cpu/cpu_codegen.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <set>

#include "codegen/c_printer.h"
#include "codegen/kernel_shape.h"
#include "support/check.h"

namespace coil::codegen {

extern const char* const cpu_prelude;
extern const char* const cpu_special;

namespace {

using loop::ReduceKind;

// Work below this many inner iterations per kernel runs on one thread.
constexpr int64_t kParallelThreshold = 32768;

std::string store_value(const std::string& v, DType t) {
  if (t == DType::f16) return "coil_rt::f32_to_f16(" + v + ")";
  if (t == DType::bf16) return "coil_rt::f32_to_bf16(" + v + ")";
  return v;
}

class KernelEmitter {
 public:
  KernelEmitter(const loop::Program& p, const loop::LoopKernel& k, const std::vector<std::string>& symbols)
      : p_(p), k_(k), symbols_(symbols) {
    std::vector<std::string> names;
    for (size_t i = 0; i < p.buffers.size(); ++i) names.push_back("b" + std::to_string(i));
    printer_ = std::make_unique<ExprPrinter>(names);
  }

  std::string emit() {
    loop::Access access = loop::access(k_);
    std::set<int> buffers = access.reads;
    buffers.insert(access.writes.begin(), access.writes.end());
    std::vector<std::string> used = kernel_symbols(k_);
    out("// computes %{}", fmt::join(k_.origins, ", %"));
    out("extern \"C\" void {}(void* const* B, const int64_t* S, int64_t* E) {{", k_.name);
    out("  (void)E;");
    for (int b : buffers) {
      const loop::Buffer& buf = p_.buffers[static_cast<size_t>(b)];
      out("  {}* __restrict__ b{} = static_cast<{}*>(B[{}]);", storage_type(buf.dtype), b, storage_type(buf.dtype), b);
    }
    for (size_t i = 0; i < symbols_.size(); ++i)
      if (std::find(used.begin(), used.end(), symbols_[i]) != used.end())
        out("  const int64_t {} = S[{}];", symbol_name(symbols_[i]), i);
    std::string work = index_expr(product(k_.outer) * (k_.inner.empty() ? SymInt(1) : product(k_.inner)));
    if (column_reduction() || transposing()) {
      column_reduction() ? column_body(work) : tiled_body(work);
      out("}}");
      return text_;
    }
    std::string indent = "  ";
    if (!k_.outer.empty() && !loop::has_dynamic_stores(k_)) {
      // A pointwise kernel keeps its innermost loop out of the collapsed nest, so that it stays a
      // plain loop the compiler vectorizes.
      size_t parallel = k_.inner.empty() && k_.outer.size() > 1 ? k_.outer.size() - 1 : k_.outer.size();
      std::string collapse = parallel > 1 ? fmt::format(" collapse({})", parallel) : "";
      out("  #pragma omp parallel for{} if({} >= {})", collapse, work, kParallelThreshold);
    }
    std::optional<size_t> split;
    if (loop::has_dynamic_stores(k_) && !k_.free_dims.empty()) {
      // A scatter: the range of its last free dim split in parts that run in parallel, each over
      // the whole nest in order (its stores reach elements no other part does).
      split = k_.free_dims.back();
      const std::string extent = index_expr(k_.outer[*split]);
      out("  const int64_t parts = {} < 64 ? {} : 64;", extent, extent);
      out("  #pragma omp parallel for if({} >= {})", work, kParallelThreshold);
      out("  for (int64_t part = 0; part < parts; ++part) {{");
      out("    const int64_t lo = {} * part / parts, hi = {} * (part + 1) / parts;", extent, extent);
      indent += "  ";
    }
    open_outer(k_.outer.size(), indent, split);
    body(indent);
    for (size_t d = k_.outer.size(); d-- > 0;) {
      indent.resize(indent.size() - 2);
      out("{}}}", indent);
    }
    if (split) out("  }}");
    out("}}");
    return text_;
  }

 private:
  template <typename... Args>
  void out(fmt::format_string<Args...> f, Args&&... args) {
    text_ += fmt::format(f, std::forward<Args>(args)...) + "\n";
  }

  // `omp simd` over the inner nest lets the compiler keep one partial result per vector lane
  // (it may then reassociate, as PyTorch's vectorized reductions do). NaN-propagating max/min
  // use the reductions the prelude declares.
  std::optional<std::string> simd_reduction(const loop::ReduceStep& r, const std::string& acc) const {
    if (r.acc == DType::b8 || r.acc == DType::f16 || r.acc == DType::bf16) return std::nullopt;
    std::string op;
    switch (r.kind) {
      case ReduceKind::sum: op = "+"; break;
      case ReduceKind::prod: op = "*"; break;
      case ReduceKind::max: op = is_float(r.acc) ? fmt::format("coil_max_{}", value_type(r.acc)) : "max"; break;
      case ReduceKind::min: op = is_float(r.acc) ? fmt::format("coil_min_{}", value_type(r.acc)) : "min"; break;
      default: return std::nullopt;
    }
    return fmt::format("reduction({}:{})", op, acc);
  }

  // A reduction whose rows run across memory (a sum over a leading dim): the loads have unit
  // stride along the last outer variable and not along the last inner one. Such a kernel is
  // emitted with the loops interchanged (column_body).
  bool column_reduction() const {
    return is_column_reduction(k_) &&
           std::all_of(k_.reductions.begin(), k_.reductions.end(), [&](const loop::ReduceStep& r) { return simd_reduction(r, "acc").has_value(); });
  }

  // A pointwise kernel that reads (or writes) some operand transposed: unit stride along the
  // second-to-last loop variable and not the last. Such a kernel runs in square tiles, so both
  // the contiguous and the transposed accesses stay within a few cache lines (tiled_body).
  bool transposing() const { return is_transposing(k_); }

  // The last two loops in kTile x kTile blocks; the blocks (and any loops outside them) run in
  // parallel. Within a block the loop along which the stores are contiguous runs innermost: a
  // kernel writing every result transposed (a channels-last result laid out NCHW again) writes
  // its cache lines in order and reads across the block (2 cores, bf16 [8, 240, 56, 56] NHWC ->
  // NCHW and its depthwise convolution: 12.6 -> 6.4 ms).
  void tiled_body(const std::string& work) {
    constexpr int kTile = 32;
    size_t m = k_.outer.size();
    out("  #pragma omp parallel for collapse({}) if({} >= {})", m, work, kParallelThreshold);
    std::string indent = "  ";
    open_outer(m - 2, indent);
    for (size_t d = m - 2; d < m; ++d) {
      out("{}for (int64_t {}b = 0; {}b < {}; {}b += {}) {{", indent, loop::loop_var(static_cast<int>(d)),
          loop::loop_var(static_cast<int>(d)), index_expr(k_.outer[d]), loop::loop_var(static_cast<int>(d)), kTile);
      indent += "  ";
    }
    const bool writes_across = transposed_accesses(k_).stores.size() == k_.stores.size();
    for (size_t d : writes_across ? std::vector<size_t>{m - 1, m - 2} : std::vector<size_t>{m - 2, m - 1}) {
      std::string v = loop::loop_var(static_cast<int>(d));
      out("{}for (int64_t {} = {}b; {} < coil_rt::imin({}, {}b + {}); ++{}) {{", indent, v, v, v, index_expr(k_.outer[d]), v, kTile, v);
      indent += "  ";
    }
    std::vector<std::string> lines;
    printer_->reset();
    for (const auto& s : k_.stores) store(s, indent, lines);
    while (indent.size() > 2) {
      indent.resize(indent.size() - 2);
      out("{}}}", indent);
    }
  }

  // Interchanged loops for a column reduction: the last outer dim goes in tiles of kTile
  // columns, each column with its own accumulator; the reduction loops run outside and a
  // vectorized loop over the tile's columns inside, so every load is contiguous.
  void column_body(const std::string& work) {
    constexpr int kTile = 64;
    size_t m = k_.outer.size();
    std::string x = loop::loop_var(static_cast<int>(m) - 1), extent = index_expr(k_.outer[m - 1]);
    std::string collapse = m > 1 ? fmt::format(" collapse({})", m) : "";
    out("  #pragma omp parallel for{} if({} >= {})", collapse, work, kParallelThreshold);
    std::string indent = "  ";
    open_outer(m - 1, indent);
    out("{}for (int64_t xb = 0; xb < {}; xb += {}) {{", indent, extent, kTile);
    indent += "  ";
    out("{}const int64_t xe = coil_rt::imin({}, xb + {});", indent, extent, kTile);
    std::vector<std::string> lines;
    for (size_t first = 0; first < k_.reductions.size();) {
      size_t end = loop::pass_end(k_, first);
      for (size_t i = first; i < end; ++i) {
        const auto& r = k_.reductions[i];
        out("{}{} acc{}[{}];", indent, value_type(r.acc), i, kTile);
        out("{}for (int64_t t = 0; t < {}; ++t) acc{}[t] = {};", indent, kTile, i, reduce_init(r.kind, r.acc));
      }
      std::string in = open_inner(indent);
      out("{}#pragma omp simd", in);
      out("{}for (int64_t {} = xb; {} < xe; ++{}) {{", in, x, x, x);
      printer_->reset();
      for (size_t i = first; i < end; ++i) accumulate(i, in + "  ", lines, fmt::format("acc{}[{} - xb]", i, x));
      out("{}}}", in);
      close_inner(in);
      for (size_t i = first; i < end; ++i) printer_->reduced[static_cast<int>(i)] = fmt::format("acc{}[{} - xb]", i, x);
      first = end;
    }
    out("{}for (int64_t {} = xb; {} < xe; ++{}) {{", indent, x, x, x);
    printer_->reset();
    for (const auto& s : k_.stores) store(s, indent + "  ", lines);
    out("{}}}", indent);
    while (indent.size() > 2) {
      indent.resize(indent.size() - 2);
      out("{}}}", indent);
    }
  }

  // Opens the loops over the first `count` outer variables, deepening `indent`.
  // The first `count` outer loops; dim `split` runs over [lo, hi) (a part of a scatter).
  void open_outer(size_t count, std::string& indent, std::optional<size_t> split = std::nullopt) {
    for (size_t d = 0; d < count; ++d) {
      std::string v = loop::loop_var(static_cast<int>(d));
      if (split == d) out("{}for (int64_t {} = lo; {} < hi; ++{}) {{", indent, v, v, v);
      else out("{}for (int64_t {} = 0; {} < {}; ++{}) {{", indent, v, v, index_expr(k_.outer[d]), v);
      indent += "  ";
    }
  }

  // Opens the inner loop nest; returns the indent inside it.
  std::string open_inner(std::string indent) {
    for (size_t d = 0; d < k_.inner.size(); ++d) {
      out("{}for (int64_t {} = 0; {} < {}; ++{}) {{", indent, loop::reduce_var(static_cast<int>(d)), loop::reduce_var(static_cast<int>(d)),
          index_expr(k_.inner[d]), loop::reduce_var(static_cast<int>(d)));
      indent += "  ";
    }
    return indent;
  }
  void close_inner(std::string& indent) {
    for (size_t d = 0; d < k_.inner.size(); ++d) {
      indent.resize(indent.size() - 2);
      out("{}}}", indent);
    }
  }
  void flush(std::vector<std::string>& lines) {
    for (const auto& l : lines) text_ += l + "\n";
    lines.clear();
  }

  // A scan: the running values and the inner stores advance together, in order.
  void scan_body(const std::string& indent) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < k_.reductions.size(); ++i) {
      const auto& r = k_.reductions[i];
      out("{}{} acc{} = {};", indent, value_type(r.acc), i, reduce_init(r.kind, r.acc));
    }
    std::string in = open_inner(indent);
    printer_->reset();
    for (size_t i = 0; i < k_.reductions.size(); ++i) printer_->reduced[static_cast<int>(i)] = "acc" + std::to_string(i);
    for (size_t i = 0; i < k_.reductions.size(); ++i) {
      const auto& r = k_.reductions[i];
      std::string v = printer_->emit(r.value, lines, in);
      flush(lines);
      out("{}{}", in, fold_statement(r.kind, r.acc, "acc" + std::to_string(i), v));
    }
    for (const auto& s : k_.stores) store(s, in, lines);
    close_inner(in);
  }

  // A Welford pair (mean in acc<i>, M2 in acc<i+1>). Over one inner dim it runs in blocks: each
  // block's mean and M2 come from two vectorized passes over the block (in L1), then merge into
  // the running ones (Chan et al.), so memory is read once and the loops still vectorize. Over
  // several inner dims it is the scalar update.
  void welford_pass(size_t i, const std::string& indent, std::vector<std::string>& lines) {
    constexpr int kBlock = 512;
    const auto& r = k_.reductions[i];
    std::string t = value_type(r.acc), mean = fmt::format("acc{}", i), m2 = fmt::format("acc{}", i + 1);
    out("{}{} {} = 0, {} = 0; int64_t {}_n = 0;", indent, t, mean, m2, mean);
    if (k_.inner.size() != 1) {
      std::string in = open_inner(indent);
      printer_->reset();
      std::string v = printer_->emit(r.value, lines, in);
      flush(lines);
      out("{}coil_rt::welford_merge({}, {}, {}_n, {}, {}(0), int64_t(1));", in, mean, m2, mean, v, t);
      close_inner(in);
    } else {
      std::string rv = loop::reduce_var(0), extent = index_expr(k_.inner[0]);
      out("{}for (int64_t rb = 0; rb < {}; rb += {}) {{", indent, extent, kBlock);
      std::string in = indent + "  ";
      out("{}const int64_t re = coil_rt::imin({}, rb + {});", in, extent, kBlock);
      out("{}{} s = 0, q = 0;", in, t);
      for (int round = 0; round < 2; ++round) {
        out("{}#pragma omp simd reduction(+:{})", in, round == 0 ? "s" : "q");
        out("{}for (int64_t {} = rb; {} < re; ++{}) {{", in, rv, rv, rv);
        printer_->reset();
        std::string v = printer_->emit(r.value, lines, in + "  ");
        flush(lines);
        if (round == 0) out("{}  s += {};", in, v);
        else out("{}  const {} d = {} - s / {}(re - rb);\n{}  q += d * d;", in, t, v, t, in);
        out("{}}}", in);
      }
      out("{}coil_rt::welford_merge({}, {}, {}_n, s / {}(re - rb), q, re - rb);", in, mean, m2, mean, t);
      out("{}}}", indent);
    }
    out("{}if ({}_n == 0) {} = coil_rt::nan<{}>();  // the mean of nothing, as in PyTorch", indent, mean, mean, t);
    printer_->reduced[static_cast<int>(i)] = mean;
    printer_->reduced[static_cast<int>(i) + 1] = m2;
  }

  // Folds reduction step i's value into `acc` (its accumulator, "acc<i>" unless given).
  void accumulate(size_t i, const std::string& in, std::vector<std::string>& lines, std::string acc = "") {
    const auto& r = k_.reductions[i];
    if (acc.empty()) acc = "acc" + std::to_string(i);
    std::string v = printer_->emit(r.value, lines, in);
    flush(lines);
    switch (r.kind) {
      case ReduceKind::sum:
      case ReduceKind::prod:
      case ReduceKind::max:
      case ReduceKind::min: out("{}{}", in, fold_statement(r.kind, r.acc, acc, v)); break;
      case ReduceKind::argmax:
      case ReduceKind::argmin: {
        // The first extreme wins; NaN counts as the extreme and sticks.
        SymInt linear = 0;
        for (size_t d = 0; d < k_.inner.size(); ++d) linear = linear * k_.inner[d] + SymInt::symbol(loop::reduce_var(static_cast<int>(d)));
        const char* cmp = r.kind == ReduceKind::argmax ? ">" : "<";
        out("{}if ({} < 0 || (!({}_v != {}_v) && ({} != {} || {} {} {}_v))) {{ {}_v = {}; {} = {}; }}", in, acc, acc, acc, v, v, v,
            cmp, acc, acc, v, acc, index_expr(linear));
        break;
      }
      case ReduceKind::welford_mean:
      case ReduceKind::welford_m2: COIL_CHECK(false) << "Welford steps run in welford_pass"; break;
      case ReduceKind::carry: COIL_CHECK(false) << "carry is a scan step"; break;
    }
  }

  // Reduction steps run in passes over the inner loop (loop::pass_end).
  void body(const std::string& indent) {
    if (loop::is_scan(k_)) return scan_body(indent);
    std::vector<std::string> lines;
    size_t n = k_.reductions.size();
    for (size_t first = 0; first < n;) {
      size_t end = loop::pass_end(k_, first);
      if (k_.reductions[first].kind == ReduceKind::welford_mean) {
        welford_pass(first, indent, lines);
        first = end;
        continue;
      }
      std::vector<std::string> clauses;
      for (size_t i = first; i < end; ++i) {
        const auto& r = k_.reductions[i];
        std::string acc = "acc" + std::to_string(i);
        if (r.kind == ReduceKind::argmax || r.kind == ReduceKind::argmin) {
          out("{}{} {}_v = {}; int64_t {} = -1;", indent, value_type(r.acc), acc, reduce_init(ReduceKind::sum, r.acc), acc);
        } else {
          out("{}{} {} = {};", indent, value_type(r.acc), acc, reduce_init(r.kind, r.acc));
        }
        if (auto clause = simd_reduction(r, acc)) clauses.push_back(*clause);
      }
      if (clauses.size() == end - first) {
        std::string collapse = k_.inner.size() > 1 ? fmt::format(" collapse({})", k_.inner.size()) : "";
        out("{}#pragma omp simd {}{}", indent, fmt::join(clauses, " "), collapse);
      }
      std::string in = open_inner(indent);
      printer_->reset();
      for (size_t i = first; i < end; ++i) accumulate(i, in, lines);
      close_inner(in);
      for (size_t i = first; i < end; ++i) printer_->reduced[static_cast<int>(i)] = "acc" + std::to_string(i);
      first = end;
    }
    printer_->reset();
    for (const auto& s : k_.stores) {
      if (s.inner) continue;
      store(s, indent, lines);
    }
    bool any_inner = std::any_of(k_.stores.begin(), k_.stores.end(), [](const loop::StoreStep& s) { return s.inner; });
    if (!any_inner) return;
    std::string in = open_inner(indent);
    printer_->reset();
    for (const auto& s : k_.stores)
      if (s.inner) store(s, in, lines);
    close_inner(in);
  }

  void store(const loop::StoreStep& s, const std::string& indent, std::vector<std::string>& lines) {
    std::string v = printer_->emit(s.value, lines, indent);
    std::string dynamic = s.dynamic ? " + " + printer_->emit(s.dynamic, lines, indent) : "";
    flush(lines);
    DType t = p_.buffers[static_cast<size_t>(s.buffer)].dtype;
    out("{}b{}[{}{}] = {};", indent, s.buffer, index_expr(s.offset), dynamic, store_value(v, t));
  }

  const loop::Program& p_;
  const loop::LoopKernel& k_;
  const std::vector<std::string>& symbols_;
  std::unique_ptr<ExprPrinter> printer_;
  std::string text_;
};

}  // namespace

std::string CpuSource::unit(const std::vector<size_t>& which) const {
  std::string code = prelude;
  for (size_t i : which) code += bodies.at(i) + "\n";
  return code;
}

std::string CpuSource::code() const {
  std::vector<size_t> all(kernels.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return unit(all);
}

std::vector<std::vector<size_t>> partition_kernels(const CpuSource& source, size_t parts) {
  return partition_bodies(source.bodies, parts);
}

std::vector<std::vector<size_t>> partition_bodies(const std::vector<std::string>& bodies, size_t parts) {
  size_t n = std::min(std::max<size_t>(parts, 1), bodies.size());
  std::vector<std::vector<size_t>> units(n);
  std::vector<size_t> load(n, 0), order(bodies.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Largest first, each into the lightest unit; ties by index, so the split is reproducible.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bodies[a].size() > bodies[b].size(); });
  for (size_t i : order) {
    size_t u = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    units[u].push_back(i);
    load[u] += bodies[i].size();
  }
  for (auto& u : units) std::sort(u.begin(), u.end());
  return units;
}

CpuSource generate_cpu(const loop::Program& program, const std::vector<std::string>& symbols) {
  CpuSource src;
  src.prelude = "// Generated by coil.\n" + with_scalar_helpers(cpu_prelude) + "\n";
  if (uses_special_functions(program)) src.prelude += with_special_helpers(cpu_special) + "\n";
  for (const auto& kernel : program.kernels) {
    const auto* k = std::get_if<loop::LoopKernel>(&kernel);
    if (!k) continue;
    src.bodies.push_back(KernelEmitter(program, *k, symbols).emit());
    src.kernels.push_back(k->name);
  }
  return src;
}

}  // namespace coil::codegen
