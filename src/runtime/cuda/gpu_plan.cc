#include "runtime/cuda/gpu_plan.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "loop/conv_params.h"
#include "runtime/plan.h"
#include "support/check.h"

namespace coil {

namespace {

cuda::DevicePtr at(cuda::DevicePtr base, const loop::Buffer& buf, int64_t offset) {
  return base + static_cast<cuda::DevicePtr>(offset * static_cast<int64_t>(dtype_size(buf.dtype)));
}

}  // namespace

SplitScratchLayout split_scratch_layout(const std::vector<codegen::CudaKernel>& kernels) {
  SplitScratchLayout layout;
  for (const codegen::CudaKernel& k : kernels) {
    const int64_t bytes = k.launch.scratch_bytes;
    layout.offsets.push_back(bytes > 0 ? layout.bytes : -1);
    if (bytes > 0) layout.bytes += (bytes + 255) / 256 * 256;
  }
  return layout;
}

void launch_loop_kernel(const cuda::Context& ctx, void* function, const codegen::CudaKernel& info, const std::vector<cuda::DevicePtr>& ptrs,
                        const std::vector<int64_t>& symbol_values, int64_t units, cuda::DevicePtr status, cuda::DevicePtr scratch,
                        cuda::Stream stream, bool overlap) {
  if (units <= 0) return;
  int64_t grid = codegen::grid_blocks(info.launch, units);
  COIL_CHECK((scratch != 0) == (info.launch.scratch_bytes > 0)) << "scratch for " << info.name;
  COIL_CHECK(info.launch.cluster == 0 || grid % info.launch.cluster == 0) << info.name << ": " << grid << " blocks in clusters of " << info.launch.cluster;
  // Reused by the thread (a launch is a few microseconds of host time, and a backward step makes
  // hundreds); cuLaunchKernel copies the arguments before it returns.
  thread_local std::vector<cuda::DevicePtr> param_ptrs;
  thread_local std::vector<int64_t> values;
  thread_local std::vector<void*> params;
  param_ptrs.clear(), values.clear(), params.clear();
  for (int b : info.buffers) param_ptrs.push_back(ptrs[static_cast<size_t>(b)]);
  param_ptrs.push_back(status);
  if (scratch) param_ptrs.push_back(scratch);
  for (int s : info.symbols) values.push_back(symbol_values[static_cast<size_t>(s)]);
  for (size_t i = 0; i < info.buffers.size(); ++i) params.push_back(&param_ptrs[i]);
  for (auto& v : values) params.push_back(&v);
  for (size_t i = info.buffers.size(); i < param_ptrs.size(); ++i) params.push_back(&param_ptrs[i]);
  ctx.launch(function, {static_cast<unsigned>(grid)}, {static_cast<unsigned>(info.launch.block_x), static_cast<unsigned>(info.launch.block_y)},
             static_cast<unsigned>(info.launch.shared_bytes), stream, params.data(), overlap, static_cast<unsigned>(info.launch.cluster));
}

void GpuPlan::enable_horizontals() {
  copies_onto_inputs = coil::copies_onto_inputs(lowered, output_over_input);
  // A graph output computed over an input is that input's memory.
  std::map<int, int> alias;
  for (size_t o = 0; o < output_over_input.size(); ++o)
    if (output_over_input[o] >= 0) alias[lowered.output_buffers[o]] = lowered.input_buffers[static_cast<size_t>(output_over_input[o])];
  auto memory_of = [&](int b) {
    auto it = alias.find(b);
    return it == alias.end() ? b : it->second;
  };
  for (Horizontal& h : horizontals) {
    h.on = true;
    std::set<int> written, touched;
    for (size_t s : h.steps) {
      std::set<int> w, t;
      for (int b : memory.writes[s]) w.insert(memory_of(b)), t.insert(memory_of(b));
      for (int b : memory.reads[s]) t.insert(memory_of(b));
      for (int b : w)
        if (touched.count(b)) h.on = false;
      for (int b : t)
        if (written.count(b)) h.on = false;
      written.insert(w.begin(), w.end());
      touched.insert(t.begin(), t.end());
    }
  }
}

GpuPlan::~GpuPlan() {
  try {
    check_pending(true);
  } catch (const Error&) {  // an error nobody asked about any more
  }
  cuda_graphs_.reset();
  for (const Pending& p : free_slots_) {
    context->destroy_event(p.event);
    context->release_host(p.words);
  }
  if (!allocator) return;
  for (const auto& [host, p] : device_weights_) allocator->free(p, nullptr);
  for (const auto& [b, p] : device_constants_) allocator->free(p, nullptr);
  for (const auto& [stream, region] : split_scratch_) allocator->free(region.first, stream);
}

cuda::DevicePtr GpuPlan::constant_on_device(size_t b, const std::map<std::string, int64_t>& symbols, cuda::Stream stream) const {
  std::lock_guard<std::mutex> lock(weights_mutex_);
  if (auto it = device_constants_.find(b); it != device_constants_.end()) return it->second;
  const loop::Buffer& buf = lowered.program.buffers[b];
  Tensor flat = Tensor::empty_strided(buf.dtype, {buffer_elements(buf, symbols)}, {1});
  for (size_t i = 0; i < buf.data.size(); ++i) flat.store(static_cast<int64_t>(i), buf.data[i]);
  const size_t bytes = buffer_bytes(buf, symbols);
  cuda::DevicePtr p = allocator->allocate(bytes, stream);
  try {
    context->copy_to_device(p, flat.data(), bytes, stream);
    context->synchronize(stream);  // (the host copy goes with this call)
  } catch (...) {
    allocator->free(p, stream);
    throw;
  }
  return device_constants_.emplace(b, p).first->second;
}

cuda::DevicePtr GpuPlan::split_scratch(size_t bytes, cuda::Stream stream) const {
  std::lock_guard<std::mutex> lock(scratch_mutex_);
  auto& region = split_scratch_[stream];
  if (region.second < bytes) {  // the first split kernel on this stream, or a larger one
    if (region.first) allocator->free(region.first, stream);
    region = {0, 0};
    cuda::DevicePtr p = allocator->allocate(bytes, stream);
    context->fill_zero(p, bytes, stream);
    region = {p, bytes};
  }
  return region.first;
}

void GpuPlan::use_cuda_graphs(std::function<void(const std::string&)> note) {
  cuda_graphs_.reset();
  if (!note) return;
  if (std::string why = uncapturable(); !why.empty()) {
    note("a compiled graph runs without CUDA graphs: " + why);
    return;
  }
  cuda_graphs_ = std::make_unique<CudaGraphs>(*this, std::move(note));
}

CudaGraphStats GpuPlan::graph_stats() const { return cuda_graphs_ ? cuda_graphs_->stats() : CudaGraphStats{}; }

Tensor GpuPlan::bind(const Tensor& t, const loop::Buffer& b, const SizedRun::BufferAt& at, const SizedRun& sized,
                     const Naming& naming) const {
  // (the name is only made for a message: a backward graph binds a hundred inputs a run)
  auto what = [&] { return fmt::format("{}{}{}", naming.prefix, naming.name, naming.suffix); };
  if (t.device().kind != Device::Kind::cuda) return bind_external(t, b, sized.symbols, what());
  if (t.device().index != context->ordinal())
    fail("{}: on {}, but this executable runs on cuda:{}", what(), device_name(t.device()), context->ordinal());
  if (t.dtype() != b.dtype) fail("{}: expected dtype {}, got {}", what(), dtype_name(b.dtype), dtype_name(t.dtype()));
  if (t.sizes() != at.sizes) fail("{}: expected shape {}, got {}", what(), shape_to_string(at.sizes), shape_to_string(t.sizes()));
  if (t.numel() > 0 && t.strides() != at.strides)
    fail("{}: a device tensor with strides {} where the compiled graph expects {} (compile for this layout)", what(),
         shape_to_string(t.strides()), shape_to_string(at.strides));
  return t;
}

GpuPlan::HostTimes GpuPlan::host_times() const {
  std::lock_guard<std::mutex> lock(times_mutex_);
  return times_;
}

const GpuPlan::RunLayout& GpuPlan::run_layout() const {
  std::call_once(layout_once_, [&] {
    RunLayout& l = layout_;
    l.input_nodes = graph.input_nodes();
    l.weight_nodes = graph.weight_nodes();
    const auto& buffers = lowered.program.buffers;
    l.temporaries_before.resize(lowered.program.kernels.size());
    const std::vector<bool> hosted = hosted_buffers(lowered.program);  // (a torch call's result: never allocated)
    for (size_t b = 0; b < buffers.size(); ++b) {
      const loop::Buffer& buf = buffers[b];
      if (hosted[b]) {
        if (buf.role == loop::Buffer::Role::output) l.outputs.push_back(b);
        continue;
      }
      if (buf.role == loop::Buffer::Role::temporary && memory.first_use[b] >= 0)
        l.temporaries_before[static_cast<size_t>(memory.first_use[b])].push_back(b);
      else if (buf.role == loop::Buffer::Role::constant && memory.first_use[b] >= 0)
        l.constants.push_back(b);
      else if (buf.role == loop::Buffer::Role::output)
        l.outputs.push_back(b);
      if (buf.role == loop::Buffer::Role::output && memory.first_use[b] >= 0)
        l.temporaries_before[static_cast<size_t>(memory.first_use[b])].push_back(b);
    }
    l.inputs_after.resize(lowered.program.kernels.size());
    for (size_t i = 0; i < lowered.input_buffers.size(); ++i) {
      auto b = static_cast<size_t>(lowered.input_buffers[i]);
      bool returned = std::count(lowered.output_buffers.begin(), lowered.output_buffers.end(), lowered.input_buffers[i]) > 0;
      if (memory.last_use[b] >= 0 && !returned) l.inputs_after[static_cast<size_t>(memory.last_use[b])].push_back(i);
    }
  });
  return layout_;
}

std::vector<Tensor> GpuPlan::run(const TensorMap& inputs, const TensorMap& weights, cuda::Stream stream) const {
  std::vector<Tensor> given;
  for (int n : run_layout().input_nodes) {
    const std::string& name = graph.nodes[static_cast<size_t>(n)].name();
    auto it = inputs.find(name);
    if (it == inputs.end()) fail("graph {}: missing input %{}", graph.name, name);
    given.push_back(it->second);
  }
  return run(std::move(given), weights, stream);
}

namespace {

// A plain run's memory: the plan's caching allocator.
class AllocatorBlocks : public RunBlocks {
 public:
  explicit AllocatorBlocks(cuda::DeviceAllocator& allocator) : allocator_(allocator) {}
  cuda::DevicePtr take(size_t bytes, cuda::Stream stream) override { return allocator_.allocate(bytes, stream); }
  void give(cuda::DevicePtr p, cuda::Stream stream) override { allocator_.free(p, stream); }

