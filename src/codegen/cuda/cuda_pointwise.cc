// Pointwise kernels on CUDA: a grid-stride loop over the outer points, vectorized along the
// last dim where contiguity and alignment allow (transposes: cuda_tiled.cc).
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
// stores in the order of the whole loop nest.
void CudaEmitter::scatter() {
  const size_t m = k_.outer.size();
  const std::vector<std::string> vars = outer_vars(m);
  std::vector<std::string> free_vars;
  std::vector<SymInt> free_extents;
  for (size_t d : k_.free_dims) free_vars.push_back(vars[d]), free_extents.push_back(k_.outer[d]);
  out("  const idx_t n = {};", idx(product(free_extents)));
  out("  for (idx_t i = static_cast<idx_t>(blockIdx.x) * {} + static_cast<idx_t>(threadIdx.x); i < n; i += static_cast<idx_t>(gridDim.x) * {}) {{",
      config_.block, config_.block);
  decompose("i", free_vars, free_extents, "    ");
  std::string in = "    ";
  size_t opened = 0;
  for (size_t d = 0; d < m; ++d) {
    if (std::find(k_.free_dims.begin(), k_.free_dims.end(), d) != k_.free_dims.end()) continue;
    out("{}for (idx_t {} = 0; {} < {}; ++{}) {{", in, vars[d], vars[d], idx(k_.outer[d]), vars[d]);
    in += "  ";
    ++opened;
  }
  printer_->reset();
  std::vector<std::string> lines;
  for (const auto& s : k_.stores) store(s, in, lines);
  for (size_t i = 0; i < opened; ++i) {
    in.resize(in.size() - 2);
    out("{}}}", in);
  }
  out("  }}");
}

}  // namespace coil::codegen
