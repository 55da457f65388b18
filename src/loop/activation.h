// Activations that a library call can apply to its own result (cuBLASLt's epilogues), as
// loop-IR expressions. Lowering builds relu and gelu(approximate="tanh") with these, and the
// GEMM-epilogue fusion recognizes them by building the same expression again, so the two
// always agree on the form.
#pragma once
#include <string_view>

#include "loop/expr.h"

namespace coil::loop {

enum class Activation : uint8_t { none, relu, gelu_tanh };

std::string_view activation_name(Activation a);  // "none", "relu", "gelu_tanh"
// relu: maximum(x, 0); gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in x's dtype.
ExprRef activation_expr(Activation a, ExprRef x);

}  // namespace coil::loop
