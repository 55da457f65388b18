#include "runtime/cuda/graph_replays.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/cuda/gpu_plan.h"
#include "support/check.h"

namespace coil {

namespace {

// The memory one graph keeps for its life: every block its captured run took (temporaries,
// outputs, workspaces) and its slots. A block the run gave back during the capture serves the
// run's later requests (the graph's nodes run in capture order); the blocks go back to the
// allocator with the graph, on the stream of its last replay. Each is marked as this plan's
// graphs' (DeviceAllocator::set_owner), so that another plan's graph reads it in place.
class KeptBlocks : public RunBlocks {
 public:
  KeptBlocks(cuda::DeviceAllocator& allocator, cuda::Stream home, uintptr_t owner) : allocator_(allocator), home_(home), owner_(owner) {}
  ~KeptBlocks() override {
    for (const auto& [p, bytes] : held_) allocator_.free(p, home_);
  }
  KeptBlocks(const KeptBlocks&) = delete;
  KeptBlocks& operator=(const KeptBlocks&) = delete;

  // (blocks come from the pool of the stream the graph replays on, whatever the capture's)
  cuda::DevicePtr take(size_t bytes, cuda::Stream) override {
    const size_t rounded = cuda::DeviceAllocator::round_size(std::max<size_t>(bytes, 1));
    if (auto it = spare_.lower_bound(rounded); it != spare_.end()) {
      cuda::DevicePtr p = it->second;
      spare_.erase(it);
      return p;
    }
    cuda::DevicePtr p = allocator_.allocate(rounded, home_);
    held_.emplace(p, rounded);
    allocator_.set_owner(p, owner_);
    return p;
  }
  void give(cuda::DevicePtr p, cuda::Stream) override { spare_.emplace(held_.at(p), p); }
  void move_to(cuda::Stream stream) { home_ = stream; }  // the stream the blocks go back on

 private:
  cuda::DeviceAllocator& allocator_;
  cuda::Stream home_;
  uintptr_t owner_;
  std::map<cuda::DevicePtr, size_t> held_;      // every block taken, and its size
  std::multimap<size_t, cuda::DevicePtr> spare_;  // those given back, by size
};

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && (a.numel() == 0 || a.strides() == b.strides());
}

size_t input_bytes(const Tensor& t) {
  return t.numel() ? static_cast<size_t>(span_of(t.sizes(), t.strides(), 0)) * dtype_size(t.dtype()) : 0;
}

}  // namespace

struct CudaGraphs::Instance {
  const cuda::Context* context = nullptr;
  void* exec = nullptr;
  std::unique_ptr<KeptBlocks> blocks;
  std::vector<Tensor> layouts;               // per input, as captured (its dtype, sizes, strides)
  std::vector<cuda::DevicePtr> address;      // per input read in place, its captured address (else 0)
  std::vector<const void*> weights;          // per weight node, the data captured (read in place)
  std::vector<cuda::DevicePtr> slot;         // per input read from a slot, the slot's element [0] (else 0)
  std::vector<size_t> copy_back;             // slotted inputs an output is computed in: copied back
  std::vector<Tensor> outputs;               // as the captured run returned them (undefined: in an input)
  std::shared_ptr<int> alive = std::make_shared<int>(0);  // a copy in each output of the last replay
  cuda::DevicePtr status = 0;                // the status words, set by a kernel's error and kept
  int64_t* words = nullptr;                  // where each replay copies them (page-locked)
  size_t word_count = 0;
  cuda::Stream last_stream = nullptr;    // (the legacy default stream is nullptr too)
  bool replayed = false;
  uint64_t last_used = 0;

  bool idle() const { return alive.use_count() == 1; }
  bool matches(const std::vector<Tensor>& inputs, const std::vector<const void*>& weight_data) const {
    if (weight_data != weights) return false;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (address[k] && reinterpret_cast<cuda::DevicePtr>(inputs[k].data()) != address[k]) return false;
      if (!same_layout(inputs[k], layouts[k]) || inputs[k].device() != layouts[k].device()) return false;
    }
    return true;
  }
  ~Instance() {
    if (exec) context->destroy_graph(exec);  // (one in flight is freed when it finishes)
    if (words) {  // not while a replay's copy into them may be in flight
      try {
        if (replayed) context->synchronize(last_stream);
      } catch (const Error&) {  // a device in an error state: nothing will copy any more
      }
      context->release_host(words);
    }
  }
};

struct CudaGraphs::Bucket {
  bool warmed = false;                 // its first run (plain) is done
  std::string plain;                   // why its runs stay plain, where they do
  int captures = 0;
  std::vector<cuda::DevicePtr> before;  // per input, its address at the bucket's last run
  std::vector<std::unique_ptr<Instance>> graphs;
};

CudaGraphs::CudaGraphs(const GpuPlan& plan, std::function<void(const std::string&)> note) : plan_(plan), note_(std::move(note)) {}

CudaGraphs::~CudaGraphs() {
  buckets_.clear();  // (each graph's blocks go back in the order of its last replay's stream)
  if (capture_stream_) plan_.context->destroy_stream(capture_stream_);
}

