// CublasLt without a GPU: gemm's calls (descriptors, attributes and their sizes, the heuristic
// cache, descriptors freed on every failure, threads) against a fake libcublasLt built here, and
// loading the real library: on a machine with the toolkit but no CUDA driver it loads and then
// fails in cublasLtCreate with CUBLAS_STATUS_NOT_INITIALIZED (seen with cuBLASLt 13.1).
// tests/device/cublaslt_check.cc runs the real thing on a GPU.
#include "runtime/cuda/cublaslt.h"
#include "cublaslt_problems.h"
#include "test_util.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "coil/error.h"

namespace coil::cuda {
namespace {

using coil::testing::message_of;
using testing::contiguous;
using testing::linear;

// A stand-in libcublasLt that checks attribute sizes the way cuBLASLt does, logs each heuristic
// query and matmul with everything it was given, counts live descriptors, and fails a named
// call on request.
const char* kFakeCublasLt = R"(
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
namespace {
struct Desc { int compute, scale; int64_t transa = 0, transb = 0, epilogue = 1, bias = 0, bias_type = -1; };
struct Layout { int type; uint64_t rows, cols; int64_t ld, count = 1, offset = 0; };
struct Pref { int64_t workspace = 0, align[4] = {256, 256, 256, 256}; };
std::mutex mu;
std::string log_text, log_copy, fail_call;
int fail_status = 0, live = 0, heuristics = 0, matmuls = 0, handle_object = 0;
bool failing(const char* call) { std::lock_guard l(mu); return fail_call == call; }
int store(int64_t& field, const void* buf, size_t size, size_t expected) {
  if (size != expected) return 7;
  if (size == 4) { int32_t v; std::memcpy(&v, buf, 4); field = v; } else std::memcpy(&field, buf, 8);
  return 0;
}
std::string hex(const void* p) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)(uintptr_t)p);
  return b;
}
std::string layout(const void* l) {
  auto* x = static_cast<const Layout*>(l);
  char b[160];
  std::snprintf(b, sizeof b, "type %d rows %llu cols %llu ld %lld", x->type, (unsigned long long)x->rows,
                (unsigned long long)x->cols, (long long)x->ld);
  std::string s = b;
  if (x->count != 1) s += " batch " + std::to_string(x->count) + " offset " + std::to_string(x->offset);
  return s;
}
template <typename T> int create(void** out) {
  *out = new T();
  std::lock_guard l(mu);
  ++live;
  return 0;
}
template <typename T> int destroy(void* p) { delete static_cast<T*>(p); std::lock_guard l(mu); --live; return 0; }
}
extern "C" {
int cublasLtCreate(void** h) { if (failing("cublasLtCreate")) return fail_status; *h = &handle_object; return 0; }
int cublasLtDestroy(void*) { return 0; }
const char* cublasLtGetStatusName(int s) {
  switch (s) { case 1: return "CUBLAS_STATUS_NOT_INITIALIZED"; case 7: return "CUBLAS_STATUS_INVALID_VALUE";
               case 15: return "CUBLAS_STATUS_NOT_SUPPORTED"; }
  return "CUBLAS_STATUS_UNKNOWN";
}
size_t cublasLtGetVersion() { return 130100; }
int cublasLtMatmulDescCreate(void** d, int compute, int scale) {
  int rc = create<Desc>(d);
  if (rc == 0) { static_cast<Desc*>(*d)->compute = compute; static_cast<Desc*>(*d)->scale = scale; }
  return rc;
}
int cublasLtMatmulDescDestroy(void* d) { return destroy<Desc>(d); }
int cublasLtMatmulDescSetAttribute(void* d, int attr, const void* buf, size_t size) {
  auto* x = static_cast<Desc*>(d);
  switch (attr) {
    case 3: return store(x->transa, buf, size, 4);    case 4: return store(x->transb, buf, size, 4);
    case 7: return store(x->epilogue, buf, size, 4);  case 8: return store(x->bias, buf, size, 8);
    case 26: return store(x->bias_type, buf, size, 4);
  }
  return 7;
}
int cublasLtMatrixLayoutCreate(void** l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  int rc = create<Layout>(l);
  if (rc == 0) *static_cast<Layout*>(*l) = Layout{type, rows, cols, ld};
  return rc;
}
int cublasLtMatrixLayoutDestroy(void* l) { return destroy<Layout>(l); }
int cublasLtMatrixLayoutSetAttribute(void* l, int attr, const void* buf, size_t size) {
  if (failing("cublasLtMatrixLayoutSetAttribute")) return fail_status;
  auto* x = static_cast<Layout*>(l);
  if (attr == 5) return store(x->count, buf, size, 4);
  if (attr == 6) return store(x->offset, buf, size, 8);
  return 7;
}
int cublasLtMatmulPreferenceCreate(void** p) { return create<Pref>(p); }
int cublasLtMatmulPreferenceDestroy(void* p) { return destroy<Pref>(p); }
int cublasLtMatmulPreferenceSetAttribute(void* p, int attr, const void* buf, size_t size) {
  auto* x = static_cast<Pref*>(p);
  if (attr == 1) return store(x->workspace, buf, size, 8);
  if (attr >= 5 && attr <= 8) return store(x->align[attr - 5], buf, size, 4);
  return 7;
}
struct Algo { uint64_t data[8]; };
struct Result { Algo algo; size_t workspace; int state; float waves; int reserved[4]; };
int cublasLtMatmulAlgoGetHeuristic(void*, void*, void*, void*, void*, void*, void* pref, int requested, Result* results,
                                   int* found) {
  if (failing("cublasLtMatmulAlgoGetHeuristic")) return fail_status;
  if (failing("no algorithm")) { *found = 0; return 0; }
  auto* x = static_cast<Pref*>(pref);
  std::lock_guard l(mu);
  // The first is numbered by the query; the others (up to 3 in all, while every pointer is
  // 256-byte aligned) are 2001, 2002, the same in every query.
  results[0] = Result{};
  results[0].algo.data[0] = 1000 + ++heuristics;
  *found = 1;
  bool aligned = x->align[0] == 256 && x->align[1] == 256 && x->align[2] == 256 && x->align[3] == 256;
  for (int i = 1; aligned && i < requested && i < 3; ++i) {
    results[i] = Result{};
    results[i].algo.data[0] = 2000 + i;
    *found = i + 1;
  }
  log_text += "heuristic requested " + std::to_string(requested) + " workspace " + std::to_string(x->workspace) +
              " align " + std::to_string(x->align[0]) + " " + std::to_string(x->align[1]) + " " +
              std::to_string(x->align[2]) + " " + std::to_string(x->align[3]) + "\n";
  return 0;
}
int cublasLtMatmul(void*, void* desc, const void* alpha, const void* a, void* la, const void* b, void* lb,
                   const void* beta, const void* c, void* lc, void* d, void* ld, const Algo* algo, void* workspace,
                   size_t workspace_bytes, void* stream) {
  if (failing("cublasLtMatmul")) return fail_status;
  auto* x = static_cast<Desc*>(desc);
  auto scalar = [&](const void* v) {
    return x->scale == 1 ? *static_cast<const double*>(v) : *static_cast<const float*>(v);
  };
  char head[200];
  std::snprintf(head, sizeof head, "matmul compute %d scale %d transa %lld transb %lld epilogue %lld", x->compute,
                x->scale, (long long)x->transa, (long long)x->transb, (long long)x->epilogue);
  std::string s = head;
  if (x->bias) s += " bias " + hex((const void*)x->bias) + " type " + std::to_string(x->bias_type);
  s += " | A " + layout(la) + " @" + hex(a) + " | B " + layout(lb) + " @" + hex(b);
  s += " | C " + (lc == ld ? std::string("as D") : layout(lc)) + " @" + hex(c) + " | D " + layout(ld) + " @" + hex(d);
  char tail[200];
  std::snprintf(tail, sizeof tail, " | alpha %g beta %g | algo %llu | workspace %s %zu | stream %s\n", scalar(alpha),
                scalar(beta), (unsigned long long)algo->data[0], hex(workspace).c_str(), workspace_bytes,
                hex(stream).c_str());
  std::lock_guard l(mu);
  ++matmuls;
  log_text += s + tail;
  return 0;
}
const char* fake_log() { std::lock_guard l(mu); log_copy = log_text; log_text.clear(); return log_copy.c_str(); }
int fake_live() { std::lock_guard l(mu); return live; }
int fake_matmuls() { std::lock_guard l(mu); return matmuls; }
void fake_fail(const char* call, int status) { std::lock_guard l(mu); fail_call = call; fail_status = status; }
void fake_reset() { std::lock_guard l(mu); fail_call.clear(); log_text.clear(); heuristics = 0; }
}
)";

