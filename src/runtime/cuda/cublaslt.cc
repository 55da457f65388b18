#include "runtime/cuda/cublaslt.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/cuda/cublaslt_api.h"
#include "support/check.h"
#include "support/foreign_library.h"

namespace coil::cuda {

// cuBLASLt's entry points (types from cublaslt_api.h: handles and descriptors are void*).
struct CublasLt::Api {
  using Status = lt::Status;
  using SetAttribute = Status (*)(void*, int, const void*, size_t);
  Status (*create)(void**) = nullptr;
  Status (*destroy)(void*) = nullptr;
  const char* (*status_name)(Status) = nullptr;
  size_t (*version)() = nullptr;
  Status (*desc_create)(void**, int, int) = nullptr;
  Status (*desc_destroy)(void*) = nullptr;
  SetAttribute desc_set = nullptr;
  Status (*layout_create)(void**, int, uint64_t, uint64_t, int64_t) = nullptr;
  Status (*layout_destroy)(void*) = nullptr;
  SetAttribute layout_set = nullptr;
  Status (*pref_create)(void**) = nullptr;
  Status (*pref_destroy)(void*) = nullptr;
  SetAttribute pref_set = nullptr;
  Status (*heuristic)(void*, void*, void*, void*, void*, void*, void*, int, lt::HeuristicResult*, int*) = nullptr;
  Status (*matmul)(void*, void*, const void*, const void*, void*, const void*, void*, const void*, const void*, void*,
                   void*, void*, const lt::MatmulAlgo*, void*, size_t, void*) = nullptr;
};

namespace {

// Everything the choice depends on: the problem, the pointers' alignments (cuBLASLt picks
// kernels by them), the workspace it may use and the caller's preference. Doubles are kept as
// bits, so that NaN still orders.
struct AlgoKey {
  GemmProblem p;
  uint64_t alpha_bits = 0, beta_bits = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0;
  size_t workspace_bytes = 0;
  GemmAlgo prefer;  // all zero: none

  auto fields() const {
    return std::tie(p.dtype, p.f32_output, p.batch, p.m, p.n, p.k, p.a_rs, p.a_cs, p.a_bs, p.b_rs, p.b_cs, p.b_bs, p.c_rs, p.c_cs,
                    p.c_bs, p.d_rs, p.d_cs, p.d_bs, alpha_bits, beta_bits, p.epilogue, p.tf32, align_a, align_b,
                    align_c, align_d, align_bias, workspace_bytes, prefer);
  }
  bool operator<(const AlgoKey& o) const { return fields() < o.fields(); }
};

}  // namespace

struct CublasLt::Cache {
  std::mutex mutex;
  std::map<AlgoKey, lt::MatmulAlgo> algos;
};

namespace {

// A cuBLASLt object destroyed on every path.
struct Owned {
  explicit Owned(lt::Status (*destroy_fn)(void*)) : destroy(destroy_fn) {}
  ~Owned() {
    if (p) destroy(p);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  void* p = nullptr;
  lt::Status (*destroy)(void*);
};

bool empty(const GemmProblem& p) { return p.batch == 0 || p.m == 0 || p.n == 0; }

// A row-major rows x cols matrix with strides (rs, cs) as a column-major cuBLASLt matrix: its
// transpose with ld = rs when its columns are unit-strided (op N then gives back that
// transpose), else itself with ld = cs when its rows are (op T). A dimension of extent 1 may
// have any stride; the leading dimension it would set is then the other extent.
std::optional<LtMatrix> column_major(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols))
    return LtMatrix{.rows = cols, .cols = rows, .ld = rows == 1 ? cols : rs, .transpose = false};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows))
    return LtMatrix{.rows = rows, .cols = cols, .ld = cols == 1 ? rows : cs, .transpose = true};
  return std::nullopt;
}

