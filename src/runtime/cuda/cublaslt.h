// Matrix products on the GPU through cuBLASLt, loaded with dlopen like the driver and NVRTC so
// that one coil build runs with or without CUDA. A GemmProblem states a (batched) product in
// coil's row-major terms with element strides; to_column_major maps it onto cuBLASLt's
// column-major operands by computing D^T = B^T A^T (so cuBLASLt's A is our B and its B is our
// A), each operand transposed or not as its strides say; CublasLt::gemm runs it with the
// algorithm cuBLASLt's heuristic picks (or one the caller measured faster and prefers), cached
// per problem, pointer alignment and preference, and fuses
// bias, ReLU and GELU through cuBLASLt's epilogues. A product whose D rows are 16-byte aligned
// but whose n is not a multiple of 16 bytes runs as two calls, the aligned columns and the rest
// (cuBLASLt's fast kernels want both aligned).
#pragma once
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coil/dtype.h"

namespace coil::cuda {

// What cuBLASLt applies to alpha * A @ B + beta * C before storing D. The bias is a vector of n
// elements of the problem's dtype (one per column of D, broadcast over rows and batches), added
// before the activation. gelu is cuBLASLt's GELU, the tanh approximation (PyTorch's
// gelu(approximate="tanh")), not the exact erf form; in f64 it is good to about 1e-10, not to
// fp64's last bits (seen on an H200 with cuBLASLt 13.1).
enum class Epilogue : uint8_t { none, bias, relu, bias_relu, gelu, bias_gelu };
std::string_view epilogue_name(Epilogue e);  // "none", "bias_gelu", ...
bool epilogue_has_bias(Epilogue e);

// One (batched) product D = alpha * A @ B + beta * C (+ epilogue), row-major semantics: A is
// m x k, B is k x n, C and D are m x n, batch of each. Strides are in elements: for each matrix
// one of its row and column strides is 1 and the other covers the extent (a dimension of extent 1
// may have any stride); C and D need unit column stride. Batch strides may be 0 for A, B and C
// (one matrix shared by every batch). C is not read when beta == 0 (its strides are ignored).
struct GemmProblem {
  DType dtype = DType::f32;  // of A, B, C, D and the bias: f32, f16, bf16 or f64
  // C and D in f32 instead, for an f16 or bf16 product: its f32 sum unrounded, for a caller that
  // adds more before rounding once (a convolution's bias). Only without an epilogue.
  bool f32_output = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t a_rs = 0, a_cs = 0, a_bs = 0;
  int64_t b_rs = 0, b_cs = 0, b_bs = 0;
  int64_t c_rs = 0, c_cs = 0, c_bs = 0;
  int64_t d_rs = 0, d_cs = 0, d_bs = 0;
  double alpha = 1, beta = 0;
  Epilogue epilogue = Epilogue::none;
  // f32 only (ignored otherwise): allow TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32, PyTorch's
  // float32_matmul_precision "high"); otherwise exact fp32 (CUBLAS_COMPUTE_32F). f16 and bf16
  // accumulate in fp32, f64 in fp64.
  bool tf32 = false;
};
std::string str(const GemmProblem& p);  // one line, for messages and logs
DType output_dtype(const GemmProblem& p);  // of C and D

// Why cuBLASLt cannot take `p` as laid out (callers pack the operands into a supported layout),
// or nullopt when it can. Empty problems (batch, m or n == 0) are supported: gemm does nothing.
// k == 0 with m, n > 0 is not: D = beta * C (+ epilogue) is no product, and callers compute it
// (cuBLASLt 13.1 was seen to do it right for f32 on an H200, but coil does not rely on that).
std::optional<std::string> gemm_unsupported_reason(const GemmProblem& p);
bool gemm_supported(const GemmProblem& p);

// One operand as cuBLASLt sees it: a column-major rows x cols matrix with leading dimension ld
// (cuBLASLt's layout), used as is or transposed (its op), batch_stride elements apart.
struct LtMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  bool transpose = false;
  int64_t batch_stride = 0;  // 0 when batch == 1
  bool operator==(const LtMatrix&) const = default;
};

// The operands of D^T = B^T A^T in cuBLASLt's terms: `a` describes our B (op(a) is n x k), `b`
// our A (op(b) is k x m), `c` and `d` our C and D (n x m, never transposed; `c` is `d` when
// beta == 0, since cuBLASLt then reads no C and D stands in for it).
struct LtOperands {
  LtMatrix a, b, c, d;
  int32_t batch = 1;
};
// Throws coil::Error with gemm_unsupported_reason unless gemm_supported(p) and p is not empty.
LtOperands to_column_major(const GemmProblem& p);

// The largest power of two dividing the address, at most 256: what cuBLASLt picks kernels by
// (256 for a null pointer, cuBLASLt's default assumption).
uint32_t pointer_alignment(const void* ptr);

// One of cuBLASLt's algorithms as its heuristic returns it (cublasLtMatmulAlgo_t, 64 opaque
// bytes: the same bytes for the same choice within one library version), kept by the GEMM
// tuner (driver/autotune_gemm.h) as hex text.
struct GemmAlgo {
  std::array<uint64_t, 8> data{};
  bool operator==(const GemmAlgo&) const = default;
  auto operator<=>(const GemmAlgo&) const = default;
};
std::string to_hex(const GemmAlgo& algo);                       // 128 hex digits
std::optional<GemmAlgo> gemm_algo_from_hex(std::string_view text);  // nullopt unless 128 hex digits

