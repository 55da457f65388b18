// Column reductions on CUDA: a block takes a tile of adjacent outputs (threadIdx.x, times
// `vector` lanes), its rows of threads (threadIdx.y) split the reduction, and a split column
// tile's blocks meet in device scratch, the last to arrive merging their partials.
#include "codegen/cuda/emitter.h"
#include "codegen/cuda/launch.h"
#include "codegen/kernel_shape.h"

namespace coil::codegen {

namespace {

using loop::ReduceKind;

// The column in the tile of a round's column c: thread c / group's lane g * group + c % group.
std::string column_of(int vector, int group, int g) {
  if (group == vector) return "c";
  return fmt::format("c / {} * {} + {} + c % {}", group, vector, g * group, group);
}

}  // namespace

void CudaEmitter::column() {
  const size_t m = k_.outer.size();
  const bool flat = column_flat(config_);
  if (!flat)
    out("  __shared__ __align__(16) unsigned char scratch[{}];", static_cast<int64_t>(config_.block * config_.block_y) * kColumnScratchPerThread);
  std::vector<std::string> vars = outer_vars(m);
  std::string last = vars.back();
  vars.back() = "tile_x";
  std::vector<SymInt> extents(k_.outer.begin(), k_.outer.end());
  const int width = flat ? config_.vector : column_width(config_);
  extents.back() = floordiv(extents.back() + SymInt(width - 1), SymInt(width));
  if (column_lanes()) {
    find_column_vectors();
    find_column_steps();
  }
  out("  const idx_t tiles = {};", idx(product(extents)));
  if (flat) {
    // A thread per group of `vector` adjacent outputs, neighbours in the block taking the next
    // group over all outer dims: short reductions over many outputs whose last dim is narrower
    // than a warp's tile (a depthwise convolution's channels) leave no thread idle.
    out("  for (idx_t tile = static_cast<idx_t>(blockIdx.x) * {} + static_cast<idx_t>(threadIdx.x); tile < tiles; tile += "
        "static_cast<idx_t>(gridDim.x) * {}) {{",
        config_.block, config_.block);
    decompose("tile", vars, extents, "    ");
    out("    const idx_t {} = tile_x * {};", last, width);
    out("    const bool active = {} < {};", last, idx(k_.outer.back()));
    reduction_passes("    ", "active", true);
    out("  }}");
    return;
  }
  if (config_.splits > 1) {
    out("  __shared__ bool last_split;");
    out("  for (idx_t unit = blockIdx.x; unit < tiles * {}; unit += gridDim.x) {{", config_.splits);
    out("    const idx_t tile = unit / {};", config_.splits);
    out("    const int split = static_cast<int>(unit % {});", config_.splits);
  } else {
    out("  for (idx_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {{");
  }
  decompose("tile", vars, extents, "    ");
  out("    const idx_t {} = tile_x * {} + static_cast<idx_t>(threadIdx.x){};", last, width,
      column_lanes() ? fmt::format(" * {}", config_.vector) : "");
  out("    const bool active = {} < {};", last, idx(k_.outer.back()));
  reduction_passes("    ", "active", true);
  out("  }}");
}

// Lanes of step i's partial that one round through the block's scratch takes: as many as fit
// kColumnScratchPerThread bytes a thread (all of a float sum's).
int CudaEmitter::column_group(size_t i) const {
  const auto& r = k_.reductions[i];
  // value_type's: 16-bit floats accumulate in float
  int64_t bytes = r.acc == DType::f16 || r.acc == DType::bf16 ? 4 : dtype_size(r.acc);
  if (r.kind == ReduceKind::argmax || r.kind == ReduceKind::argmin) bytes = 16;
  if (r.kind == ReduceKind::welford_mean) bytes = 2 * bytes + 8;
  int g = config_.vector;
  while (g > 1 && g * bytes > kColumnScratchPerThread) g /= 2;
  return g;
}

// Step i's partials, lanes [g * group, (g + 1) * group), written to the block's scratch as
// cs[threadIdx.y][threadIdx.x][lane], then a loop over the tile's columns of that group, each
// column taken by one thread (`c`, at column column_of(...) of the tile) with `v` the column's
// partials combined across the rows of threads; the caller's `body` uses them.
void CudaEmitter::column_round(size_t i, int g, const std::string& in, const std::function<void(const std::string&)>& body) {
  const int group = column_group(i), b = config_.block;
  const std::string type = partial_type(i).first, f = combiner_of(i);
  out("{}__syncthreads();", in);
  if (column_lanes()) {
    out("{}#pragma unroll", in);
    out("{}for (int q = 0; q < {}; ++q) cs{}[(threadIdx.y * {} + threadIdx.x) * {} + q] = acc{}[{} + q];", in, group, i, b, group, i,
        g * group);
  } else {
    out("{}cs{}[threadIdx.y * {} + threadIdx.x] = acc{};", in, i, b, i);
  }
  out("{}__syncthreads();", in);
  each_column(group, in, [&](const std::string& at) {
    out("{}{} v = cs{}[c];", at, type, i);
    out("{}#pragma unroll", at);
    out("{}for (int y = 1; y < {}; ++y) v = {}(v, cs{}[y * {} + c]);", at, config_.block_y, f, i, b * group);
    body(at);
  });
}

// `body` (given its indent) for each column c of a round of `group` lanes (block * group columns
// over the block's threads): straight-line code, or an unrolled loop of fixed trip count where a
// thread takes more than one. A loop bounded by the column count instead (c += threads), with the
// split partials read back by plain loads, had made a bf16 column sum 0.0910 -> 0.0977 ms on an
// H100 (the same loop with L2 reads: 0.0912).
void CudaEmitter::each_column(int group, const std::string& in, const std::function<void(const std::string&)>& body) {
  const int columns = config_.block * group, threads = config_.block * config_.block_y;
  const int per = (columns + threads - 1) / threads;
  const bool ragged = per * threads != columns;
  if (per > 1) {
    out("{}#pragma unroll", in);
    out("{}for (int k = 0; k < {}; ++k) {{", in, per);
  } else {
    out("{}{{", in);
  }
  out("{}  const int c = threadIdx.y * {} + threadIdx.x{};", in, config_.block, per > 1 ? fmt::format(" + k * {}", threads) : "");
  if (ragged) out("{}  if (c < {}) {{", in, columns);
  body(in + (ragged ? "    " : "  "));
  if (ragged) out("{}  }}", in);
  out("{}}}", in);
}

// Every thread of the block gets step i's lanes of group g from cs[c] (the column's result).
void CudaEmitter::column_spread(size_t i, int g, const std::string& in) {
  const int group = column_group(i);
  out("{}__syncthreads();", in);
  if (column_lanes()) {
    out("{}#pragma unroll", in);
    out("{}for (int q = 0; q < {}; ++q) acc{}[{} + q] = cs{}[threadIdx.x * {} + q];", in, group, i, g * group, i, group);
  } else {
    out("{}acc{} = cs{}[threadIdx.x];", in, i, i);
  }
}

// Combines the partials of steps [first, end) across the rows of threads: one round of the
// block's scratch per group of lanes, where a round per lane and a second round to hand every
// thread the result had cost eight barriers more for 4 lanes. A split tile's blocks write the
// combined partials to device scratch; the last block to arrive merges them, sets the tile's
// ticket back to zero (the runtime zeroes a stream's scratch once, not before every launch) and
// alone goes on to the stores. Afterwards every thread holds the results, as later passes read
// them. bf16 16384x8192 sum over dim 0, 16 splits of 32x4 threads, on an H100: 0.0921 -> 0.0908 ms.
constexpr int kUnrolledSplits = 32;

void CudaEmitter::column_combine(size_t first, size_t end, const std::string& in) {
  if (column_flat(config_)) return;  // each thread reduced its columns alone
  std::vector<size_t> steps;
  for (size_t i = first; i < end; ++i)
    if (k_.reductions[i].kind != ReduceKind::welford_m2) steps.push_back(i);
  for (size_t i : steps) out("{}{}* const cs{} = reinterpret_cast<{}*>(scratch);", in, partial_type(i).first, i, partial_type(i).first);
  const int splits = config_.splits;
  if (splits <= 1) {
    for (size_t i : steps)
      for (int g = 0; g < config_.vector / column_group(i); ++g) {
        column_round(i, g, in, [&](const std::string& at) { out("{}cs{}[c] = v;", at, i); });
        column_spread(i, g, in);
      }
    return;
  }
  SplitLayout layout = split_layout(k_, config_);
  for (size_t i : steps)
    for (int g = 0; g < config_.vector / column_group(i); ++g)
      column_round(i, g, in, [&](const std::string& at) {
        out("{}{}[(tile * {} + split) * {} + {}] = v;", at, split_partials(layout, i), splits, layout.width,
            column_of(config_.vector, column_group(i), g));
      });
  out("{}__threadfence();", in);
  out("{}__syncthreads();", in);
  out("{}if (threadIdx.x == 0 && threadIdx.y == 0) last_split = atomicAdd(reinterpret_cast<unsigned*>(W) + tile, 1u) == {}u;", in,
      splits - 1);
  out("{}__syncthreads();", in);
  out("{}if (!last_split) continue;", in);
  out("{}__threadfence();", in);
  for (size_t i : steps) {
    const int group = column_group(i);
    for (int g = 0; g < config_.vector / group; ++g) {
      if (i != steps.front() || g > 0) out("{}__syncthreads();", in);  // the previous round's results are read
      each_column(group, in, [&](const std::string& at) {
        out("{}{} v = {};", at, partial_type(i).first, partial_type(i).second);
        // unrolled whole only for a few splits: ResNet-50's batch-norm statistics had 528,
        // whose unrolled Welford merges took NVRTC 10 s a kernel (units of 50 s)
        out("{}#pragma unroll{}", at, splits <= kUnrolledSplits ? "" : fmt::format(" {}", kUnrolledSplits / 4));
        out("{}for (int q = 0; q < {}; ++q) v = {}(v, coil_rt::load_l2({} + (tile * {} + q) * {} + {}));", at, splits, combiner_of(i),
            split_partials(layout, i), splits, layout.width, column_of(config_.vector, group, g));
        out("{}cs{}[c] = v;", at, i);
      });
      column_spread(i, g, in);
    }
  }
  out("{}if (threadIdx.x == 0 && threadIdx.y == 0) reinterpret_cast<unsigned*>(W)[tile] = 0u;", in);
}

// Vectorized columns over one reduction dim, where each staged load steps a constant along it:
// the row loop reads through a pointer per load, set at the thread's first row and advanced a
// constant each trip, and evict-first (coil_rt::load_once) where the kernel reads its rows once
// (one pass, no stores along them). On an H100 (bf16 sum over dim 0 of 16384x8192, split in 16,
// two inputs in turns) the hint gains this way, 0.0910 -> 0.0903 ms, where it cost 6% with the
// index recomputed each trip (0.0910 -> 0.0966); the pointer alone is even (0.0908).
void CudaEmitter::find_column_steps() {
  if (k_.inner.size() != 1) return;
  const std::string r = inner_vars()[0];
  for (const auto& l : row_vec_loads_) {
    auto step = affine_stride(l.offset, r);
    if (!step) {
      column_steps_.clear();
      return;
    }
    column_steps_.push_back(*step);
  }
}

void CudaEmitter::open_column_pointers(const std::string& indent, const std::string& first_row) {
  ++column_loops_;
  const std::string r = inner_vars()[0];
  for (size_t k = 0; k < row_vec_loads_.size(); ++k) {
    const Staged& l = row_vec_loads_[k];
    const SymInt at_first = substitute(l.offset, {{lane_var(), SymInt(0)}, {r, SymInt(0)}});
    out("{}const {}* const p{}_{} = b{} + ({}) + ({}) * {};", indent, element_type(l.buffer), l.name, column_loops_, l.buffer,
        idx(at_first), first_row, column_steps_[k]);
  }
}

void CudaEmitter::column_pointer_loads(const std::string& indent) {
  const bool once = loop::pass_end(k_, 0) == k_.reductions.size() &&
                    std::none_of(k_.stores.begin(), k_.stores.end(), [](const loop::StoreStep& s) { return s.inner; });
  for (size_t k = 0; k < row_vec_loads_.size(); ++k) {
    const Staged& l = row_vec_loads_[k];
    const auto vec = vec_type(l.buffer, config_.vector);
    const auto at = fmt::format("reinterpret_cast<const {}*>(p{}_{} + it * {})", vec, l.name, column_loops_, column_steps_[k] * config_.block_y);
    out("{}const {} {} = {};", indent, vec, l.name, once ? "coil_rt::load_once(" + at + ")" : "*" + at);
  }
}

// Flat columns over a nest of reduction dims of known extents walk them in nested loops.
bool CudaEmitter::nested_row_loops() const {
  return column_flat(config_) && k_.inner.size() > 1 && !column_pointers() &&
         std::all_of(k_.inner.begin(), k_.inner.end(), [](const SymInt& e) { return e.constant().has_value(); });
}

}  // namespace coil::codegen
