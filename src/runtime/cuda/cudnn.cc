#include "runtime/cuda/cudnn.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "runtime/cuda/cudnn_api.h"
#include "support/check.h"
#include "support/foreign_library.h"

namespace coil::cuda {

// cuDNN's entry points (types from cudnn_api.h: the handle and descriptors are void*).
struct Cudnn::Api {
  using Status = dnn::Status;
  Status (*create)(void**) = nullptr;
  Status (*destroy)(void*) = nullptr;
  Status (*set_stream)(void*, void*) = nullptr;
  size_t (*version)() = nullptr;
  const char* (*error_string)(Status) = nullptr;
  void (*last_error)(char*, size_t) = nullptr;
  Status (*create_descriptor)(int, void**) = nullptr;
  Status (*destroy_descriptor)(void*) = nullptr;
  Status (*finalize)(void*) = nullptr;
  Status (*set)(void*, int, int, int64_t, const void*) = nullptr;
  Status (*get)(void*, int, int, int64_t, int64_t*, void*) = nullptr;
  Status (*execute)(void*, void*, void*) = nullptr;
};

namespace {

// A backend descriptor destroyed on every path.
class Desc {
 public:
  Desc(const Cudnn::Api* api, int type);
  ~Desc() {
    if (p_) api_->destroy_descriptor(p_);
  }
  Desc(Desc&& o) noexcept : api_(o.api_), p_(std::exchange(o.p_, nullptr)) {}
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  void* get() const { return p_; }
  void* const* address() const { return &p_; }

 private:
  const Cudnn::Api* api_;
  void* p_ = nullptr;
};

std::string status_text(const Cudnn::Api& a, dnn::Status s) {
  const char* name = a.error_string ? a.error_string(s) : nullptr;
  std::string text = fmt::format("{} ({})", name ? name : "unknown status", s);
  if (a.last_error) {
    char detail[512] = {};
    a.last_error(detail, sizeof detail);
    if (detail[0]) text += fmt::format(": {}", detail);
  }
  return text;
}

Desc::Desc(const Cudnn::Api* api, int type) : api_(api) {
  if (dnn::Status s = api->create_descriptor(type, &p_); s != dnn::kSuccess) {
    p_ = nullptr;
    fail("cudnnBackendCreateDescriptor({}) failed: {}", type, status_text(*api, s));
  }
}

int data_type(DType t) {
  switch (t) {
    case DType::f32: return dnn::kDataFloat;
    case DType::f16: return dnn::kDataHalf;
    case DType::bf16: return dnn::kDataBfloat16;
    default: fail("cuDNN convolutions take f32, f16 and bf16, not {}", dtype_name(t));
  }
}

}  // namespace

std::string str(const ConvProblem& p) {
  const ConvEpilogue& e = p.epilogue;
  return fmt::format("{} {}convolution{}: x [{}] strides [{}] align {}, w [{}] strides [{}] align {}, y [{}] strides [{}] align {}, "
                     "stride [{}] padding [{}]/[{}] dilation [{}]{}{}{}{}",
                     dtype_name(p.dtype), p.transposed ? "transposed " : "", p.tf32 && p.dtype == DType::f32 ? " (tf32)" : "",
                     fmt::join(p.x_dims, ", "),
                     fmt::join(p.x_strides, ", "), p.align_x, fmt::join(p.w_dims, ", "), fmt::join(p.w_strides, ", "), p.align_w,
                     fmt::join(p.y_dims, ", "), fmt::join(p.y_strides, ", "), p.align_y, fmt::join(p.stride, ", "),
                     fmt::join(p.pre_padding, ", "), fmt::join(p.post_padding, ", "), fmt::join(p.dilation, ", "),
                     e.scale ? ", then * scale" : "", e.residual ? (e.residual_scale ? " + residual * scale" : " + residual") : "",
                     e.shift ? " + shift" : "", e.relu ? ", relu" : "");
}

std::optional<std::vector<int64_t>> packed_conv_strides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  // Dim orders from the innermost: NCHW is [..., W, H, C, N] and NHWC [C, ..., W, H, N].
  std::vector<size_t> nchw, nhwc = {1};
  for (size_t d = dims.size(); d-- > 0;) nchw.push_back(d);
  for (size_t d = dims.size(); d-- > 2;) nhwc.push_back(d);
  nhwc.push_back(0);
  for (const auto& order : {nchw, nhwc}) {
    std::vector<int64_t> packed(dims.size());
    int64_t expect = 1;
    bool match = true;
    for (size_t d : order) {
      packed[d] = expect;
      if (dims[d] != 1 && strides[d] != expect) match = false;
      expect *= dims[d];
    }
    if (match) return packed;
  }
  return std::nullopt;
}

