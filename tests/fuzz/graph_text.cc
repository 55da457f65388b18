// libFuzzer target: the graph text parser (parse_graph: tokens, schema-directed arguments, shape
// inference and the verifier on every statement). What parses must also print and read back as
// itself, print -> parse -> print being a fixed point (tests/unit/text_test.cc checks the same
// on generated graphs).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coil/graph.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<coil::Graph> graph;
  if (!coil::fuzz::accepted([&] { graph = coil::parse_graph(text, "fuzz.coil"); })) return 0;
  coil::fuzz::check_graph(*graph);
  return 0;
}
