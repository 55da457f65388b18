// Pieces of the text format shared by the printer, parser and verifier. Private to src/graph.
#pragma once
#include <set>
#include <string>

#include "coil/graph.h"

namespace coil {

std::string format_double(double v);        // always reads back as a float: "1.0", "1e-05", "inf"
std::string quote_string(const std::string& s);
std::string print_node(const Graph& g, const Node& node);
// Checks node `index` of `g` against its schema and inference (the verifier's per-node check).
void verify_node(const Graph& g, size_t index, const std::set<std::string>& symbols);

}  // namespace coil