CudaGraphStats CudaGraphs::stats() const {
  std::lock_guard lock(mutex_);
  CudaGraphStats s = stats_;
  s.graphs = 0;
  for (const auto& [key, b] : buckets_) s.graphs += static_cast<int64_t>(b->graphs.size());
  return s;
}

std::vector<Tensor> CudaGraphs::plain(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream,
                                      const SizedRun& sized, const std::string& why) {
  if (!why.empty() && noted_.insert(why).second && note_) note_(why);
  ++stats_.plain_runs;
  return plan_.run_steps(std::move(inputs), weights, stream, sized, nullptr);
}

std::vector<const void*> CudaGraphs::weight_data(const TensorMap& weights) const {
  std::vector<const void*> out;
  for (int n : plan_.run_layout().weight_nodes) {
    auto it = weights.find(std::get<std::string>(plan_.graph.nodes[static_cast<size_t>(n)].arg("key").value));
    out.push_back(it == weights.end() ? nullptr : it->second.data());  // (a missing one: the run says so)
  }
  return out;
}

void CudaGraphs::check_instance(Instance& g, bool wait) {
  if (!g.words || !g.replayed) return;
  if (wait) plan_.context->synchronize(g.last_stream);
  bool bad = false;
  for (size_t i = 0; i < g.word_count; i += 3) bad |= reinterpret_cast<volatile int64_t*>(g.words)[i] != 0;
  if (!bad) return;
  // Reported once: the words are cleared, after the graph's last replay.
  plan_.context->synchronize(g.last_stream);
  std::vector<int64_t> words(g.words, g.words + g.word_count);
  std::memset(g.words, 0, g.word_count * sizeof(int64_t));
  plan_.context->fill_zero(g.status, g.word_count * sizeof(int64_t), g.last_stream);
  plan_.report_status(words.data());
}

void CudaGraphs::check(bool wait) {
  std::lock_guard lock(mutex_);
  for (auto& [key, b] : buckets_)
    for (auto& g : b->graphs) check_instance(*g, wait);
}

std::unique_ptr<CudaGraphs::Instance> CudaGraphs::capture(const std::vector<Tensor>& inputs, const std::vector<cuda::DevicePtr>& before,
                                                           const TensorMap& weights, cuda::Stream stream,
                                                           const SizedRun& sized) {
  const cuda::Context& ctx = *plan_.context;
  cuda::DeviceAllocator& allocator = *plan_.allocator;
  const auto self = reinterpret_cast<uintptr_t>(this);
  auto g = std::make_unique<Instance>();
  g->context = &ctx;
  g->blocks = std::make_unique<KeptBlocks>(allocator, stream, self);
  g->last_stream = stream;
  g->weights = weight_data(weights);
  const size_t n = inputs.size();
  g->address.assign(n, 0), g->slot.assign(n, 0);
  std::vector<Tensor> given;  // what the captured run reads: the inputs in place, or their slots
  for (size_t k = 0; k < n; ++k) {
    const Tensor& t = inputs[k];
    g->layouts.push_back(Tensor::borrow(nullptr, t.dtype(), t.sizes(), t.strides(), 0, t.device()));
    const auto p = reinterpret_cast<cuda::DevicePtr>(t.data());
    const uintptr_t owner = allocator.owner_of(p);
    if (p == before[k] || (owner != 0 && owner != self)) {
      g->address[k] = p;
      given.push_back(t);
      continue;
    }
    // A slot laid out as the plan's buffer: element [0] at the buffer's offset from an aligned base.
    const int64_t offset = sized.buffers[static_cast<size_t>(plan_.lowered.input_buffers[k])].offset * static_cast<int64_t>(dtype_size(t.dtype()));
    const cuda::DevicePtr base = g->blocks->take(static_cast<size_t>(offset) + input_bytes(t), stream);
    g->slot[k] = base + static_cast<cuda::DevicePtr>(offset);
    given.push_back(Tensor::borrow(reinterpret_cast<void*>(g->slot[k]), t.dtype(), t.sizes(), t.strides(), 0, t.device()));
  }
  for (size_t o = 0; o < plan_.output_over_input.size(); ++o)
    if (int i = plan_.output_over_input[o]; i >= 0 && g->slot[static_cast<size_t>(i)]) g->copy_back.push_back(static_cast<size_t>(i));
  CaptureTarget target;
  target.blocks = g->blocks.get();
  if (plan_.status_words) {  // zeroed once, on the stream the graph replays on
    g->word_count = plan_.status_bytes() / sizeof(int64_t);
    g->status = target.status = g->blocks->take(plan_.status_bytes(), stream);
    ctx.fill_zero(g->status, plan_.status_bytes(), stream);
    g->words = target.words = static_cast<int64_t*>(ctx.allocate_host(plan_.status_bytes()));
    std::memset(g->words, 0, plan_.status_bytes());
  }
  if (plan_.scratch_layout.bytes > 0) {  // tickets zero: each split kernel's last block leaves them so
    target.scratch = g->blocks->take(static_cast<size_t>(plan_.scratch_layout.bytes), stream);
    ctx.fill_zero(target.scratch, static_cast<size_t>(plan_.scratch_layout.bytes), stream);
  }
  if (!capture_stream_) capture_stream_ = ctx.create_stream();
  g->exec = ctx.capture(capture_stream_, [&] { g->outputs = plan_.run_steps(given, weights, capture_stream_, sized, &target); });
  ++stats_.captures;
  return g;
}

