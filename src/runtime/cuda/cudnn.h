// Convolutions on the GPU through cuDNN's backend (graph) API, loaded with dlopen like the driver
// and cuBLASLt so that one coil build runs with or without it (constants from cudnn_api.h).
// A ConvProblem states one forward convolution with its tensors' dims and element strides
// (NCHW, channels-last or any other strides cuDNN's engines take); `engines` builds the
// execution plans cuDNN's heuristics offer for it (mode A, then the fallback list, in their
// order), leaving out those
// PyTorch leaves out (inputs converted to a narrower type; TF32 for f32 unless allowed) and
// nondeterministic ones, once per problem; `convolution` runs one of them. The
// tuner (driver/autotune_conv.h) times the plans and the GPU plan runs the winner.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coil/dtype.h"

namespace coil::cuda {

// Pointwise work cuDNN's runtime-fused engines apply to the convolution's result in registers
// before the store: y = relu?(conv(x, w) * scale + residual * residual_scale + shift), computed in
// f32, with scale, shift and residual_scale f32 vectors over the output channels and residual a
// tensor of y's dims, strides and dtype; each part optional (absent: 1, 0, none, 1).
struct ConvEpilogue {
  bool scale = false, shift = false, residual = false, residual_scale = false, relu = false;
  bool any() const { return scale || shift || residual || relu; }
};

// The operands of one convolution call (those of an epilogue part the problem lacks are unused).
struct ConvPointers {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;
  const void* shift = nullptr;
  const void* residual = nullptr;
  const void* residual_scale = nullptr;
};

// y = conv(x, w): x [N, C, spatial...], w [K, C / groups, spatial...], y [N, K, spatial...]
// (groups follow from x's C over w's), with 2 or 3 spatial dims (a 1-D convolution is given a
// unit dim), and per spatial dim its stride, padding before and after, and dilation.
// Transposed (`transposed`): y = conv_transpose(x, w), the gradient of a forward convolution
// with respect to its input (cuDNN's backward-data operation): x [N, K, spatial...] (the forward
// convolution's dy), w [K, C / groups, spatial...], y [N, C, spatial...] (its dx); stride,
// padding and dilation are the forward convolution's, and y's sizes pick the output padding.
struct ConvProblem {
  bool transposed = false;
  DType dtype = DType::f32;  // of x, w and y: f32, f16 or bf16 (accumulated in f32)
  bool tf32 = false;         // f32 may use TF32 tensor cores (PyTorch's cudnn.allow_tf32)
  std::vector<int64_t> x_dims, x_strides, w_dims, w_strides, y_dims, y_strides;
  std::vector<int64_t> stride, pre_padding, post_padding, dilation;
  uint32_t align_x = 16, align_w = 16, align_y = 16;  // byte alignment of the pointers (at most 16)
  ConvEpilogue epilogue;  // the residual, when there is one, has y's alignment
};
std::string str(const ConvProblem& p);  // one line, for messages, logs and cache keys

// The strides of a tensor [N, C, spatial...] laid out packed as NCHW or as channels-last
// (NHWC), with the strides of its size-1 dims, which address nothing, made the packed ones; or
// nullopt for any other layout (sliced, permuted otherwise, broadcast). Only these go to cuDNN:
// on the H100 an engine took a sliced input with a fully permuted weight and returned wrong
// values.
std::optional<std::vector<int64_t>> packed_conv_strides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);

// Where the plans of runtime-compiled engines (a fused epilogue's: cuDNN compiles their kernels
// as it builds them, about 0.3 s each) persist between processes, serialized as cuDNN's JSON:
// `read` the bytes stored under a name (cuDNN's version and the problem's line), or nullopt;
// `write` them. The store keys them by the device too (a plan holds a kernel for one GPU).
// Either may be empty (nothing kept).
struct CudnnPlanStore {
  std::function<std::optional<std::string>(const std::string& problem)> read;
  std::function<void(const std::string& problem, const std::string& bytes)> write;
};

class Cudnn {
 public:
  // The plans taken at most: the heuristics' first few hold the fast ones; the last few places
  // are the fallback list's.
  static constexpr size_t kMaxEngines = 14, kFallbackEngines = 4;
  // With a fused epilogue, whose engines compile their kernels as their plans are built (cuDNN
  // compiles one at a time: the H100's host took ~0.45 s a plan, ResNet-18's cold compile 20 s
  // with 3 a problem). The heuristic's first: on the H100 the tuner kept it for 11 of the 17
  // fused problems of ResNet-18 and the yardstick CNN, the others' best 3-10% faster (0.005 ms
  // of ResNet-18's 0.81).
  static constexpr size_t kMaxFusedEngines = 1;

  // $COIL_CUDNN when set (and then nothing else), else the first that loads of libcudnn.so.9
  // and libcudnn.so (inside a process that imported torch, its copy is already loaded); then
  // creates a handle on the current CUDA context. Throws coil::Error saying what was tried.
  static std::shared_ptr<const Cudnn> load(CudnnPlanStore store = {});
  ~Cudnn();
  Cudnn(const Cudnn&) = delete;
  Cudnn& operator=(const Cudnn&) = delete;

  const std::string& path() const { return path_; }
  std::string version() const;  // "9.10.2", from cudnnGetVersion

  // How many execution plans cuDNN offers for `p` (0: it cannot run it). Builds them the first
  // time (milliseconds; a fused epilogue's compile their kernels, about 0.3 s each, unless the
  // store has them); thread-safe, and distinct problems build at the same time.
  size_t engines(const ConvProblem& p) const;
  // Device memory plan `engine` of `p` needs as workspace.
  size_t workspace_bytes(const ConvProblem& p, size_t engine) const;
  // y = conv(x, w) (and the problem's epilogue) with plan `engine` on `stream` (a CUstream; nullptr: the default stream),
  // asynchronously. Throws coil::Error naming the call and the problem when cuDNN fails.
  void convolution(const ConvProblem& p, size_t engine, const ConvPointers& operands, void* workspace, void* stream) const;

  // One problem's plan found once (its key formatted and looked up once): what a GPU plan keeps
  // per convolution of static shape, run every step with new pointers of the same alignments.
  struct Prepared {
    ConvProblem problem;
    std::string name;          // str(problem), for messages
    const void* plan = nullptr;  // cuDNN's execution plan
    size_t workspace = 0;      // bytes
  };
  // `engine` falls back to the first where `p` has fewer plans; throws where it has none.
  Prepared prepare(const ConvProblem& p, size_t engine) const;
  void convolution(const Prepared& call, const ConvPointers& operands, void* workspace, void* stream) const;

  struct Api;  // the entry points (cudnn.cc)

 private:
  struct Plans;
  struct Cache;
  Cudnn() = default;
  const Plans& plans(const ConvProblem& p) const;
  std::unique_ptr<Plans> build(const ConvProblem& p, const std::string& key) const;
  std::unique_ptr<Plans> restore(const std::string& bytes) const;  // nullptr: not all restored
  std::optional<std::string> serialize(const Plans& plans) const;  // nullopt: one is not serializable
  void* library_ = nullptr;
  void* handle_ = nullptr;  // cudnnHandle_t
  std::string path_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<Cache> cache_;
  CudnnPlanStore store_;
};

}  // namespace coil::cuda
