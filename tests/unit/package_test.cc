// Compiled packages (.coilpkg): compiled once, loaded into an empty kernel cache with compiling
// off, run against eager's saved outputs (on the GPU too with COIL_TEST_DEVICE=cuda); clear
// errors for files that are not packages, newer formats and kernels this machine lacks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "coil/coil.h"
#include "frontend/pt2.h"
#include "frontend/zip_reader.h"
#include "test_util.h"

namespace coil {
namespace {

namespace fs = std::filesystem;

std::string made_package(const std::string& name) {
  std::string path = testing::temp_dir("package") + "/" + name + "_" + testing::test_device() + ".coilpkg";
  if (fs::exists(path)) return path;
  Pt2Program p = load_pt2(testing::pt2_fixture(name + ".pt2"));
  write_package(path, p.graph, p.weights, {.cache_dir = testing::temp_dir("package") + "/build_cache", .device = testing::test_device()});
  return path;
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Package, RunsFromAnEmptyCacheWithoutCompiling) {
  for (const char* name : {"mlp", "block", "cnn"}) {
    SCOPED_TRACE(name);
    std::string cache = testing::temp_dir("package") + "/load_cache_" + name;
    fs::remove_all(cache);
    Package p = Package::load(made_package(name), cache);
    EXPECT_FALSE(fs::is_empty(cache));  // the package's kernels now live in the cache
    TensorMap io;
    for (auto& [key, t] : read_safetensors(testing::pt2_fixture(std::string(name) + ".io.safetensors"))) io[key] = t;
    auto got = p.run(io);
    ASSERT_EQ(got.size(), p.graph().outputs.size());
    for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], io.at("out" + std::to_string(i)), "output " + std::to_string(i), 1e-4);
    // A second load finds the kernels already there.
    EXPECT_EQ(Package::load(made_package(name), cache).run(io).size(), got.size());
  }
}

TEST(Package, RefusesWhatItCannotUse) {
  std::string dir = testing::temp_dir("package");
  expect_error([&] { Package::load(dir + "/absent.coilpkg"); }, "not a readable zip");
  expect_error([&] { Package::load(testing::pt2_fixture("mlp.pt2")); }, "not a coil package");
  auto rewrite = [&](const std::string& out, const std::function<bool(std::pair<std::string, std::string>&)>& keep) {
    auto zip = frontend::ZipReader::open(made_package("mlp"));
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto& n : zip.names()) {
      std::pair<std::string, std::string> e{n, zip.read(n)};
      if (keep(e)) entries.push_back(e);
    }
    frontend::write_zip(out, entries);
    return out;
  };
  std::string newer = rewrite(dir + "/newer.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) e.second.replace(e.second.find("\"version\": 1"), 12, "\"version\": 9");
    return true;
  });
  expect_error([&] { Package::load(newer, dir + "/c1"); }, "format version 9 is not supported");
  // A field of the wrong type was "internal error: [json.exception.type_error.302]".
  std::string typed = rewrite(dir + "/typed.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) e.second.replace(e.second.find("\"version\": 1"), 12, "\"version\": \"1\"");
    return true;
  });
  expect_error([&] { Package::load(typed, dir + "/c1"); }, "bad manifest: \"version\" is a string, not a whole number");
  // Without its kernels (as if made for another compiler or GPU), loading says so instead of compiling.
  std::string bare = rewrite(dir + "/bare.coilpkg", [](auto& e) { return e.first.find("/cache/") == std::string::npos; });
  fs::remove_all(dir + "/c2");
  expect_error([&] { Package::load(bare, dir + "/c2"); }, "compiling is off");
  expect_error([&] { write_package(dir + "/x.coilpkg", load_pt2(testing::pt2_fixture("mlp.pt2")).graph, {}); }, "was not given");
}

TEST(Zip, AStoredEntryWithAChangedByteIsFoundByItsCrc) {
  // A .pt2 or .coilpkg holds its weights stored, not compressed: one flipped byte read back as a
  // different weight with exit 0 until the CRC-32 was checked.
  std::string dir = testing::temp_dir("package");
  std::string path = dir + "/flipped.zip", marker = "coil-weights:";
  std::string payload = marker + std::string(4096, '\x5a');
  frontend::write_zip(path, {{"archive/data/0", payload}, {"archive/version", "3"}});
  EXPECT_EQ(frontend::ZipReader::open(path).read("archive/data/0"), payload);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t at = bytes.find(marker);
  ASSERT_NE(at, std::string::npos);
  bytes[at + marker.size() + 100] ^= 0x01;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  expect_error([&] { frontend::ZipReader::open(path).read("archive/data/0"); }, "is corrupt");
  EXPECT_EQ(frontend::ZipReader::open(path).read("archive/version"), "3");  // the others still read
}

}  // namespace
}  // namespace coil
