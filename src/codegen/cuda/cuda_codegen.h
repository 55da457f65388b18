// CUDA C++ from the loop IR: one __global__ function per loop kernel, for NVRTC. Each kernel is
// emitted in one of a few forms, chosen with its launch configuration from the kernel's shape
// and the device's facts (launch.h):
// - pointwise: a grid-stride loop over the outer points, each thread taking `vector`
//   consecutive elements of the last dim with 16-byte loads and stores where contiguity allows;
//   an operand read or written
//   across the fast dim goes through a shared-memory tile, so every access stays coalesced;
// - row: reductions over the inner dims, `threads_per_row` threads per row combining through
//   warp shuffles and shared memory; `persistent` keeps the row's loads in registers across the
//   passes (softmax, layer_norm read their input once), otherwise every pass re-reads it;
// - column: reductions whose rows run across memory (a sum over dim 0): threads of a warp take
//   adjacent columns, rows of threads split the reduction and combine in shared memory;
// - split (row or column with splits > 1): few long rows; each row's reduction is shared by
//   `splits` blocks, which leave their partials in scratch; the last block of a row to finish
//   (an atomic ticket) merges them and writes the row's results;
// - scan: a thread per row walks the row in order (cumsum);
// - serial: one thread runs the kernel in order (scatter with ordered writes).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "coil/sym.h"
#include "loop/kernel.h"
#include "runtime/cuda/device_info.h"

