// Launch heuristics for CUDA kernels, in the spirit of Inductor's pointwise / reduction /
// persistent-reduction heuristics, with every device number read from DeviceInfo: a kernel's
// form follows from its structure, its block size from its element count, threads per row from
// the row length; a block per unit of work, pointwise grids up to 8 waves of the SMs. candidate_configs gives up to 8
// configurations, the heuristic's choice first; the autotuner measures them.
#pragma once
#include <algorithm>
#include <optional>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/kernel_shape.h"
#include "coil/dtype.h"

namespace coil::codegen {

inline constexpr size_t kMaxCandidates = 8;
// gridDim.x's limit on every architecture since compute capability 3.0.
inline constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;
// The largest partial a thread carries between threads: Welford's (mean, M2, count) in double.
inline constexpr int64_t kLargestPartial = 24;
// Shared memory a column reduction's thread has for its partials in one round of combining.
inline constexpr int64_t kColumnScratchPerThread = 32;
// Rows a flat column's thread walks alone (column_flat): candidates up to kFlatColumnRow
// elements, the first choice up to kFlatColumnFirst.
inline constexpr int64_t kFlatColumnRow = 1024;
inline constexpr int64_t kFlatColumnFirst = 128;

// A column reduction's tile: a warp of threads, each taking `vector` adjacent outputs.
inline int column_width(const CudaConfig& c) { return c.block * c.vector; }
// Flat columns: one row of threads and no splits, so each thread reduces its `vector` outputs
// alone and the block's threads take consecutive groups of them across all outer dims.
inline bool column_flat(const CudaConfig& c) { return c.form == CudaConfig::Form::column && c.block_y == 1 && c.splits == 1; }
// A tiled transpose's square tile: block threads along x, each taking `vector` columns.
inline int tile_side(const CudaConfig& c) { return c.block * std::max(1, c.vector); }
// A tiled kernel's tile extents along its two dims (a, then b): wide tiles' own, else square.
inline int tile_extent_a(const CudaConfig& c) { return c.tile_a ? c.tile_a : tile_side(c); }
inline int tile_extent_b(const CudaConfig& c) { return c.tile_b ? c.tile_b : tile_side(c); }
// Padding of a tile's shared-memory rows (elements) that puts a column's elements in distinct
// banks: an odd number of 4-byte words per row.
inline int tile_pad(DType t) { return std::max<int>(1, 4 / static_cast<int>(dtype_size(t))); }

// Where a split reduction keeps its state in the kernel's scratch: a ticket counter per unit
// (row, or column tile) at offset 0, then per reduction step (a Welford pair shares one) a region
// of units x splits x width partial slots of kLargestPartial bytes.
struct SplitLayout {
  int64_t units = 0;                    // rows (row form) or column tiles (column form)
  int64_t width = 1;                    // partials per unit and split: 1, or the tile's columns
  std::vector<int64_t> partial_offset;  // per reduction step (-1 for a Welford pair's second)
  int64_t bytes = 0;
};
SplitLayout split_layout(const loop::LoopKernel& kernel, const CudaConfig& config);

// Threads a scatter's free point gets (CudaConfig::parts) when partitioned_scatter allows it.
inline constexpr int kScatterParts = 32;
// Positions in order (static) up to which a scatter is not partitioned.
inline constexpr int64_t kFewScatterPositions = 16;
// Whether a scatter's stores may be split among threads by the element they store: it has dims
// that run in order, and reads what it stores only at the element it stores (an accumulation),
// so no thread reads an element another one writes.
bool partitioned_scatter(const loop::LoopKernel& kernel);
// A partitioned scatter of one store whose part follows from the ordered dims alone (not the
// free ones): every thread of a block of one part then takes the same positions, which the block
// lists once (CudaConfig::listed). cuda_pointwise.cc.
bool listed_scatter(const loop::LoopKernel& kernel);

std::vector<CudaConfig> candidate_configs(const loop::Program& program, const loop::LoopKernel& kernel,
                                          const cuda::DeviceInfo& device);
CudaLaunch launch_for(const loop::LoopKernel& kernel, const CudaConfig& config, const cuda::DeviceInfo& device);

// The widest vector (elements per access, a power of two, 16 bytes at most) a pointwise kernel
// can use along its last outer dim: every load and store of unit stride there starts aligned.
int vector_width(const loop::Program& program, const loop::LoopKernel& kernel);

}  // namespace coil::codegen
