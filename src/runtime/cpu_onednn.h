// oneDNN on the CPU: convolutions (forward and transposed, 1-3 spatial dims, groups up to
// depthwise, any strides of input, weight and output) and matrix products (2-D and batched,
// with the bias added in the product's kernel) in f32, f16 and bf16.
//
// A convolution asks oneDNN for its best kernel over the input and output in their own layouts
// (a channels-last chain's NHWC), then with every layout left to oneDNN (blocked layouts such as
// nChw8c on AVX2) where the first finds only a reference loop; operands are reordered into what
// the kernel wants and the result back into the output's strides. f16 and bf16 run natively
// where the machine has a 16-bit kernel (AVX-512 BF16, AMX); elsewhere (oneDNN's 16-bit
// reorders are then slow reference loops too) they are widened to f32 by coil's own conversion
// (cpu_convert.h) and the result narrowed back. Either way products accumulate in f32 and the
// result rounds once, after the bias, as PyTorch's CPU kernels round.
//
// Creating a primitive costs tens of microseconds (more than a small product takes): a Plan
// keeps the ones its calls made in Primitives, under the call and the size symbols' values.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coil/tensor.h"
#include "loop/conv_params.h"

namespace coil::onednn {

// The primitives one Plan made (thread-safe; a primitive runs in several threads at once).
class Primitives {
 public:
  Primitives();
  ~Primitives();
  Primitives(const Primitives&) = delete;
  Primitives& operator=(const Primitives&) = delete;
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Where a call's primitive is kept: the plan's cache (nullptr: made for this call alone), the
// call's kernel index and the size symbols' values (together they fix every operand's view).
struct Site {
  const Primitives* cache = nullptr;
  size_t kernel = 0;
  std::vector<int64_t> symbols;
};

// Whether oneDNN computes convolutions of this dtype (operands and result all of it).
bool takes_convolution(DType dtype);

// out = conv(input, weight) + bias, as aten.convolution with `params`. `name` names the call in errors.
void convolution(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                 const loop::ConvParams& params, const std::string& name, const Site& site = {});

// out = a @ b (+ bias, broadcast to out's shape through its strides) for a [m, k] and b [k, n],
// or batched [B, m, k] @ [B, k, n], all of one dtype (f32, f16 or bf16; bias of that dtype or
// f32). Returns false, computing nothing, where oneDNN has only a reference loop for it (16-bit
// types without the machine's 16-bit instructions, an unusual layout): BLAS then runs it.
bool matmul(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor& out, const std::string& name,
            const Site& site = {});

}  // namespace coil::onednn
