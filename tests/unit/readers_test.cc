// The readers of outside data from bytes (the entry points the libFuzzer targets of tests/fuzz
// drive), and the inputs fuzzing found, each kept as a test of its own (and as a seed,
// tests/fuzz/corpus/<target>/regress-*).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "coil/error.h"
#include "coil/graph.h"
#include "coil/io.h"
#include "frontend/pt2.h"
#include "frontend/zip_reader.h"
#include "test_util.h"

namespace coil {
namespace {

using testing::message_of;

void expect_error(const std::string& message, const std::string& phrase) {
  EXPECT_NE(message.find(phrase), std::string::npos) << "error was: \"" << message << "\"";
}

std::string u64_le(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// A safetensors file of `header` and no data.
std::string safetensors_with(const std::string& header) { return u64_le(header.size()) + header; }

TEST(Readers, ZipFromBytes) {
  const frontend::ZipEntries entries = {{"a/x", "hello"}, {"a/empty", ""}, {"a/z", std::string(1000, '\0')}};
  frontend::ZipReader zip = frontend::ZipReader::from_bytes(frontend::zip_bytes(entries), "mem.zip");
  ASSERT_EQ(zip.names().size(), entries.size());
  for (const auto& [name, bytes] : entries) EXPECT_EQ(zip.read(name), bytes) << name;
  expect_error(message_of([] { frontend::ZipReader::from_bytes("PK not a zip", "junk.zip"); }),
               "junk.zip: not a readable zip archive");
  EXPECT_TRUE(frontend::ZipReader::from_bytes("", "empty.zip").names().empty());  // as libzip reads an empty file
}

TEST(Readers, Pt2FromBytesLoadsWhatTheFileLoads) {
  const std::string path = testing::pt2_fixture("mlp.pt2");
  Pt2Program from_file = load_pt2(path);
  Pt2Program from_bytes = load_pt2_bytes(read_file(path), "mlp-in-memory.pt2");
  EXPECT_EQ(print_graph(from_bytes.graph), print_graph(from_file.graph));
  ASSERT_EQ(from_bytes.weights.size(), from_file.weights.size());
  for (const auto& [key, t] : from_file.weights) EXPECT_EQ(from_bytes.weights.at(key).sizes(), t.sizes()) << key;
  expect_error(message_of([] { load_pt2_bytes("junk", "junk.pt2"); }), "junk.pt2: not a readable zip archive");
  expect_error(message_of([] { load_pt2_bytes("", "empty.pt2"); }), "empty.pt2: an empty archive");
}

TEST(Readers, NpyFromBytes) {
  const std::string header = "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }\n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header +
                      std::string("\x01\x00\x02\x00", 4);
  Tensor t = parse_npy(bytes, "mem.npy");
  ASSERT_EQ(t.sizes(), Shape({2}));
  EXPECT_EQ(t.load_int(1), 2);
  expect_error(message_of([&] { parse_npy(bytes.substr(0, 12), "cut.npy"); }), "cut.npy: the .npy header length");
}

// ---- found by fuzzing

// A number too large for a double in the header threw nlohmann's out_of_range (406), which only
// parse errors were caught for: the exception escaped the reader.
TEST(Readers, SafetensorsNumberOverflowIsAnError) {
  expect_error(message_of([] { parse_safetensors(safetensors_with(R"({"__metadata__": {"k": 1e5161533}})"), "big.st"); }),
               "big.st: the safetensors header is not valid JSON");
  expect_error(message_of([] { parse_safetensors(safetensors_with(R"({"a": -1e400})"), "big.st"); }), "number overflow");
}

// An empty Fortran-order array (a zero dim, so no data and no byte count to bound the others):
// its Fortran strides overflowed int64 (undefined behaviour, UBSan's report) before the
// allocation's checked arithmetic refused the shape.
TEST(Readers, NpyEmptyFortranOrderWithHugeDims) {
  const std::string header = "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 4294967296, 4294967296), }\n";
  const std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  expect_error(message_of([&] { parse_npy(bytes, "empty.npy"); }), "too large");
  const std::string small = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 0, 3), }\n";
  Tensor t = parse_npy(std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(small.size()) + '\0' + small, "e.npy");
  EXPECT_EQ(t.sizes(), Shape({2, 0, 3}));
}

}  // namespace
}  // namespace coil