 private:
  cuda::DeviceAllocator& allocator_;
};

}  // namespace

std::shared_ptr<const SizedRun> GpuPlan::sized_run(const std::vector<int64_t>& values) const {
  return sized_runs_.at(values, [&](const std::vector<int64_t>& v) {
    return evaluate_sized_run(lowered.program, graph.symbols, v, functions, kernels, variants);
  });
}

std::shared_ptr<const SizedRun> GpuPlan::run_symbols(const std::vector<Tensor>& inputs, const std::map<std::string, int64_t>& given) const {
  // (a graph of static sizes binds none; bind() checks each input's shape)
  if (graph.symbols.empty()) return sized_run({});
  const RunLayout& layout = run_layout();
  if (inputs.size() != layout.input_nodes.size())
    fail("graph {} takes {} inputs, got {}", graph.name, layout.input_nodes.size(), inputs.size());
  std::vector<int64_t> values;
  for (const auto& s : graph.symbols) {
    auto it = given.find(s.name);
    if (it == given.end()) break;
    if (it->second < s.min || (s.max && it->second > *s.max))
      fail("graph {}: size symbol {} is {}, outside the range [{}, {}] it was compiled for", graph.name, s.name, it->second, s.min,
           s.max ? std::to_string(*s.max) : "inf");
    values.push_back(it->second);
  }
  if (values.size() < graph.symbols.size()) {  // some read from the inputs' shapes
    TensorMap named;
    for (size_t i = 0; i < inputs.size(); ++i) named.emplace(graph.nodes[static_cast<size_t>(layout.input_nodes[i])].name(), inputs[i]);
    const std::map<std::string, int64_t> bound = bind_symbols(graph, named, given);
    values.clear();
    for (const auto& s : graph.symbols) values.push_back(bound.at(s.name));
    return sized_run(values);
  }
  // Every symbol given: each input's sizes, and its strides where they are expressions, as
  // those values make them (bind_symbols' checks).
  std::shared_ptr<const SizedRun> sized = sized_run(values);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& node = graph.nodes[static_cast<size_t>(layout.input_nodes[i])];
    const TensorMeta& m = node.outputs[0].meta;
    const SizedRun::BufferAt& at = sized->buffers[static_cast<size_t>(lowered.input_buffers[i])];
    const Tensor& t = inputs[i];
    if (t.sizes() != at.sizes)
      fail("input %{}: expected shape {} = {} at the given sizes, got {}", node.name(), shape_to_string(at.sizes), m.str(),
           shape_to_string(t.sizes()));
    for (size_t d = 0; d < m.strides.size() && d < t.strides().size() && d < at.strides.size(); ++d)
      if (!m.strides[d].is_constant() && t.sizes()[d] != 1 && t.strides()[d] != at.strides[d])
        fail("input %{}: the stride of dimension {} should be {} = {}, got {}", node.name(), d, m.strides[d].str(), at.strides[d],
             t.strides()[d]);
  }
  return sized;
}