void* at(uintptr_t address) { return reinterpret_cast<void*>(address); }

class FakeCublasLt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("coil_fake_cublaslt_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    std::ofstream(*dir_ / "fake.cc") << kFakeCublasLt;
    std::string cmd =
        "g++ -std=c++17 -shared -fPIC -o " + (*dir_ / "libcublasLt.so").string() + " " + (*dir_ / "fake.cc").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    // Held open for the whole suite, so that its counters outlive each CublasLt.
    library_ = ::dlopen((*dir_ / "libcublasLt.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << ::dlerror();
  }
  static void TearDownTestSuite() {
    if (library_) ::dlclose(library_);
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    ::setenv("COIL_CUBLASLT", (*dir_ / "libcublasLt.so").c_str(), 1);
    symbol<void (*)()>("fake_reset")();
    lt_ = CublasLt::load();
  }
  void TearDown() override { ::unsetenv("COIL_CUBLASLT"); }

  template <typename Fn>
  static Fn symbol(const char* name) {
    return reinterpret_cast<Fn>(::dlsym(library_, name));
  }
  static std::string log() { return symbol<const char* (*)()>("fake_log")(); }
  static int live() { return symbol<int (*)()>("fake_live")(); }
  static int matmuls() { return symbol<int (*)()>("fake_matmuls")(); }
  static void fail(const char* call, int status) { symbol<void (*)(const char*, int)>("fake_fail")(call, status); }

  static std::filesystem::path* dir_;
  static void* library_;
  std::shared_ptr<const CublasLt> lt_;
};
std::filesystem::path* FakeCublasLt::dir_ = nullptr;
void* FakeCublasLt::library_ = nullptr;

TEST_F(FakeCublasLt, LinearWithBiasAndGelu) {
  EXPECT_EQ(lt_->version(), "13.1.0");
  EXPECT_EQ(lt_->path(), (*dir_ / "libcublasLt.so").string());
  GemmProblem p = linear(DType::f16, 64, 128, 32);
  p.epilogue = Epilogue::bias_gelu;
  lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), at(0x5000), at(0x9000), 1024, at(0x77));
  EXPECT_EQ(log(),
            "heuristic requested 1 workspace 1024 align 256 256 256 256\n"
            "matmul compute 68 scale 0 transa 1 transb 0 epilogue 36 bias 0x5000 type 2"
            " | A type 2 rows 32 cols 128 ld 32 @0x2000 | B type 2 rows 32 cols 64 ld 32 @0x1000"
            " | C as D @0x4000 | D type 2 rows 128 cols 64 ld 128 @0x4000"
            " | alpha 1 beta 0 | algo 1001 | workspace 0x9000 1024 | stream 0x77\n");
  EXPECT_EQ(live(), 0) << "every descriptor destroyed";
}