namespace coil::codegen {

// Every buffer a kernel takes starts at a multiple of this many bytes, so vector accesses at
// offsets that are multiples of their width need no check at run time (and no scalar twin that
// would cost every kernel registers): the GPU plan allocates its buffers so and stages a
// borrowed tensor that is not (a view at an odd storage offset) into an aligned copy.
inline constexpr size_t kBufferAlignment = 16;

struct CudaConfig {
  enum class Form : uint8_t { pointwise, tiled, row, column, scan, serial, scatter, attention, gemv };
  Form form = Form::pointwise;
  int block = 1;            // threads per block along x
  int block_y = 1;          // column: rows of threads; tiled: rows of the tile per pass
  int threads_per_row = 1;  // row: a power of two
  int vector = 1;           // pointwise: elements per thread access; column: adjacent outputs per thread;
                            // tiled: columns per thread, block apart (the tile is block * vector a side)
  int persistent = 0;       // row: elements per thread kept in registers (0: looped)
  int splits = 1;           // row, column: blocks sharing one row (or column tile), > 1 for few long rows;
                            // gemv: warps sharing an output, each over a slice of K
  int tile_a = 0, tile_b = 0;  // tiled in 16-byte groups of `vector` elements: the tile's extents along
                               // its two dims (0: square tiles of tile_side)
  int jam = 1;                 // flat column: adjacent outputs along the window dim a thread takes (jam.h)
  int parts = 1;               // scatter: threads per free point, each storing the elements whose hash is its part;
                               // gemv: adjacent outputs a warp computes
  bool listed = false;         // scatter with parts: a block's threads list a round of positions of its part in
                               // shared memory, in order, then each applies them (cuda_pointwise.cc)
  bool operator==(const CudaConfig&) const = default;
};
std::string to_string(const CudaConfig& c);  // "row tpr=256 block=256 persistent=8"

// How the runtime launches a kernel: block (block, block_y); grid = ceil(units / per_block)
// blocks, at most max_blocks (grid-stride loops take the rest).
struct CudaLaunch {
  int block_x = 1, block_y = 1;
  SymInt units = 1;
  int64_t per_block = 1;
  int64_t max_blocks = 1;
  int64_t scratch_bytes = 0;  // split partials and tickets, after the status word; tickets start and end at zero
  int shared_bytes = 0;       // dynamic shared memory a block (the attention's tile ring)
  // Blocks a thread-block cluster (consecutive blocks along x; the grid is a whole number of
  // clusters), 0 for none; over 8 the function must allow a non-portable size.
  int cluster = 0;
};
int64_t grid_blocks(const CudaLaunch& launch, int64_t units);  // ceil(units / per_block), 1 to max_blocks

struct CudaKernel {
  std::string name;
  size_t program_index = 0;  // in Program::kernels
  std::vector<int> buffers;  // parameters in order (buffer ids), then symbols, the status word, the scratch if any
  std::vector<int> symbols;  // indices into the graph's size symbols
  CudaConfig config;
  CudaLaunch launch;
};

// A kernel's size parameters ("const int64_t s_<name>", after its buffers): the graph's
// `symbols` (in their order) that `used` mentions, each recorded in info.symbols.
std::vector<std::string> size_parameters(const std::vector<std::string>& used, const std::vector<std::string>& symbols, CudaKernel& info);

// The size bucket of a kernel's sizes: each of its size symbols' values (`symbol_values` in the
// graph's order, info.symbols) rounded up to a power of two. Symbolic kernels are tuned per bucket.
std::vector<int64_t> size_bucket(const CudaKernel& info, const std::vector<int64_t>& symbol_values);
// The same for every value given (a whole graph's sizes).
std::vector<int64_t> size_bucket(const std::vector<int64_t>& values);

struct CudaSource {
  std::string prelude;
  std::vector<std::string> bodies;  // per kernel
  std::vector<CudaKernel> kernels;
  std::string code() const;                                 // everything, for --emit code
};

// Emits one kernel in the given form (which must suit it: see candidate_configs).
std::string emit_cuda_kernel(const loop::Program& program, const loop::LoopKernel& kernel,
                             const std::vector<std::string>& symbols, const cuda::DeviceInfo& device,
                             const CudaConfig& config, CudaKernel& info);

// Kernel `index` of `program` in `config`, under `name`: a loop kernel (emit_cuda_kernel) or a
// product of a few rows (emit_cuda_gemv); what the autotuner builds of each candidate.
std::string emit_tunable_kernel(const loop::Program& program, size_t index, const std::string& name, const std::vector<std::string>& symbols,
                                const cuda::DeviceInfo& device, const CudaConfig& config, CudaKernel& info);

// cuda_attention.cc: the fused attention kernel of an attention extern call (a constant head
// size; the batch and the lengths may be symbolic, taken as the kernel's size parameters).
std::string emit_cuda_attention(const loop::Program& program, const loop::ExternCall& call, const std::vector<std::string>& symbols,
                                const cuda::DeviceInfo& device, CudaKernel& info);

// cuda_gemv.cc: a matrix product of a few rows (static sizes, f16/bf16/f32, B with unit stride
// along K) as coil's kernel: its candidate configurations, the heuristic's first; none where the
// call is no such product (cuBLASLt runs it). At most kGemvRows rows on tensor cores (f16/bf16
// in 16-byte pieces, sm_80 on), kGemvFmaRows otherwise.
inline constexpr int64_t kGemvRows = 16, kGemvFmaRows = 8;
std::vector<CudaConfig> gemv_configs(const loop::Program& program, const loop::ExternCall& call, const cuda::DeviceInfo& device);
std::string emit_cuda_gemv(const loop::Program& program, const loop::ExternCall& call, const CudaConfig& config, CudaKernel& info);

// Every loop kernel (and fused attention) of `program` with its heuristic configuration, or with its `candidate`-th
// candidate (the last when it has fewer) when that is >= 0.
// A kernel's text without comments, with its own name and its buffer parameters (b<N>) renamed
// in order of first appearance: equal for kernels that run the same code on different buffers (a model's repeated
// layers), which then compile and tune once.
std::string canonical_kernel_text(const std::string& body, const std::string& name);
// The name and text a kernel is built under: its canonical text (canonical_kernel_text) named by
// its op stem (the readable name less its index, graph-value numbers and candidate suffix:
// k3_native_layer_norm_2__0_c1 -> native_layer_norm) and a hash of that text. A model's repeated
// layers, each a graph of its own (partitions around attention, forward and backward), so build
// units of the same text, which the artifact cache serves for every layer after the first.
std::pair<std::string, std::string> content_named_kernel(const std::string& canonical, const std::string& readable);

CudaSource generate_cuda(const loop::Program& program, const std::vector<std::string>& symbols,
                         const cuda::DeviceInfo& device, int candidate = -1);

}  // namespace coil::codegen