// The execution plans of one problem and every descriptor they were built from.
struct Cudnn::Plans {
  std::vector<Desc> owned;  // tensors, the operation, its graph, engine configurations
  std::vector<void*> plans;
  std::vector<size_t> workspace;
  size_t offered = 0;  // configurations taken (their plans built or not)
};

struct Cudnn::Cache {
  // A problem's plans, built once (by the first thread asking; others wait for it).
  struct Entry {
    std::once_flag once;
    std::unique_ptr<Plans> plans;
  };
  std::mutex mutex;         // guards `plans`, the map (the building happens outside it)
  std::mutex stream_mutex;  // the handle's stream: set, then execute
  std::map<std::string, std::unique_ptr<Entry>> plans;
};

std::shared_ptr<const Cudnn> Cudnn::load(CudnnPlanStore store) {
  std::vector<std::string> candidates = {"libcudnn.so.9", "libcudnn.so"};
  if (const char* env = std::getenv("COIL_CUDNN"); env && *env) candidates = {env};
  std::string path, tried;
  void* library = open_first_library(candidates, path, tried);
  if (!library)
    fail("cannot load cuDNN for convolutions on the GPU; tried:{}\nInstall cuDNN 9 (PyTorch's wheels bring it: "
         "site-packages/nvidia/cudnn/lib) on the library path, or set COIL_CUDNN to libcudnn's path.",
         tried);
  std::shared_ptr<Cudnn> dnn(new Cudnn());
  dnn->library_ = library;
  dnn->path_ = path;
  dnn->api_ = std::make_unique<Api>();
  dnn->cache_ = std::make_unique<Cache>();
  dnn->store_ = std::move(store);
  Api& a = *dnn->api_;
  bind_symbol(library, "cudnnCreate", a.create, path, "cuDNN");
  bind_symbol(library, "cudnnDestroy", a.destroy, path, "cuDNN");
  bind_symbol(library, "cudnnSetStream", a.set_stream, path, "cuDNN");
  bind_symbol(library, "cudnnGetVersion", a.version, path, "cuDNN");
  bind_symbol(library, "cudnnGetErrorString", a.error_string, path, "cuDNN");
  bind_symbol(library, "cudnnGetLastErrorString", a.last_error, path, "cuDNN");
  bind_symbol(library, "cudnnBackendCreateDescriptor", a.create_descriptor, path, "cuDNN");
  bind_symbol(library, "cudnnBackendDestroyDescriptor", a.destroy_descriptor, path, "cuDNN");
  bind_symbol(library, "cudnnBackendFinalize", a.finalize, path, "cuDNN");
  bind_symbol(library, "cudnnBackendSetAttribute", a.set, path, "cuDNN");
  bind_symbol(library, "cudnnBackendGetAttribute", a.get, path, "cuDNN");
  bind_symbol(library, "cudnnBackendExecute", a.execute, path, "cuDNN");
  if (dnn::Status s = a.create(&dnn->handle_); s != dnn::kSuccess) {
    dnn->handle_ = nullptr;
    fail("cudnnCreate failed: {} in {}: cuDNN needs a CUDA driver and a GPU", status_text(a, s), path);
  }
  return dnn;
}

Cudnn::~Cudnn() {
  if (cache_) {
    for (auto& [key, entry] : cache_->plans)
      if (entry->plans)
        for (void* plan : entry->plans->plans) api_->destroy_descriptor(plan);
    cache_->plans.clear();
  }
  if (handle_) api_->destroy(handle_);
  close_foreign_library(library_);
}

