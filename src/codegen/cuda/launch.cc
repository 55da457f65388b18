#include "codegen/cuda/launch.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "codegen/cuda/jam.h"
#include "coil/dtype.h"
#include "support/check.h"

namespace coil::codegen {

namespace {

using loop::ExprRef;

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Blocks resident at once on the whole device, times `waves`.
int64_t resident_blocks(const cuda::DeviceInfo& d, int threads, int waves) {
  int64_t per_sm = std::max(1, d.max_threads_per_sm / std::max(threads, 1));
  return static_cast<int64_t>(d.sm_count) * per_sm * waves;
}

// Loads of a kernel's row (reduction values and inner stores) that depend on the row position:
// what a persistent row keeps in registers.
size_t row_loads(const loop::LoopKernel& k) {
  std::vector<ExprRef> loads;
  for (const auto& r : k.reductions) collect_loads(r.value, loads);
  for (const auto& s : k.stores)
    if (s.inner) collect_loads(s.value, loads);
  size_t n = 0;
  for (const auto& l : loads) {
    if (reads_row(l)) ++n;
  }
  return std::max<size_t>(n, 1);
}

// Whether a reduction reads memory along the row. Without (the sum of a one-hot row, a count),
// the reduction pass reads nothing and only the stores read the row: once, whichever the form,
// so keeping it in registers for them saves no traffic and costs the registers that would keep
// more rows in flight (GPT-2's loss gradient, [8192, 50257]: persistent rows 1.44 ms on an H200).
bool reductions_read_row(const loop::LoopKernel& k) {
  std::vector<ExprRef> loads;
  for (const auto& r : k.reductions) collect_loads(r.value, loads);
  return std::any_of(loads.begin(), loads.end(), [](const ExprRef& l) { return reads_row(l); });
}

// A column reduction's tiles of column_width(c) adjacent columns (the last outer dim), over
// the other outer dims.
SymInt column_tiles(const loop::LoopKernel& k, const CudaConfig& c) {
  const int width = column_flat(c) ? c.vector : column_width(c);
  SymInt tiles = floordiv(k.outer.back() + SymInt(width - 1), SymInt(width));
  for (size_t i = 0; i + 1 < k.outer.size(); ++i) tiles = tiles * k.outer[i];
  return tiles;
}

// A reduction whose blocks could not fill the device otherwise is split when it is one pass
// writing only per-row results, with static sizes. Returns the splits that fill about one wave
// of `threads`-thread blocks over `unit_count` units (rows or column tiles), keeping at least
// `min_per_split` elements per split, or 1.
int split_count(const loop::LoopKernel& k, const SymInt& unit_count, const cuda::DeviceInfo& d, int threads, int64_t min_per_split) {
  auto units = unit_count.constant(), r = product(k.inner).constant();
  if (!units || !r || *units <= 0 || loop::pass_end(k, 0) != k.reductions.size()) return 1;
  if (std::any_of(k.stores.begin(), k.stores.end(), [](const loop::StoreStep& s) { return s.inner; })) return 1;
  int64_t wave = resident_blocks(d, threads, 1);
  if (*units * 2 > wave) return 1;
  return static_cast<int>(std::clamp<int64_t>(wave / *units, 1, *r / std::max<int64_t>(min_per_split, 1)));
}

// The widest vector (elements, a power of two, 16 bytes of the widest access at most) for
// accesses `unit` (buffer, offset) of unit stride along `var`: `length` divides by it and every
// access starts aligned (at var = 0).
int widest_vector(const loop::Program& p, const std::vector<std::pair<int, SymInt>>& unit, const std::string& var, int64_t length) {
  if (unit.empty()) return 1;
  size_t widest = 1;
  for (const auto& [b, off] : unit) widest = std::max<size_t>(widest, dtype_size(p.buffers[static_cast<size_t>(b)].dtype));
  int v = static_cast<int>(kBufferAlignment / widest);
  for (; v > 1; v /= 2) {
    if (length % v != 0) continue;
    if (std::all_of(unit.begin(), unit.end(), [&](const auto& u) { return multiple_of(substitute(u.second, {{var, SymInt(0)}}), v); }))
      break;
  }
  return v;
}

// The widest vector (elements, a power of two, 16 bytes at most) a row reduction can move at
// a time: one inner dim of static length, every row-dependent load and every inner store of
// unit stride along it and starting aligned.
int row_vector_width(const loop::Program& p, const loop::LoopKernel& k) {
  auto r = product(k.inner).constant();
  if (k.inner.size() != 1 || !r) return 1;
  const std::string r0 = loop::reduce_var(0);
  std::vector<ExprRef> loads;
  for (const auto& red : k.reductions) collect_loads(red.value, loads);
  std::vector<std::pair<int, SymInt>> unit;
  for (const auto& s : k.stores) {
    if (!s.inner) continue;
    collect_loads(s.value, loads);
    if (s.dynamic || affine_stride(s.offset, r0) != 1) return 1;
    unit.emplace_back(s.buffer, s.offset);
  }
  for (const auto& l : loads) {
    if (!reads_row(l)) continue;
    if (l->dynamic() || affine_stride(l->offset(), r0) != 1) return 1;
    unit.emplace_back(l->buffer(), l->offset());
  }
  return widest_vector(p, unit, r0, *r);
}

// The widest vector of adjacent outputs a column reduction's thread can take: the loads of unit
// stride along the last outer dim move that many elements at once (16 bytes of the widest),
// starting aligned; the outputs' count divides by it.
int column_vector_width(const loop::Program& p, const loop::LoopKernel& k) {
  auto n = k.outer.back().constant();
  if (!n) return 1;
  const std::string x = loop::loop_var(static_cast<int>(k.outer.size()) - 1);
  std::vector<ExprRef> loads;
  for (const auto& r : k.reductions) collect_loads(r.value, loads);
  std::vector<std::pair<int, SymInt>> unit;
  for (const auto& l : loads)
    if (!l->dynamic() && affine_stride(l->offset(), x) == 1) unit.emplace_back(l->buffer(), l->offset());
  return widest_vector(p, unit, x, *n);
}

// Flat columns (column_flat) for rows up to kFlatColumnRow long: where the loads slide along a
// window (jam.h), first the jammed ones, 4 and 2 outputs along it a thread, each with the widest
// vector that still gives half a wave of threads; then the widest vectors that give a full wave,
// three at most, the widest also in blocks of 8 warps.
std::vector<CudaConfig> flat_column_configs(const loop::LoopKernel& k, const cuda::DeviceInfo& d, int v) {
  std::vector<CudaConfig> flat;
  const auto r = product(k.inner).constant();
  const auto outputs = product(k.outer).constant();
  if (!r || *r > kFlatColumnRow || !outputs) return flat;
  const int warp = d.warp_size;
  const int64_t wave = static_cast<int64_t>(d.sm_count) * d.max_threads_per_sm;
  auto config = [](int vector, int block, int jam) {
    CudaConfig f;
    f.form = CudaConfig::Form::column;
    f.block = block;
    f.vector = vector;
    f.jam = jam;
    return f;
  };
  if (const int window = window_dim(k); window >= 0) {
    const auto along = k.outer[static_cast<size_t>(window)].constant();
    for (int jam : {4, 2})
      for (int vector = v; along && *along % jam == 0 && vector >= 1; vector /= 2)
        if (*outputs / (vector * jam) >= wave / 2) {
          flat.push_back(config(vector, 4 * warp, jam));
          break;
        }
  }
  const size_t jams = flat.size();
  for (int vector = v; vector >= 1 && flat.size() < jams + 4; vector /= 2) {
    if (*outputs / vector < wave) continue;
    flat.push_back(config(vector, 4 * warp, 1));
    if (flat.size() == jams + 1) flat.push_back(config(vector, 8 * warp, 1));
  }
  return flat;
}

std::vector<CudaConfig> row_configs(const loop::Program& p, const loop::LoopKernel& k, const cuda::DeviceInfo& d) {
  const int warp = d.warp_size, max_block = d.max_threads_per_block;
  auto r = product(k.inner).constant();
  auto rows = product(k.outer).constant();
  const int v = row_vector_width(p, k);
  auto make = [&](int64_t tpr, bool persistent, int vector) {
    CudaConfig c;
    c.form = CudaConfig::Form::row;
    c.threads_per_row = static_cast<int>(tpr);
    c.block = static_cast<int>(std::max<int64_t>(tpr, 4 * warp));
    c.vector = vector;
    // Elements per thread: whole groups of `vector` adjacent ones.
    int64_t per_thread = r ? (*r + tpr * vector - 1) / (tpr * vector) * vector : 0;
    // Registers for the kept loads: a budget of a quarter of a thread's share of the SM's file.
    int64_t budget = d.registers_per_sm / d.max_threads_per_sm * 16;
    if (persistent && r && per_thread >= 1 && per_thread * static_cast<int64_t>(row_loads(k)) <= budget) c.persistent = static_cast<int>(per_thread);
    return c;
  };
  std::vector<CudaConfig> out;
  auto add = [&](const CudaConfig& c) {
    if (out.size() < kMaxCandidates && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (!r) {  // a row length known only at run time: looped rows of a few warps
    add(make(4 * warp, false, 1));
    add(make(warp, false, 1));
    add(make(max_block, false, 1));
    return out;
  }
  // Few long rows: blocks share a row (whole-block rows, 16 elements per thread at least).
  for (int block : {std::min(max_block, 16 * warp), std::min(max_block, 8 * warp)}) {
    int splits = split_count(k, product(k.outer), d, block, 16 * block);
    if (splits <= 1) break;
    CudaConfig c = make(block, false, v);
    c.splits = splits;
    add(c);
    if (splits >= 4) {
      c.splits = splits / 2;
      add(c);
    }
  }
  // Enough threads per row for about 8 elements each (one vector); a whole block when rows
  // are too few to fill the device.
  int64_t tpr = std::clamp<int64_t>(pow2_ceil((*r + 7) / 8), 1, max_block);
  if (rows && *rows < d.sm_count && *r > 8 * warp) tpr = max_block;
  const bool keeps = reductions_read_row(k);
  // Persistent rows at 1, 1/2 and 1/4 of those threads, where the row fits in registers;
  // otherwise looped rows (each pass re-reads the row, from L2 when it is short) at 1, 1/4 and
  // 1/8 of them, which keep few registers and so more rows in flight on an SM. Where vectors are
  // possible, no scalar twins. Each candidate costs an NVRTC build at the first compile, and
  // on the H100 the tuner never picked a scalar twin or a looped row where a persistent one
  // fitted (bf16 16384x8192, ms: layer_norm 0.181 persistent against 0.389 looped, softmax
  // 0.183 against 0.208, rms_norm 0.182 against 0.221; a GPT-2 block's layer_norm 0.008
  // against 0.023).
  bool persistent = false;
  for (int64_t t : {tpr, tpr / 2, tpr / 4}) {
    if (t < 1 || !keeps) continue;
    CudaConfig c = make(t, true, v);
    if (c.persistent) add(c), persistent = true;
  }
  if (persistent) return out;
  for (int64_t t : {tpr, tpr / 4, tpr / 8})
    if (t >= std::min<int64_t>(warp, tpr)) add(make(t, false, v));
  add(make(std::min<int64_t>(max_block, std::max<int64_t>(tpr, warp)), false, v));
  return out;
}

// Buffers past which a vectorized pointwise thread's loads may not fit its registers.
constexpr size_t kManyBuffers = 24;

size_t accessed_buffers(const loop::LoopKernel& k) {
  loop::Access a = loop::access(loop::Kernel{k});
  a.reads.insert(a.writes.begin(), a.writes.end());
  return a.reads.size();
}

}  // namespace

int vector_width(const loop::Program& p, const loop::LoopKernel& k) {
  if (k.outer.empty() || !k.inner.empty() || !k.reductions.empty() || loop::has_dynamic_stores(k)) return 1;
  auto last = k.outer.back().constant();
  if (!last) return 1;
  std::string x = loop::loop_var(static_cast<int>(k.outer.size()) - 1);
  std::vector<ExprRef> loads;
  std::vector<std::pair<int, SymInt>> unit;  // (buffer, offset) of the contiguous accesses
  for (const auto& s : k.stores) {
    collect_loads(s.value, loads);
    if (affine_stride(s.offset, x) == 1) unit.emplace_back(s.buffer, s.offset);
  }
  for (const auto& l : loads)
    if (!l->dynamic() && affine_stride(l->offset(), x) == 1) unit.emplace_back(l->buffer(), l->offset());
  return widest_vector(p, unit, x, *last);
}

bool partitioned_scatter(const loop::LoopKernel& k) {
  if (k.free_dims.empty() || k.free_dims.size() == k.outer.size() || !k.reductions.empty()) return false;
  std::set<std::string> ordered;  // the loop variables of the dims that run in order
  for (size_t d = 0; d < k.outer.size(); ++d)
    if (std::find(k.free_dims.begin(), k.free_dims.end(), d) == k.free_dims.end()) ordered.insert(loop::loop_var(static_cast<int>(d)));
  std::set<int> stored;
  for (const auto& s : k.stores) stored.insert(s.buffer);
  for (const auto& s : k.stores) {
    // A thread's elements differ by their dynamic part alone, which decides the part.
    std::vector<std::string> vars;
    s.offset.collect_symbols(vars);
    for (const auto& v : vars)
      if (ordered.count(v)) return false;
    std::vector<loop::ExprRef> loads;
    collect_loads(s.value, loads);
    if (s.dynamic) collect_loads(s.dynamic, loads);
    for (const auto& l : loads) {
      if (!stored.count(l->buffer())) continue;
      bool own = l->buffer() == s.buffer && l->offset() == s.offset && (l->dynamic() && s.dynamic ? loop::same(l->dynamic(), s.dynamic)
                                                                                                  : !l->dynamic() && !s.dynamic);
      if (!own) return false;
    }
  }
  return true;
}

std::vector<CudaConfig> candidate_configs(const loop::Program& p, const loop::LoopKernel& k, const cuda::DeviceInfo& d) {
  const int warp = d.warp_size;
  CudaConfig c;
  if (loop::has_dynamic_stores(k)) {
    // A thread per point of the free dims, each running the others in order; without free dims
    // one thread runs everything in order.
    c.form = k.free_dims.empty() ? CudaConfig::Form::serial : CudaConfig::Form::scatter;
    if (!k.free_dims.empty()) c.block = 4 * warp;
    // Parts only where there are enough positions in order to share out: with a few (a KV
    // cache's index_copy_ at one position) every thread runs them all, and the launch is the
    // points' alone (256 parts of one position were 512 blocks, all but 2 idle: 1.5 us).
    SymInt ordered = 1;
    for (size_t dim = 0; dim < k.outer.size(); ++dim)
      if (std::find(k.free_dims.begin(), k.free_dims.end(), dim) == k.free_dims.end()) ordered = ordered * k.outer[dim];
    const bool few = ordered.constant() && *ordered.constant() <= kFewScatterPositions;
    if (!k.free_dims.empty() && partitioned_scatter(k) && !few) c.parts = kScatterParts;
    // Listed: blocks of one part and a tile of points, about 4 a multiprocessor (an embedding
    // gradient, 768 columns over 8192 tokens: 6 tiles of 128 columns, 128 parts).
    if (c.parts > 1 && warp == 32 && listed_scatter(k)) {
      SymInt points = 1;
      for (size_t f : k.free_dims) points = points * k.outer[f];
      const int64_t tiles = points.constant() ? (*points.constant() + c.block - 1) / c.block : 8;
      const int64_t parts = std::min<int64_t>(256, 4 * d.sm_count / std::max<int64_t>(tiles, 1));
      if (parts >= 2) {
        int64_t p2 = 1;
        while (p2 * 2 <= parts) p2 *= 2;
        c.parts = static_cast<int>(p2);
        c.listed = true;
      }
    }
    return {c};
  }
  if (loop::is_scan(k)) {
    c.form = CudaConfig::Form::scan;
    c.block = 4 * warp;
    CudaConfig small = c;
    small.block = warp;
    return {c, small};
  }
  if (!k.reductions.empty()) {
    if (!is_column_reduction(k)) return row_configs(p, k, d);
    std::vector<CudaConfig> out;
    c.form = CudaConfig::Form::column;
    c.block = warp;
    const int v = column_vector_width(p, k);
    // Short rows over many outputs: flat columns, first when the rows are short enough that rows
    // of threads would split them thin (a depthwise 7x7 convolution's 49 taps over channels-last
    // activations), else last.
    const std::vector<CudaConfig> flat = flat_column_configs(k, d, v);
    const auto r = product(k.inner).constant();
    const bool flat_first = r && *r <= kFlatColumnFirst && !flat.empty();
    if (flat_first) out = flat;
    // A split over few column tiles comes first as 4 rows of threads taking half the widest
    // vector, in half a wave of splits: twice the blocks of 8 rows with 16-byte accesses, each
    // half the size (bf16 column sum 16384x8192 on an H100: 0.0968 -> 0.0933 ms; a whole wave of
    // them 0.0954, 2-element vectors 0.0940, 2 rows of threads 0.1023).
    c.block_y = 4;
    c.vector = std::max(v / 2, 1);
    if (int splits = split_count(k, column_tiles(k, c), d, warp * 4, 32 * 4); splits > 1) {
      c.splits = splits >= 4 ? splits / 2 : splits;
      out.push_back(c);
    }
    for (int rows : {8, 16, 4, 32}) {
      if (rows * warp > d.max_threads_per_block) continue;
      c.block_y = rows;
      for (int vector : {v, 1}) {
        if (vector == 1 && v > 1 && rows > 8) continue;  // scalar columns: only the usual 8 rows
        c.vector = vector;
        c.splits = 1;
        // Few column tiles over a long reduction: blocks split the rows (32 each per thread at least).
        if (int splits = split_count(k, column_tiles(k, c), d, warp * rows, 32 * rows); splits > 1) {
          c.splits = splits;
          out.push_back(c);
          if (rows == 8 && splits >= 4) {
            c.splits = splits / 2;
            out.push_back(c);
          }
          c.splits = 1;
        }
        out.push_back(c);
        if (v == 1) break;
      }
    }
    if (!flat_first) {
      const size_t room = kMaxCandidates - std::min(flat.size(), kMaxCandidates / 2);
      if (out.size() > room) out.resize(room);
      out.insert(out.end(), flat.begin(), flat.end());
    }
    // A window (pooling, a depthwise convolution) became a column by its channels-last layout:
    // the row forms it had before stay candidates, the tuner deciding.
    if (reads_window(k)) {
      const auto rows = row_configs(p, k, d);
      const size_t keep = std::min(rows.size(), size_t{3});
      if (out.size() > kMaxCandidates - keep) out.resize(kMaxCandidates - keep);
      out.insert(out.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep));
    }
    if (out.size() > kMaxCandidates) out.resize(kMaxCandidates);
    return out;
  }
  std::vector<CudaConfig> out;
  if (is_transposing(k)) {
    // Tiles of 2 and 1 warps a side (shared memory permitting), passes of warp / 4 and warp / 8 rows.
    TransposedAccesses staged = transposed_accesses(k);
    auto shared_bytes = [&](int side) {
      int64_t bytes = 0;
      for (const auto* group : {&staged.loads, &staged.stores})
        for (const auto& a : *group) {
          DType t = p.buffers[static_cast<size_t>(a.buffer)].dtype;
          bytes += int64_t{side} * (side + tile_pad(t)) * static_cast<int64_t>(dtype_size(t));
        }
      return bytes;
    };
    c.form = CudaConfig::Form::tiled;
    c.block = warp;
    // Wide tiles first: every staged access moves in 16-byte groups, the tile 256 bytes along
    // the staged accesses' dim and 128 along the other, 8 rows of threads (bf16 x + yT
    // 16384x8192: 128x64 tiles 0.273 ms against 0.280 for 64x64 pairs, on an H100).
    std::set<size_t> sizes;
    for (const auto* group : {&staged.loads, &staged.stores})
      for (const auto& a : *group) sizes.insert(dtype_size(p.buffers[static_cast<size_t>(a.buffer)].dtype));
    if (sizes.size() == 1 && *sizes.begin() <= 8) {
      const int s = static_cast<int>(*sizes.begin());
      for (auto [bytes_a, bytes_b, rows] : {std::tuple{256, 128, 8}, {256, 256, 16}, {256, 256, 8}}) {
        CudaConfig w = c;
        const int threads = rows * warp;
        w.block_y = rows;
        w.vector = 16 / s;
        w.tile_a = bytes_a / s;
        w.tile_b = bytes_b / s;
        const int per_row_a = w.tile_a / w.vector, per_row_b = w.tile_b / w.vector;
        bool fits = threads % per_row_a == 0 && threads % per_row_b == 0 && w.tile_b % (threads / per_row_a) == 0 &&
                    w.tile_a % (threads / per_row_b) == 0 && threads <= d.max_threads_per_block;
        int64_t bytes = int64_t{w.tile_a} * w.tile_b * s * static_cast<int64_t>(staged.loads.size() + staged.stores.size());
        if (fits && bytes <= d.shared_per_block) out.push_back(w);
      }
    }
    for (int rows : {warp / 4, warp / 8})
      for (int columns : {2, 1}) {
        c.block_y = std::max(1, rows);
        c.vector = columns;
        if (columns == 1 || shared_bytes(tile_side(c)) <= d.shared_per_block) out.push_back(c);
      }
  }
  c = CudaConfig{};
  int v = vector_width(p, k);
  for (int warps : {4, 8, 16}) {
    if (warps * warp > d.max_threads_per_block) continue;
    c.block = warps * warp;
    c.vector = v;
    // No scalar twin where vectors are possible: slower in every tuning on the H100 (the CNN's
    // im2col and relu: 0.070 and 0.096 ms against 0.027 and 0.048), and an NVRTC build each.
    out.push_back(c);
  }
  // ... but for a kernel of many buffers, whose vectors a thread holds all at once (merged
  // optimizer updates of twelve layers: 48 vector loads a thread, spilled; ViT-S's
  // [1152, 384] f32 ones took 0.125 ms on an H200 for 149 MB), scalar twins are candidates too.
  if (v > 1 && accessed_buffers(k) > kManyBuffers)
    for (int warps : {4, 8}) {
      c.block = warps * warp;
      c.vector = 1;
      out.push_back(c);
    }
  if (out.size() > kMaxCandidates) out.resize(kMaxCandidates);
  return out;
}

CudaLaunch launch_for(const loop::LoopKernel& k, const CudaConfig& c, const cuda::DeviceInfo& d) {
  CudaLaunch l;
  l.block_x = c.block;
  l.block_y = c.block_y;
  int threads = c.block * c.block_y;
  // A block per unit (row, tile or split share), so blocks retire and start as the device has
  // room: a grid of a few resident waves whose blocks loop over several units ends unevenly
  // (bf16 layer_norm 16384x8192: 0.192 -> 0.183 ms with one row a block; x + yT 0.290 ->
  // 0.280 ms with one tile a block, on an H100).
  l.max_blocks = kMaxGrid;
  SymInt rows = product(k.outer);
  switch (c.form) {
    case CudaConfig::Form::pointwise:
      l.units = floordiv(rows, SymInt(c.vector));
      l.per_block = c.block;
      // Pointwise threads take a few accesses each once the grid passes 8 resident waves
      // (gelu(x + b) bf16 16384x8192: 0.200 ms at 2 waves, 0.189 at 8, 0.206 at one access a thread).
      l.max_blocks = resident_blocks(d, threads, 8);
      break;
    case CudaConfig::Form::tiled: {
      size_t m = k.outer.size();
      SymInt tiles = 1;
      for (size_t i = 0; i + 2 < m; ++i) tiles = tiles * k.outer[i];
      tiles = tiles * floordiv(k.outer[m - 2] + SymInt(tile_extent_a(c) - 1), SymInt(tile_extent_a(c)));
      tiles = tiles * floordiv(k.outer[m - 1] + SymInt(tile_extent_b(c) - 1), SymInt(tile_extent_b(c)));
      l.units = tiles;
      break;
    }
    case CudaConfig::Form::row:
      l.units = rows * SymInt(c.splits);
      l.per_block = c.block / c.threads_per_row;
      break;
    case CudaConfig::Form::column:
      l.units = column_tiles(k, c) * SymInt(c.splits);
      if (column_flat(c)) l.per_block = c.block;  // a thread per tile of `vector` columns
      break;
    case CudaConfig::Form::scan:
      l.units = rows;
      l.per_block = c.block;
      break;
    case CudaConfig::Form::serial: l.max_blocks = 1; break;
    case CudaConfig::Form::scatter: {
      SymInt points = 1;
      for (size_t f : k.free_dims) points = points * k.outer[f];
      if (c.listed) {  // a block a part and tile of points
        l.units = floordiv(points + SymInt(c.block - 1), SymInt(c.block)) * SymInt(c.parts);
        l.per_block = 1;
        break;
      }
      l.units = points * SymInt(c.parts);
      l.per_block = c.block;
      break;
    }
    case CudaConfig::Form::attention:
    case CudaConfig::Form::gemv: COIL_CHECK(false) << "attention and gemv launches come from their emitters"; break;
  }
  if (c.splits > 1) l.scratch_bytes = split_layout(k, c).bytes;
  return l;
}

SplitLayout split_layout(const loop::LoopKernel& k, const CudaConfig& c) {
  SplitLayout s;
  bool column = c.form == CudaConfig::Form::column;
  if (column) s.width = column_width(c);
  auto n = (column ? column_tiles(k, c) : product(k.outer)).constant();
  COIL_CHECK(n) << "split reductions need static sizes";
  s.units = *n;
  auto align = [](int64_t v) { return (v + 255) / 256 * 256; };
  s.bytes = align(s.units * 4);
  for (const auto& r : k.reductions) {
    if (r.kind == loop::ReduceKind::welford_m2) {
      s.partial_offset.push_back(-1);
      continue;
    }
    s.partial_offset.push_back(s.bytes);
    s.bytes += align(s.units * c.splits * s.width * kLargestPartial);
  }
  return s;
}

}  // namespace coil::codegen