// n = 1001 bf16 columns with D's rows padded to 1008 elements: the 1000 aligned columns in one
// call, the last one in a second, B, D and the bias moved along by 1000 columns. Unpadded rows
// (ld 1001) stay one call, since the split would not align them.
TEST_F(FakeCublasLt, UnalignedColumnsOfAlignedRowsSplit) {
  GemmProblem p = linear(DType::bf16, 64, 1001, 32);
  p.d_rs = 1008;
  const int before = matmuls();
  p.epilogue = Epilogue::bias;
  lt_->gemm(p, at(0x100000), at(0x200000), nullptr, at(0x400000), at(0x500000), nullptr, 0, nullptr);
  std::string calls = log();
  EXPECT_NE(calls.find("bias 0x500000 type 14 | A type 14 rows 32 cols 1000 ld 32 @0x200000 | B type 14 rows 32 cols 64 ld 32 "
                       "@0x100000 | C as D @0x400000 | D type 14 rows 1000 cols 64 ld 1008 @0x400000"),
            std::string::npos)
      << calls;
  EXPECT_NE(calls.find("bias 0x5007d0 type 14 | A type 14 rows 1 cols 32 ld 1 @0x20fa00 | B type 14 rows 32 cols 64 ld 32 "
                       "@0x100000 | C as D @0x4007d0 | D type 14 rows 1 cols 64 ld 1008 @0x4007d0"),
            std::string::npos)
      << calls;
  EXPECT_EQ(matmuls() - before, 2);
  p.d_rs = 1001;
  lt_->gemm(p, at(0x100000), at(0x200000), nullptr, at(0x400000), at(0x500000), nullptr, 0, nullptr);
  EXPECT_EQ(matmuls() - before, 3);
  EXPECT_EQ(live(), 0);
}

