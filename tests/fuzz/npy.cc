// libFuzzer target: the .npy reader (parse_npy: magic, format version, the Python-literal header,
// dtype, shape, C or Fortran order, the data's exact length).
#include <cstddef>
#include <cstdint>
#include <string>

#include "coil/io.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  coil::Tensor tensor;
  if (!coil::fuzz::accepted([&] { tensor = coil::parse_npy(bytes, "fuzz.npy"); })) return 0;
  if (!tensor.defined() || !tensor.is_contiguous()) coil::fuzz::finding("parse_npy returned an unusable tensor", "");
  return 0;
}
