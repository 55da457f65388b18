// PyTorch's layouts for the values of a traced program. A traced node's output has the strides
// PyTorch's meta functions give it, and the graph's later views, and the code after the graph,
// rely on them (a `view` after attention's permuted output, an output the caller views). coil
// infers its own layouts; where a node's differs from the traced one, the value is laid out as
// PyTorch has it. Inside a functional graph nobody can tell a view from a copy, so both are
// done with copies where needed.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coil/graph.h"

namespace coil::frontend {

// `v` laid out with these strides (PyTorch's, for sizes equal to v's): `v` itself where the
// layouts agree (size-1 dims aside) or where PyTorch's is not dense (overlapping views: those
// come from view ops, whose layout follows their input's); else a permute into PyTorch's
// memory order, a dense clone and the inverse permute.
ValueRef with_layout(Graph& g, ValueRef v, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                     const std::string& name);

// The same for symbolic sizes and strides (a graph Dynamo traced with dynamic sizes): the memory
// order is decided at the graph's symbol hints, and an error is raised where coil's strides then
// are not PyTorch's expressions.
ValueRef with_layout(Graph& g, ValueRef v, const SymShape& sizes, const SymShape& strides, const std::string& name);

// `view(self, size)`, where coil's layout of `self` lets it be a view, else a view of a dense
// copy (PyTorch's layout of `self` allowed the view; coil's, where it differs, may not).
std::vector<ValueRef> view_or_copy(Graph& g, std::vector<std::pair<std::string, Arg>> keywords,
                                   std::vector<std::string> names);

}  // namespace coil::frontend
