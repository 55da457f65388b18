// Transposes on CUDA: square tiles over the last two dims (a, b) staged through shared memory,
// so that every global access is coalesced. Operands read with unit stride along a are first
// copied into the tile by threads running along a; results written with unit stride along a are
// staged there and written back the same way; everything else runs with threads along b.
//
// A thread takes `vector` columns of tile / block_y rows in each phase, in unrolled loops of
// fixed trip counts, so that its loads are in flight together. Its columns are block apart
// (the tile padded to an odd number of words a row, so a column's elements fall in distinct
// banks), except for pairs of 16-bit elements: two adjacent columns, moved as one 32-bit access
// where aligned (a warp's request then covers 128 bytes, not 64), in a tile swizzled instead of
// padded: element (r, c) sits at column c ^ (r & (side - 2)), which keeps a pair together and
// still spreads both a row's pairs and a column's elements over distinct banks.
#include <fmt/ranges.h>

#include "codegen/cuda/emitter.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

// A constant, even extent: a pair of adjacent positions along it is either whole or out.
bool even(const SymInt& extent) {
  auto e = extent.constant();
  return e && *e % 2 == 0;
}

// Whether an access of unit stride along `var` moves as aligned pairs: the offset is even at
// even values of `var`, whose extent is even.
bool moves_in_pairs(const SymInt& offset, const std::string& var, const SymInt& extent) {
  return even(extent) && affine_stride(offset, var) == 1 && multiple_of(substitute(offset, {{var, SymInt(0)}}), 2);
}

}  // namespace