// The operands of a non-empty problem, or why cuBLASLt cannot take it ("" when it can).
std::string map_operands(const GemmProblem& p, LtOperands& ops) {
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16 && p.dtype != DType::f64)
    return fmt::format("cuBLASLt takes f32, f16, bf16 and f64 products, not {}", dtype_name(p.dtype));
  if (p.f32_output && p.dtype != DType::f16 && p.dtype != DType::bf16) return "an f32 output is for f16 and bf16 products";
  if (p.f32_output && p.epilogue != Epilogue::none) return "an f32 output takes no epilogue";
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) return "negative sizes";
  if (p.batch > INT32_MAX) return fmt::format("a batch of {} is more than cuBLASLt's int32 batch count holds", p.batch);
  if (p.k == 0) return "k == 0: D = beta * C (+ epilogue) is no product, the caller computes it";
  for (int64_t s : {p.a_rs, p.a_cs, p.a_bs, p.b_rs, p.b_cs, p.b_bs, p.c_rs, p.c_cs, p.c_bs, p.d_rs, p.d_cs, p.d_bs})
    if (s < 0) return "negative strides";
  auto batch_stride = [&](int64_t s) { return p.batch == 1 ? 0 : s; };
  auto operand = [&](const char* name, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t bs, LtMatrix& out,
                     bool may_transpose) -> std::string {
    auto m = column_major(rows, cols, rs, cs);
    if (!m || (m->transpose && !may_transpose))
      return fmt::format(
          "{} ({}x{}, strides {}, {}) {}", name, rows, cols, rs, cs,
          may_transpose ? "has neither a unit row stride nor a unit column stride with the other covering its extent"
                        : "is not row-major with a unit column stride and a row stride covering its columns");
    out = *m;
    out.batch_stride = batch_stride(bs);
    return "";
  };
  ops.batch = static_cast<int32_t>(p.batch);
  for (const std::string& why : {operand("A", p.m, p.k, p.a_rs, p.a_cs, p.a_bs, ops.b, true),
                                 operand("B", p.k, p.n, p.b_rs, p.b_cs, p.b_bs, ops.a, true),
                                 operand("D", p.m, p.n, p.d_rs, p.d_cs, p.d_bs, ops.d, false)})
    if (!why.empty()) return why;
  if (p.batch > 1 && p.d_bs == 0) return "D's batches overlap (batch stride 0)";
  ops.c = ops.d;
  if (p.beta != 0) return operand("C", p.m, p.n, p.c_rs, p.c_cs, p.c_bs, ops.c, false);
  return "";
}

int data_type(DType t) {
  switch (t) {
    case DType::f64: return lt::kR64F;
    case DType::f16: return lt::kR16F;
    case DType::bf16: return lt::kR16BF;
    default: return lt::kR32F;
  }
}

int compute_type(const GemmProblem& p) {
  if (p.dtype == DType::f64) return lt::kCompute64F;
  return p.dtype == DType::f32 && p.tf32 ? lt::kCompute32FFastTf32 : lt::kCompute32F;
}

uint32_t cublas_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::none: return lt::kEpilogueDefault;
    case Epilogue::bias: return lt::kEpilogueBias;
    case Epilogue::relu: return lt::kEpilogueRelu;
    case Epilogue::bias_relu: return lt::kEpilogueReluBias;
    case Epilogue::gelu: return lt::kEpilogueGelu;
    case Epilogue::bias_gelu: return lt::kEpilogueGeluBias;
  }
  return lt::kEpilogueDefault;
}

}  // namespace

std::string_view epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::none: return "none";
    case Epilogue::bias: return "bias";
    case Epilogue::relu: return "relu";
    case Epilogue::bias_relu: return "bias_relu";
    case Epilogue::gelu: return "gelu";
    case Epilogue::bias_gelu: return "bias_gelu";
  }
  return "?";
}

bool epilogue_has_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::bias_relu || e == Epilogue::bias_gelu;
}

DType output_dtype(const GemmProblem& p) { return p.f32_output ? DType::f32 : p.dtype; }

