// src/build: compiler detection, the content-addressed artifact cache (integrity, atomic
// stores, concurrent writers) and the CPU compile path (hits, misses, errors, parallel builds).
// Every test gets its own empty cache folder.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "build/cache.h"
#include "build/compiler.h"
#include "build/cpu_compile.h"
#include "build/host_isa.h"
#include "test_util.h"
#include "coil/error.h"
#include "coil/io.h"

namespace coil::build {
namespace {

namespace fs = std::filesystem;
using coil::testing::message_of;
using coil::testing::ScopedEnv;

std::string add_source(int k) {
  return fmt::format("extern \"C\" int add{0}(int x) {{ return x + {0}; }}\n", k);
}

int call_add(const CompiledLibrary& library, int k, int x) {
  return library.function<int (*)(int)>(fmt::format("add{}", k))(x);
}

// Every regular file under `dir`, except kept failures.
std::vector<fs::path> cache_files(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().parent_path().filename() != "failed") files.push_back(entry.path());
  }
  return files;
}

// Replaces a file with other bytes through a rename, the way a disk or a careless tool would
// leave it, without touching pages a loaded copy of the old file may still map.
void replace_file(const std::string& path, const std::string& bytes) {
  std::string temp = path + ".replacement";
  std::ofstream(temp, std::ios::binary) << bytes;
  fs::rename(temp, path);
}

class BuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "coil-build-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    options_ = std::make_unique<CpuBuildOptions>(CpuBuildOptions::detect(ArtifactCache(dir_ + "/cache")));
  }
  void TearDown() override { fs::remove_all(dir_); }

  const ArtifactCache& cache() const { return options_->cache; }
  std::string dir_;
  std::unique_ptr<CpuBuildOptions> options_;
};

// ---- compiler detection ----

TEST(BuildCompiler, DetectsAWorkingCompiler) {
  Compiler compiler = detect_compiler();
  EXPECT_FALSE(compiler.path.empty());
  EXPECT_FALSE(compiler.id.empty());
  EXPECT_EQ(compiler.id.find('\n'), std::string::npos);
}

TEST(BuildCompiler, SkipsCandidatesThatDoNotRun) {
  ScopedEnv env;
  env.set("COIL_CXX", "/nonexistent/coil-test-cxx");
  env.set("CXX", nullptr);
  Compiler compiler = detect_compiler();
  EXPECT_EQ(compiler.path.find("nonexistent"), std::string::npos);
}

TEST(BuildCompiler, HonorsCoilCxx) {
  Compiler clang;
  try {
    clang = probe_compiler("clang++");
  } catch (const Error&) {
    GTEST_SKIP() << "clang++ is not installed";
  }
  ScopedEnv env;
  env.set("COIL_CXX", clang.path.c_str());
  EXPECT_EQ(detect_compiler().id, clang.id);
}

TEST(BuildCompiler, NoCompilerIsAnErrorListingWhatWasTried) {
  ScopedEnv env;
  env.set("COIL_CXX", "/nonexistent/coil-test-cxx");
  env.set("CXX", nullptr);
  env.set("PATH", "/nonexistent-coil-test-dir");
  std::string message = message_of([] { detect_compiler(); });
  EXPECT_NE(message.find("/nonexistent/coil-test-cxx"), std::string::npos) << message;
  EXPECT_NE(message.find("$COIL_CXX"), std::string::npos) << message;
  EXPECT_NE(message.find("g++"), std::string::npos) << message;
  EXPECT_NE(message.find("clang++"), std::string::npos) << message;
}

TEST(BuildCompiler, HostIsaFingerprintIsStable) {
  Compiler compiler = detect_compiler();
  std::string isa = host_isa_fingerprint(compiler);
  EXPECT_FALSE(isa.empty());
  EXPECT_EQ(isa, host_isa_fingerprint(compiler));
}

// ---- the artifact cache ----

TEST_F(BuildTest, CacheKeyLengthPrefixesParts) {
  EXPECT_EQ(ArtifactCache::key({"ab", "c"}), ArtifactCache::key({"ab", "c"}));
  EXPECT_NE(ArtifactCache::key({"ab", "c"}), ArtifactCache::key({"a", "bc"}));
  EXPECT_NE(ArtifactCache::key({"abc"}), ArtifactCache::key({"abc", ""}));
  EXPECT_EQ(ArtifactCache::key({"x"}).size(), 32u);
}