std::string Cudnn::version() const {
  size_t v = api_->version();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

namespace {

struct Builder {
  const Cudnn::Api& a;
  std::vector<Desc>& owned;
  const std::string& problem;

  void check(dnn::Status s, const char* what) const {
    if (s != dnn::kSuccess) fail("{} failed: {} for the {}", what, status_text(a, s), problem);
  }
  void* make(int type) {
    owned.emplace_back(&a, type);
    return owned.back().get();
  }
  void set(void* d, int name, int type, int64_t count, const void* values) {
    check(a.set(d, name, type, count, values), "cudnnBackendSetAttribute");
  }
  void ints(void* d, int name, const std::vector<int64_t>& v) { set(d, name, dnn::kTypeInt64, static_cast<int64_t>(v.size()), v.data()); }
  // A virtual tensor lives only inside the fused kernel (the convolution's f32 result on its way
  // through the epilogue).
  void* tensor(int64_t uid, int dtype, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, uint32_t align,
               bool is_virtual = false) {
    void* t = make(dnn::kTensorDescriptor);
    const int64_t alignment = align;
    set(t, dnn::kTensorDataType, dnn::kTypeDataType, 1, &dtype);
    ints(t, dnn::kTensorDimensions, dims);
    ints(t, dnn::kTensorStrides, strides);
    set(t, dnn::kTensorUniqueId, dnn::kTypeInt64, 1, &uid);
    set(t, dnn::kTensorByteAlignment, dnn::kTypeInt64, 1, &alignment);
    if (is_virtual) {
      const bool yes = true;
      set(t, dnn::kTensorIsVirtual, dnn::kTypeBoolean, 1, &yes);
    }
    return a.finalize(t) == dnn::kSuccess ? t : nullptr;  // nullptr: no engine takes this tensor
  }
  // y = mode(x[, b]) in f32; nullptr where cuDNN refuses it.
  void* pointwise(int mode, void* x, void* b, void* y) {
    void* pw = make(dnn::kPointwiseDescriptor);
    const int precision = dnn::kDataFloat;
    set(pw, dnn::kPointwiseMode, dnn::kTypePointwiseMode, 1, &mode);
    set(pw, dnn::kPointwiseMathPrecision, dnn::kTypeDataType, 1, &precision);
    if (a.finalize(pw) != dnn::kSuccess) return nullptr;
    void* op = make(dnn::kOperationPointwiseDescriptor);
    set(op, dnn::kOperationPointwisePwDescriptor, dnn::kTypeBackendDescriptor, 1, &pw);
    set(op, dnn::kOperationPointwiseX, dnn::kTypeBackendDescriptor, 1, &x);
    if (b) set(op, dnn::kOperationPointwiseB, dnn::kTypeBackendDescriptor, 1, &b);
    set(op, dnn::kOperationPointwiseY, dnn::kTypeBackendDescriptor, 1, &y);
    return a.finalize(op) == dnn::kSuccess ? op : nullptr;
  }
};

// The tensors' unique ids: the variant pack gives their pointers under these.
enum Uid : int64_t { kUidX = 1, kUidW, kUidY, kUidScale, kUidShift, kUidResidual, kUidResidualScale, kUidFirstVirtual = 100 };

// Whether an engine's numerics are allowed, as PyTorch filters cuDNN's plans: never one that
// converts its inputs to a narrower type, no tensor cores (TF32) for f32 unless allowed, and
// (coil's choice, PyTorch's only in deterministic mode) no nondeterministic one.
bool numerics_allowed(const std::vector<int>& notes, const ConvProblem& p) {
  for (int n : notes) {
    if (n == dnn::kNoteDownConvertInputs || n == dnn::kNoteNondeterministic) return false;
    if (p.dtype == DType::f32 && !p.tf32 && n == dnn::kNoteTensorCore) return false;
  }
  return true;
}

// The engine configurations heuristic `mode` offers for `graph` (descriptors `b` owns).
std::vector<void*> offered_configs(Builder& b, void* graph, int mode) {
  void* heuristic = b.make(dnn::kEngineHeuristicDescriptor);
  b.set(heuristic, dnn::kHeuristicOperationGraph, dnn::kTypeBackendDescriptor, 1, &graph);
  b.set(heuristic, dnn::kHeuristicMode, dnn::kTypeHeuristicMode, 1, &mode);
  if (b.a.finalize(heuristic) != dnn::kSuccess) return {};
  int64_t offered = 0;
  if (b.a.get(heuristic, dnn::kHeuristicResults, dnn::kTypeBackendDescriptor, 0, &offered, nullptr) != dnn::kSuccess) return {};
  std::vector<void*> configs;
  for (int64_t i = 0; i < offered; ++i) configs.push_back(b.make(dnn::kEngineConfigDescriptor));
  int64_t got = 0;
  if (offered > 0 &&
      b.a.get(heuristic, dnn::kHeuristicResults, dnn::kTypeBackendDescriptor, offered, &got, configs.data()) != dnn::kSuccess)
    return {};
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(got, 0, offered)));
  return configs;
}