void CudaEmitter::tiled() {
  const size_t m = k_.outer.size();
  const int t = tile_side(config_);
  std::vector<std::string> vars = outer_vars(m);
  const std::string a = vars[m - 2], b = vars[m - 1];
  const SymInt& extent_a = k_.outer[m - 2];
  const SymInt& extent_b = k_.outer[m - 1];
  std::vector<Staged> loads, stores;
  TransposedAccesses staged = transposed_accesses(k_);
  auto dtype = [&](int buffer) { return p_.buffers[static_cast<size_t>(buffer)].dtype; };
  for (const auto& l : staged.loads) loads.push_back({l.buffer, l.offset, "tl" + std::to_string(loads.size())});
  for (const auto& s : staged.stores) stores.push_back({s.buffer, s.offset, "ts" + std::to_string(stores.size())});
  bool pairs = config_.vector == 2;
  for (const auto* group : {&loads, &stores})
    for (const auto& s : *group) pairs = pairs && dtype_size(dtype(s.buffer)) == 2;
  for (const auto* group : {&loads, &stores})
    for (const auto& s : *group)
      out("  __shared__ __align__(16) {} {}[{}][{}];", storage_type(dtype(s.buffer)), s.name, t, pairs ? t : t + tile_pad(dtype(s.buffer)));
  // A tile element (row, column) in shared memory.
  auto cell = [&](const std::string& name, const std::string& row, const std::string& column) {
    if (!pairs) return fmt::format("{}[{}][{}]", name, row, column);
    return fmt::format("{}[{}][({}) ^ ({} & {})]", name, row, column, row, t - 2);
  };
  // Tiles: the leading dims, then tile rows along a and tile columns along b.
  std::vector<std::string> tile_vars(vars.begin(), vars.end() - 2);
  std::vector<SymInt> tile_extents(k_.outer.begin(), k_.outer.end() - 2);
  tile_vars.push_back("ta");
  tile_vars.push_back("tb");
  for (size_t d = m - 2; d < m; ++d) tile_extents.push_back(floordiv(k_.outer[d] + SymInt(t - 1), SymInt(t)));
  std::string ea = idx(extent_a), eb = idx(extent_b);
  out("  const idx_t tiles = {};", idx(product(tile_extents)));
  out("  for (idx_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{");
  decompose("tile", tile_vars, tile_extents, "    ");
  // One phase: yy the tile row, xx the tile column of this thread's element. In pairs, the
  // pair's accesses that move whole come first (`whole`, with a and b at its first column xx0),
  // then `body` per element (left out when empty), then `after` (the pair's whole stores).
  using Emit = std::function<void(const std::string&)>;
  auto phase = [&](bool along_a, const Emit& whole, const Emit& body, const Emit& after) {
    const bool in_pairs = pairs && even(along_a ? extent_a : extent_b);
    auto position = [&](const std::string& in, const std::string& column) {
      out("{}const idx_t {} = ta * {} + {};", in, a, t, along_a ? column : "yy");
      out("{}const idx_t {} = tb * {} + {};", in, b, t, along_a ? "yy" : column);
    };
    out("    #pragma unroll");
    out("    for (int i = 0; i < {}; ++i) {{", t / config_.block_y);
    out("      const int yy = static_cast<int>(threadIdx.y) + i * {};", config_.block_y);
    if (in_pairs) {
      out("      const int xx0 = static_cast<int>(threadIdx.x) * 2;");
      out("      {{");
      position("        ", "xx0");
      out("        if ({} < {} && {} < {}) {{", a, ea, b, eb);
      whole("          ");
      if (body) {
        out("          #pragma unroll");
        out("          for (int q = 0; q < 2; ++q) {{");
        out("            const int xx = xx0 + q;");
        position("            ", "xx");
        body("            ");
        out("          }}");
      }
      after("          ");
      out("        }}");
      out("      }}");
    } else {
      out("      #pragma unroll");
      out("      for (int q = 0; q < {}; ++q) {{", std::max(1, config_.vector));
      out("        const int xx = {};", pairs ? "static_cast<int>(threadIdx.x) * 2 + q" : fmt::format("static_cast<int>(threadIdx.x) + q * {}", config_.block));
      position("        ", "xx");
      out("        if ({} < {} && {} < {}) {{", a, ea, b, eb);
      if (body) body("          ");
      out("        }}");
      out("      }}");
    }
    out("    }}");
  };
  auto vec_type = [&](int buffer) { return fmt::format("coil_rt::Vec<{}, 2>", storage_type(dtype(buffer))); };
  auto whole_along = [&](const Staged& s, const std::string& var, const SymInt& extent) {
    return pairs && moves_in_pairs(s.offset, var, extent);
  };
  const Emit none = [](const std::string&) {};
  // Along a, the per-element part copies the staged accesses that do not move whole: none when
  // all do.
  auto per_element_unless_whole = [&](const std::vector<Staged>& group, Emit e) {
    bool all_whole = std::all_of(group.begin(), group.end(), [&](const Staged& s) { return whole_along(s, a, extent_a); });
    return all_whole ? Emit{} : e;
  };
  if (!loads.empty()) {
    phase(
        true,
        [&](const std::string& in) {
          for (const auto& l : loads)
            if (whole_along(l, a, extent_a))
              out("{}*reinterpret_cast<{}*>(&{}) = *reinterpret_cast<const {}*>(b{} + ({}));", in, vec_type(l.buffer), cell(l.name, "yy", "xx0"),
                  vec_type(l.buffer), l.buffer, idx(l.offset));
        },
        per_element_unless_whole(loads, [&](const std::string& in) {
          for (const auto& l : loads)
            if (!whole_along(l, a, extent_a)) out("{}{} = b{}[{}];", in, cell(l.name, "yy", "xx"), l.buffer, idx(l.offset));
        }),
        none);
    out("    __syncthreads();");
  }
  // Along b: staged operands from the tile; the pair's direct loads and stores of unit stride
  // along b as whole pairs (V<n>, W<n>), the rest per element.
  std::vector<Staged> direct_loads, direct_stores;
  if (pairs && even(extent_b)) {
    std::vector<loop::ExprRef> all;
    for (const auto& s : k_.stores) collect_loads(s.value, all);
    for (const auto& l : all) {
      Staged d{l->buffer(), l->offset(), "V" + std::to_string(direct_loads.size())};
      if (!l->dynamic() && whole_along(d, b, extent_b)) direct_loads.push_back(d);
    }
    for (const auto& s : k_.stores) {
      Staged d{s.buffer, s.offset, "W" + std::to_string(direct_stores.size())};
      if (!s.dynamic && whole_along(d, b, extent_b)) direct_stores.push_back(d);
    }
  }
  printer_->load_hook = [&](const loop::ExprRef& e) -> std::string {
    if (e->dynamic()) return "";
    for (const auto& l : loads)
      if (l.buffer == e->buffer() && l.offset == e->offset()) return cell(l.name, "xx", "yy");
    for (const auto& l : direct_loads)
      if (l.buffer == e->buffer() && l.offset == e->offset()) return l.name + ".v[q]";
    return "";
  };
  phase(
      false,
      [&](const std::string& in) {
        for (const auto& l : direct_loads)
          out("{}const {} {} = *reinterpret_cast<const {}*>(b{} + ({}));", in, vec_type(l.buffer), l.name, vec_type(l.buffer), l.buffer,
              idx(l.offset));
        for (const auto& s : direct_stores) out("{}{} {};", in, vec_type(s.buffer), s.name);
      },
      [&](const std::string& in) {
        std::vector<std::string> lines;
        printer_->reset();
        for (const auto& s : k_.stores) {
          auto same = [&](const Staged& x) { return x.buffer == s.buffer && x.offset == s.offset; };
          auto st = std::find_if(stores.begin(), stores.end(), same);
          auto ds = std::find_if(direct_stores.begin(), direct_stores.end(), same);
          if (st == stores.end() && ds == direct_stores.end()) {
            store(s, in, lines);
            continue;
          }
          std::string value = stored(s.value, dtype(s.buffer), lines, in);
          flush(lines);
          if (st != stores.end()) out("{}{} = {};", in, cell(st->name, "xx", "yy"), value);
          else out("{}{}.v[q] = {};", in, ds->name, value);
        }
      },
      [&](const std::string& in) {
        for (const auto& s : direct_stores)
          out("{}*reinterpret_cast<{}*>(b{} + ({})) = {};", in, vec_type(s.buffer), s.buffer, idx(s.offset), s.name);
      });
  printer_->load_hook = nullptr;
  if (!stores.empty()) {
    out("    __syncthreads();");
    phase(
        true,
        [&](const std::string& in) {
          for (const auto& s : stores)
            if (whole_along(s, a, extent_a))
              out("{}*reinterpret_cast<{}*>(b{} + ({})) = *reinterpret_cast<const {}*>(&{});", in, vec_type(s.buffer), s.buffer, idx(s.offset),
                  vec_type(s.buffer), cell(s.name, "yy", "xx0"));
        },
        per_element_unless_whole(stores, [&](const std::string& in) {
          for (const auto& s : stores)
            if (!whole_along(s, a, extent_a)) out("{}b{}[{}] = {};", in, s.buffer, idx(s.offset), cell(s.name, "yy", "xx"));
        }),
        none);
  }
  out("    __syncthreads();");
  out("  }}");
}

}  // namespace coil::codegen