TEST_F(BuildTest, CacheStoresAndVerifiesEntries) {
  std::string key = ArtifactCache::key({"payload"});
  EXPECT_FALSE(cache().lookup(key, "bin"));
  std::string bytes("some\0bytes", 10);
  std::string path = cache().store(key, "bin", bytes);
  EXPECT_EQ(cache().lookup(key, "bin"), path);
  EXPECT_EQ(cache().read(key, "bin"), bytes);
  EXPECT_FALSE(cache().lookup(key, "so"));  // another extension is another entry

  // Every truncation and every single-byte change is detected, and the bad entry removed.
  std::string file = read_file(path);
  for (size_t size = 0; size < file.size(); ++size) {
    replace_file(path, file.substr(0, size));
    EXPECT_FALSE(cache().lookup(key, "bin")) << "truncated to " << size;
    EXPECT_FALSE(fs::exists(path));
  }
  for (size_t at = 0; at < file.size(); ++at) {
    std::string flipped = file;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    replace_file(path, flipped);
    EXPECT_FALSE(cache().read(key, "bin")) << "byte " << at << " changed";
  }
  // A valid entry copied under another key's name is not that key's entry.
  std::string other = ArtifactCache::key({"other"});
  fs::create_directories(fs::path(cache().entry_path(other, "bin")).parent_path());
  replace_file(cache().entry_path(other, "bin"), file);
  EXPECT_FALSE(cache().lookup(other, "bin"));
}

// The cache holds code that runs, so coil uses only a folder no one else can write.
TEST(BuildCacheFolder, IsCreatedPrivateAndRefusedWhenOthersCanWrite) {
  std::string root = coil::testing::temp_dir("cache_folder");
  fs::remove_all(root);
  ArtifactCache fresh(root + "/a/b/cache");
  fresh.store(ArtifactCache::key({"x"}), "bin", "payload");
  for (std::string dir : {root + "/a", root + "/a/b", root + "/a/b/cache"})
    EXPECT_EQ(fs::status(dir).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none) << dir;

  std::string shared = root + "/shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);  // 0777, like a planted folder under /tmp
  std::string message = message_of([&] { ArtifactCache{shared}; });
  EXPECT_NE(message.find("writable by every user"), std::string::npos) << message;
  EXPECT_NE(message.find("chmod go-w"), std::string::npos) << message;
  fs::permissions(shared, fs::perms::owner_all | fs::perms::group_all);
  message = message_of([&] { ArtifactCache{shared}; });
  EXPECT_NE(message.find("writable by its group"), std::string::npos) << message;
  fs::permissions(shared, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  EXPECT_NO_THROW(ArtifactCache{shared});  // 0755 is fine: only its owner writes it

  std::string file = root + "/not-a-folder";
  std::ofstream(file) << "x";
  message = message_of([&] { ArtifactCache{file}; });
  EXPECT_NE(message.find("is not a folder"), std::string::npos) << message;
  // Another owner cannot be made without privileges; /proc is root's, so it stands in, unless
  // these tests run as root.
  if (::geteuid() != 0) {
    message = message_of([&] { ArtifactCache{"/proc"}; });
    EXPECT_NE(message.find("belongs to user id 0"), std::string::npos) << message;
  }
}

// ---- compiling ----

TEST_F(BuildTest, CompilesAndCallsAFunction) {
  BuildStats stats;
  auto library = compile_cpu_library(add_source(1), *options_, &stats);
  EXPECT_EQ(call_add(*library, 1, 41), 42);
  EXPECT_FALSE(stats.cache_hit);
  EXPECT_GT(stats.compile_seconds, 0);
  EXPECT_EQ(stats.key, cpu_build_key(add_source(1), *options_));
  std::string message = message_of([&] { library->symbol("no_such_kernel"); });
  EXPECT_NE(message.find("no_such_kernel"), std::string::npos) << message;
}

TEST_F(BuildTest, SecondCompileIsAHitWithoutTheCompiler) {
  BuildStats first;
  compile_cpu_library(add_source(2), *options_, &first);
  std::string entry = cache().entry_path(first.key, "so");
  auto written = fs::last_write_time(entry);

  // Same key (the id is what is hashed, not the path), but a compiler that cannot run: a hit
  // must not need it.
  CpuBuildOptions no_compiler = *options_;
  no_compiler.compiler.path = "/nonexistent/coil-compiler-must-not-run";
  BuildStats second;
  auto library = compile_cpu_library(add_source(2), no_compiler, &second);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.compile_seconds, 0);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(library->path(), entry);
  EXPECT_EQ(fs::last_write_time(entry), written);
  EXPECT_EQ(call_add(*library, 2, 1), 3);
}

TEST_F(BuildTest, ChangedSourceIsAMiss) {
  BuildStats first, second;
  compile_cpu_library(add_source(3), *options_, &first);
  auto library = compile_cpu_library(add_source(3) + "// changed\n", *options_, &second);
  EXPECT_FALSE(second.cache_hit);
  EXPECT_NE(second.key, first.key);
  EXPECT_EQ(call_add(*library, 3, 1), 4);
}

TEST_F(BuildTest, CorruptedEntryIsRebuilt) {
  BuildStats stats;
  compile_cpu_library(add_source(4), *options_, &stats);  // the library is released right away
  std::string entry = cache().entry_path(stats.key, "so");
  std::string good = read_file(entry);

  std::string overwritten = good;
  for (size_t i = good.size() / 3; i < good.size() / 3 + 64; ++i) overwritten[i] = 'x';
  replace_file(entry, overwritten);
  auto library = compile_cpu_library(add_source(4), *options_, &stats);
  EXPECT_FALSE(stats.cache_hit);
  EXPECT_EQ(call_add(*library, 4, 1), 5);
  EXPECT_EQ(read_file(entry), good);  // builds are reproducible, so the rebuild is identical

  replace_file(entry, good.substr(0, good.size() / 2));
  library = compile_cpu_library(add_source(4), *options_, &stats);
  EXPECT_FALSE(stats.cache_hit);
  EXPECT_EQ(call_add(*library, 4, 2), 6);
  EXPECT_TRUE(cache().lookup(stats.key, "so"));
}