std::vector<Tensor> CudaGraphs::replay(Instance& g, const std::vector<Tensor>& inputs, cuda::Stream stream) {
  const cuda::Context& ctx = *plan_.context;
  if (g.last_stream != stream) {  // the last replay, and the blocks' frees, ordered before this one
    ctx.synchronize(g.last_stream);
    g.last_stream = stream;
    g.blocks->move_to(stream);
  }
  for (size_t k = 0; k < inputs.size(); ++k)
    if (g.slot[k]) {
      ctx.copy_on_device(g.slot[k], reinterpret_cast<cuda::DevicePtr>(inputs[k].data()), input_bytes(inputs[k]), stream);
      ++stats_.copied_inputs;
    }
  ctx.launch_graph(g.exec, stream);
  g.replayed = true;
  for (size_t k : g.copy_back)
    ctx.copy_on_device(reinterpret_cast<cuda::DevicePtr>(inputs[k].data()), g.slot[k], input_bytes(inputs[k]), stream);
  g.last_used = ++clock_;
  ++stats_.replays;
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (const Tensor& t : g.outputs) {
    if (!t.defined()) {
      out.emplace_back();
      continue;
    }
    out.push_back(Tensor::borrow(t.data(), t.dtype(), t.sizes(), t.strides(), 0, t.device(), [alive = g.alive](void*) {}));
  }
  return out;
}

std::vector<Tensor> CudaGraphs::run(std::vector<Tensor> inputs, const TensorMap& weights, cuda::Stream stream,
                                    const std::map<std::string, int64_t>& given) {
  std::lock_guard lock(mutex_);
  const std::shared_ptr<const SizedRun> at = plan_.run_symbols(inputs, given);
  const SizedRun& sized = *at;
  for (const Tensor& t : inputs)
    if (t.device().kind != Device::Kind::cuda) return plain(std::move(inputs), weights, stream, sized, "an input is on the host");
  if (plan_.context->capturing(stream))
    return plain(std::move(inputs), weights, stream, sized, "the caller's stream is being captured into a CUDA graph already");
  const std::vector<int64_t>& key = sized.values;
  auto found = buckets_.find(key);
  if (found == buckets_.end()) {
    if (buckets_.size() >= kBuckets)
      return plain(std::move(inputs), weights, stream, sized,
                   fmt::format("a graph of dynamic sizes met more than {} sizes: runs at further sizes are not captured", kBuckets));
    found = buckets_.emplace(key, std::make_unique<Bucket>()).first;
  }
  Bucket& b = *found->second;
  for (auto& g : b.graphs) check_instance(*g, false);
  std::vector<cuda::DevicePtr> addresses;
  addresses.reserve(inputs.size());
  for (const Tensor& t : inputs) addresses.push_back(reinterpret_cast<cuda::DevicePtr>(t.data()));
  std::vector<cuda::DevicePtr> before = std::move(b.before);
  b.before = addresses;
  if (!b.warmed) {  // a warm-up: constants uploaded, library calls described, before a capture
    b.warmed = true;
    return plain(std::move(inputs), weights, stream, sized, "");
  }
  if (!b.plain.empty()) return plain(std::move(inputs), weights, stream, sized, b.plain);
  const std::vector<const void*> weight_now = weight_data(weights);
  for (auto& g : b.graphs)
    if (g->idle() && g->matches(inputs, weight_now)) return replay(*g, inputs, stream);
  if (b.captures >= kCaptures) {
    b.plain = fmt::format("inputs read in place kept changing their addresses: {} graphs were captured for one set of sizes",
                          kCaptures);
    return plain(std::move(inputs), weights, stream, sized, b.plain);
  }
  if (b.graphs.size() >= kInstances) {  // the least recently used idle graph makes room
    auto lru = b.graphs.end();
    for (auto it = b.graphs.begin(); it != b.graphs.end(); ++it)
      if ((*it)->idle() && (lru == b.graphs.end() || (*it)->last_used < (*lru)->last_used)) lru = it;
    if (lru == b.graphs.end())
      return plain(std::move(inputs), weights, stream, sized,
                   fmt::format("the outputs of {} earlier calls are still held (a graph's outputs are never overwritten while "
                               "held): a call runs without a CUDA graph",
                               kInstances));
    b.graphs.erase(lru);
  }
  ++b.captures;
  std::unique_ptr<Instance> g;
  try {
    g = capture(inputs, before, weights, stream, sized);
  } catch (const Error& e) {
    b.plain = fmt::format("capturing a CUDA graph failed ({}): its runs launch each kernel", e.what());
    return plain(std::move(inputs), weights, stream, sized, b.plain);
  }
  b.graphs.push_back(std::move(g));
  return replay(*b.graphs.back(), inputs, stream);
}

}  // namespace coil