TEST_F(FakeCublasLt, BatchedF64WithABroadcastC) {
  GemmProblem p = contiguous(DType::f64, 16, 8, 4);
  p.batch = 3;
  p.a_rs = 1;  // A transposed per batch
  p.a_cs = 16;
  p.a_bs = 64;
  p.b_bs = 0;
  p.c_bs = 0;
  p.d_bs = 128;
  p.alpha = 0.5;
  p.beta = 2;
  p.epilogue = Epilogue::relu;
  lt_->gemm(p, at(0x1000), at(0x2000), at(0x3000), at(0x4000), nullptr, nullptr, 0, nullptr);
  EXPECT_EQ(log(),
            "heuristic requested 1 workspace 0 align 256 256 256 256\n"
            "matmul compute 70 scale 1 transa 0 transb 1 epilogue 2"
            " | A type 1 rows 8 cols 4 ld 8 batch 3 offset 0 @0x2000 | B type 1 rows 16 cols 4 ld 16 batch 3 offset 64 "
            "@0x1000"
            " | C type 1 rows 8 cols 16 ld 8 batch 3 offset 0 @0x3000 | D type 1 rows 8 cols 16 ld 8 batch 3 offset "
            "128 @0x4000"
            " | alpha 0.5 beta 2 | algo 1001 | workspace 0x0 0 | stream 0x0\n");
  EXPECT_EQ(live(), 0);
}

TEST_F(FakeCublasLt, ComputeTypes) {
  GemmProblem p = contiguous(DType::f32, 8, 8, 8);
  p.tf32 = true;
  lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, nullptr, 0, nullptr);
  EXPECT_NE(log().find("matmul compute 77 scale 0 "), std::string::npos) << "TF32 tensor cores";
  p.tf32 = false;
  lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, nullptr, 0, nullptr);
  EXPECT_NE(log().find("matmul compute 68 scale 0 "), std::string::npos) << "exact fp32";
  p.dtype = DType::bf16;
  p.tf32 = true;  // ignored
  p.epilogue = Epilogue::bias;
  lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), at(0x5000), nullptr, 0, nullptr);
  std::string text = log();
  EXPECT_NE(text.find("matmul compute 68 scale 0 transa 0 transb 0 epilogue 4 bias 0x5000 type 14 | A type 14 "),
            std::string::npos)
      << text;
}

TEST_F(FakeCublasLt, HeuristicIsCachedPerProblemAlignmentAndWorkspace) {
  GemmProblem p = contiguous(DType::f16, 64, 64, 64);
  auto run = [&](uintptr_t a, size_t workspace) {
    lt_->gemm(p, at(a), at(0x2000), nullptr, at(0x4000), nullptr, at(0x9000), workspace, nullptr);
  };
  run(0x1000, 4096);
  run(0x1100, 4096);  // another pointer, same alignment
  std::string text = log();
  EXPECT_EQ(text.find("heuristic"), text.rfind("heuristic")) << "one query for both:\n" << text;
  EXPECT_NE(text.find("algo 1001 | workspace 0x9000 4096 | stream 0x0\nmatmul"), std::string::npos) << text;
  run(0x1010, 4096);  // our A (cuBLASLt's B) only 16-byte aligned
  text = log();
  EXPECT_NE(text.find("heuristic requested 1 workspace 4096 align 256 16 256 256\n"), std::string::npos) << text;
  EXPECT_NE(text.find("algo 1002"), std::string::npos) << text;
  run(0x1000, 0);  // less workspace
  EXPECT_NE(log().find("algo 1003"), std::string::npos);
  p.beta = 1;  // another problem
  p.c_rs = 64;
  p.c_cs = 1;
  lt_->gemm(p, at(0x1000), at(0x2000), at(0x3000), at(0x4000), nullptr, nullptr, 0, nullptr);
  EXPECT_NE(log().find("algo 1004"), std::string::npos);
  EXPECT_EQ(lt_->cached_algorithms(), 4u);
}