TEST_F(BuildTest, TwoProcessesCompileTheSameSourceAtOnce) {
  const std::string source = add_source(5);
  int start_gate[2];
  ASSERT_EQ(::pipe(start_gate), 0);
  std::vector<pid_t> children;
  for (int child = 0; child < 2; ++child) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Wait until the parent opens the gate (closes the pipe), so both compile together.
      ::close(start_gate[1]);
      char byte;
      while (::read(start_gate[0], &byte, 1) > 0) {
      }
      int code = 2;
      try {
        auto library = compile_cpu_library(source, *options_);
        code = call_add(*library, 5, 10) == 15 ? 0 : 3;
      } catch (...) {
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(start_gate[0]);
  ::close(start_gate[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }

  std::string key = cpu_build_key(source, *options_);
  std::vector<fs::path> files = cache_files(cache().dir());
  ASSERT_EQ(files.size(), 1u);  // one entry, no temporary files left behind
  EXPECT_EQ(files[0].string(), cache().entry_path(key, "so"));
  BuildStats stats;
  auto library = compile_cpu_library(source, *options_, &stats);
  EXPECT_TRUE(stats.cache_hit);
  EXPECT_EQ(call_add(*library, 5, 1), 6);
}

TEST_F(BuildTest, CompilerErrorKeepsTheSourceAndShowsTheLog) {
  const std::string source = "extern \"C\" int broken(int x) { return x + coil_undeclared_name; }\n";
  std::string message = message_of([&] { compile_cpu_library(source, *options_); });
  std::string kept = cache().dir() + "/failed/" + cpu_build_key(source, *options_) + ".cc";
  EXPECT_NE(message.find("coil_undeclared_name"), std::string::npos) << message;
  EXPECT_NE(message.find(kept), std::string::npos) << message;
  EXPECT_NE(message.find(kept + ":1:"), std::string::npos) << "diagnostics should name the kept file\n" << message;
  ASSERT_TRUE(fs::exists(kept));
  EXPECT_EQ(read_file(kept), source);
  EXPECT_TRUE(cache_files(cache().dir()).empty());  // nothing cached for a failure
}

TEST_F(BuildTest, CompilesManySourcesInParallel) {
  std::vector<std::string> sources = {add_source(11), add_source(12), add_source(13), add_source(14), add_source(11)};
  std::vector<BuildStats> stats;
  auto libraries = compile_cpu_libraries(sources, *options_, &stats);
  ASSERT_EQ(libraries.size(), sources.size());
  ASSERT_EQ(stats.size(), sources.size());
  for (int k = 11; k <= 14; ++k) {
    EXPECT_EQ(call_add(*libraries[k - 11], k, 100), 100 + k);
    EXPECT_FALSE(stats[k - 11].cache_hit);
  }
  EXPECT_EQ(libraries[4], libraries[0]);  // a repeated source is built once
  EXPECT_EQ(cache_files(cache().dir()).size(), 4u);

  libraries = compile_cpu_libraries(sources, *options_, &stats);
  for (const auto& s : stats) EXPECT_TRUE(s.cache_hit);
  EXPECT_EQ(call_add(*libraries[3], 14, 0), 14);
}

TEST_F(BuildTest, ParallelBuildErrorsPropagate) {
  std::vector<std::string> sources = {add_source(21), "int coil_parallel_broken( {", add_source(22)};
  std::string message = message_of([&] { compile_cpu_libraries(sources, *options_); });
  EXPECT_NE(message.find("coil_parallel_broken"), std::string::npos) << message;
}

TEST_F(BuildTest, KeyCoversFlagsCompilerAndHostIsa) {
  const std::string source = add_source(1);
  const std::string base = cpu_build_key(source, *options_);
  EXPECT_EQ(cpu_build_key(source, *options_), base);

  CpuBuildOptions changed = *options_;
  changed.flags.push_back("-DCOIL_EXTRA");
  EXPECT_NE(cpu_build_key(source, changed), base);
  changed = *options_;
  std::replace(changed.flags.begin(), changed.flags.end(), std::string("-O3"), std::string("-O2"));
  EXPECT_NE(cpu_build_key(source, changed), base);
  changed = *options_;
  changed.compiler.id += " (patched)";
  EXPECT_NE(cpu_build_key(source, changed), base);
  changed = *options_;
  changed.host_isa = "another-cpu";
  EXPECT_NE(cpu_build_key(source, changed), base);

  // Without -march=native the host does not matter, so the key ignores it.
  changed.flags = {"-O2", "-fPIC", "-shared"};
  std::string portable = cpu_build_key(source, changed);
  changed.host_isa = options_->host_isa;
  EXPECT_EQ(cpu_build_key(source, changed), portable);
}

}  // namespace
}  // namespace coil::build
