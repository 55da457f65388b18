// Pieces the fused attention generators share (cuda_attention.cc defines them): sizes and
// strides as C++ (constants, or expressions over the kernel's size parameters), a view's offset
// for one (batch, head), the unrolled loop over a tile's 16-byte pieces, the swizzled address of
// a piece in a wgmma tile, and the geometry of one call.
#pragma once
#include <numbers>
#include <optional>
#include <string>

#include "codegen/cuda/cuda_codegen.h"

namespace coil::codegen::attention {

int64_t constant(const SymInt& s, const char* what);
// A size, stride or offset as C++: a constant's digits, else its expression over the kernel's
// size parameters (symbol_name), in parentheses.
std::string text(const SymInt& s);
// C++ that sets `name` to the view's offset for the flattened batch index `bh`.
std::string batch_offset(const loop::View& v, const std::string& name);
// A view's row stride (from_end 2) or element stride (from_end 1), as text().
std::string stride(const loop::View& v, size_t from_end);
// Opens the unrolled loop over the 16-byte pieces of a tile of `tile_rows` rows, i0 the first
// piece of the pass (the thread's is i0 + threadIdx.x); THREADS and HD are the kernel's constants.
std::string open_pieces(const std::string& indent, const char* tile_rows);
// The shared-memory address of element `col` (a multiple of 8) of row `row` of a 128-byte
// swizzled tile at `base` (16-byte piece c of row r at c ^ (r % 8)).
std::string swizzled(const std::string& base);

// The online softmax of one row tile's scores `sc` ([BN / 8][4]: rows g and g + 8 of a quad's
// columns), base 2: each row's max over the quad (the raw max times `exp_scale`, then the running
// max `mr`), the running values' scale a0 / a1 (declared), exp2 of the scores in place, their
// sums folded into `lr`. `in` indents each line.
std::string online_softmax(const std::string& in, const std::string& sc, const std::string& mr, const std::string& lr, const std::string& hp,
                           double exp_scale);
// The running output's fragments `frag` (over d < HD / 8, d the loop's variable) rescaled by
// the online softmax's a0 (their first row) and a1 (their second).
std::string rescale_output(const std::string& in, const std::string& frag);
// The probabilities of keys [16 kk, 16 kk + 16) of `sc` as an A fragment `dest` (two adjacent
// score tiles, packed to 16 bits).
std::string pack_probabilities(const std::string& in, const std::string& dest, const std::string& sc, const std::string& hp);

// What every attention kernel needs to know about its call.
struct Shape {
  loop::View q, k, v, o;
  std::optional<loop::View> mask;  // over the scores [..., L, S]
  DType mask_dtype = DType::b8;
  // The batch dims' product, the query and key lengths: symbolic where the graph's sizes are
  // (dynamic shapes); the head size is a constant.
  SymInt batch = 1, L = 0, S = 0;
  int64_t E = 0;
  bool causal = false, half = false;
  bool fixed() const { return batch.is_constant() && L.is_constant() && S.is_constant(); }
  double scale_log2 = 0;  // the scale times log2(e)
  // A positive scale is applied inside exp2's argument (an FFMA per score, the max taken on the
  // raw scores); any other multiplies the scores first (prescale) and exp2's factor is 1.
  bool prescale() const { return !(scale_log2 > 0); }
  double exp_scale() const { return prescale() ? 1.0 : scale_log2; }
  // An added mask's factor in the scores' units: log2(e) once prescaled, else 1 / scale (the
  // scale then multiplies it back inside exp2's argument).
  double mask_factor() const { return prescale() ? std::numbers::log2e : std::numbers::log2e / scale_log2; }
};
Shape shape_of(const loop::Program& p, const loop::ExternCall& call);
// The kernel's size parameters (const int64_t, after its buffers): the graph's `symbols` that the
// call's views mention, in the graph's order, recorded in info.symbols.
std::vector<std::string> size_params(const Shape& a, const std::vector<std::string>& symbols, CudaKernel& info);
// The launch of `rows` query rows a block over every (batch, head), a block a tile (grid-stride
// beyond the grid's limit), and the kernel's lines that declare L, S and TILES_Q (its tiles per
// head) and TILES (all of them): constexpr where the sizes are constants.
void tile_launch(const Shape& a, int rows, CudaKernel& info);
std::string tile_constants(const Shape& a, int rows);
// The kernel parameter of buffer `b` (the output written, the others read; 16-bit elements but
// a mask's own type).
std::string buffer_param(const Shape& a, int b);
// Masks the scores `sc` of one row tile ([BN / 8][4]: rows `row` and `row` + 8 over keys
// k0 + nt * 8 + t * 2 + (c & 1)): keys past S or past the diagonal (causal) become -inf, and the
// explicit mask (read at `mb`, this (batch, head)'s offset into it) hides keys (bool) or is added
// (scaled to the scores' units). For tiles that need it: every tile where a mask is given.
std::string mask_scores(const Shape& a, const std::string& in, const std::string& sc, const std::string& row);

// Whether a view's rows move in 16-byte pieces (offset and outer strides multiples of 8).
bool vectorizable(const loop::View& v);

// A few query rows (decoding) take cuda_attention_decode.cc's kernel, split over the keys (static
// sizes: the split is chosen, and its scratch sized, at compile time), where its working set fits
// a block's static shared memory.
constexpr int64_t kDecodeRows = 16;
bool decode_attention_fits(const Shape& a, const cuda::DeviceInfo& device);
// `params` are the kernel's buffer and size parameters and the status word's, the scratch's to come.
std::string emit_decode_attention(const Shape& a, const loop::ExternCall& call, const std::string& hp, std::vector<std::string> params,
                                  const cuda::DeviceInfo& device, CudaKernel& info);

// The Hopper kernel (sm_90a, 64-wide heads whose rows move in 16-byte pieces): after the shared
// helpers `hp`_* that cuda_attention.cc emits; `params` its parameters.
std::string emit_wgmma_attention(const Shape& a, const loop::ExternCall& call, const std::string& hp, const std::vector<std::string>& params,
                                 CudaKernel& info);

}  // namespace coil::codegen::attention
