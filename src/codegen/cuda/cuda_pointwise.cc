// Pointwise kernels on CUDA: a grid-stride loop over the outer points (vectorized along the
// last dim where contiguity and alignment allow), and transposes tiled through shared memory.
#include <fmt/ranges.h>

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
      const char* t = storage_type(p_.buffers[static_cast<size_t>(l.buffer)].dtype);
      std::string at = idx(substitute(l.offset, {{lane, SymInt(0)}}));
      out("{}coil_rt::Vec<{}, {}> {};", in, t, v, l.name);
      out("{}{} = *reinterpret_cast<const coil_rt::Vec<{}, {}>*>(b{} + ({}));", in, l.name, t, v, l.buffer, at);
    }
    for (const auto& s : vstores)
      out("{}coil_rt::Vec<{}, {}> {};", in, storage_type(p_.buffers[static_cast<size_t>(s.buffer)].dtype), v, s.name);
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
      const char* t = storage_type(p_.buffers[static_cast<size_t>(s.buffer)].dtype);
      std::string at = idx(s.offset);
      out("{}*reinterpret_cast<coil_rt::Vec<{}, {}>*>(b{} + ({})) = {};", in, t, v, s.buffer, at, s.name);
    }
    printer_->load_hook = nullptr;
  }
  out("  }}");
}

// A transpose in square tiles of block * vector elements over the last two dims (a, b):
// operands read with unit stride along a are first copied into shared memory by threads
// running along a, results written with unit stride along a are staged there and written back
// the same way; everything else runs with threads along b. Every global access is coalesced.
// A thread takes `vector` columns (block apart) of tile / block_y rows in each phase, in
// unrolled loops of fixed trip counts, so that its loads are in flight together.
void CudaEmitter::tiled() {
  const size_t m = k_.outer.size();
  const int t = tile_side(config_);
  std::vector<std::string> vars = outer_vars(m);
  const std::string a = vars[m - 2], b = vars[m - 1];
  std::vector<Staged> loads, stores;
  TransposedAccesses staged = transposed_accesses(k_);
  for (const auto& l : staged.loads) loads.push_back({l.buffer, l.offset, "tl" + std::to_string(loads.size())});
  for (const auto& s : staged.stores) stores.push_back({s.buffer, s.offset, "ts" + std::to_string(stores.size())});
  for (const auto* group : {&loads, &stores})
    for (const auto& s : *group) {
      DType dt = p_.buffers[static_cast<size_t>(s.buffer)].dtype;
      out("  __shared__ {} {}[{}][{}];", storage_type(dt), s.name, t, t + tile_pad(dt));
    }
  // Tiles: the leading dims, then tile rows along a and tile columns along b.
  std::vector<std::string> tile_vars(vars.begin(), vars.end() - 2);
  std::vector<SymInt> tile_extents(k_.outer.begin(), k_.outer.end() - 2);
  tile_vars.push_back("ta");
  tile_vars.push_back("tb");
  for (size_t d = m - 2; d < m; ++d) tile_extents.push_back(floordiv(k_.outer[d] + SymInt(t - 1), SymInt(t)));
  std::string ea = idx(k_.outer[m - 2]), eb = idx(k_.outer[m - 1]);
  out("  const idx_t tiles = {};", idx(product(tile_extents)));
  out("  for (idx_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{");
  decompose("tile", tile_vars, tile_extents, "    ");
  // yy: the tile row, xx: the tile column of this thread's element.
  auto phase = [&](bool along_a, const std::function<void(const std::string&)>& body) {
    out("    #pragma unroll");
    out("    for (int i = 0; i < {}; ++i) {{", t / config_.block_y);
    out("      const int yy = static_cast<int>(threadIdx.y) + i * {};", config_.block_y);
    out("      #pragma unroll");
    out("      for (int q = 0; q < {}; ++q) {{", std::max(1, config_.vector));
    out("        const int xx = static_cast<int>(threadIdx.x) + q * {};", config_.block);
    out("        const idx_t {} = ta * {} + {};", a, t, along_a ? "xx" : "yy");
    out("        const idx_t {} = tb * {} + {};", b, t, along_a ? "yy" : "xx");
    out("        if ({} < {} && {} < {}) {{", a, ea, b, eb);
    body("          ");
    out("        }}");
    out("      }}");
    out("    }}");
  };
  if (!loads.empty()) {
    phase(true, [&](const std::string& in) {
      for (const auto& l : loads) out("{}{}[yy][xx] = b{}[{}];", in, l.name, l.buffer, idx(l.offset));
    });
    out("    __syncthreads();");
  }
  printer_->load_hook = [&](const loop::ExprRef& e) -> std::string {
    for (const auto& l : loads)
      if (!e->dynamic() && l.buffer == e->buffer() && l.offset == e->offset()) return l.name + "[xx][yy]";
    return "";
  };
  phase(false, [&](const std::string& in) {
    std::vector<std::string> lines;
    printer_->reset();
    for (const auto& s : k_.stores) {
      auto st = std::find_if(stores.begin(), stores.end(), [&](const Staged& x) { return x.buffer == s.buffer && x.offset == s.offset; });
      if (st == stores.end()) {
        store(s, in, lines);
        continue;
      }
      std::string value = stored(s.value, p_.buffers[static_cast<size_t>(s.buffer)].dtype, lines, in);
      flush(lines);
      out("{}{}[xx][yy] = {};", in, st->name, value);
    }
  });
  printer_->load_hook = nullptr;
  if (!stores.empty()) {
    out("    __syncthreads();");
    phase(true, [&](const std::string& in) {
      for (const auto& s : stores) out("{}b{}[{}] = {}[yy][xx];", in, s.buffer, idx(s.offset), s.name);
    });
  }
  out("    __syncthreads();");
  out("  }}");
}

}  // namespace coil::codegen
