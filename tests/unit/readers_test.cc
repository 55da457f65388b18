// The readers of outside data from bytes (the entry points the libFuzzer targets of tests/fuzz
// drive), and the inputs fuzzing found, each kept as a test of its own (and as a seed,
// tests/fuzz/corpus/<target>/regress-*).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
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

// A copy of a .pt2 fixture, in memory, with the JSON entry `entry` changed by `edit`; a string
// value "@literal@" it leaves is then replaced by `literal`, text no JSON library writes.
std::string pt2_edited(const std::string& fixture, const std::string& entry,
                       const std::function<void(nlohmann::json&)>& edit, const std::string& literal = "") {
  frontend::ZipReader zip = frontend::ZipReader::open(testing::pt2_fixture(fixture));
  frontend::ZipEntries entries;
  for (const auto& name : zip.names()) {
    std::string bytes = zip.read(name);
    if (name == entry) {
      auto j = nlohmann::json::parse(bytes);
      edit(j);
      bytes = j.dump();
      if (size_t at = bytes.find("\"@literal@\""); at != std::string::npos) bytes.replace(at, 11, literal);
    }
    entries.emplace_back(name, std::move(bytes));
  }
  return frontend::zip_bytes(entries);
}

// The message loading the mlp_raw fixture gives with the value at `path` (a JSON pointer) of
// `entry` set to the text `literal`.
std::string mlp_raw_error(const std::string& entry, const std::string& path, const std::string& literal) {
  auto edit = [&](nlohmann::json& j) { j[nlohmann::json::json_pointer(path)] = "@literal@"; };
  return message_of([&] { load_pt2_bytes(pt2_edited("mlp_raw.pt2", "mlp_raw/" + entry, edit, literal), "a.pt2"); });
}

// An integer past 64 bits ("as_int": 555...5, which JSON parsers read as a float) or a float
// where the schema has an integer: nlohmann's get<int64_t>() converted 5.6e123 to int64
// (undefined behaviour, UBSan's report) and truncated 2.5 to 2.
TEST(Readers, Pt2IntegersMustBeIntegers) {
  const std::string config = "data/weights/model_weights_config.json";
  const std::string size = "/config/fc1.bias/tensor_meta/sizes/0/as_int";
  expect_error(mlp_raw_error(config, size, std::string(40, '5')), "'fc1.bias': expected an integer (int64), got 5.55");
  expect_error(mlp_raw_error(config, size, "2.5"), "expected an integer (int64), got 2.5");
  expect_error(mlp_raw_error(config, "/config/fc1.bias/tensor_meta/dtype", "1e300"), "expected an integer (int64), got 1e+300");
  expect_error(mlp_raw_error("models/model.json", "/schema_version/major", "9.99e99"),
               "a.pt2: models/model.json schema_version: expected an integer");
}

// Arguments of block_raw's first node of `target` set: `name` to {"as_int": value}.
std::string block_raw_error(const std::string& target, const std::string& name, int64_t value) {
  auto edit = [&](nlohmann::json& j) {
    for (auto& node : j["graph_module"]["graph"]["nodes"]) {
      if (node["target"] != target) continue;
      for (auto& input : node["inputs"])
        if (input["name"] == name) input["arg"] = {{"as_int", value}};
      return;
    }
  };
  return message_of([&] { load_pt2_bytes(pt2_edited("block_raw.pt2", "block_raw/models/model.json", edit), "b.pt2"); });
}

// Dims out of range in the non-core ops the reader decomposes: transpose.int and split.Tensor
// indexed a vector with them (std::out_of_range, which came out as "malformed export program:
// vector::_M_range_check ..."); split's pieces are counted before they are listed.
TEST(Readers, Pt2DecomposedOpsCheckTheirDims) {
  expect_error(block_raw_error("torch.ops.aten.transpose.int", "dim0", 65536), "transpose: dims 65536 and 2 out of range for rank 4");
  expect_error(block_raw_error("torch.ops.aten.transpose.int", "dim1", -5), "transpose: dims 1 and -5 out of range for rank 4");
  expect_error(block_raw_error("torch.ops.aten.split.Tensor", "dim", 3), "split: dim 3 out of range for rank 3");
  expect_error(block_raw_error("torch.ops.aten.split.Tensor", "split_size", 1),
               "split: 48 pieces of 1 make 48 outputs, but the node has 3");
}

// A convolution's padding of 2^62 (regress-conv-padding-overflow.pt2, the pool_raw fixture as the
// fuzzer changed it): shape inference doubled it in int64 (signed overflow, UBSan's report).
TEST(Readers, Pt2HugeConvolutionPaddingIsAnError) {
  const std::string path = testing::source_file("tests/fuzz/corpus/pt2/regress-conv-padding-overflow.pt2");
  expect_error(message_of([&] { load_pt2_bytes(read_file(path), "c.pt2"); }), "a convolution's padding is too large");
}

}  // namespace
}  // namespace coil
