// The torch.export archive reader (`torch.export.save`, torch >= 2.8): a zip whose entries sit
// under one root folder, with archive_format "pt2", models/<name>.json (an ExportedProgram of
// schema major version 8) and raw little-endian weights and constants described by
// data/weights/<name>_weights_config.json and data/constants/<name>_constants_config.json.
// Parameters, buffers and lifted constants become weights (keyed by their names in the
// module); user inputs become inputs. Nodes map onto coil's ATen ops with arguments bound by
// name (defaults omitted in the file come from coil's schemas); a few non-core ops (linear, t)
// are decomposed here. Every failure is a coil::Error naming the archive and, for a node, its
// name and stack trace.
#pragma once
#include <string>

#include "coil/graph.h"
#include "coil/reference.h"
#include "coil/tensor.h"

namespace coil {

struct Pt2Program {
  Graph graph;
  TensorMap weights;  // by weight key
};

// `model`: which models/<model>.json (empty: the only one, or "model").
Pt2Program load_pt2(const std::string& path, const std::string& model = "");
// The same from the archive's bytes; `name` stands for the file in error messages.
Pt2Program load_pt2_bytes(std::string bytes, const std::string& name, const std::string& model = "");

}  // namespace coil