// algorithms lists what the heuristic offers; gemm runs a preferred one when the heuristic
// offers it for the call's pointers (asking for kOffered), else the heuristic's first; each
// preference is cached apart. Products that gemm splits in two calls list nothing.
TEST_F(FakeCublasLt, PreferredAlgorithmWhenOffered) {
  GemmProblem p = contiguous(DType::bf16, 64, 64, 64);
  auto algos = lt_->algorithms(p, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, 4096);
  ASSERT_EQ(algos.size(), 3u);
  EXPECT_EQ(algos[0].data[0], 1001u);
  EXPECT_EQ(algos[2].data[0], 2002u);
  EXPECT_EQ(log(), fmt::format("heuristic requested {} workspace 4096 align 256 256 256 256\n", CublasLt::kOffered));
  auto run = [&](uintptr_t a, const GemmAlgo* prefer) {
    lt_->gemm(p, at(a), at(0x2000), nullptr, at(0x4000), nullptr, at(0x9000), 4096, nullptr, prefer);
  };
  run(0x1000, &algos[2]);
  std::string text = log();
  EXPECT_NE(text.find(fmt::format("heuristic requested {} ", CublasLt::kOffered)), std::string::npos) << text;
  EXPECT_NE(text.find("| algo 2002 |"), std::string::npos) << text;
  run(0x1000, &algos[2]);  // cached
  text = log();
  EXPECT_EQ(text.find("heuristic"), std::string::npos) << text;
  EXPECT_NE(text.find("| algo 2002 |"), std::string::npos) << text;
  run(0x1000, nullptr);  // no preference: the heuristic's first, asked for alone
  text = log();
  EXPECT_NE(text.find("heuristic requested 1 "), std::string::npos) << text;
  EXPECT_NE(text.find("| algo 1003 |"), std::string::npos) << text;
  run(0x1010, &algos[2]);  // A 16-byte aligned: not offered, the first runs
  text = log();
  EXPECT_NE(text.find("| algo 1004 |"), std::string::npos) << text;
  GemmAlgo unknown;
  unknown.data[0] = 7;
  run(0x1000, &unknown);
  EXPECT_NE(log().find("| algo 1005 |"), std::string::npos);
  EXPECT_EQ(lt_->cached_algorithms(), 4u);

  GemmProblem split = linear(DType::bf16, 64, 1001, 32);
  split.d_rs = 1008;
  EXPECT_TRUE(lt_->algorithms(split, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, 0).empty());
  EXPECT_EQ(live(), 0);
}

TEST(GemmAlgo, HexRoundTrip) {
  GemmAlgo algo;
  for (size_t i = 0; i < algo.data.size(); ++i) algo.data[i] = 0x0123456789abcdefull * (i + 1);
  std::string text = to_hex(algo);
  EXPECT_EQ(text.size(), 128u);
  EXPECT_EQ(text.substr(0, 16), "0123456789abcdef");
  EXPECT_EQ(gemm_algo_from_hex(text), algo);
  EXPECT_EQ(gemm_algo_from_hex("first"), std::nullopt);
  EXPECT_EQ(gemm_algo_from_hex(text.substr(1)), std::nullopt);
  EXPECT_EQ(gemm_algo_from_hex(std::string(127, '0') + "g"), std::nullopt);
}

TEST_F(FakeCublasLt, FailingCallsNameTheStatusAndFreeEverything) {
  GemmProblem p = linear(DType::f16, 64, 128, 32);
  p.batch = 2;
  p.a_bs = 64 * 32;
  p.d_bs = 64 * 128;
  auto run = [&] { lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, nullptr, 0, nullptr); };
  fail("cublasLtMatmul", 15);
  std::string message = message_of(run);
  EXPECT_EQ(message.rfind("cublasLtMatmul failed: CUBLAS_STATUS_NOT_SUPPORTED (15) for the f16 gemm batch 2 m 64 n 128 "
                          "k 32",
                          0),
            0u)
      << message;
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(lt_->cached_algorithms(), 1u) << "the heuristic's answer is kept";
  fail("cublasLtMatrixLayoutSetAttribute", 7);
  message = message_of(run);
  EXPECT_EQ(
      message.rfind("cublasLtMatrixLayoutSetAttribute failed: CUBLAS_STATUS_INVALID_VALUE (7) for the f16 gemm", 0), 0u)
      << message;
  EXPECT_EQ(live(), 0);
  p.batch = 1;
  fail("cublasLtMatmulAlgoGetHeuristic", 15);
  message = message_of(run);
  EXPECT_EQ(
      message.rfind("cublasLtMatmulAlgoGetHeuristic failed: CUBLAS_STATUS_NOT_SUPPORTED (15) for the f16 gemm", 0), 0u)
      << message;
  fail("no algorithm", 0);
  message = message_of(run);
  EXPECT_EQ(message.rfind("cublasLtMatmulAlgoGetHeuristic found no algorithm for the f16 gemm batch 1", 0), 0u)
      << message;
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(lt_->cached_algorithms(), 1u) << "failed queries are not cached";
  fail("", 0);
  run();
  EXPECT_EQ(live(), 0);
}