// A product's operands on the device: A, B, C (a residual; null without one), D and the bias
// (null without one).
struct GemmPointers {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;
};

// One product's cuBLASLt calls made ready (CublasLt::prepare): descriptors and algorithm, for
// pointers of the alignments it was made with. A GPU plan keeps one per product of static shape,
// which runs every step with new pointers: describing a call took ~20 us of host time a product
// (GPT-2's training step makes 147), running a described one a few.
class GemmCall {
 public:
  GemmCall();
  ~GemmCall();
  GemmCall(const GemmCall&) = delete;
  GemmCall& operator=(const GemmCall&) = delete;

 private:
  friend class CublasLt;
  struct Part;                               // one cuBLASLt call (two where the columns split)
  std::vector<std::unique_ptr<Part>> parts_;
  size_t workspace_bytes_ = 0;
  std::mutex mutex_;  // the bias pointer is an attribute of the shared descriptor
};

// The cuBLASLt library and one handle. Immutable once loaded apart from the algorithm cache,
// which a mutex guards: gemm may be called from many threads at once. The caller makes the
// GPU's context current; one CublasLt serves one kind of GPU (the cached algorithms were picked
// for the device current when they were first asked for).
class CublasLt {
 public:
  // $COIL_CUBLASLT when set (and then nothing else), else the first that loads of
  // libcublasLt.so.13, libcublasLt.so and /usr/local/cuda/lib64/libcublasLt.so; then creates a
  // handle. Throws coil::Error listing what was tried and why each failed, or naming a missing
  // symbol, or "cublasLtCreate failed: CUBLAS_STATUS_NOT_INITIALIZED (1) ..." where the library
  // loads but finds no CUDA driver or GPU (as on a machine with the toolkit and no GPU).
  static std::shared_ptr<const CublasLt> load();
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  const std::string& path() const { return path_; }
  std::string version() const;  // "13.1.0", from cublasLtGetVersion

  // D = alpha * A @ B + beta * C (+ epilogue) on `stream` (a CUstream; nullptr for the default
  // stream), asynchronously. `workspace` is device memory of `workspace_bytes` (0 allowed;
  // cuBLASLt's larger kernels want 32 MiB or more on Hopper). `bias` is needed by the bias
  // epilogues, `c` when beta != 0. Throws coil::Error "<call> failed: <status name> (<number>)
  // for <problem>" when a cuBLASLt call fails, or why the problem is unsupported.
  // With `prefer`, the product runs with that algorithm when the heuristic offers it among its
  // first kOffered for these pointers (their alignments decide what it offers), else with the
  // heuristic's first, as without.
  void gemm(const GemmProblem& p, const void* a, const void* b, const void* c, void* d, const void* bias,
            void* workspace, size_t workspace_bytes, void* stream, const GemmAlgo* prefer = nullptr) const;
  size_t cached_algorithms() const;  // problems whose algorithm has been chosen
  // gemm in two halves: `prepare` describes the product for these pointers (any pointer of the
  // same alignments does) and chooses its algorithm as gemm would; `run` runs a prepared call,
  // or returns false, running nothing, where a pointer's alignment or the workspace's size
  // differs from the prepared call's (the caller then prepares again or calls gemm).
  std::unique_ptr<GemmCall> prepare(const GemmProblem& p, const void* a, const void* b, const void* c, const void* d,
                                    const void* bias, size_t workspace_bytes, const GemmAlgo* prefer = nullptr) const;
  bool run(GemmCall& call, const void* a, const void* b, const void* c, void* d, const void* bias, void* workspace,
           size_t workspace_bytes, void* stream) const;

  // The heuristic's first `count` algorithms (at most) for `p` with these pointers, its best
  // guess first: what gemm may be told to prefer. Empty when gemm runs `p` as two calls (its
  // columns split, see above), or when `p` is empty.
  static constexpr int kOffered = 16;
  std::vector<GemmAlgo> algorithms(const GemmProblem& p, const void* a, const void* b, const void* c, const void* d,
                                   const void* bias, size_t workspace_bytes, int count = kOffered) const;

  struct Api;
  struct Cache;

 private:
  CublasLt();
  void check(int status, const char* call, const GemmProblem& p) const;
  // One cuBLASLt call for the whole of `p` (gemm may split its columns in two calls), described
  // and its algorithm chosen.
  std::unique_ptr<GemmCall::Part> prepare_part(const GemmProblem& p, const void* a, const void* b, const void* c,
                                               const void* d, const void* bias, size_t workspace_bytes,
                                               const GemmAlgo* prefer) const;
  // The column count of gemm's first call when it splits `p`'s columns, else 0.
  static int64_t split_columns(const GemmProblem& p);

  void* library_ = nullptr;
  void* handle_ = nullptr;  // cublasLtHandle_t
  std::unique_ptr<Api> api_;
  std::unique_ptr<Cache> cache_;
  std::string path_;
};

}  // namespace coil::cuda
