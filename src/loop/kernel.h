// Loop-IR kernels and programs. A LoopKernel iterates over `outer` (variables x0, x1, ...);
// inside, optional reduction steps iterate over `inner` (r0, r1, ...) and yield one value each
// per outer point; stores write either per (outer, inner) point — a pointwise body, or the
// normalize pass of softmax/layer_norm — or per outer point after the reductions. A kernel with
// no inner loop is a pointwise kernel. Externs call libraries (GEMM, convolution).
#pragma once
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "loop/activation.h"
#include "loop/expr.h"

namespace coil::loop {

// welford_mean and welford_m2 come as a pair of adjacent steps over the same value: one pass of
// Welford's algorithm gives the mean and the sum of squared deviations from it (M2).
// carry (scans only): the running value becomes `value` at each step; `value` may read the
// running values of this and later steps (as the previous step left them) besides earlier
// steps' (this step's), so a scan can carry an index beside a running max, or any recurrence.
enum class ReduceKind : uint8_t { sum, prod, max, min, argmax, argmin, welford_mean, welford_m2, carry };
const char* reduce_name(ReduceKind k);

struct ReduceStep {
  ReduceKind kind;
  ExprRef value;  // over x*, r*, and earlier steps' `reduced` values
  DType acc;      // accumulator dtype (the result dtype; argmax/argmin give i64)
  // A scan (cumsum, cummax, ...): `reduced` is the running value, read by inner stores in the
  // same pass over the inner loop, which then runs in order. A kernel's steps are all scans or
  // none; a scan's steps are sum, prod, max, min or carry.
  bool scan = false;
};

struct StoreStep {
  int buffer;
  SymInt offset;  // over x* (and r* when `inner`)
  ExprRef value;
  bool inner;     // runs inside the inner loop (after all reductions)
  // A data-dependent (i64) addition to `offset` (scatter), or null. A kernel with such a
  // store runs its iterations in order, on one thread, so later writes win.
  ExprRef dynamic = nullptr;
};

struct LoopKernel {
  std::string name;
  SymShape outer;
  SymShape inner;
  std::vector<ReduceStep> reductions;
  std::vector<StoreStep> stores;
  std::vector<std::string> origins;  // the graph values this kernel computes (for tracing)
  // With dynamic stores (a scatter): the outer dims (ascending) whose distinct values store to
  // distinct elements, which may run in parallel; the other dims run in order, which keeps each
  // element's sequence of stores (later writes win, sums in order). Empty: all in order.
  std::vector<size_t> free_dims;
};

// attention: softmax(q @ k^T * scale (causal: keys after the query masked; a bool mask hides
// the keys it holds false for, another is added to the scaled scores)) @ v over the leading
// (batch, heads) dims, a fused kernel on CUDA (codegen/cuda/cuda_attention.cc).
// torch: a call the embedding program makes (graph op torch_call; CompileOptions::host_calls),
// the only kind with more than one output.
enum class ExternKind : uint8_t { mm, bmm, addmm, convolution, attention, torch };
// mm, bmm, addmm: the calls a GEMM epilogue may join.
inline bool is_product(ExternKind k) { return k == ExternKind::mm || k == ExternKind::bmm || k == ExternKind::addmm; }

// An operand of an extern call: a strided view into a buffer.
struct View {
  int buffer;
  SymShape sizes;
  SymShape strides;
  SymInt offset = 0;
};
// The element offset of `index` (one entry per dim, from the first) in a view.
SymInt view_offset(const View& v, const std::vector<SymInt>& index);

struct ExternCall {
  std::string name;
  ExternKind kind;
  std::vector<View> inputs;  // addmm: bias, mat1, mat2; convolution: input, weight[, bias]; attention: q, k, v[, mask
                             // as a view of the scores' sizes [..., L, S], stride 0 where it broadcasts]
  int output;                // a buffer, written in its own layout unless output_view is set
  // torch: the call's other outputs, in order (its memory is the embedder's: runtime/plan.h).
  std::vector<int> more_outputs;
  // attention: where the result (its logical sizes) goes in `output` when that is a permuted
  // layout (schedule/extern_copies.h).
  std::optional<View> output_view;
  // addmm: beta, alpha; convolution: k (spatial dims), then k each of stride, padding,
  // dilation, output_padding, then groups and transposed (0 or 1); attention: scale, causal (0 or 1);
  // torch: the embedder's index of the call
  std::vector<double> params;
  // Applied to each element of the result before it is stored (mm, bmm, addmm): a GEMM
  // epilogue the scheduler found after the product.
  Activation activation = Activation::none;
  // mm, addmm: a tensor added to the product before the store (cuBLASLt's C with beta 1: D = A @ B
  // (+ bias) + residual), viewed in the product's logical sizes; schedule/fuse_gemm_epilogues.h.
  // convolution: the same in the result's layout, added as residual * residual_scale.
  std::optional<View> residual;
  // convolution (cuDNN's fused epilogue, schedule/fuse_conv_epilogues.h): the result stored is
  // activation(conv * scale + residual * residual_scale + shift), with these f32 vectors over the
  // output channels (absent: 1, 1 and 0); activation relu or none.
  std::optional<View> scale, shift, residual_scale;
  // mm, addmm as coil's few-row product kernel (schedule/fuse_gemv_epilogues.h): `gate`, the B
  // operand of a second product of the same A (a plain mm), and `epilogue`, the pointwise kernel
  // that consumed the results. Where it loads buffer epilogue_inputs[0] it reads the first
  // product's value (after the call's alpha, bias, residual and activation, rounded to that
  // buffer's dtype), where it loads epilogue_inputs[1] the second's (no step writes either buffer
  // any more); its one store is the call's `output`.
  std::optional<View> gate;
  std::shared_ptr<const LoopKernel> epilogue;
  std::vector<int> epilogue_inputs;
  // mm, addmm as the few-row product kernel (schedule/fuse_gemv_prologues.h): the row kernel
  // that wrote A (reductions over each row of A, then the row's elements as one inner store; an
  // RMSNorm), which the product's kernel runs itself, into shared memory. A's buffer is then
  // neither written nor read.
  std::shared_ptr<const LoopKernel> prologue;
  std::vector<std::string> origins;
};

using Kernel = std::variant<LoopKernel, ExternCall>;

// Whether only coil's few-row product kernel runs the call (cuBLASLt has no such prologue or
// epilogue).
inline bool fused_with_loops(const ExternCall& c) { return c.epilogue || c.prologue; }

struct Buffer {
  enum class Role : uint8_t { input, weight, constant, temporary, output };
  std::string name;
  Role role;
  DType dtype;
  SymShape sizes;
  SymShape strides;
  SymInt offset = 0;
  std::vector<double> data;  // the values of a constant buffer
  // An output whose strides the schedule may change (Graph::any_layout_outputs): moved to
  // channels-last with the temporaries around it (schedule/channels_last.h).
  bool any_layout = false;
};

const char* role_name(Buffer::Role r);  // "input", "weight", "constant", "temp", "output"

struct Program {
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;  // in execution order
};

std::string loop_var(int i);    // "x0"
std::string reduce_var(int i);  // "r0"
std::string to_string(const Program& p);
// The buffers a kernel reads (loads, extern inputs) and writes (stores, extern output).
struct Access {
  std::set<int> reads, writes;
};
Access access(const Kernel& k);
void collect_loads(const ExprRef& e, std::set<int>& out);
// The loads of `buffer` in e, appended to out.
void loads_of(const ExprRef& e, int buffer, std::vector<ExprRef>& out);

bool is_scan(const LoopKernel& k);
// Whether `e` reads the result of a reduction step of slot in [first, end).
bool reads_slots(const ExprRef& e, int first, int end = std::numeric_limits<int>::max());
// `e` with its reduction results' slots renumbered by `by` (steps put in front of its kernel's).
ExprRef shift_slots(const ExprRef& e, int by);
// Reduction steps run in passes over the inner loop: a pass takes consecutive steps that do not
// read each other's results (sum and max of one row, max.dim's value and index), so the row is
// read once for all of them; a Welford pair is a pass of its own. The end of the pass that
// starts at step `first`.
size_t pass_end(const LoopKernel& k, size_t first);
bool has_dynamic_stores(const LoopKernel& k);
// Whether the kernel can report an error through its status word: an index check, or an
// integer division or remainder (by zero).
bool may_fail(const LoopKernel& k);
// Internal consistency: buffer ids, variables in range, reduced slots defined before use,
// store dtypes matching their buffers. Throws coil::Error (an internal error) on violation.
void verify(const Program& p);

}  // namespace coil::loop
