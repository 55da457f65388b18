#include "driver/conv_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "coil/graph.h"
#include "driver/autotune_conv.h"
#include "driver/compile.h"
#include "driver/tuning_timer.h"
#include "loop/conv_params.h"
#include "schedule/channels_last.h"

namespace coil {

namespace {

constexpr TurnsOptions kTurns{.sample_ms = 0.3, .rounds = 5, .max_repeats = 32};
constexpr size_t kMaxWorkspace = size_t{1} << 30;

std::vector<int64_t> constants(const SymShape& s) {
  std::vector<int64_t> out;
  for (const auto& d : s) out.push_back(*d.constant());
  return out;
}

// The convolution alone as a graph over NCHW operands, without its bias.
std::string graph_text(const loop::ExternCall& call, DType dtype) {
  const loop::ConvParams c = loop::conv_params(call.params);
  const auto list = [](const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); };
  return fmt::format(
      "graph convolution {{\n  %x = input() : {0}{1}\n  %w = input() : {0}{2}\n  %y = convolution(%x, %w, none, {3}, {4}, {5}, false, {6}, {7})\n"
      "  return %y\n}}\n",
      dtype_name(dtype), list(constants(call.inputs[0].sizes)), list(constants(call.inputs[1].sizes)), list(c.stride), list(c.padding),
      list(c.dilation), list(c.output_padding), c.groups);
}

// cuDNN's problem as layout planning gives it (schedule/channels_last.h): packed channels-last
// operands, an input over too few channels padded with zero ones (what the key and the timing use).
cuda::ConvProblem planned_problem(const loop::ExternCall& call, const loop::Program& program, bool tf32) {
  cuda::ConvProblem p = static_conv_problem(without_bias(call, program), program, tf32);
  p.epilogue = {};  // the choice is the convolution's: the same before and after epilogue fusion
  if (loop::conv_params(call.params).groups == 1) p.x_dims[1] = p.w_dims[1] = schedule::aligned_channels(p.x_dims[1], p.dtype);
  for (auto [dims, strides] : {std::pair{&p.x_dims, &p.x_strides}, {&p.w_dims, &p.w_strides}, {&p.y_dims, &p.y_strides}}) {
    int64_t stride = (*dims)[1];
    (*strides)[1] = 1;
    for (size_t d = dims->size(); d-- > 2;) (*strides)[d] = stride, stride *= (*dims)[d];
    (*strides)[0] = stride;
  }
  p.align_x = p.align_w = p.align_y = 16;
  return p;
}

size_t bytes_of(const std::vector<int64_t>& dims, DType dtype) {
  size_t n = dtype_size(dtype);
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

// The fastest of cuDNN's plans for `p`, in ms (infinity where none ran).
double best_cudnn_ms(const cuda::ConvProblem& p, const cuda::Cudnn& cudnn, const cuda::Context& context, RandomFill& fill) {
  cuda::DeviceScratch memory(context);
  auto operand = [&](const std::vector<int64_t>& dims) {
    const size_t bytes = bytes_of(dims, p.dtype);
    cuda::DevicePtr d = memory.take(bytes);
    fill(d, bytes, p.dtype);
    return reinterpret_cast<void*>(d);
  };
  void* x = operand(p.x_dims);
  void* w = operand(p.w_dims);
  void* y = operand(p.y_dims);
  std::vector<size_t> plans;
  size_t workspace_bytes = 0;
  for (size_t i = 0; i < cudnn.engines(p); ++i)
    if (size_t b = cudnn.workspace_bytes(p, i); b <= kMaxWorkspace) plans.push_back(i), workspace_bytes = std::max(workspace_bytes, b);
  if (plans.empty()) return std::numeric_limits<double>::infinity();
  void* workspace = workspace_bytes ? reinterpret_cast<void*>(memory.take(workspace_bytes)) : nullptr;
  std::vector<double> ms = time_in_turns(
      context, plans.size(),
      [&](size_t i, int times) {
        for (int r = 0; r < times; ++r) cudnn.convolution(p, plans[i], {.x = x, .w = w, .y = y}, workspace, nullptr);
      },
      kTurns);
  return *std::min_element(ms.begin(), ms.end());
}

// The convolution compiled alone as coil's loop kernel (tuned), timed on random NCHW operands.
double loop_ms(const loop::ExternCall& call, DType dtype, const CompileOptions& options, const std::shared_ptr<cuda::Context>& context,
               RandomFill& fill) {
  CompileOptions alone = options;
  alone.device_memory.reset();  // its own pool, given back with it: the trial's buffers stay out of the caller's cache
  alone.externs_as_loops = true;
  alone.autotune = true;
  alone.cuda_candidate = -1;
  const Executable exe = compile_cuda(parse_graph(graph_text(call, dtype), "<convolution>"), alone, context);
  cuda::DeviceScratch memory(*context);
  const Device gpu{Device::Kind::cuda, options.cuda_device};
  TensorMap inputs;
  for (auto [name, view] : {std::pair{"x", &call.inputs[0]}, {"w", &call.inputs[1]}}) {
    const Shape sizes = constants(view->sizes);
    const size_t bytes = bytes_of(sizes, dtype);
    cuda::DevicePtr d = memory.take(bytes);
    fill(d, bytes, dtype);
    inputs.emplace(name, Tensor::borrow(reinterpret_cast<void*>(d), dtype, sizes, contiguous_strides(sizes), 0, gpu));
  }
  return time_in_turns(
      *context, 1,
      [&](size_t, int times) {
        for (int r = 0; r < times; ++r) exe.run_on_stream(inputs, {}, nullptr);
      },
      kTurns)[0];
}

}  // namespace

bool loop_convolution_candidate(const loop::ExternCall& call, const loop::Program& program) {
  (void)program;
  const loop::ConvParams c = loop::conv_params(call.params);
  if (c.transposed || call.inputs.size() < 2) return false;
  int64_t reduction = 1;
  const SymShape& w = call.inputs[1].sizes;
  for (size_t d = 1; d < w.size(); ++d) {
    const auto n = w[d].constant();
    if (!n) return false;
    reduction *= *n;
  }
  for (const auto& v : {call.inputs[0], call.inputs[1]})
    for (const auto& d : v.sizes)
      if (!d.constant()) return false;
  return reduction <= kLoopConvolutionMaxReduction;
}

std::string conv_path_key(const loop::ExternCall& call, const loop::Program& program, bool tf32) {
  return cuda::str(planned_problem(call, program, tf32));
}

ConvPathChoice choose_conv_path(const loop::ExternCall& call, const loop::Program& program, const CompileOptions& options,
                                const cuda::Cudnn& cudnn, const std::shared_ptr<cuda::Context>& context,
                                const build::ArtifactCache& cache) {
  const cuda::ConvProblem p = planned_problem(call, program, options.allow_tf32);
  ConvPathChoice choice;
  const std::string key = build::ArtifactCache::key({"coil-conv-path-1", cuda::str(p), context->device().key(), cudnn.version()});
  if (auto cached = cache.read(key, "tune")) {
    int loop = 0;
    if (std::sscanf(cached->c_str(), "%d %lf %lf", &loop, &choice.cudnn_ms, &choice.loop_ms) == 3) {
      choice.loop = loop != 0;
      return choice;
    }
  }
  context->make_current();
  RandomFill fill(*context);
  choice.cudnn_ms = best_cudnn_ms(p, cudnn, *context, fill);
  choice.loop_ms = loop_ms(call, p.dtype, options, context, fill);
  choice.loop = choice.loop_ms < choice.cudnn_ms;
  choice.measured = true;
  cache.store(key, "tune", fmt::format("{} {} {}", choice.loop ? 1 : 0, choice.cudnn_ms, choice.loop_ms));
  return choice;
}

std::string conv_path_report(const std::string& name, const ConvPathChoice& c) {
  return fmt::format("{}: {} ({:.4f} ms as a loop kernel, {:.4f} ms for cuDNN's best plan{})", name,
                     c.loop ? "a loop kernel" : "cuDNN", c.loop_ms, c.cudnn_ms, c.measured ? "" : "; from the tuning cache");
}

}  // namespace coil
