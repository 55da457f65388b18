// Pointwise kernels on CUDA: a grid-stride loop over the outer points, vectorized along the
// last dim where contiguity and alignment allow (transposes: cuda_tiled.cc).
#include <fmt/ranges.h>

#include <algorithm>

#include "codegen/cuda/emitter.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen {

// Each thread takes `vector` consecutive elements along the last dim: contiguous loads and
// stores move as one aligned access (buffer bases are kBufferAlignment-aligned), the rest of the body runs per element in an unrolled loop over the lane variable.
void CudaEmitter::pointwise() {
  if (!k_.inner.empty() || !k_.reductions.empty()) {  // a serial kernel with rows
    row();
    return;
  }
  const int v = config_.vector;
  const size_t m = k_.outer.size();
  std::vector<std::string> lines;
  std::vector<SymInt> extents(k_.outer.begin(), k_.outer.end());
  std::vector<std::string> vars = outer_vars(m);
  std::string last = m ? vars.back() : "", lane = loop::loop_var(static_cast<int>(m));
  if (v > 1) {
    extents.back() = floordiv(extents.back(), SymInt(v));
    vars.back() = last + "q";
  }
  std::vector<loop::StoreStep> stores = k_.stores;
  std::vector<Staged> loads, vstores;
  if (v > 1) {
    // The body as seen from lane `lane` of the vector: last -> last + lane.
    std::map<std::string, SymInt> shift{{last, SymInt::symbol(last) + SymInt::symbol(lane)}};
    std::vector<loop::ExprRef> all;
    for (auto& s : stores) {
      s.value = loop::substitute(s.value, shift);
      collect_loads(s.value, all);
    }
    for (const auto& l : all) {
      if (l->dynamic()) continue;
      SymInt base = substitute(l->offset(), {{lane, SymInt(0)}});
      if (affine_stride(base, last) == 1 && affine_stride(l->offset(), lane) == 1)
        loads.push_back({l->buffer(), l->offset(), "L" + std::to_string(loads.size())});
    }
    for (auto& s : stores) {
      if (affine_stride(s.offset, last) == 1) vstores.push_back({s.buffer, s.offset, "S" + std::to_string(vstores.size())});
      s.offset = substitute(s.offset, shift);
    }
  }
  out("  const idx_t n = {};", idx(product(extents)));
  out("  for (idx_t i = static_cast<idx_t>(blockIdx.x) * {} + static_cast<idx_t>(threadIdx.x); i < n; i += static_cast<idx_t>(gridDim.x) * {}) {{",
      config_.block, config_.block);
  decompose("i", vars, extents, "    ");
  std::string in = "    ";
  if (v > 1) {
    out("{}const idx_t {} = {}q * {};", in, last, last, v);
    for (const auto& l : loads) {
      std::string at = idx(substitute(l.offset, {{lane, SymInt(0)}}));
      out("{}{} {};", in, vec_type(l.buffer, v), l.name);
      out("{}{} = {};", in, l.name, whole_load(vec_type(l.buffer, v), l.buffer, at));
    }
    for (const auto& s : vstores)
      out("{}{} {};", in, vec_type(s.buffer, v), s.name);
    out("{}#pragma unroll", in);
    out("{}for (int {} = 0; {} < {}; ++{}) {{", in, lane, lane, v, lane);
    in += "  ";
    printer_->load_hook = [&](const loop::ExprRef& e) -> std::string {
      if (e->dynamic()) return "";
      for (const auto& l : loads)
        if (l.buffer == e->buffer() && l.offset == e->offset()) return l.name + ".v[" + lane + "]";
      return "";
    };
  }
  printer_->reset();
  for (size_t i = 0; i < stores.size(); ++i) {
    const auto& s = stores[i];
    auto vs = std::find_if(vstores.begin(), vstores.end(), [&](const Staged& st) { return st.buffer == s.buffer && st.offset == k_.stores[i].offset; });
    if (v > 1 && vs != vstores.end()) {
      std::string value = stored(s.value, p_.buffers[static_cast<size_t>(s.buffer)].dtype, lines, in);
      flush(lines);
      out("{}{}.v[{}] = {};", in, vs->name, lane, value);
    } else {
      store(s, in, lines);
    }
  }
  if (v > 1) {
    in.resize(in.size() - 2);
    out("{}}}", in);
    for (const auto& s : vstores) {
      out("{}*reinterpret_cast<{}*>(b{} + ({})) = {};", in, vec_type(s.buffer, v), s.buffer, idx(s.offset), s.name);
    }
    printer_->load_hook = nullptr;
  }
  out("  }}");
}