std::string GpuPlan::uncapturable() const {
  for (const auto& k : lowered.program.kernels)
    if (const auto* call = std::get_if<loop::ExternCall>(&k); call && call->kind == loop::ExternKind::torch)
      return fmt::format("it calls PyTorch's {} (a library call run by the host)", call->name);
  return "";
}

std::vector<Tensor> GpuPlan::run(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream,
                                 const std::map<std::string, int64_t>& given_symbols) const {
  if (cuda_graphs_) return cuda_graphs_->run(std::move(inputs), weights, stream, given_symbols);
  const std::shared_ptr<const SizedRun> sized = run_symbols(inputs, given_symbols);
  return run_steps(std::move(inputs), weights, stream, *sized, nullptr);
}

std::vector<Tensor> GpuPlan::run_steps(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream, const SizedRun& sized,
                                       const CaptureTarget* target) const {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  HostTimes spent;
  auto since = [](Clock::time_point from) { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - from).count(); };
  auto record = [&] {
    std::lock_guard<std::mutex> lock(times_mutex_);
    times_.runs += 1;
    times_.setup_ns += spent.setup_ns, times_.loop_ns += spent.loop_ns, times_.loops += spent.loops, times_.gemm_ns += spent.gemm_ns;
    times_.gemms += spent.gemms, times_.conv_ns += spent.conv_ns, times_.convs += spent.convs, times_.memory_ns += spent.memory_ns;
    times_.torch_ns += spent.torch_ns, times_.torch_calls += spent.torch_calls;
    times_.finish_ns +=
        since(started) - spent.setup_ns - spent.loop_ns - spent.gemm_ns - spent.conv_ns - spent.memory_ns - spent.torch_ns;
  };
  const cuda::Context& ctx = *context;
  ctx.make_current();
  check_runs(false);
  const RunLayout& layout = run_layout();
  if (inputs.size() != layout.input_nodes.size())
    fail("graph {} takes {} inputs, got {}", graph.name, layout.input_nodes.size(), inputs.size());
  const bool device_outputs = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.device().kind == Device::Kind::cuda; });
  COIL_CHECK(!target || device_outputs) << "a captured run takes device inputs";
  AllocatorBlocks plain(*allocator);
  RunBlocks& blocks = target ? *target->blocks : plain;
  const std::map<std::string, int64_t>& symbols = sized.symbols;
  const std::vector<int64_t>& symbol_values = sized.values;
  const auto& buffers = lowered.program.buffers;
  const size_t nb = buffers.size(), nk = lowered.program.kernels.size();
  std::vector<cuda::DevicePtr> ptrs(nb, 0);
  std::vector<bool> owned(nb, false);  // allocated for this run (freed at its end)
  std::vector<Tensor> adopted(nb);     // a torch call's result: the embedder's memory, held until released
  cuda::DevicePtr status = 0, workspace = 0;
  const size_t status_size = status_bytes();  // per kernel: code, index, size
  // Everything this run still holds back to the allocator, in stream order.
  auto release_run = [&] {
    if (status && !target) blocks.give(status, stream);
    if (workspace) blocks.give(workspace, stream);
    status = workspace = 0;
    for (size_t b = 0; b < nb; ++b)
      if (owned[b]) blocks.give(ptrs[b], stream), owned[b] = false;
  };
  auto take = [&](size_t b) {
    ptrs[b] = blocks.take(sized.buffers[b].bytes, stream);
    owned[b] = true;
  };
  std::vector<Tensor> staged;  // host copies kept alive until the copies ran
  auto upload = [&](size_t b, const Tensor& t) {
    // The tensor's element [0, ...] sits where the buffer's offset puts it.
    const int64_t offset = sized.buffers[b].offset;
    size_t bytes = static_cast<size_t>(t.numel() ? span_of(t.sizes(), t.strides(), 0) : 0) * dtype_size(t.dtype());
    if (t.device().kind == Device::Kind::cuda) {
      auto base = reinterpret_cast<cuda::DevicePtr>(t.data()) - static_cast<cuda::DevicePtr>(offset * static_cast<int64_t>(dtype_size(t.dtype())));
      if (base % codegen::kBufferAlignment == 0) {  // borrowed: the kernels read it in place
        ptrs[b] = base;
        return;
      }
      take(b);  // a base the kernels' vector accesses cannot take: an aligned copy, made on the stream
      ctx.copy_on_device(at(ptrs[b], buffers[b], offset), reinterpret_cast<cuda::DevicePtr>(t.data()), bytes, stream);
      return;
    }
    take(b);
    ctx.copy_to_device(at(ptrs[b], buffers[b], offset), t.data(), bytes, stream);
    staged.push_back(t);
  };
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto b = static_cast<size_t>(lowered.input_buffers[i]);
      const std::string& name = graph.nodes[static_cast<size_t>(layout.input_nodes[i])].name();
      upload(b, bind(inputs[i], buffers[b], sized.buffers[b], sized, {"input %", name, ""}));
    }
    const auto& weight_nodes = layout.weight_nodes;
    for (size_t i = 0; i < weight_nodes.size(); ++i) {
      auto b = static_cast<size_t>(lowered.weight_buffers[i]);
      const Node& node = graph.nodes[static_cast<size_t>(weight_nodes[i])];
      const auto& key = std::get<std::string>(node.arg("key").value);
      auto it = weights.find(key);
      if (it == weights.end()) fail("weight '{}' (for %{}) was not given", key, node.name());
      if (it->second.device().kind == Device::Kind::cuda) {
        upload(b, bind(it->second, buffers[b], sized.buffers[b], sized, {"weight '", key, "'"}));
        continue;
      }
      std::lock_guard<std::mutex> lock(weights_mutex_);
      auto cached = device_weights_.find({it->second.data(), b});
      if (cached == device_weights_.end()) {
        upload(b, bind(it->second, buffers[b], sized.buffers[b], sized, {"weight '", key, "'"}));
        owned[b] = false;
        ctx.synchronize(stream);
        cached = device_weights_.emplace(std::make_pair(it->second.data(), b), ptrs[b]).first;
      }
      ptrs[b] = cached->second;
    }
    std::vector<bool> in_input(lowered.output_buffers.size(), false);
    for (size_t o = 0; o < output_over_input.size(); ++o) {
      if (output_over_input[o] < 0) continue;
      auto ib = static_cast<size_t>(lowered.input_buffers[static_cast<size_t>(output_over_input[o])]);
      if (owned[ib]) continue;  // a copy of the input (a host tensor, an unaligned base): not the caller's memory
      ptrs[static_cast<size_t>(lowered.output_buffers[o])] = ptrs[ib];
      in_input[o] = true;
    }
    for (size_t b : layout.constants) ptrs[b] = constant_on_device(b, symbols, stream);
    for (size_t b : layout.outputs)  // those no step writes; the others at their first writer
      if (!ptrs[b] && memory.first_use[b] < 0) take(b);
    // Per input, whether an output is computed in its memory (then it stays the caller's).
    std::vector<bool> written_over(inputs.size(), false);
    for (size_t o = 0; o < output_over_input.size(); ++o)
      if (output_over_input[o] >= 0 && in_input[o]) written_over[static_cast<size_t>(output_over_input[o])] = true;
    if (status_words && target) {
      status = target->status;
    } else if (status_words) {  // else no kernel writes them: kernels get a null status pointer
      status = blocks.take(status_size, stream);
      ctx.fill_zero(status, status_size, stream);
    }
    COIL_CHECK(scratch_layout.offsets.size() == kernels.size()) << "the GPU plan's split scratch is not laid out";
    const cuda::DevicePtr scratch_base = scratch_layout.bytes <= 0 ? 0
                                         : target                ? target->scratch
                                                                 : split_scratch(static_cast<size_t>(scratch_layout.bytes), stream);
    spent.setup_ns = since(started);
    auto allocate = [&](size_t k) {
      const auto from = Clock::now();
      for (size_t b : layout.temporaries_before[k]) {
        if (ptrs[b]) continue;  // an output computed in an input's memory
        if (int a = memory.in_place_of[b]; a >= 0) {
          ptrs[b] = ptrs[static_cast<size_t>(a)];
          owned[b] = owned[static_cast<size_t>(a)];
          owned[static_cast<size_t>(a)] = false;
          adopted[b] = std::move(adopted[static_cast<size_t>(a)]);
          continue;
        }
        take(b);
      }
      spent.memory_ns += since(from);
    };
    auto release_dead = [&](size_t k) {
      const auto from = Clock::now();
      for (int b : memory.release_after[k]) {
        auto ub = static_cast<size_t>(b);
        if (owned[ub]) blocks.give(ptrs[ub], stream);
        owned[ub] = false;
        ptrs[ub] = 0;
        adopted[ub] = Tensor();  // (after its last reader is enqueued: PyTorch's allocator orders reuse on the stream)
      }
      for (size_t i : layout.inputs_after[k])  // its last reader is enqueued: the run's hold ends
        if (!written_over[i] && inputs[i].device().kind == Device::Kind::cuda) inputs[i] = Tensor();
      spent.memory_ns += since(from);
    };
    std::vector<int> group_at(nk, -1);  // the group starting at a step, where on
    for (size_t g = 0; g < horizontals.size(); ++g)
      if (horizontals[g].on) group_at[horizontals[g].steps.front()] = static_cast<int>(g);
    // A run's first launch does not overlap what came before it on the stream (the run before,
    // whose last kernel may write a weight this one reads before its wait: cuda_gemv.cc); the
    // rest overlap the kernel before them.
    bool overlap = false;
    for (size_t k = 0; k < nk; ++k) {
      const auto kernel_start = Clock::now();
      const int64_t memory_before = spent.memory_ns;
      // this step's host time, less the allocator's
      auto step_ns = [&] { return since(kernel_start) - (spent.memory_ns - memory_before); };
      if (group_at[k] >= 0) {  // every member's buffers taken first, released after: they run at once
        const Horizontal& h = horizontals[static_cast<size_t>(group_at[k])];
        for (size_t s : h.steps) allocate(s);
        launch_loop_kernel(ctx, h.function, h.info, ptrs, symbol_values, h.info.launch.units.eval(symbols),
                           status ? status + k * 3 * sizeof(int64_t) : 0, 0, stream, overlap);
        overlap = true;
        for (size_t s : h.steps) release_dead(s);
        spent.loop_ns += step_ns(), spent.loops += 1;
        k = h.steps.back();
        continue;
      }
      allocate(k);
      if (!copies_onto_inputs.empty() && !copies_onto_inputs[k].empty() &&
          std::all_of(copies_onto_inputs[k].begin(), copies_onto_inputs[k].end(), [&](size_t o) { return bool(in_input[o]); })) {
        release_dead(k);  // an input copied onto itself
        continue;
      }
      if (const SizedRun::LaunchAt& launch = sized.launches[k]; launch.function) {
        const codegen::CudaKernel& info = *launch.info;
        cuda::DevicePtr scratch = info.launch.scratch_bytes > 0 ? scratch_base + static_cast<cuda::DevicePtr>(scratch_layout.offsets[k]) : 0;
        launch_loop_kernel(ctx, launch.function, info, ptrs, symbol_values, launch.units, status ? status + k * 3 * sizeof(int64_t) : 0,
                           scratch, stream, overlap);
        overlap = true;
        spent.loop_ns += step_ns(), spent.loops += 1;
      } else {
        const auto& call = std::get<loop::ExternCall>(lowered.program.kernels[k]);
        if (call.kind == loop::ExternKind::torch) {
          std::vector<Tensor> results = run_torch_call(call, ptrs, symbols, stream);
          const std::vector<int> outs = call_outputs(call);
          for (size_t i = 0; i < outs.size(); ++i) {
            auto b = static_cast<size_t>(outs[i]);
            ptrs[b] = reinterpret_cast<cuda::DevicePtr>(results[i].data()) -
                      static_cast<cuda::DevicePtr>(sized.buffers[b].offset * static_cast<int64_t>(dtype_size(buffers[b].dtype)));
            adopted[b] = std::move(results[i]);
          }
          spent.torch_ns += step_ns(), spent.torch_calls += 1;
          release_dead(k);
          continue;
        }
        auto view_ptr = [&](const loop::View* v) -> const void* {
          if (!v) return nullptr;
          auto b = static_cast<size_t>(v->buffer);
          return reinterpret_cast<const void*>(at(ptrs[b], buffers[b], v->offset.eval(symbols)));
        };
        const loop::Buffer& ob = buffers[static_cast<size_t>(call.output)];
        const SymInt& out_offset = call.output_view ? call.output_view->offset : ob.offset;
        auto* d = reinterpret_cast<void*>(at(ptrs[static_cast<size_t>(call.output)], ob, out_offset.eval(symbols)));
        if (call.kind == loop::ExternKind::convolution) {
          auto optional_ptr = [&](const std::optional<loop::View>& v) { return v ? view_ptr(&*v) : nullptr; };
          const cuda::ConvPointers operands{view_ptr(&call.inputs[0]), view_ptr(&call.inputs[1]), d, optional_ptr(call.scale),
                                            optional_ptr(call.shift), optional_ptr(call.residual), optional_ptr(call.residual_scale)};
          run_convolution(k, call, operands, conv_plans.empty() ? 0 : conv_plans[k], symbols, stream, blocks);
          spent.conv_ns += step_ns(), spent.convs += 1;
        } else {
          const GemmViews views = gemm_views(call);
          if (!workspace) workspace = blocks.take(kGemmWorkspace, stream);
          run_gemm(k, call, {view_ptr(views.a), view_ptr(views.b), view_ptr(views.c), d, view_ptr(views.bias)}, workspace, sized, stream);
          spent.gemm_ns += step_ns(), spent.gemms += 1;
        }
      }
      release_dead(k);
    }
    std::vector<Tensor> out;
    if (device_outputs) {
      // Outputs stay on the device, freed to the allocator (on this stream) with their last
      // tensor; the status words come back asynchronously and are checked by a later call.
      std::map<int, Tensor> given;
      for (size_t o = 0; o < lowered.output_buffers.size(); ++o) {
        if (in_input[o]) {
          out.emplace_back();
          continue;
        }
        int ob = lowered.output_buffers[o];
        auto ub = static_cast<size_t>(ob);
        const loop::Buffer& buf = buffers[ub];
        if (!given.count(ob)) {
          std::function<void(void*)> release;
          if (owned[ub] && target) {
            owned[ub] = false;  // the target's to keep
          } else if (owned[ub]) {
            release = [alloc = allocator, stream](void* p) { alloc->free(reinterpret_cast<cuda::DevicePtr>(p), stream); };
            owned[ub] = false;
          } else if (adopted[ub].defined()) {
            release = [keep = std::move(adopted[ub])](void*) {};  // the embedder's tensor, held by the output's
          }
          given[ob] = Tensor::borrow(reinterpret_cast<void*>(ptrs[ub]), buf.dtype, {sized.buffers[ub].elements}, {1}, 0,
                                     Device{Device::Kind::cuda, ctx.ordinal()}, release);
        }
        const SizedRun::BufferAt& at = sized.buffers[ub];
        out.push_back(given[ob].view(at.sizes, at.strides, at.offset));
      }
      if (status && target) ctx.copy_to_host(target->words, status, status_size, stream);
      else if (status) defer_status(status, status_size, stream);
      release_run();
      record();
      return out;
    }
    // Outputs back to the host, then the status words.
    for (int ob : lowered.output_buffers) {
      const loop::Buffer& buf = buffers[static_cast<size_t>(ob)];
      const SizedRun::BufferAt& at = sized.buffers[static_cast<size_t>(ob)];
      Tensor flat = Tensor::empty_strided(buf.dtype, {at.elements}, {1});
      ctx.copy_to_host(flat.data(), ptrs[static_cast<size_t>(ob)], at.bytes, stream);
      out.push_back(flat.view(at.sizes, at.strides, at.offset));
    }
    std::vector<int64_t> words(status_size / sizeof(int64_t), 0);
    if (status) ctx.copy_to_host(words.data(), status, words.size() * sizeof(int64_t), stream);
    ctx.synchronize(stream);
    release_run();
    record();
    report_status(words.data());
    return out;
  } catch (...) {
    try {
      ctx.synchronize(stream);
    } catch (const Error&) {  // the device is in an error state: the first error is the one to report
    }
    release_run();
    throw;
  }
}

}  // namespace coil
