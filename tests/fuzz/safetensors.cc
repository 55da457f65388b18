// libFuzzer target: the .safetensors reader (parse_safetensors: the header length, the JSON
// header, dtypes, shapes and byte ranges that must tile the buffer). What it reads must write out
// again and read back as the same tensors.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coil/io.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  coil::NamedTensors tensors;
  if (!coil::fuzz::accepted([&] { tensors = coil::parse_safetensors(bytes, "fuzz.safetensors"); })) return 0;
  coil::NamedTensors again;
  coil::fuzz::must_pass("what was read does not write and read back", [&] {
    again = coil::parse_safetensors(coil::safetensors_bytes(tensors), "rewritten.safetensors");
  });
  if (again.size() != tensors.size()) coil::fuzz::finding("the rewritten file has another number of tensors", "");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (again[i].first != tensors[i].first || !coil::fuzz::same_tensor(again[i].second, tensors[i].second))
      coil::fuzz::finding("a tensor changed in the round trip", tensors[i].first);
  return 0;
}
