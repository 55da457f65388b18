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
//
// Wide tiles (CudaConfig::tile_a, the tuner's first candidate) are rectangular: 16-byte groups
// moved as one access, 256 bytes along a and 128 along b, groups swizzled by row; threads are
// numbered across the block and a phase's rows taken (tile extent / group) threads each.
#include <fmt/ranges.h>

#include <array>

#include "codegen/cuda/emitter.h"
#include "codegen/cuda/launch.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

// A constant extent that `group` divides: a group of adjacent positions along it is either
// whole or out.
bool divides(const SymInt& extent, int group) {
  auto e = extent.constant();
  return e && *e % group == 0;
}

// Whether an access of unit stride along `var` moves in aligned groups of `group` elements: the
// offset is a multiple of it at multiples of it along `var`, whose extent it divides.
bool moves_in_groups(const SymInt& offset, const std::string& var, const SymInt& extent, int group) {
  return divides(extent, group) && affine_stride(offset, var) == 1 && multiple_of(substitute(offset, {{var, SymInt(0)}}), group);
}

int log2_exact(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

}  // namespace

void CudaEmitter::tiled() {
  const size_t m = k_.outer.size();
  const int t = tile_side(config_);
  // Wide tiles: 16-byte groups of `vector` elements in a tile of ta x tb (a, b), threads
  // numbered across the block, each phase's rows taken `per_row` threads a row.
  const bool wide = config_.tile_a > 0;
  const int ta_side = tile_extent_a(config_), tb_side = tile_extent_b(config_);
  std::vector<std::string> vars = outer_vars(m);
  const std::string a = vars[m - 2], b = vars[m - 1];
  const SymInt& extent_a = k_.outer[m - 2];
  const SymInt& extent_b = k_.outer[m - 1];
  std::vector<Staged> loads, stores;
  TransposedAccesses staged = transposed_accesses(k_);
  auto dtype = [&](int buffer) { return p_.buffers[static_cast<size_t>(buffer)].dtype; };
  for (const auto& l : staged.loads) loads.push_back({l.buffer, l.offset, "tl" + std::to_string(loads.size())});
  for (const auto& s : staged.stores) stores.push_back({s.buffer, s.offset, "ts" + std::to_string(stores.size())});
  bool pairs = !wide && config_.vector == 2;
  for (const auto* group : {&loads, &stores})
    for (const auto& s : *group) pairs = pairs && dtype_size(dtype(s.buffer)) == 2;
  // Accesses that move whole move `group` adjacent elements at a time.
  const bool grouped = pairs || wide;
  const int group = wide ? config_.vector : 2;
  for (const auto* staged_group : {&loads, &stores})
    for (const auto& s : *staged_group)
      out("  __shared__ __align__(16) {} {}[{}][{}];", element_type(s.buffer), s.name, tb_side,
          grouped ? ta_side : t + tile_pad(dtype(s.buffer)));
  // A tile element (row, column) in shared memory. Wide tiles swizzle whole groups: group g of
  // row r at g ^ ((r / group) % 8), so a warp reading a column across 8 groups' rows hits 8
  // distinct 16-byte bank groups, and one writing a row's groups stays conflict-free.
  const int lg = log2_exact(group), swizzle = std::min(ta_side / group, 8) - 1;
  auto cell = [&](const std::string& name, const std::string& row, const std::string& column) {
    if (wide)
      return fmt::format("{}[{}][((({}) >> {}) ^ ((({}) >> {}) & {})) << {} | (({}) & {})]", name, row, column, lg, row, lg, swizzle, lg,
                         column, group - 1);
    if (!pairs) return fmt::format("{}[{}][{}]", name, row, column);
    return fmt::format("{}[{}][({}) ^ ({} & {})]", name, row, column, row, t - 2);
  };
  // Tiles: the leading dims, then tile rows along a and tile columns along b.
  std::vector<std::string> tile_vars(vars.begin(), vars.end() - 2);
  std::vector<SymInt> tile_extents(k_.outer.begin(), k_.outer.end() - 2);
  tile_vars.push_back("ta");
  tile_vars.push_back("tb");
  tile_extents.push_back(floordiv(extent_a + SymInt(ta_side - 1), SymInt(ta_side)));
  tile_extents.push_back(floordiv(extent_b + SymInt(tb_side - 1), SymInt(tb_side)));
  std::string ea = idx(extent_a), eb = idx(extent_b);
  if (wide) out("  const int tid = static_cast<int>(threadIdx.y) * {} + static_cast<int>(threadIdx.x);", config_.block);
  out("  const idx_t tiles = {};", idx(product(tile_extents)));
  out("  for (idx_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{");
  decompose("tile", tile_vars, tile_extents, "    ");
  // One phase: yy the tile row, xx the tile column of this thread's element. In groups (pairs or
  // wide tiles), the group's accesses that move whole come first (`whole`, with a and b at its
  // first column xx0), then `body` per element (left out when empty), then `after` (the group's
  // whole stores).
  using Emit = std::function<void(const std::string&)>;
  // Wide tiles: a phase's rows (along b when moving along a, and the reverse) per_row threads a
  // row, rows_per_pass at a time.
  auto wide_passes = [&](bool along_a) {
    const int columns = along_a ? ta_side : tb_side, rows = along_a ? tb_side : ta_side;
    const int per_row = columns / group, rows_per_pass = config_.block * config_.block_y / per_row;
    return std::array<int, 3>{per_row, rows_per_pass, rows / rows_per_pass};
  };
  auto position = [&](const std::string& in, const std::string& column, bool along_a) {
    out("{}const idx_t {} = ta * {} + {};", in, a, ta_side, along_a ? column : "yy");
    out("{}const idx_t {} = tb * {} + {};", in, b, tb_side, along_a ? "yy" : column);
  };
  // `prefetch` (wide tiles only): the whole groups' loads of every pass first, in a loop of their
  // own, so they are in flight together (the compiler does not move a pass's loads above the
  // previous pass's stores).
  auto phase = [&](bool along_a, const Emit& whole, const Emit& body, const Emit& after, const Emit& prefetch = {}) {
    const bool in_groups = grouped && divides(along_a ? extent_a : extent_b, group);
    auto position_at = [&](const std::string& in, const std::string& column) { position(in, column, along_a); };
    // Opens a wide tile's loop over the passes, yy the row and xx0 the group's first column.
    auto open_wide_passes = [&] {
      auto [per_row, rows_per_pass, passes] = wide_passes(along_a);
      out("    #pragma unroll");
      out("    for (int i = 0; i < {}; ++i) {{", passes);
      out("      const int yy = tid / {} + i * {};", per_row, rows_per_pass);
      out("      const int xx0 = tid % {} * {};", per_row, group);
    };
    if (wide && in_groups && prefetch) {
      open_wide_passes();
      position_at("      ", "xx0");
      out("      if ({} < {} && {} < {}) {{", a, ea, b, eb);
      prefetch("        ");
      out("      }}");
      out("    }}");
    }
    if (wide) {
      open_wide_passes();
    } else {
      out("    #pragma unroll");
      out("    for (int i = 0; i < {}; ++i) {{", t / config_.block_y);
      out("      const int yy = static_cast<int>(threadIdx.y) + i * {};", config_.block_y);
      if (in_groups) out("      const int xx0 = static_cast<int>(threadIdx.x) * 2;");
    }
    if (in_groups) {
      out("      {{");
      position_at("        ", "xx0");
      out("        if ({} < {} && {} < {}) {{", a, ea, b, eb);
      whole("          ");
      if (body) {
        out("          #pragma unroll");
        out("          for (int q = 0; q < {}; ++q) {{", group);
        out("            const int xx = xx0 + q;");
        position_at("            ", "xx");
        body("            ");
        out("          }}");
      }
      after("          ");
      out("        }}");
      out("      }}");
    } else {  // element by element (wide tiles and pairs: an extent the group does not divide)
      std::string column = wide    ? "xx0 + q"
                           : pairs ? "static_cast<int>(threadIdx.x) * 2 + q"
                                   : fmt::format("static_cast<int>(threadIdx.x) + q * {}", config_.block);
      out("      #pragma unroll");
      out("      for (int q = 0; q < {}; ++q) {{", std::max(1, config_.vector));
      out("        const int xx = {};", column);
      position_at("        ", "xx");
      out("        if ({} < {} && {} < {}) {{", a, ea, b, eb);
      if (body) body("          ");
      out("        }}");
      out("      }}");
    }
    out("    }}");
  };
  auto whole_along = [&](const Staged& s, const std::string& var, const SymInt& extent) {
    return grouped && moves_in_groups(s.offset, var, extent, group);
  };
  const Emit none = [](const std::string&) {};
  // Along a, the per-element part copies the staged accesses that do not move whole: none when
  // all do.
  auto per_element_unless_whole = [&](const std::vector<Staged>& accesses, Emit e) {
    bool all_whole = std::all_of(accesses.begin(), accesses.end(), [&](const Staged& s) { return whole_along(s, a, extent_a); });
    return all_whole ? Emit{} : e;
  };
  if (!loads.empty()) {
    phase(
        true,
        [&](const std::string& in) {
          for (const auto& l : loads)
            if (whole_along(l, a, extent_a))
              out("{}*reinterpret_cast<{}*>(&{}) = {};", in, vec_type(l.buffer, group), cell(l.name, "yy", "xx0"),
                  whole_load(vec_type(l.buffer, group), l.buffer, idx(l.offset)));
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
  if (grouped && divides(extent_b, group)) {
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
  const bool prefetched = wide && !direct_loads.empty();
  printer_->load_hook = [&](const loop::ExprRef& e) -> std::string {
    if (e->dynamic()) return "";
    for (const auto& l : loads)
      if (l.buffer == e->buffer() && l.offset == e->offset()) return cell(l.name, "xx", "yy");
    for (const auto& l : direct_loads)
      if (l.buffer == e->buffer() && l.offset == e->offset()) return l.name + (prefetched ? "[i].v[q]" : ".v[q]");
    return "";
  };
  // Wide tiles load every pass's direct groups first (arrays V<n>[pass]).
  if (prefetched) {
    const int passes = wide_passes(false)[2];
    for (const auto& l : direct_loads) out("    {} {}[{}];", vec_type(l.buffer, group), l.name, passes);
  }
  Emit prefetch;
  if (prefetched)
    prefetch = [&](const std::string& in) {
      for (const auto& l : direct_loads)
        out("{}{}[i] = {};", in, l.name, whole_load(vec_type(l.buffer, group), l.buffer, idx(l.offset)));
    };
  phase(
      false,
      [&](const std::string& in) {
        if (!prefetched)
          for (const auto& l : direct_loads)
            out("{}const {} {} = {};", in, vec_type(l.buffer, group), l.name, whole_load(vec_type(l.buffer, group), l.buffer, idx(l.offset)));
        for (const auto& s : direct_stores) out("{}{} {};", in, vec_type(s.buffer, group), s.name);
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
          out("{}*reinterpret_cast<{}*>(b{} + ({})) = {};", in, vec_type(s.buffer, group), s.buffer, idx(s.offset), s.name);
      },
      prefetch);
  printer_->load_hook = nullptr;
  if (!stores.empty()) {
    out("    __syncthreads();");
    phase(
        true,
        [&](const std::string& in) {
          for (const auto& s : stores)
            if (whole_along(s, a, extent_a))
              out("{}*reinterpret_cast<{}*>(b{} + ({})) = *reinterpret_cast<const {}*>(&{});", in, vec_type(s.buffer, group), s.buffer, idx(s.offset),
                  vec_type(s.buffer, group), cell(s.name, "yy", "xx0"));
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