// What tells an engine configuration apart: its engine's global index and its knob choices
// (tile shape, stages, split-K...). The heuristic offers one engine with several choices, and
// those differ in speed (on the H100, bf16 fprop engine 62's tiles): keyed by the engine alone,
// all but its first configuration were lost.
std::string config_identity(Builder& b, void* config, int64_t engine_index) {
  std::string id = fmt::format("{}", engine_index);
  // At most one choice per knob type (CUDNN_KNOB_TYPE_COUNTS of them in cuDNN 9.x); cuDNN fills
  // the descriptors made beforehand (a query of the count alone fails).
  constexpr int64_t kMaxKnobs = 64;
  std::vector<Desc> owned;  // only for this query
  std::vector<void*> choices;
  for (int64_t i = 0; i < kMaxKnobs; ++i) choices.push_back(owned.emplace_back(&b.a, dnn::kKnobChoiceDescriptor).get());
  int64_t got = 0;
  if (b.a.get(config, dnn::kEngineConfigKnobChoices, dnn::kTypeBackendDescriptor, kMaxKnobs, &got, choices.data()) != dnn::kSuccess)
    return id;
  for (int64_t i = 0; i < std::min(got, kMaxKnobs); ++i) {
    int knob = -1;
    int64_t value = 0, n = 0;
    b.a.get(choices[static_cast<size_t>(i)], dnn::kKnobChoiceKnobType, dnn::kTypeKnobType, 1, &n, &knob);
    b.a.get(choices[static_cast<size_t>(i)], dnn::kKnobChoiceKnobValue, dnn::kTypeInt64, 1, &n, &value);
    id += fmt::format(" {}={}", knob, value);
  }
  return id;
}

}  // namespace

const Cudnn::Plans& Cudnn::plans(const ConvProblem& p) const {
  const std::string key = str(p);
  Cache::Entry* entry = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto& slot = cache_->plans[key];
    if (!slot) slot = std::make_unique<Cache::Entry>();
    entry = slot.get();
  }
  std::call_once(entry->once, [&] {
    // Only a fused epilogue's plans are worth keeping (and only runtime-compiled engines
    // serialize); a stored list that does not restore whole is built again and replaced.
    const bool kept = p.epilogue.any();
    const std::string name = kept ? fmt::format("cuDNN {}: {}", version(), key) : std::string();
    if (kept && store_.read)
      if (auto bytes = store_.read(name)) entry->plans = restore(*bytes);
    if (entry->plans) return;
    entry->plans = build(p, key);
    if (kept && store_.write && !entry->plans->plans.empty())
      if (auto bytes = serialize(*entry->plans)) store_.write(name, *bytes);
  });
  return *entry->plans;
}

// Stored plans: "coil-cudnn-plans 1 <count>\n", then per plan "<bytes>\n<cuDNN's JSON, as
// cuDNN gave it>\n", in the order they were offered (the tuning cache keeps an index into it).
namespace {
constexpr std::string_view kPlansMagic = "coil-cudnn-plans 1 ";
}

