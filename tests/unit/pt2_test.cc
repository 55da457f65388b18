// The torch.export (.pt2) reader: the fixtures (tests/fixtures/pt2/make_fixtures.py) compiled
// and run against eager's saved outputs, and clear errors for bad archives. Mutated archives
// are fuzzed under the sanitizers by tests/fuzz/pt2_mutations.cc.
#include <gtest/gtest.h>
#include <zip.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "coil/coil.h"
#include "coil/io.h"
#include "frontend/pt2.h"
#include "frontend/sympy_expr.h"
#include "test_util.h"

namespace coil {
namespace {

std::string fixture(const std::string& name) { return testing::pt2_fixture(name); }
std::string temp_dir() { return testing::temp_dir("pt2"); }

TEST(Pt2, FixturesMatchEagerOutputs) {
  for (const char* name : {"mlp", "mlp_raw", "block", "cnn", "block_raw", "cnn_raw", "gpt_raw", "pool", "pool_raw"}) {
    SCOPED_TRACE(name);
    Pt2Program p = load_pt2(fixture(std::string(name) + ".pt2"));
    TensorMap io;
    for (auto& [key, t] : read_safetensors(fixture(std::string(name) + ".io.safetensors"))) io[key] = t;
    TensorMap inputs;
    for (int n : p.graph.input_nodes()) inputs[p.graph.nodes[static_cast<size_t>(n)].name()] = io.at(p.graph.nodes[static_cast<size_t>(n)].name());
    Executable exe = compile(p.graph, {.cache_dir = temp_dir() + "/cache", .device = testing::test_device()});
    auto got = exe.run(inputs, p.weights);
    ASSERT_EQ(got.size(), p.graph.outputs.size());
    for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], io.at("out" + std::to_string(i)), "output " + std::to_string(i), 1e-4);
  }
}

// Exports with dynamic dims (torch.export.Dim with ranges): one compile runs the traced size and
// another, each against eager's outputs; a size outside the export's range is an error.
TEST(Pt2, DynamicDimsCompileOnceForEverySizeInTheirRanges) {
  for (const char* name : {"block_dyn", "reshapes_dyn"}) {
    SCOPED_TRACE(name);
    Pt2Program p = load_pt2(fixture(std::string(name) + ".pt2"));
    ASSERT_EQ(p.graph.symbols.size(), 2u);
    for (const auto& s : p.graph.symbols) {
      EXPECT_EQ(s.min, 2);
      EXPECT_TRUE(s.max == 64 || s.max == 128) << s.name;
      EXPECT_TRUE(s.hint.has_value()) << s.name;
    }
    Executable exe = compile(p.graph, {.cache_dir = temp_dir() + "/cache", .device = testing::test_device()});
    TensorMap inputs;
    for (const char* io_name : {".io.safetensors", ".io2.safetensors"}) {
      TensorMap io;
      for (auto& [key, t] : read_safetensors(fixture(std::string(name) + io_name))) io[key] = t;
      inputs.clear();
      for (int n : p.graph.input_nodes()) inputs[p.graph.nodes[static_cast<size_t>(n)].name()] = io.at(p.graph.nodes[static_cast<size_t>(n)].name());
      auto got = exe.run(inputs, p.weights);
      ASSERT_EQ(got.size(), p.graph.outputs.size());
      for (size_t i = 0; i < got.size(); ++i)
        testing::expect_close(got[i], io.at("out" + std::to_string(i)), std::string(io_name) + " output " + std::to_string(i), 1e-4);
    }
    // A batch of 65: above the export's Dim("batch", max=64).
    TensorMap big = random_inputs(p.graph, 1, {{p.graph.symbols[0].name, 65}, {p.graph.symbols[1].name, 65}});
    try {
      exe.run(big, p.weights);
      ADD_FAILURE() << "a size outside the export's range ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outside the range [2, "), std::string::npos) << e.what();
    }
  }
}

// The sympy form of an archive's size expressions.
TEST(Pt2, SympySizeExpressionsParse) {
  auto parse = [](const std::string& text) { return frontend::parse_sympy_srepr(text, "test"); };
  const SymInt s = SymInt::symbol("s27"), t = SymInt::symbol("s77");
  EXPECT_EQ(parse("Symbol('s27', positive=True, integer=True)"), s);
  EXPECT_EQ(parse("Mul(Integer(16), Symbol('s27', positive=True, integer=True))"), s * 16);
  EXPECT_EQ(parse("Add(Mul(Integer(-1), Symbol('s77')), Symbol('s27'), Integer(3))"), s - t + 3);
  EXPECT_EQ(parse("FloorDiv(Symbol('s27'), Integer(2))"), floordiv(s, 2));
  EXPECT_EQ(parse("CeilDiv(Symbol('s27'), Integer(4))"), floordiv(s + 3, 4));
  EXPECT_EQ(parse("PythonMod(Symbol('s27'), Integer(8))"), mod(s, 8));
  EXPECT_EQ(parse("Max(Integer(1), Symbol('s27'))"), max(SymInt(1), s));
  EXPECT_EQ(parse("Pow(Symbol('s27'), Integer(2))"), s * s);
  for (const char* bad : {"Rational(1, 2)", "Mul(Symbol('s27')", "Symbol(s27)", "FloorDiv(Integer(1))", "Integer(99999999999999999999)"})
    EXPECT_THROW(parse(bad), Error) << bad;
}

