// libFuzzer target: the torch.export (.pt2) reader from bytes (load_pt2_bytes: the zip, the
// export JSON, weights and their strides, nodes bound through coil's schemas and inferred).
// What loads must verify, print, and read back from its text as itself. The custom mutator
// mutates the archive's entries (zip_mutator.h); one mutation in eight is of the raw bytes, for
// the zip layer itself.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "coil/graph.h"
#include "frontend/pt2.h"
#include "fuzz_util.h"
#include "zip_mutator.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return coil::fuzz::mutate_archive(data, size, max_size, seed, [](auto&, auto&) {});
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<coil::Pt2Program> program;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!coil::fuzz::accepted([&] { program = coil::load_pt2_bytes(std::move(bytes), "fuzz.pt2"); })) return 0;
  coil::fuzz::check_graph(program->graph);
  return 0;
}
