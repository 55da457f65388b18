// coil::LimitError: a valid program that coil declines to compile because doing so would cost
// too much, not because anything is wrong with it or with coil: the generated code past the
// source budget (COIL_MAX_SOURCE_MB, 32 MB by default). torch.compile(backend="coil") runs such a
// graph in PyTorch with a FallbackWarning (coil.LimitError in Python); C++ callers may catch it
// apart from other errors.
#pragma once
#include "coil/error.h"

namespace coil {

class LimitError : public Error {
 public:
  using Error::Error;
};

}  // namespace coil