std::string str(const GemmProblem& p) {
  return fmt::format(
      "{}{} gemm batch {} m {} n {} k {} (strides batch/row/col: A {}/{}/{}, B {}/{}/{}, C {}/{}/{}, D {}/{}/{}), "
      "alpha {} beta {}, epilogue {}{}",
      dtype_name(p.dtype), p.f32_output ? " (f32 output)" : "", p.batch, p.m, p.n, p.k, p.a_bs, p.a_rs, p.a_cs, p.b_bs, p.b_rs, p.b_cs, p.c_bs, p.c_rs,
      p.c_cs, p.d_bs, p.d_rs, p.d_cs, p.alpha, p.beta, epilogue_name(p.epilogue),
      p.tf32 && p.dtype == DType::f32 ? ", tf32" : "");
}

uint32_t pointer_alignment(const void* ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  if (address == 0) return 256;
  return static_cast<uint32_t>(std::min<uintptr_t>(256, address & (~address + 1)));
}

std::string to_hex(const GemmAlgo& algo) {
  std::string out;
  for (uint64_t word : algo.data) out += fmt::format("{:016x}", word);
  return out;
}

std::optional<GemmAlgo> gemm_algo_from_hex(std::string_view text) {
  GemmAlgo algo;
  if (text.size() != 16 * algo.data.size()) return std::nullopt;
  for (size_t w = 0; w < algo.data.size(); ++w) {
    uint64_t word = 0;
    for (char ch : text.substr(16 * w, 16)) {
      int digit = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (digit < 0) return std::nullopt;
      word = word << 4 | static_cast<uint64_t>(digit);
    }
    algo.data[w] = word;
  }
  return algo;
}

std::optional<std::string> gemm_unsupported_reason(const GemmProblem& p) {
  if (empty(p) && p.batch >= 0 && p.m >= 0 && p.n >= 0 && p.k >= 0) return std::nullopt;
  LtOperands ops;
  std::string why = map_operands(p, ops);
  if (why.empty()) return std::nullopt;
  return why;
}

bool gemm_supported(const GemmProblem& p) { return !gemm_unsupported_reason(p).has_value(); }

LtOperands to_column_major(const GemmProblem& p) {
  if (empty(p)) fail("the {} is empty: there is nothing for cuBLASLt to do", str(p));
  LtOperands ops;
  std::string why = map_operands(p, ops);
  if (!why.empty()) fail("cuBLASLt cannot take the {}: {}", str(p), why);
  return ops;
}

CublasLt::CublasLt() = default;

CublasLt::~CublasLt() {
  if (handle_) api_->destroy(handle_);
  close_foreign_library(library_);
}

std::shared_ptr<const CublasLt> CublasLt::load() {
  std::vector<std::string> candidates = {"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so"};
  if (const char* env = std::getenv("COIL_CUBLASLT"); env && *env) candidates = {env};
  std::string path, tried;
  void* library = open_first_library(candidates, path, tried);
  if (!library)
    fail(
        "cannot load cuBLASLt for matrix products on the GPU; tried:{}\nInstall the CUDA toolkit or set COIL_CUBLASLT to "
        "libcublasLt's path.",
        tried);
  std::shared_ptr<CublasLt> lt(new CublasLt());
  lt->library_ = library;
  lt->path_ = path;
  lt->api_ = std::make_unique<Api>();
  lt->cache_ = std::make_unique<Cache>();
  Api& a = *lt->api_;
  bind_symbol(library, "cublasLtCreate", a.create, path, "cuBLASLt");
  bind_symbol(library, "cublasLtDestroy", a.destroy, path, "cuBLASLt");
  bind_symbol(library, "cublasLtGetStatusName", a.status_name, path, "cuBLASLt");
  bind_symbol(library, "cublasLtGetVersion", a.version, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulDescCreate", a.desc_create, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulDescDestroy", a.desc_destroy, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulDescSetAttribute", a.desc_set, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatrixLayoutCreate", a.layout_create, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatrixLayoutDestroy", a.layout_destroy, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatrixLayoutSetAttribute", a.layout_set, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulPreferenceCreate", a.pref_create, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulPreferenceDestroy", a.pref_destroy, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulPreferenceSetAttribute", a.pref_set, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmulAlgoGetHeuristic", a.heuristic, path, "cuBLASLt");
  bind_symbol(library, "cublasLtMatmul", a.matmul, path, "cuBLASLt");
  if (int status = a.create(&lt->handle_); status != lt::kSuccess) {
    lt->handle_ = nullptr;
    const char* name = a.status_name(status);
    fail("cublasLtCreate failed: {} ({}) in {}: cuBLASLt needs a CUDA driver and a GPU",
         name ? name : "unknown status", status, path);
  }
  return lt;
}

