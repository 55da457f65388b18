// Compiled packages (.coilpkg): compiled once, loaded with no compiler on the PATH and compiling
// off, run against eager's saved outputs (on the GPU too with COIL_TEST_DEVICE=cuda); clear
// errors for files that are not packages, other formats, entries that do not match the
// manifest and kernels this machine lacks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "coil/coil.h"
#include "driver/package_format.h"
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

// The package's entries, rewritten by `edit` (return false to drop one) into `out`.
std::string rewritten(const std::string& out, const std::function<bool(std::pair<std::string, std::string>&)>& edit) {
  auto zip = frontend::ZipReader::open(made_package("mlp"));
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& n : zip.names()) {
    std::pair<std::string, std::string> e{n, zip.read(n)};
    if (edit(e)) entries.push_back(e);
  }
  frontend::write_zip(out, entries);
  return out;
}

void replace_once(std::string& text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
}

TEST(Package, RunsWithoutACompilerAndAddsNothingToTheCache) {
  for (const char* name : {"mlp", "block", "cnn"}) {
    SCOPED_TRACE(name);
    std::string package = made_package(name);
    std::string cache = testing::temp_dir("package") + "/shared_cache_" + name;
    fs::remove_all(cache);
    testing::ScopedEnv env;  // no compiler to be found, and a kernel cache that must stay empty
    env.set("COIL_CACHE_DIR", cache.c_str());
    env.set("COIL_CXX", nullptr);
    env.set("CXX", nullptr);
    env.set("PATH", "/nonexistent-coil-test-dir");
    Package p = Package::load(package);
    EXPECT_FALSE(fs::exists(cache)) << "a package's kernels went into the shared cache";
    TensorMap io;
    for (auto& [key, t] : read_safetensors(testing::pt2_fixture(std::string(name) + ".io.safetensors"))) io[key] = t;
    auto got = p.run(io);
    ASSERT_EQ(got.size(), p.graph().outputs.size());
    for (size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], io.at("out" + std::to_string(i)), "output " + std::to_string(i), 1e-4);
    EXPECT_EQ(Package::load(package).run(io).size(), got.size());  // loads again the same way
  }
}

TEST(Package, RefusesWhatItCannotUse) {
  std::string dir = testing::temp_dir("package");
  expect_error([&] { Package::load(dir + "/absent.coilpkg"); }, "not a readable zip");
  expect_error([&] { Package::load(testing::pt2_fixture("mlp.pt2")); }, "not a coil package");
  std::string newer = rewritten(dir + "/newer.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) replace_once(e.second, "\"version\": 2", "\"version\": 9");
    return true;
  });
  expect_error([&] { Package::load(newer); }, "format version 9 is not supported");
  std::string older = rewritten(dir + "/older.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) replace_once(e.second, "\"version\": 2", "\"version\": 1");
    return true;
  });
  expect_error([&] { Package::load(older); }, "write the package again");
  // A field of the wrong type was "internal error: [json.exception.type_error.302]".
  std::string typed = rewritten(dir + "/typed.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) replace_once(e.second, "\"version\": 2", "\"version\": \"2\"");
    return true;
  });
  expect_error([&] { Package::load(typed); }, "bad manifest: \"version\" is a string, not a whole number");
  // Without its kernels (as if made for another compiler or GPU), loading says so instead of
  // compiling. The manifest lists the kernels, so they are dropped from it too.
  std::string bare = rewritten(dir + "/bare.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) {
      auto manifest = nlohmann::json::parse(e.second);
      for (auto it = manifest["entries"].begin(); it != manifest["entries"].end();)
        it = it.key().find("/cache/") != std::string::npos ? manifest["entries"].erase(it) : std::next(it);
      e.second = manifest.dump();
    }
    return e.first.find("/cache/") == std::string::npos;
  });
  expect_error([&] { Package::load(bare); }, "compiling is off");
  expect_error([&] { write_package(dir + "/x.coilpkg", load_pt2(testing::pt2_fixture("mlp.pt2")).graph, {}); }, "was not given");
}

// Every entry is checked against the manifest before anything is used: 11 of 40 random bit
// flips in a package's weights ran with changed outputs, and a kernel library swapped for
// another was loaded (its constructor ran) and copied into the shared cache.
TEST(Package, EntriesThatDoNotMatchTheManifestAreRefused) {
  std::string dir = testing::temp_dir("package");
  std::string weights = rewritten(dir + "/weights.coilpkg", [](auto& e) {
    if (e.first.ends_with("weights.safetensors")) e.second.back() = static_cast<char>(e.second.back() ^ 0x01);
    return true;
  });
  expect_error([&] { Package::load(weights); }, "weights.safetensors': the entry's bytes do not match the manifest");
  int kernels_changed = 0;  // CPU libraries, or cubins on CUDA
  std::string kernel = rewritten(dir + "/kernel.coilpkg", [&](auto& e) {
    if (e.first.ends_with(".so") || e.first.ends_with(".cubin")) {
      e.second[e.second.size() / 2] ^= 0x40;
      ++kernels_changed;
    }
    return true;
  });
  ASSERT_GT(kernels_changed, 0);
  expect_error([&] { Package::load(kernel); }, "do not match the manifest");
  std::string extra = rewritten(dir + "/extra.coilpkg", [](auto& e) {
    if (e.first.ends_with("graph.coil")) e.first = "coilpkg/cache/00/planted.so";  // the graph entry goes missing too
    return true;
  });
  expect_error([&] { Package::load(extra); }, "entry 'coilpkg/cache/00/planted.so' is not listed in the manifest");
  std::string longer = rewritten(dir + "/longer.coilpkg", [](auto& e) {
    if (e.first.ends_with("graph.coil")) e.second += "\n";
    return true;
  });
  expect_error([&] { Package::load(longer); }, "more than the");
  std::string unlisted = rewritten(dir + "/unlisted.coilpkg", [](auto& e) {
    if (e.first.ends_with("manifest.json")) {
      auto manifest = nlohmann::json::parse(e.second);
      manifest.erase("entries");
      e.second = manifest.dump();
    }
    return true;
  });
  expect_error([&] { Package::load(unlisted); }, "bad manifest: no \"entries\" object");
}