// A scatter with free dims (LoopKernel::free_dims): a grid-stride loop over the points of the
// free dims, each thread running the other dims in order, so that every element sees its
// stores in the order of the whole loop nest. With `parts` (launch.h, partitioned_scatter),
// `parts` threads share a point, each making only the stores whose dynamic offset (a point's
// elements differ by it alone) hashes to its part: every element still has one thread, which
// stores it in order. A warp's threads are adjacent points of one part, so they store together
// (an embedding gradient, 768 free columns over 8192 tokens, ran on 768 threads in order).
namespace {

// Whether `e` is made of constants and index expressions of the free loop variables only.
bool free_term(const loop::ExprRef& e, const std::vector<std::string>& free) {
  if (e->kind() == loop::Expr::Kind::load || e->kind() == loop::Expr::Kind::reduced) return false;
  if (e->kind() == loop::Expr::Kind::index) {
    std::vector<std::string> vars;
    e->offset().collect_symbols(vars);
    return std::all_of(vars.begin(), vars.end(), [&](const std::string& v) { return std::count(free.begin(), free.end(), v) > 0; });
  }
  return std::all_of(e->operands().begin(), e->operands().end(), [&](const loop::ExprRef& o) { return free_term(o, free); });
}

// The part of a scatter's dynamic offset that decides the thread: the offset less its terms
// in the free variables alone (a thread's elements differ by the rest, which adjacent points of
// a warp then share: an embedding row).
loop::ExprRef hashed_offset(const loop::ExprRef& e, const std::vector<std::string>& free) {
  if (e->kind() == loop::Expr::Kind::op && e->op() == loop::LoopOp::Add) {
    const auto& a = e->operands()[0];
    const auto& b = e->operands()[1];
    if (free_term(b, free)) return hashed_offset(a, free);
    if (free_term(a, free)) return hashed_offset(b, free);
  }
  return e;
}

// Whether `e` reads any of `vars` (in an index, a load's offset or its dynamic part).
bool uses_vars(const loop::ExprRef& e, const std::vector<std::string>& vars) {
  auto in_offset = [&](const SymInt& offset) {
    std::vector<std::string> used;
    offset.collect_symbols(used);
    return std::any_of(used.begin(), used.end(), [&](const std::string& v) { return std::count(vars.begin(), vars.end(), v) > 0; });
  };
  if ((e->kind() == loop::Expr::Kind::index || e->kind() == loop::Expr::Kind::load) && in_offset(e->offset())) return true;
  if (e->kind() == loop::Expr::Kind::load && e->dynamic() && uses_vars(e->dynamic(), vars)) return true;
  return std::any_of(e->operands().begin(), e->operands().end(), [&](const loop::ExprRef& o) { return uses_vars(o, vars); });
}

// A scatter's loop variables and extents, split into its free dims and those that run in order.
struct ScatterDims {
  std::vector<std::string> free_vars, ordered_vars;
  std::vector<SymInt> free_extents, ordered_extents;
};

ScatterDims scatter_dims(const loop::LoopKernel& k) {
  ScatterDims s;
  for (size_t d = 0; d < k.outer.size(); ++d) {
    const bool free = std::find(k.free_dims.begin(), k.free_dims.end(), d) != k.free_dims.end();
    (free ? s.free_vars : s.ordered_vars).push_back(loop::loop_var(static_cast<int>(d)));
    (free ? s.free_extents : s.ordered_extents).push_back(k.outer[d]);
  }
  return s;
}

}  // namespace

bool listed_scatter(const loop::LoopKernel& k) {
  if (!partitioned_scatter(k) || k.stores.size() != 1 || !k.stores[0].dynamic) return false;
  const auto free = scatter_dims(k).free_vars;
  return !uses_vars(hashed_offset(k.stores[0].dynamic, free), free);
}