// A copy of a fixture with one entry's text changed by `edit`.
std::string edited(const std::string& name, const std::string& entry, const std::function<std::string(std::string)>& edit) {
  std::string out = temp_dir() + "/edited_" + std::to_string(std::rand()) + ".pt2";
  std::filesystem::copy_file(fixture(name), out, std::filesystem::copy_options::overwrite_existing);
  int err = 0;
  zip_t* z = zip_open(out.c_str(), 0, &err);
  EXPECT_NE(z, nullptr);
  zip_int64_t idx = zip_name_locate(z, entry.c_str(), 0);
  EXPECT_GE(idx, 0) << entry;
  zip_stat_t st;
  zip_stat_index(z, static_cast<zip_uint64_t>(idx), 0, &st);
  std::string text(st.size, '\0');
  zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(idx), 0);
  zip_fread(f, text.data(), st.size);
  zip_fclose(f);
  static std::vector<std::string> keep;  // libzip reads the buffer when the archive is closed
  keep.push_back(edit(text));
  zip_source_t* src = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
  zip_file_replace(z, static_cast<zip_uint64_t>(idx), src, 0);
  zip_close(z);
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

void expect_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    load_pt2(path);
    ADD_FAILURE() << path << ": expected an error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

TEST(Pt2, ErrorsNameTheProblem) {
  expect_error(temp_dir() + "/missing.pt2", {"missing.pt2", "not a readable zip"});
  {  // a truncated archive
    std::string cut = temp_dir() + "/cut.pt2";
    std::ifstream in(fixture("mlp.pt2"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    expect_error(cut, {"cut.pt2"});
  }
  const std::string json = "mlp/models/model.json";
  expect_error(edited("mlp.pt2", json, [](std::string s) { return replace_all(s, "\"major\": 8", "\"major\": 9"); }),
               {"schema version 9", "major version 8"});
  expect_error(edited("mlp.pt2", json, [](std::string s) { return replace_all(s, "torch.ops.aten.relu.default", "torch.ops.aten.frobnicate.default"); }),
               {"node 'relu'", "frobnicate", "stack trace", "forward"});
  expect_error(edited("mlp.pt2", json, [](std::string s) { return replace_all(s, "torch.ops.aten.relu.default", "torch.ops.mylib.relu.default"); }),
               {"node 'relu'", "only ATen ops"});
  expect_error(edited("mlp.pt2", json, [](std::string s) { return replace_all(s, "\"dtype\": 7", "\"dtype\": 10"); }), {"dtype code 10"});
  expect_error(edited("mlp.pt2", "mlp/data/weights/model_weights_config.json",
                      [](std::string s) { return replace_all(s, "\"use_pickle\": false", "\"use_pickle\": true"); }),
               {"pickled tensor"});
  expect_error(edited("mlp.pt2", json, [](std::string s) { return s.substr(0, s.size() / 2); }), {"not valid JSON"});
  expect_error(edited("mlp.pt2", "mlp/archive_format", [](std::string) { return std::string("zip"); }), {"archive_format is 'zip'"});
  // Non-core ops decomposed on reading: arguments they cannot take are named with the node.
  const std::string cnn = "cnn_raw/models/model.json";
  expect_error(edited("cnn_raw.pt2", cnn, [](std::string s) { return replace_all(s, "\"as_bool\": false", "\"as_bool\": true"); }),
               {"node 'batch_norm'", "training mode", "eval()"});
  expect_error(edited("cnn_raw.pt2", cnn, [](std::string s) {
                 return replace_all(s, "torch.ops.aten.conv2d.default", "torch.ops.aten.conv2d.padding");
               }),
               {"node 'conv2d'", "conv2d.padding"});
}

TEST(Pt2, HostileShapesAreErrors) {
  // Edits of the archive's JSON as structures: the input of `linear` made 0-dim (a segfault on
  // the empty shape's last dim), a weight's stride or storage offset near 2^63 (its extent
  // wrapped past the bounds check: values read from outside the file, or an ASan overflow).
  auto json_edit = [](std::function<void(nlohmann::json&)> f) {
    return [f](std::string s) {
      auto j = nlohmann::json::parse(s);
      f(j);
      return j.dump();
    };
  };
  expect_error(edited("mlp_raw.pt2", "mlp_raw/models/model.json", json_edit([](nlohmann::json& j) {
                 auto& x = j["graph_module"]["graph"]["tensor_values"]["x"];
                 x["sizes"] = x["strides"] = nlohmann::json::array();
               })),
               {"linear", "0-dim"});
  const std::string config = "mlp_raw/data/weights/model_weights_config.json";
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  expect_error(edited("mlp_raw.pt2", config, json_edit([&](nlohmann::json& j) {
                 j["config"]["fc1.weight"]["tensor_meta"]["strides"][0]["as_int"] = kMax;
               })),
               {"fc1.weight", "too large"});
  expect_error(edited("mlp_raw.pt2", config, json_edit([&](nlohmann::json& j) {
                 j["config"]["fc1.weight"]["tensor_meta"]["storage_offset"]["as_int"] = kMax - 8;
               })),
               {"fc1.weight", "too large"});
}

// Seeded mutations of the model JSON and of the archive bytes: every load either works or
// throws coil::Error; nothing else escapes and nothing crashes.
}  // namespace
}  // namespace coil
