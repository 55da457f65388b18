// NVRTC through dlopen: CUDA C++ to a Hopper cubin with no GPU needed, the cubin cache, and
// failures that carry NVRTC's log and the kept source. Machines without the CUDA toolkit skip
// these with the loader's message.
#include <gtest/gtest.h>

#include <filesystem>

#include "build/nvrtc.h"
#include "coil/error.h"

namespace coil::build {
namespace {

const char* kKernel = R"(extern "C" __global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";

class Nvrtc : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("coil_nvrtc_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    try {
      options_ = std::make_unique<CudaBuildOptions>(CudaBuildOptions::detect(ArtifactCache(dir_.string()), "sm_90a"));
    } catch (const Error& e) {
      GTEST_SKIP() << "NVRTC is not available here: " << e.what();
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::unique_ptr<CudaBuildOptions> options_;
};

TEST_F(Nvrtc, CompilesAHopperCubinAndCachesIt) {
  BuildStats first, second;
  std::string cubin = compile_cubin(kKernel, *options_, &first);
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(compile_cubin(kKernel, *options_, &second), cubin);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_FALSE(options_->nvrtc->version().empty());
  CudaBuildOptions ampere = *options_;
  ampere.arch = "sm_80";
  EXPECT_NE(cubin_key(kKernel, ampere), first.key) << "the architecture is part of the key";
}

TEST_F(Nvrtc, FailureCarriesTheLogAndKeepsTheSource) {
  std::string broken = "extern \"C\" __global__ void k(float* x) { x[0] = undefined_thing; }\n";
  try {
    compile_cubin(broken, *options_);
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("NVRTC"), std::string::npos) << message;
    EXPECT_NE(message.find("undefined_thing"), std::string::npos) << message;
    EXPECT_NE(message.find("source kept at: " + dir_.string()), std::string::npos) << message;
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ / "failed")) << "the failed source is kept";
}

TEST_F(Nvrtc, CompilesManyInParallelInOrder) {
  std::vector<std::string> sources;
  for (int i = 0; i < 4; ++i)
    sources.push_back(std::string(kKernel) + "extern \"C\" __global__ void k" + std::to_string(i) + "(int* x) { x[0] = " +
                      std::to_string(i) + "; }\n");
  std::vector<BuildStats> stats;
  auto cubins = compile_cubins(sources, *options_, &stats);
  ASSERT_EQ(cubins.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(cubins[i], compile_cubin(sources[i], *options_)) << i;
    EXPECT_FALSE(stats[i].cache_hit);
  }
}


TEST_F(Nvrtc, ExtraFlagsFromTheEnvironmentJoinTheBuildAndItsKey) {
  ::setenv("COIL_NVRTC_FLAGS", "  --Ofast-compile=mid   -lineinfo ", 1);
  CudaBuildOptions fast = CudaBuildOptions::detect(ArtifactCache(dir_.string()), "sm_90a");
  ::unsetenv("COIL_NVRTC_FLAGS");
  auto flags = fast.all_flags();
  ASSERT_GE(flags.size(), 2u);
  EXPECT_EQ(flags[flags.size() - 2], "--Ofast-compile=mid");
  EXPECT_EQ(flags.back(), "-lineinfo");
  EXPECT_NE(cubin_key(kKernel, fast), cubin_key(kKernel, *options_)) << "the flags are part of the key";
  std::string cubin = compile_cubin(kKernel, fast);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
  ::setenv("COIL_NVRTC_FLAGS", "--no-such-flag", 1);
  CudaBuildOptions bad = CudaBuildOptions::detect(ArtifactCache(dir_.string()), "sm_90a");
  ::unsetenv("COIL_NVRTC_FLAGS");
  EXPECT_THROW(compile_cubin(kKernel, bad), Error);
}

}  // namespace
}  // namespace coil::build