std::string CublasLt::version() const {
  size_t v = api_->version();
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

void CublasLt::check(int status, const char* call, const GemmProblem& p) const {
  if (status == lt::kSuccess) return;
  const char* name = api_->status_name(status);
  fail("{} failed: {} ({}) for the {}", call, name ? name : "unknown status", status, str(p));
}

size_t CublasLt::cached_algorithms() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->algos.size();
}

int64_t CublasLt::split_columns(const GemmProblem& p) {
  // cuBLASLt runs its fast kernels only when n (its m) is a multiple of 16 bytes as well as
  // the leading dimensions (seen: [8192, 768] x [768, 50257] bf16 took 6.6 ms with any ld, 1 ms
  // split as below). With D's rows aligned, the aligned columns go first and the last few after.
  const auto size = static_cast<int64_t>(dtype_size(output_dtype(p)));
  const int64_t per_vector = 16 / static_cast<int64_t>(dtype_size(p.dtype));
  const int64_t main_n = p.n / per_vector * per_vector;
  if (main_n > 0 && main_n < p.n && p.d_cs == 1 && (p.d_rs * size) % 16 == 0 && (p.beta == 0 || p.c_cs == 1)) return main_n;
  return 0;
}

void CublasLt::gemm(const GemmProblem& p, const void* a, const void* b, const void* c, void* d, const void* bias,
                    void* workspace, size_t workspace_bytes, void* stream, const GemmAlgo* prefer) const {
  auto call = prepare(p, a, b, c, d, bias, workspace_bytes, prefer);
  COIL_CHECK(run(*call, a, b, c, d, bias, workspace, workspace_bytes, stream)) << "a product prepared for its own pointers did not run";
}