// The package format without compiling: what is written reads back the same, and what a
// rewritten manifest vouches for (sizes and hashes recomputed, as anyone changing a package can
// do) is still checked: kernel paths stay inside the cache folder, every entry is a part of a
// package, and the options are of coil's values.
TEST(PackageFormat, WhatTheManifestCannotVouchForIsStillChecked) {
  driver::PackageContents c;
  c.graph = parse_graph("graph g {\n  %x = input() : f32[4]\n  %y = relu(%x)\n  return %y\n}\n", "g.coil");
  c.weights = {{"w", Tensor::zeros(DType::f32, {3})}};
  c.kernels = {{"ab/k.so", "kernel bytes"}, {"tuning/t.json", "{}"}};
  c.device = "cuda";
  c.toolchain = "nvrtc 13.0";
  c.build_threads = 4;
  const frontend::ZipEntries entries = driver::package_entries(c);
  ASSERT_EQ(entries.front().first, "coilpkg/manifest.json");
  auto read = [](const frontend::ZipEntries& e) {
    return driver::read_package(frontend::ZipReader::from_bytes(frontend::zip_bytes(e), "p.coilpkg"), "p.coilpkg");
  };
  driver::PackageContents back = read(entries);
  EXPECT_EQ(print_graph(back.graph), print_graph(c.graph));
  EXPECT_EQ(back.kernels, c.kernels);
  EXPECT_EQ(back.device, "cuda");
  EXPECT_EQ(back.toolchain, "nvrtc 13.0");
  EXPECT_EQ(back.build_threads, 4);
  ASSERT_EQ(back.weights.size(), 1u);
  EXPECT_EQ(back.weights[0].first, "w");

  // `edit` changes the entries, then the manifest lists them all again with true sizes and hashes.
  auto relisted = [&](const std::function<void(frontend::ZipEntries&, nlohmann::json&)>& edit) {
    frontend::ZipEntries e = entries;
    auto manifest = nlohmann::json::parse(e.front().second);
    edit(e, manifest);
    manifest["entries"] = nlohmann::json::object();
    for (size_t i = 1; i < e.size(); ++i)
      manifest["entries"][e[i].first] = {{"bytes", e[i].second.size()}, {"hash", driver::package_entry_hash(e[i].second)}};
    e.front().second = manifest.dump();
    return e;
  };
  auto rename = [&](const std::string& from, const std::string& to) {
    return relisted([&](frontend::ZipEntries& e, nlohmann::json&) {
      for (auto& [name, bytes] : e)
        if (name == from) name = to;
    });
  };
  for (const char* escape : {"coilpkg/cache/../../home/x/.bashrc", "coilpkg/cache/ab/../../x.so", "coilpkg/cache//x.so",
                             "coilpkg/cache/./x.so", "coilpkg/cache/a\\b.so"})
    expect_error([&] { read(rename("coilpkg/cache/ab/k.so", escape)); }, "leaves the cache folder");
  expect_error([&] { read(rename("coilpkg/cache/tuning/t.json", "coilpkg/cache/ab")); }, "is both a file and a folder");
  expect_error([&] { read(rename("coilpkg/cache/tuning/t.json", "coilpkg/run.sh")); }, "entry 'coilpkg/run.sh' is not part of a coil package");
  expect_error([&] { read(rename("coilpkg/graph.coil", "coilpkg/cache/graph.coil")); }, "the package has no coilpkg/graph.coil");
  expect_error([&] { read(relisted([](auto&, auto& m) { m["device"] = "tpu"; })); }, "bad manifest: device \"tpu\"");
  expect_error([&] { read(relisted([](auto&, auto& m) { m["build_threads"] = -1; })); }, "\"build_threads\" is out of range");
  expect_error([&] { read(relisted([](auto&, auto& m) { m["allow_tf32"] = 1; })); }, "\"allow_tf32\" is a number");
  expect_error([&] { read(relisted([](auto&, auto& m) { m.erase("toolchain"); })); }, "no \"toolchain\"");
  EXPECT_EQ(read(relisted([](auto&, auto&) {})).kernels, c.kernels);  // relisting alone changes nothing
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

TEST(Zip, AForgedEntrySizeIsNotAllocatedBeforeTheEntryEnds) {
  // A directory entry claiming 4 GiB was allocated (and zero-filled) before the read found the
  // entry short; now memory follows the bytes that really come out.
  std::string dir = testing::temp_dir("package");
  std::string path = dir + "/forged.zip";
  frontend::write_zip(path, {{"archive/data/0", std::string(1000, 'x')}});
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  // The inflated size in the local header (offset 22) and the central directory (24); the
  // stored bytes stay 1000.
  size_t local = bytes.find("PK\x03\x04"), central = bytes.find("PK\x01\x02");
  ASSERT_NE(local, std::string::npos);
  ASSERT_NE(central, std::string::npos);
  for (size_t at : {local + 22, central + 24}) put32(at, 0xF0000000u);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  try {
    auto zip = frontend::ZipReader::open(path);
    zip.read("archive/data/0");
    ADD_FAILURE() << "a forged entry size was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("forged.zip"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coil
