// cuDNN on a GPU (scripts/gpu-check runs these; without a driver or cuDNN they skip): a fused
// epilogue's plans, whose kernels cuDNN compiles as it builds them, are written to the plan store
// once, restored from it by the next load (another process, in effect) and run bit for bit like
// the plans they were serialized from; a stored entry that does not restore is built again and
// replaced.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn.h"
#include "coil/error.h"

namespace coil::cuda {
namespace {

struct MemoryStore {
  std::map<std::string, std::string> entries;
  int reads = 0, hits = 0, writes = 0;
};

CudnnPlanStore store_of(const std::shared_ptr<MemoryStore>& m) {
  CudnnPlanStore s;
  s.read = [m](const std::string& name) -> std::optional<std::string> {
    ++m->reads;
    auto it = m->entries.find(name);
    if (it == m->entries.end()) return std::nullopt;
    ++m->hits;
    return it->second;
  };
  s.write = [m](const std::string& name, const std::string& bytes) {
    ++m->writes;
    m->entries[name] = bytes;
  };
  return s;
}

// relu(conv(x, w) * scale + shift) in bf16, channels-last, a ResNet 3x3 layer's shape.
ConvProblem fused_problem() {
  ConvProblem p;
  p.dtype = DType::bf16;
  const int64_t n = 2, c = 64, h = 14, w = 14, k = 64;
  p.x_dims = {n, c, h, w}, p.x_strides = {h * w * c, 1, w * c, c};
  p.w_dims = {k, c, 3, 3}, p.w_strides = {9 * c, 1, 3 * c, c};
  p.y_dims = {n, k, h, w}, p.y_strides = {h * w * k, 1, w * k, k};
  p.stride = {1, 1}, p.pre_padding = {1, 1}, p.post_padding = {1, 1}, p.dilation = {1, 1};
  p.epilogue.scale = p.epilogue.shift = p.epilogue.relu = true;
  return p;
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

class Device {
 public:
  explicit Device(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
  ~Device() {
    for (DevicePtr p : owned_) ctx_->release(p);
  }
  // Random bf16 values in [-1, 1) (the upper half of f32's bits), or f32 ones in [0.5, 1.5).
  DevicePtr random(int64_t n, bool bf16, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(bf16 ? -1.f : 0.5f, bf16 ? 1.f : 1.5f);
    std::vector<unsigned char> bytes(static_cast<size_t>(n) * (bf16 ? 2 : 4));
    for (int64_t i = 0; i < n; ++i) {
      float v = dist(gen);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (bf16) {
        const uint16_t high = static_cast<uint16_t>(bits >> 16);
        std::memcpy(&bytes[static_cast<size_t>(i) * 2], &high, 2);
      } else {
        std::memcpy(&bytes[static_cast<size_t>(i) * 4], &bits, 4);
      }
    }
    DevicePtr p = take(bytes.size());
    ctx_->copy_to_device(p, bytes.data(), bytes.size(), nullptr);
    return p;
  }
  DevicePtr take(size_t bytes) {
    owned_.push_back(ctx_->allocate(std::max<size_t>(bytes, 16)));
    return owned_.back();
  }
  std::vector<unsigned char> read(DevicePtr p, size_t bytes) {
    std::vector<unsigned char> out(bytes);
    ctx_->synchronize(nullptr);
    ctx_->copy_to_host(out.data(), p, bytes, nullptr);
    return out;
  }

 private:
  std::shared_ptr<Context> ctx_;
  std::vector<DevicePtr> owned_;
};

void* ptr(DevicePtr p) { return reinterpret_cast<void*>(p); }

TEST(CudnnGpu, FusedPlansAreStoredRestoredAndRunAlike) {
  std::shared_ptr<Context> ctx;
  std::shared_ptr<const Cudnn> built;
  auto memory = std::make_shared<MemoryStore>();
  try {
    ctx = Context::open(0);
    ctx->make_current();
    built = Cudnn::load(store_of(memory));
  } catch (const Error& e) {
    GTEST_SKIP() << "no GPU or no cuDNN: " << e.what();
  }
  const ConvProblem p = fused_problem();
  const size_t plans = built->engines(p);
  ASSERT_GT(plans, 0u) << "cuDNN offers no fused plan for the " << str(p);
  EXPECT_EQ(memory->writes, 1) << "the fused plans were not serialized";
  ASSERT_EQ(memory->entries.size(), 1u);
  EXPECT_NE(memory->entries.begin()->first.find(built->version()), std::string::npos) << "the name holds cuDNN's version";
  EXPECT_EQ(built->engines(p), plans);  // built once per process
  EXPECT_EQ(memory->reads, 1);

  // Another load (as another process would) restores them without writing.
  std::shared_ptr<const Cudnn> restored = Cudnn::load(store_of(memory));
  ASSERT_EQ(restored->engines(p), plans);
  EXPECT_EQ(memory->hits, 1);
  EXPECT_EQ(memory->writes, 1);

  // A damaged entry is a miss: the plans are built again and the entry replaced.
  std::string& entry = memory->entries.begin()->second;
  const size_t whole = entry.size();
  entry.resize(whole / 2);
  std::shared_ptr<const Cudnn> rebuilt = Cudnn::load(store_of(memory));
  ASSERT_EQ(rebuilt->engines(p), plans);
  EXPECT_EQ(memory->writes, 2);
  EXPECT_GT(memory->entries.begin()->second.size(), whole / 2);

  // Every plan, as built, restored and rebuilt, computes the same bits.
  Device dev(ctx);
  ConvPointers in;
  in.x = ptr(dev.random(count(p.x_dims), true, 1));
  in.w = ptr(dev.random(count(p.w_dims), true, 2));
  in.scale = ptr(dev.random(p.y_dims[1], false, 3));
  in.shift = ptr(dev.random(p.y_dims[1], false, 4));
  const size_t y_bytes = static_cast<size_t>(count(p.y_dims)) * 2;
  for (size_t i = 0; i < plans; ++i) {
    const size_t ws = built->workspace_bytes(p, i);
    std::vector<unsigned char> results[3];
    int r = 0;
    for (const auto& dnn : {built, restored, rebuilt}) {
      ASSERT_EQ(dnn->workspace_bytes(p, i), ws) << "plan " << i;
      ConvPointers call = in;
      const DevicePtr y = dev.take(y_bytes);
      call.y = ptr(y);
      dnn->convolution(p, i, call, ws ? ptr(dev.take(ws)) : nullptr, nullptr);
      results[r++] = dev.read(y, y_bytes);
    }
    EXPECT_TRUE(results[0] == results[1]) << "plan " << i << " restored computes otherwise";
    EXPECT_TRUE(results[0] == results[2]) << "plan " << i << " rebuilt computes otherwise";
    bool nonzero = false;
    for (unsigned char b : results[0]) nonzero = nonzero || b != 0;
    EXPECT_TRUE(nonzero) << "plan " << i << " wrote nothing";
  }
}

// Plans without an epilogue build in milliseconds: nothing is stored.
TEST(CudnnGpu, PlainPlansAreNotStored) {
  auto memory = std::make_shared<MemoryStore>();
  std::shared_ptr<Context> ctx;
  std::shared_ptr<const Cudnn> dnn;
  try {
    ctx = Context::open(0);
    ctx->make_current();
    dnn = Cudnn::load(store_of(memory));
  } catch (const Error& e) {
    GTEST_SKIP() << "no GPU or no cuDNN: " << e.what();
  }
  ConvProblem p = fused_problem();
  p.epilogue = {};
  EXPECT_GT(dnn->engines(p), 0u);
  EXPECT_EQ(memory->reads + memory->writes, 0);
}

}  // namespace
}  // namespace coil::cuda