TEST_F(FakeCublasLt, RefusesBeforeCallingCublasLt) {
  GemmProblem p = contiguous(DType::f32, 8, 8, 8);
  p.epilogue = Epilogue::bias_relu;
  std::string message =
      message_of([&] { lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, nullptr, 0, nullptr); });
  EXPECT_NE(message.find("is missing a pointer (A, B, D and bias needed)"), std::string::npos) << message;
  p.epilogue = Epilogue::none;
  p.beta = 1;
  p.c_rs = 1;  // C column-major, in place on D
  p.c_cs = 8;
  message =
      message_of([&] { lt_->gemm(p, at(0x1000), at(0x2000), at(0x4000), at(0x4000), nullptr, nullptr, 0, nullptr); });
  EXPECT_NE(message.find("C (8x8, strides 1, 8) is not row-major"), std::string::npos) << message;
  p.c_rs = 16;  // C row-major but not D's layout, in place
  p.c_cs = 1;
  message =
      message_of([&] { lt_->gemm(p, at(0x1000), at(0x2000), at(0x4000), at(0x4000), nullptr, nullptr, 0, nullptr); });
  EXPECT_NE(message.find("updates C in place with different layouts for C and D"), std::string::npos) << message;
  p.k = 0;
  message =
      message_of([&] { lt_->gemm(p, at(0x1000), at(0x2000), at(0x3000), at(0x4000), nullptr, nullptr, 0, nullptr); });
  EXPECT_NE(message.find("k == 0"), std::string::npos) << message;
  p.m = 0;  // nothing to do, not even with null pointers
  lt_->gemm(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr);
  EXPECT_EQ(log(), "");
  EXPECT_EQ(live(), 0);
}

TEST_F(FakeCublasLt, ManyThreadsShareTheHandleAndTheCache) {
  int before = matmuls();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        GemmProblem p = contiguous(DType::f16, 64, 64 * (1 + (i + t) % 3), 64);
        lt_->gemm(p, at(0x1000), at(0x2000), nullptr, at(0x4000), nullptr, nullptr, 0, nullptr);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(matmuls() - before, 400);
  EXPECT_EQ(lt_->cached_algorithms(), 3u);
  EXPECT_EQ(live(), 0);
  log();
}

TEST_F(FakeCublasLt, CreateFailureIsAnError) {
  fail("cublasLtCreate", 1);
  std::string message = message_of([] { CublasLt::load(); });
  EXPECT_EQ(message.rfind("cublasLtCreate failed: CUBLAS_STATUS_NOT_INITIALIZED (1)", 0), 0u) << message;
}

TEST(CublasLtLoad, AMissingOverrideIsNamed) {
  ::setenv("COIL_CUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
  std::string message = message_of([] { CublasLt::load(); });
  ::unsetenv("COIL_CUBLASLT");
  EXPECT_NE(message.find("cannot load cuBLASLt"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/libcublasLt.so.13: "), std::string::npos) << message;
  EXPECT_EQ(message.find("\n  libcublasLt"), std::string::npos) << "the override is the only candidate: " << message;
}

// The real library: with no cuBLASLt installed, load() says what it tried; installed but
// without a CUDA driver (this machine: toolkit, no GPU), cublasLtCreate fails with
// CUBLAS_STATUS_NOT_INITIALIZED; with a driver it loads, or fails the same way where the
// driver finds no GPU.
TEST(CublasLtLoad, TheRealLibrary) {
  ::unsetenv("COIL_CUBLASLT");
  bool library = false;
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so"}) {
    if (void* h = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      ::dlclose(h);
      library = true;
      break;
    }
  }
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver) ::dlclose(driver);
  std::shared_ptr<const CublasLt> lt;
  std::string message;
  try {
    lt = CublasLt::load();
  } catch (const Error& e) {
    message = e.what();
  }
  const std::string not_initialized = "cublasLtCreate failed: CUBLAS_STATUS_NOT_INITIALIZED (1)";
  if (!library) {
    EXPECT_NE(message.find("cannot load cuBLASLt"), std::string::npos) << message;
  } else if (!driver) {
    EXPECT_EQ(message.rfind(not_initialized, 0), 0u) << message;
  } else if (lt) {
    EXPECT_EQ(lt->version().find('.'), 2u) << lt->version();
  } else {
    EXPECT_EQ(message.rfind(not_initialized, 0), 0u) << message;
  }
}
}  // namespace
}  // namespace coil::cuda