std::optional<std::string> Cudnn::serialize(const Plans& built) const {
  std::string out = fmt::format("{}{}\n", kPlansMagic, built.plans.size());
  for (void* plan : built.plans) {
    int64_t size = 0;
    if (api_->get(plan, dnn::kExecutionPlanJson, dnn::kTypeChar, 0, &size, nullptr) != dnn::kSuccess || size <= 0) return std::nullopt;
    std::string json(static_cast<size_t>(size), '\0');
    if (api_->get(plan, dnn::kExecutionPlanJson, dnn::kTypeChar, size, &size, json.data()) != dnn::kSuccess) return std::nullopt;
    json.resize(static_cast<size_t>(std::clamp<int64_t>(size, 0, static_cast<int64_t>(json.size()))));
    out += fmt::format("{}\n{}\n", json.size(), json);
  }
  return out;
}

std::unique_ptr<Cudnn::Plans> Cudnn::restore(const std::string& bytes) const {
  if (!bytes.starts_with(kPlansMagic)) return nullptr;
  size_t at = kPlansMagic.size();
  auto number = [&]() -> std::optional<size_t> {
    const size_t end = bytes.find('\n', at);
    if (end == std::string::npos || end == at) return std::nullopt;
    size_t n = 0;
    for (size_t i = at; i < end; ++i) {
      if (bytes[i] < '0' || bytes[i] > '9') return std::nullopt;
      n = n * 10 + static_cast<size_t>(bytes[i] - '0');
    }
    at = end + 1;
    return n;
  };
  auto built = std::make_unique<Plans>();
  auto give_up = [&] {
    for (void* plan : built->plans) api_->destroy_descriptor(plan);
    return nullptr;
  };
  const auto count = number();
  if (!count || *count == 0) return nullptr;
  for (size_t i = 0; i < *count; ++i) {
    const auto size = number();
    if (!size || at + *size + 1 > bytes.size() || bytes[at + *size] != '\n') return give_up();
    void* plan = nullptr;
    if (api_->create_descriptor(dnn::kExecutionPlanDescriptor, &plan) != dnn::kSuccess) return give_up();
    int64_t workspace = 0, got = 0;
    const bool ok = api_->set(plan, dnn::kExecutionPlanJson, dnn::kTypeChar, static_cast<int64_t>(*size), bytes.data() + at) == dnn::kSuccess &&
                    api_->set(plan, dnn::kExecutionPlanHandle, dnn::kTypeHandle, 1, &handle_) == dnn::kSuccess &&
                    api_->finalize(plan) == dnn::kSuccess &&
                    api_->get(plan, dnn::kExecutionPlanWorkspaceSize, dnn::kTypeInt64, 1, &got, &workspace) == dnn::kSuccess;
    if (!ok) {
      api_->destroy_descriptor(plan);
      return give_up();
    }
    built->plans.push_back(plan);
    built->workspace.push_back(static_cast<size_t>(std::max<int64_t>(workspace, 0)));
    at += *size + 1;
  }
  built->offered = built->plans.size();
  return built;
}

