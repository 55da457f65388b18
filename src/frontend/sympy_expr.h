// Size expressions of torch.export archives: the `expr_str` of a symbolic size is sympy's
// srepr form ("Mul(Integer(16), Symbol('s27', positive=True, integer=True))"), read here into a
// SymInt: Integer, Symbol, Add, Mul, FloorDiv, CeilDiv, Mod, PythonMod, Max, Min and Pow /
// PowByNatural by a small constant. Anything else (a rational, a float) is an error naming
// `where`.
#pragma once
#include <string>
#include <string_view>

#include "coil/sym.h"

namespace coil::frontend {

SymInt parse_sympy_srepr(std::string_view text, const std::string& where);

}  // namespace coil::frontend