// The listed form: a block takes one part and a tile of `block` free points; in rounds of
// `block` ordered positions its threads each test one position's part, list the matches in
// order in shared memory (a warp ballot, then the warps' counts), and every thread applies the
// round's matches to its own point. A position's stores keep their order; the part's test runs
// once a block, not once a thread (a thread of the plain form tested every position: an
// embedding gradient took 1.0 ms on an H200).
void CudaEmitter::listed_scatter_body() {
  const auto [free_vars, ordered_vars, free_extents, ordered_extents] = scatter_dims(k_);
  const int block = config_.block, warps = block / device_.warp_size;
  const auto& s = k_.stores[0];
  out("  const idx_t points = {};", idx(product(free_extents)));
  out("  const idx_t tiles = (points + {}) / {};", block - 1, block);
  out("  const idx_t ordered = {};", idx(product(ordered_extents)));
  out("  __shared__ idx_t listed[{}];", block);
  out("  __shared__ int counts[{}];", warps);
  out("  const int lane = static_cast<int>(threadIdx.x) % {}, warp = static_cast<int>(threadIdx.x) / {};", device_.warp_size,
      device_.warp_size);
  out("  for (idx_t unit = blockIdx.x; unit < tiles * {}; unit += gridDim.x) {{", config_.parts);
  out("    const int part = static_cast<int>(unit / tiles);");
  out("    const idx_t i = (unit % tiles) * {} + static_cast<idx_t>(threadIdx.x);", block);
  out("    const bool active = i < points;");
  decompose("i", free_vars, free_extents, "    ");
  out("    for (idx_t base = 0; base < ordered; base += {}) {{", block);
  out("      bool match = false;");
  out("      if (base + static_cast<idx_t>(threadIdx.x) < ordered) {{");
  decompose("base + static_cast<idx_t>(threadIdx.x)", ordered_vars, ordered_extents, "        ");
  printer_->reset();
  std::vector<std::string> lines;
  std::string dynamic = printer_->emit(hashed_offset(s.dynamic, free_vars), lines, "        ");
  flush(lines);
  out("        match = static_cast<int>((static_cast<unsigned long long>({}) * 0x9E3779B97F4A7C15ull) >> 40) % {} == part;", dynamic,
      config_.parts);
  out("      }}");
  out("      const unsigned ballot = __ballot_sync(0xffffffffu, match);");
  out("      if (lane == 0) counts[warp] = __popc(ballot);");
  out("      __syncthreads();");
  out("      int before = 0, count = 0;");
  out("      #pragma unroll");
  out("      for (int w = 0; w < {}; ++w) before += w < warp ? counts[w] : 0, count += counts[w];", warps);
  out("      if (match) listed[before + __popc(ballot & ((1u << lane) - 1u))] = base + static_cast<idx_t>(threadIdx.x);");
  out("      __syncthreads();");
  out("      for (int q = 0; active && q < count; ++q) {{");
  decompose("listed[q]", ordered_vars, ordered_extents, "        ");
  printer_->reset();
  store(s, "        ", lines);
  out("      }}");
  out("      __syncthreads();");
  out("    }}");
  out("  }}");
}

void CudaEmitter::scatter() {
  if (config_.listed) return listed_scatter_body();
  const auto [free_vars, ordered_vars, free_extents, ordered_extents] = scatter_dims(k_);
  const int parts = config_.parts;
  const std::string points = idx(product(free_extents));
  out("  const idx_t n = {} * {};", points, parts);
  out("  for (idx_t i = static_cast<idx_t>(blockIdx.x) * {} + static_cast<idx_t>(threadIdx.x); i < n; i += static_cast<idx_t>(gridDim.x) * {}) {{",
      config_.block, config_.block);
  if (parts > 1) out("    const int part = static_cast<int>(i / ({}));", points);
  decompose(parts > 1 ? fmt::format("i % ({})", points) : "i", free_vars, free_extents, "    ");
  std::string in = "    ";
  for (size_t d = 0; d < ordered_vars.size(); ++d) {
    out("{}for (idx_t {} = 0; {} < {}; ++{}) {{", in, ordered_vars[d], ordered_vars[d], idx(ordered_extents[d]), ordered_vars[d]);
    in += "  ";
  }
  printer_->reset();
  std::vector<std::string> lines;
  for (const auto& s : k_.stores) {
    if (parts == 1) {
      store(s, in, lines);
      continue;
    }
    std::string dynamic = s.dynamic ? printer_->emit(hashed_offset(s.dynamic, free_vars), lines, in) : "0";
    flush(lines);
    out("{}if (static_cast<int>((static_cast<unsigned long long>({}) * 0x9E3779B97F4A7C15ull) >> 40) % {} == part) {{", in,
        dynamic, parts);
    store(s, in + "  ", lines);
    out("{}}}", in);
    printer_->reset();  // (names made inside the block end with it)
  }
  for (size_t d = 0; d < ordered_vars.size(); ++d) {
    in.resize(in.size() - 2);
    out("{}}}", in);
  }
  out("  }}");
}

}  // namespace coil::codegen