std::unique_ptr<Cudnn::Plans> Cudnn::build(const ConvProblem& p, const std::string& key) const {
  const auto start = std::chrono::steady_clock::now();
  auto built = std::make_unique<Plans>();
  Builder b{*api_, built->owned, key};
  const int dtype = data_type(p.dtype);
  void* conv = b.make(dnn::kConvolutionDescriptor);
  const int64_t spatial = static_cast<int64_t>(p.stride.size());
  const int compute = dnn::kDataFloat, mode = dnn::kCrossCorrelation;
  b.set(conv, dnn::kConvolutionSpatialDims, dnn::kTypeInt64, 1, &spatial);
  b.set(conv, dnn::kConvolutionComputeType, dnn::kTypeDataType, 1, &compute);
  b.set(conv, dnn::kConvolutionMode, dnn::kTypeConvolutionMode, 1, &mode);
  b.ints(conv, dnn::kConvolutionDilations, p.dilation);
  b.ints(conv, dnn::kConvolutionFilterStrides, p.stride);
  b.ints(conv, dnn::kConvolutionPrePaddings, p.pre_padding);
  b.ints(conv, dnn::kConvolutionPostPaddings, p.post_padding);
  // A problem cuDNN rejects (a layout or padding no engine takes) has no plans.
  auto none = [&] { return std::move(built); };
  if (api_->finalize(conv) != dnn::kSuccess) return none();
  void* x = b.tensor(kUidX, dtype, p.x_dims, p.x_strides, p.align_x);
  void* w = b.tensor(kUidW, dtype, p.w_dims, p.w_strides, p.align_w);
  void* y = b.tensor(kUidY, dtype, p.y_dims, p.y_strides, p.align_y);
  if (!x || !w || !y) return none();
  // With an epilogue the convolution writes a virtual f32 tensor that pointwise operations carry
  // to y (the last of them writes it).
  const ConvEpilogue& e = p.epilogue;
  int64_t next_virtual = kUidFirstVirtual;
  auto virtual_result = [&] { return b.tensor(next_virtual++, dnn::kDataFloat, p.y_dims, p.y_strides, 16, true); };
  void* result = e.any() ? virtual_result() : y;
  if (!result || (p.transposed && e.any())) return none();  // no epilogue after a backward-data operation
  // The operation's attribute names: a forward convolution's, or the backward-data operation's,
  // whose dy is our x and dx our y.
  struct Names {
    int op, x, w, y, conv, alpha, beta;
  };
  const Names n = p.transposed ? Names{dnn::kConvolutionBackwardDataDescriptor, dnn::kConvolutionBwdDataDy, dnn::kConvolutionBwdDataW,
                                       dnn::kConvolutionBwdDataDx, dnn::kConvolutionBwdDataDescriptor_, dnn::kConvolutionBwdDataAlpha,
                                       dnn::kConvolutionBwdDataBeta}
                               : Names{dnn::kConvolutionForwardDescriptor, dnn::kConvolutionForwardX, dnn::kConvolutionForwardW,
                                       dnn::kConvolutionForwardY, dnn::kConvolutionForwardDescriptor_, dnn::kConvolutionForwardAlpha,
                                       dnn::kConvolutionForwardBeta};
  const float alpha = 1, beta = 0;
  void* op = b.make(n.op);
  b.set(op, n.x, dnn::kTypeBackendDescriptor, 1, &x);
  b.set(op, n.w, dnn::kTypeBackendDescriptor, 1, &w);
  b.set(op, n.y, dnn::kTypeBackendDescriptor, 1, &result);
  b.set(op, n.conv, dnn::kTypeBackendDescriptor, 1, &conv);
  b.set(op, n.alpha, dnn::kTypeFloat, 1, &alpha);
  b.set(op, n.beta, dnn::kTypeFloat, 1, &beta);
  if (api_->finalize(op) != dnn::kSuccess) return none();
  std::vector<void*> ops = {op};
  if (e.any()) {
    // Per-channel vectors [1, K, 1, ...] in f32.
    std::vector<int64_t> channel_dims(p.y_dims.size(), 1), channel_strides(p.y_dims.size(), 1);
    channel_dims[1] = p.y_dims[1];
    channel_strides[0] = p.y_dims[1];
    auto vector = [&](int64_t uid) { return b.tensor(uid, dnn::kDataFloat, channel_dims, channel_strides, 16); };
    struct Step {
      int mode;
      void* other;  // the second operand, or nullptr (relu)
    };
    std::vector<Step> steps;
    if (e.scale) steps.push_back({dnn::kPointwiseMul, vector(kUidScale)});
    if (e.residual) {
      void* residual = b.tensor(kUidResidual, dtype, p.y_dims, p.y_strides, p.align_y);
      if (residual && e.residual_scale) {  // residual * residual_scale, off the main chain
        void* scaled = virtual_result();
        void* scales = vector(kUidResidualScale);
        void* mul = scaled && scales ? b.pointwise(dnn::kPointwiseMul, residual, scales, scaled) : nullptr;
        if (!mul) return none();
        ops.push_back(mul);
        residual = scaled;
      }
      steps.push_back({dnn::kPointwiseAdd, residual});
    }
    if (e.shift) steps.push_back({dnn::kPointwiseAdd, vector(kUidShift)});
    if (e.relu) steps.push_back({dnn::kPointwiseReluForward, nullptr});
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].mode != dnn::kPointwiseReluForward && !steps[i].other) return none();
      void* out = i + 1 == steps.size() ? y : virtual_result();
      void* step = out ? b.pointwise(steps[i].mode, result, steps[i].other, out) : nullptr;
      if (!step) return none();
      ops.push_back(step);
      result = out;
    }
  }
  void* graph = b.make(dnn::kOperationGraphDescriptor);
  b.set(graph, dnn::kOperationGraphOps, dnn::kTypeBackendDescriptor, static_cast<int64_t>(ops.size()), ops.data());
  b.set(graph, dnn::kOperationGraphHandle, dnn::kTypeHandle, 1, &handle_);
  if (api_->finalize(graph) != dnn::kSuccess) return none();
  // COIL_DEBUG=cudnn lists what the heuristics offered and what became of each.
  const char* debug_env = std::getenv("COIL_DEBUG");
  const bool debug = debug_env && (std::string_view(debug_env) == "all" || std::string_view(debug_env).find("cudnn") != std::string_view::npos);
  // The heuristic's list (mode A), then its fallback list, as PyTorch takes them: some engines
  // are only on the second (on the H100, the runtime-compiled depthwise kernel eager runs for
  // ConvNeXt's 7x7 convolutions, 14x faster than the best of the first list).
  std::set<std::string> seen;  // configurations already taken
  std::vector<void*> taken;     // their descriptors (owned by `b`), in order
  for (int heuristic_mode : {dnn::kHeuristicModeA, dnn::kHeuristicModeFallback}) {
    std::vector<void*> configs = offered_configs(b, graph, heuristic_mode);
    if (debug) fmt::print(stderr, "cuDNN: {} plans offered (heuristic mode {}) for the {}\n", configs.size(), heuristic_mode, key);
    // The fallback list keeps places of its own: its engines are the ones the first list lacks.
    // A fused epilogue's engines compile their kernels when their plans are built (about 0.45 s
    // each on the H100's host, one at a time however many threads build them): the first only.
    const bool fused = p.epilogue.any();
    const size_t most = fused ? kMaxFusedEngines : kMaxEngines, fallback_places = fused ? 0 : kFallbackEngines;
    const size_t limit = heuristic_mode == dnn::kHeuristicModeA ? most - fallback_places : most;
    for (size_t i = 0; i < configs.size() && built->offered < limit; ++i) {
      void* engine = b.make(dnn::kEngineDescriptor);
      int64_t count = 0;
      if (api_->get(configs[i], dnn::kEngineConfigEngine, dnn::kTypeBackendDescriptor, 1, &count, &engine) != dnn::kSuccess)
        continue;
      std::vector<int> notes(16);
      if (api_->get(engine, dnn::kEngineNumericalNote, dnn::kTypeNumericalNote, static_cast<int64_t>(notes.size()), &count,
                    notes.data()) != dnn::kSuccess)
        continue;
      notes.resize(static_cast<size_t>(std::clamp<int64_t>(count, 0, 16)));
      int64_t global_index = -1;
      api_->get(engine, dnn::kEngineGlobalIndex, dnn::kTypeInt64, 1, &count, &global_index);
      const std::string identity = config_identity(b, configs[i], global_index);
      if (debug) fmt::print(stderr, "  config {}: engine {} numerical notes [{}]{}\n", i, identity, fmt::join(notes, ", "),
                            numerics_allowed(notes, p) ? "" : " (left out)");
      if (!numerics_allowed(notes, p) || !seen.insert(identity).second) continue;
      ++built->offered;
      taken.push_back(configs[i]);
    }
  }
  // The plans, in the order their configurations were taken.
  for (size_t i = 0; i < taken.size(); ++i) {
    void* plan = nullptr;
    b.check(api_->create_descriptor(dnn::kExecutionPlanDescriptor, &plan), "cudnnBackendCreateDescriptor (plan)");
    int64_t workspace = 0, count = 0;
    bool ok = api_->set(plan, dnn::kExecutionPlanHandle, dnn::kTypeHandle, 1, &handle_) == dnn::kSuccess &&
              api_->set(plan, dnn::kExecutionPlanEngineConfig, dnn::kTypeBackendDescriptor, 1, &taken[i]) == dnn::kSuccess &&
              api_->finalize(plan) == dnn::kSuccess &&
              api_->get(plan, dnn::kExecutionPlanWorkspaceSize, dnn::kTypeInt64, 1, &count, &workspace) == dnn::kSuccess;
    if (!ok) {  // an engine the heuristic offers may still not build for this problem
      if (debug) fmt::print(stderr, "  the plan of configuration {} taken did not build\n", i);
      api_->destroy_descriptor(plan);
      continue;
    }
    built->plans.push_back(plan);
    built->workspace.push_back(static_cast<size_t>(std::max<int64_t>(workspace, 0)));
  }
  if (debug)
    fmt::print(stderr, "cuDNN: {} plans built in {:.1f} ms\n", built->plans.size(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return built;
}

size_t Cudnn::engines(const ConvProblem& p) const { return plans(p).plans.size(); }

size_t Cudnn::workspace_bytes(const ConvProblem& p, size_t engine) const {
  const Plans& built = plans(p);
  COIL_CHECK(engine < built.plans.size()) << "cuDNN plan " << engine << " of " << built.plans.size();
  return built.workspace[engine];
}

void Cudnn::convolution(const ConvProblem& p, size_t engine, const ConvPointers& operands, void* workspace, void* stream) const {
  const Plans& built = plans(p);
  if (engine >= built.plans.size())
    fail("cuDNN offers {} plans for the {}; plan {} was asked for", built.plans.size(), str(p), engine);
  convolution(Prepared{p, str(p), built.plans[engine], built.workspace[engine]}, operands, workspace, stream);
}

Cudnn::Prepared Cudnn::prepare(const ConvProblem& p, size_t engine) const {
  const Plans& built = plans(p);
  if (built.plans.empty()) fail("cuDNN offers no plan for the {}", str(p));
  if (engine >= built.plans.size()) engine = 0;
  return Prepared{p, str(p), built.plans[engine], built.workspace[engine]};
}

void Cudnn::convolution(const Prepared& call, const ConvPointers& operands, void* workspace, void* stream) const {
  const ConvProblem& p = call.problem;
  std::vector<Desc> owned;
  Builder b{*api_, owned, call.name};
  void* pack = b.make(dnn::kVariantPackDescriptor);
  std::vector<int64_t> uids = {kUidX, kUidW, kUidY};
  std::vector<void*> pointers = {const_cast<void*>(operands.x), const_cast<void*>(operands.w), operands.y};
  const ConvEpilogue& e = p.epilogue;
  for (auto [present, uid, pointer] : {std::tuple{e.scale, kUidScale, operands.scale}, {e.shift, kUidShift, operands.shift},
                                       {e.residual, kUidResidual, operands.residual},
                                       {e.residual && e.residual_scale, kUidResidualScale, operands.residual_scale}}) {
    if (!present) continue;
    if (!pointer) fail("the {} needs its epilogue operand {}", call.name, static_cast<int64_t>(uid));
    uids.push_back(uid);
    pointers.push_back(const_cast<void*>(pointer));
  }
  b.set(pack, dnn::kVariantPackUniqueIds, dnn::kTypeInt64, static_cast<int64_t>(uids.size()), uids.data());
  b.set(pack, dnn::kVariantPackDataPointers, dnn::kTypeVoidPtr, static_cast<int64_t>(pointers.size()), pointers.data());
  b.set(pack, dnn::kVariantPackWorkspace, dnn::kTypeVoidPtr, 1, &workspace);
  b.check(api_->finalize(pack), "cudnnBackendFinalize (variant pack)");
  std::lock_guard<std::mutex> lock(cache_->stream_mutex);  // the handle's stream, then the launch
  b.check(api_->set_stream(handle_, stream), "cudnnSetStream");
  b.check(api_->execute(handle_, const_cast<void*>(call.plan), pack), "cudnnBackendExecute");
}

}  // namespace coil::cuda