namespace {

// One cuBLASLt call described: the descriptors (destroyed with it) and the key of its
// algorithm.
struct LtCall {
  explicit LtCall(const CublasLt::Api& x)
      : desc(x.desc_destroy), layout_a(x.layout_destroy), layout_b(x.layout_destroy), layout_c(x.layout_destroy),
        layout_d(x.layout_destroy) {}
  Owned desc, layout_a, layout_b, layout_c, layout_d;
  const void* c_data = nullptr;  // C, or D where cuBLASLt reads no C (beta == 0)
  void* c_layout = nullptr;
  AlgoKey key;
};

GemmAlgo as_algo(const lt::MatmulAlgo& algo) {
  GemmAlgo out;
  std::copy(std::begin(algo.data), std::end(algo.data), out.data.begin());
  return out;
}

// The descriptors of `p`'s one call; `check(status, call name)` reports a failed cuBLASLt call.
template <typename Check>
void describe(const CublasLt::Api& x, const GemmProblem& p, const void* a, const void* b, const void* c, const void* d,
              const void* bias, size_t workspace_bytes, LtCall& call, Check&& check) {
  LtOperands ops = to_column_major(p);
  bool has_bias = epilogue_has_bias(p.epilogue);
  if (!a || !b || !d || (has_bias && !bias) || (p.beta != 0 && !c))
    fail("the {} is missing a pointer ({} needed)", str(p),
         has_bias ? (p.beta != 0 ? "A, B, C, D and bias" : "A, B, D and bias")
                  : (p.beta != 0 ? "A, B, C and D" : "A, B and D"));
  if (p.beta != 0 && c == d && !(ops.c == ops.d))
    fail("the {} updates C in place with different layouts for C and D; cuBLASLt needs them equal", str(p));
  auto set = [&](CublasLt::Api::SetAttribute fn, void* object, int attribute, const auto& value, const char* name) {
    check(fn(object, attribute, &value, sizeof(value)), name);
  };
  bool f64 = p.dtype == DType::f64;
  check(x.desc_create(&call.desc.p, compute_type(p), f64 ? lt::kR64F : lt::kR32F), "cublasLtMatmulDescCreate");
  int32_t trans_a = ops.a.transpose ? lt::kOpT : lt::kOpN, trans_b = ops.b.transpose ? lt::kOpT : lt::kOpN;
  set(x.desc_set, call.desc.p, lt::kDescTransA, trans_a, "cublasLtMatmulDescSetAttribute");
  set(x.desc_set, call.desc.p, lt::kDescTransB, trans_b, "cublasLtMatmulDescSetAttribute");
  if (p.epilogue != Epilogue::none) {
    uint32_t epilogue = cublas_epilogue(p.epilogue);
    set(x.desc_set, call.desc.p, lt::kDescEpilogue, epilogue, "cublasLtMatmulDescSetAttribute");
  }
  if (has_bias) {
    int32_t bias_type = data_type(p.dtype);
    set(x.desc_set, call.desc.p, lt::kDescBiasPointer, bias, "cublasLtMatmulDescSetAttribute");
    set(x.desc_set, call.desc.p, lt::kDescBiasDataType, bias_type, "cublasLtMatmulDescSetAttribute");
  }
  auto make_layout = [&](Owned& layout, const LtMatrix& m, DType t) {
    check(x.layout_create(&layout.p, data_type(t), static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.ld),
          "cublasLtMatrixLayoutCreate");
    if (ops.batch == 1) return;
    set(x.layout_set, layout.p, lt::kLayoutBatchCount, ops.batch, "cublasLtMatrixLayoutSetAttribute");
    set(x.layout_set, layout.p, lt::kLayoutStridedBatchOffset, m.batch_stride, "cublasLtMatrixLayoutSetAttribute");
  };
  make_layout(call.layout_a, ops.a, p.dtype);
  make_layout(call.layout_b, ops.b, p.dtype);
  make_layout(call.layout_d, ops.d, output_dtype(p));
  // cuBLASLt reads no C when beta == 0; D and its layout stand in for it.
  call.c_data = p.beta != 0 ? c : d;
  if (p.beta != 0) make_layout(call.layout_c, ops.c, output_dtype(p));
  call.c_layout = p.beta != 0 ? call.layout_c.p : call.layout_d.p;
  // cuBLASLt's A is our B and its B our A.
  call.key = AlgoKey{.p = p,
                     .alpha_bits = std::bit_cast<uint64_t>(p.alpha),
                     .beta_bits = std::bit_cast<uint64_t>(p.beta),
                     .align_a = pointer_alignment(b),
                     .align_b = pointer_alignment(a),
                     .align_c = pointer_alignment(call.c_data),
                     .align_d = pointer_alignment(d),
                     .align_bias = has_bias ? pointer_alignment(bias) : 0,
                     .workspace_bytes = workspace_bytes,
                     .prefer = {}};
}

// The heuristic's first `count` algorithms for `call` (at least one, or it throws).
template <typename Check>
std::vector<lt::HeuristicResult> offered(const CublasLt::Api& x, void* handle, const GemmProblem& p, const LtCall& call,
                                         int count, Check&& check_call) {
  Owned pref(x.pref_destroy);
  check_call(x.pref_create(&pref.p), "cublasLtMatmulPreferenceCreate");
  auto set = [&](int attribute, const auto& value) {
    check_call(x.pref_set(pref.p, attribute, &value, sizeof(value)), "cublasLtMatmulPreferenceSetAttribute");
  };
  uint64_t max_workspace = call.key.workspace_bytes;
  set(lt::kPrefMaxWorkspaceBytes, max_workspace);
  set(lt::kPrefMinAlignmentA, call.key.align_a);
  set(lt::kPrefMinAlignmentB, call.key.align_b);
  set(lt::kPrefMinAlignmentC, call.key.align_c);
  set(lt::kPrefMinAlignmentD, call.key.align_d);
  std::vector<lt::HeuristicResult> results(static_cast<size_t>(std::max(count, 1)));
  int found = 0;
  check_call(x.heuristic(handle, call.desc.p, call.layout_a.p, call.layout_b.p, call.c_layout, call.layout_d.p, pref.p,
                         static_cast<int>(results.size()), results.data(), &found),
             "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) fail("cublasLtMatmulAlgoGetHeuristic found no algorithm for the {}", str(p));
  results.resize(static_cast<size_t>(found));
  for (const auto& r : results) check_call(r.state, "cublasLtMatmulAlgoGetHeuristic (its result)");
  return results;
}

}  // namespace

std::vector<GemmAlgo> CublasLt::algorithms(const GemmProblem& p, const void* a, const void* b, const void* c, const void* d,
                                           const void* bias, size_t workspace_bytes, int count) const {
  if (auto why = gemm_unsupported_reason(p)) fail("cuBLASLt cannot take the {}: {}", str(p), *why);
  if (empty(p) || split_columns(p)) return {};
  auto check_call = [&](int status, const char* name) { check(status, name, p); };
  LtCall call(*api_);
  describe(*api_, p, a, b, c, d, bias, workspace_bytes, call, check_call);
  std::vector<GemmAlgo> out;
  for (const auto& r : offered(*api_, handle_, p, call, count, check_call)) out.push_back(as_algo(r.algo));
  return out;
}

// One described call: its descriptors, algorithm and scalars, and where its pointers lie past
// those run() is given (the second call of a product whose columns split).
struct GemmCall::Part {
  explicit Part(const CublasLt::Api& x) : call(x) {}
  GemmProblem p;
  LtCall call;
  lt::MatmulAlgo algo{};
  int64_t b_shift = 0, c_shift = 0, d_shift = 0, bias_shift = 0;  // bytes
  float alpha32 = 1, beta32 = 0;
  bool c_layout_is_d = false;  // what updating C in place needs
};

GemmCall::GemmCall() = default;
GemmCall::~GemmCall() = default;

std::unique_ptr<GemmCall::Part> CublasLt::prepare_part(const GemmProblem& p, const void* a, const void* b, const void* c,
                                                       const void* d, const void* bias, size_t workspace_bytes,
                                                       const GemmAlgo* prefer) const {
  const Api& x = *api_;
  auto check_call = [&](int status, const char* name) { check(status, name, p); };
  auto part = std::make_unique<GemmCall::Part>(x);
  part->p = p;
  part->alpha32 = static_cast<float>(p.alpha), part->beta32 = static_cast<float>(p.beta);
  const LtOperands ops = to_column_major(p);
  part->c_layout_is_d = ops.c == ops.d;
  LtCall& call = part->call;
  describe(x, p, a, b, c, d, bias, workspace_bytes, call, check_call);
  if (prefer) call.key.prefer = *prefer;
  {
    std::lock_guard lock(cache_->mutex);
    if (auto it = cache_->algos.find(call.key); it != cache_->algos.end()) {
      part->algo = it->second;
      return part;
    }
  }
  auto results = offered(x, handle_, p, call, prefer ? kOffered : 1, check_call);
  part->algo = results.front().algo;
  for (const auto& r : results)
    if (prefer && as_algo(r.algo) == *prefer) part->algo = r.algo;
  std::lock_guard lock(cache_->mutex);
  cache_->algos.emplace(call.key, part->algo);
  return part;
}

std::unique_ptr<GemmCall> CublasLt::prepare(const GemmProblem& p, const void* a, const void* b, const void* c, const void* d,
                                            const void* bias, size_t workspace_bytes, const GemmAlgo* prefer) const {
  if (auto why = gemm_unsupported_reason(p)) fail("cuBLASLt cannot take the {}: {}", str(p), *why);
  auto out = std::make_unique<GemmCall>();
  out->workspace_bytes_ = workspace_bytes;
  if (empty(p)) return out;
  const int64_t main_n = split_columns(p);
  if (!main_n) {
    out->parts_.push_back(prepare_part(p, a, b, c, d, bias, workspace_bytes, prefer));
    return out;
  }
  const auto size = static_cast<int64_t>(dtype_size(p.dtype)), out_size = static_cast<int64_t>(dtype_size(output_dtype(p)));
  GemmProblem first = p, rest = p;
  first.n = main_n;
  rest.n = p.n - main_n;
  auto shift = [](const void* ptr, int64_t bytes) { return ptr ? static_cast<const char*>(ptr) + bytes : nullptr; };
  const bool has_bias = epilogue_has_bias(p.epilogue);
  const int64_t b_shift = main_n * p.b_cs * size, c_shift = main_n * p.c_cs * out_size, d_shift = main_n * p.d_cs * out_size,
                bias_shift = has_bias ? main_n * size : 0;
  out->parts_.push_back(prepare_part(first, a, b, c, d, bias, workspace_bytes, nullptr));
  auto second = prepare_part(rest, a, shift(b, b_shift), shift(c, c_shift), shift(d, d_shift), has_bias ? shift(bias, bias_shift) : nullptr,
                             workspace_bytes, nullptr);
  second->b_shift = b_shift, second->c_shift = c_shift, second->d_shift = d_shift, second->bias_shift = bias_shift;
  out->parts_.push_back(std::move(second));
  return out;
}

bool CublasLt::run(GemmCall& prepared, const void* a, const void* b, const void* c, void* d, const void* bias, void* workspace,
                   size_t workspace_bytes, void* stream) const {
  if (workspace_bytes != prepared.workspace_bytes_) return false;
  auto shift = [](const void* ptr, int64_t bytes) { return ptr ? static_cast<const char*>(ptr) + bytes : nullptr; };
  struct Pointers {
    const void *a, *b, *c, *d, *bias;
  };
  // Every part's pointers first: a call runs whole or not at all (one part, or two where the
  // columns split).
  std::array<Pointers, 2> at{};
  COIL_CHECK(prepared.parts_.size() <= at.size()) << "a product prepared in more than two calls";
  for (size_t i = 0; i < prepared.parts_.size(); ++i) {
    const auto& part = prepared.parts_[i];
    const AlgoKey& key = part->call.key;
    const bool has_bias = epilogue_has_bias(part->p.epilogue);
    Pointers q{a, shift(b, part->b_shift), shift(c, part->c_shift), shift(d, part->d_shift), has_bias ? shift(bias, part->bias_shift) : nullptr};
    if (!q.a || !q.b || !q.d || (has_bias && !q.bias) || (part->p.beta != 0 && !q.c)) return false;
    const void* c_data = part->p.beta != 0 ? q.c : q.d;
    if (pointer_alignment(q.b) != key.align_a || pointer_alignment(q.a) != key.align_b || pointer_alignment(c_data) != key.align_c ||
        pointer_alignment(q.d) != key.align_d || (has_bias && pointer_alignment(q.bias) != key.align_bias))
      return false;
    if (part->p.beta != 0 && q.c == q.d && !part->c_layout_is_d) return false;
    at[i] = q;
  }
  const Api& x = *api_;
  std::lock_guard lock(prepared.mutex_);
  for (size_t i = 0; i < prepared.parts_.size(); ++i) {
    GemmCall::Part& part = *prepared.parts_[i];
    const Pointers& q = at[i];
    const GemmProblem& p = part.p;
    if (epilogue_has_bias(p.epilogue))
      check(x.desc_set(part.call.desc.p, lt::kDescBiasPointer, &q.bias, sizeof(q.bias)), "cublasLtMatmulDescSetAttribute", p);
    const bool f64 = p.dtype == DType::f64;
    const void* alpha = f64 ? static_cast<const void*>(&p.alpha) : &part.alpha32;
    const void* beta = f64 ? static_cast<const void*>(&p.beta) : &part.beta32;
    const void* c_data = p.beta != 0 ? q.c : q.d;
    check(x.matmul(handle_, part.call.desc.p, alpha, q.b, part.call.layout_a.p, q.a, part.call.layout_b.p, beta, c_data,
                   part.call.c_layout, const_cast<void*>(q.d), part.call.layout_d.p, &part.algo, workspace, workspace_bytes, stream),
          "cublasLtMatmul", p);
  }
  return true;
}

}  // namespace coil::cuda
