// coil._coil: the C++ side of the torch.compile adapter (python/coil). A graph comes in as
// JSON (frontend/fx.h), is compiled by the same driver as every other front end, and runs on
// data pointers: inputs are borrowed in the layout they were compiled for, outputs are handed
// to PyTorch through DLPack without a copy (coil's tensor stays alive until PyTorch drops it).
// The GIL is released while compiling and running.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "build/cache.h"
#include "coil/coil.h"
#include "coil/limit_error.h"
#include "frontend/export_nodes.h"
#include "frontend/fx.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/gpu_plan.h"
#include "runtime/plan.h"

namespace nb = nanobind;

namespace {

nb::dlpack::dtype dlpack_dtype(coil::DType t) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, int bits) { return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1}; };
  switch (t) {
    case coil::DType::f64: return make(C::Float, 64);
    case coil::DType::f32: return make(C::Float, 32);
    case coil::DType::f16: return make(C::Float, 16);
    case coil::DType::bf16: return make(C::Bfloat, 16);
    case coil::DType::i64: return make(C::Int, 64);
    case coil::DType::i32: return make(C::Int, 32);
    case coil::DType::i16: return make(C::Int, 16);
    case coil::DType::i8: return make(C::Int, 8);
    case coil::DType::u8: return make(C::UInt, 8);
    case coil::DType::b8: return make(C::Bool, 8);
  }
  return make(C::Float, 32);
}

// Hands a coil tensor to Python as a torch.Tensor over the same memory: a bare DLPack capsule
// given to `from_dlpack` (torch.utils.dlpack's), which is several times cheaper per output than
// letting PyTorch negotiate the __dlpack__ protocol of an array object.
nb::object to_torch(const coil::Tensor& t, const nb::object& from_dlpack) {
  auto* keep = new coil::Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<coil::Tensor*>(p); });
  std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
  bool cuda = t.device().kind == coil::Device::Kind::cuda;
  nb::ndarray<> array(t.data(), shape.size(), shape.data(), owner, t.strides().data(), dlpack_dtype(t.dtype()),
                      cuda ? nb::device::cuda::value : nb::device::cpu::value, cuda ? t.device().index : 0);
  return from_dlpack(nb::cast(array, nb::rv_policy::reference));
}

// The caching allocator of one GPU that the adapter's compiled graphs share (CompileOptions::
// device_memory): a training step's graphs reuse one another's freed blocks.
class DeviceMemory {
 public:
  explicit DeviceMemory(int device_index) {
    nb::gil_scoped_release unlocked;
    allocator_ = std::make_shared<coil::cuda::DeviceAllocator>(coil::cuda::Context::open(device_index));
  }
  nb::dict stats() const {
    auto s = allocator_->stats();
    nb::dict d;
    d["live_bytes"] = s.live_bytes;
    d["cached_bytes"] = s.cached_bytes;
    d["driver_allocations"] = s.driver_allocations;
    d["reuses"] = s.reuses;
    d["peak_live_bytes"] = s.peak_live_bytes;
    d["peak_held_bytes"] = s.peak_held_bytes;
    d["requested_bytes"] = s.requested_bytes;
    d["peak_requested_bytes"] = s.peak_requested_bytes;
    return d;
  }
  void release_cached() { allocator_->release_cached(); }
  void reset_peaks() { allocator_->reset_peaks(); }
  std::vector<std::tuple<uint64_t, size_t, size_t>> live_blocks() const { return allocator_->live_blocks(); }
  const std::shared_ptr<coil::cuda::DeviceAllocator>& allocator() const { return allocator_; }

 private:
  std::shared_ptr<coil::cuda::DeviceAllocator> allocator_;
};

// A shape's values, or none where a dim is symbolic.
std::optional<std::vector<int64_t>> constants(const coil::SymShape& shape) {
  std::vector<int64_t> values;
  for (const auto& s : shape) {
    auto v = s.constant();
    if (!v) return std::nullopt;
    values.push_back(*v);
  }
  return values;
}

// The Python references to PyTorch's memory that a run lets go of while it runs without the GIL
// (saved activations that library calls made, as their last readers are enqueued; library calls'
// results): kept until the GIL is next held (before the run's next library call, after the
// run), then dropped together, so that a run takes the GIL once per library call instead of once
// per tensor. PyTorch's allocator sees the frees before anything of the run could reuse them:
// only its library calls allocate from it, and the queue is emptied before each.
class Releases {
 public:
  Releases() = default;
  Releases(const Releases&) = delete;
  Releases& operator=(const Releases&) = delete;
  ~Releases() { flush(); }  // (with the GIL: the last holder is a Compiled, released by Python)

  void drop(PyObject* object) {
    if (PyGILState_Check()) {
      Py_DECREF(object);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(object);
  }
  // With the GIL held.
  void flush() {
    std::vector<PyObject*> now;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      now.swap(pending_);
    }
    for (PyObject* o : now) Py_DECREF(o);
  }

 private:
  std::mutex mutex_;
  std::vector<PyObject*> pending_;
};

// A reference to a Python object that a run holds without the GIL. `releases` (or null: dropped
// at once, under the GIL) defers the drop where the object's memory is PyTorch's: memory of
// coil's pool (a forward's saved activation) must come back while the run can still reuse it.
class Owner {
 public:
  Owner(PyObject* object, std::shared_ptr<Releases> releases) : object_(object), releases_(std::move(releases)) {}  // takes over the reference
  ~Owner() {
    if (releases_) {
      releases_->drop(object_);
      return;
    }
    PyGILState_STATE state = PyGILState_Ensure();
    Py_DECREF(object_);
    PyGILState_Release(state);
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

 private:
  PyObject* object_;
  std::shared_ptr<Releases> releases_;
};

// The adapter's functions for a graph's torch_call nodes (PyTorch's library kernels), called by
// the plan with the GIL taken: each gets its inputs as torch tensors over coil's buffers and
// returns per output (tensor, data pointer) in the declared layout (_library.torch_call); the
// plan holds each tensor until the output's last reader is enqueued.
class PyHostCalls : public coil::HostCalls {
 public:
  PyHostCalls(nb::list functions, const coil::Graph& graph, coil::Device device, std::shared_ptr<Releases> releases)
      : device_(device), releases_(std::move(releases)) {
    for (nb::handle f : functions) functions_.push_back(nb::borrow<nb::object>(f));
    declared_.resize(functions_.size());
    for (const coil::Node& n : graph.nodes) {
      if (n.op != coil::OpKind::TorchCall) continue;
      auto index = static_cast<size_t>(*std::get<coil::SymInt>(n.arg("index").value).constant());
      if (index >= functions_.size()) throw coil::Error("torch_call %" + n.name() + ": no function for index " + std::to_string(index));
      for (const coil::Output& o : n.outputs) {
        auto sizes = constants(o.meta.sizes), strides = constants(o.meta.strides);
        if (!sizes || !strides) throw coil::Error("torch_call %" + n.name() + ": a symbolic output");
        declared_[index].push_back({o.meta.dtype, *sizes, *strides});
      }
    }
  }
  ~PyHostCalls() override {
    nb::gil_scoped_acquire locked;
    functions_.clear();
    from_dlpack_ = nb::object();
  }

  std::vector<coil::Tensor> call(int index, const std::vector<coil::Tensor>& inputs, void*) const override {
    nb::gil_scoped_acquire locked;
    releases_->flush();
    try {
      nb::list tensors;
      for (const auto& t : inputs) tensors.append(to_torch(t, from_dlpack_));
      nb::object results = functions_.at(static_cast<size_t>(index))(tensors);
      const auto& declared = declared_[static_cast<size_t>(index)];
      std::vector<coil::Tensor> out;
      for (nb::handle item : results) {
        if (out.size() == declared.size()) throw coil::Error("a torch call returned more outputs than it declares");
        auto pair = nb::borrow<nb::tuple>(item);
        auto ptr = nb::cast<uintptr_t>(pair[1]);
        auto owner = std::make_shared<Owner>(nb::borrow<nb::object>(pair[0]).release().ptr(), releases_);
        const Declared& d = declared[out.size()];
        out.push_back(coil::Tensor::borrow(reinterpret_cast<void*>(ptr), d.dtype, d.sizes, d.strides, 0, device_,
                                           [owner = std::move(owner)](void*) {}));
      }
      return out;
    } catch (nb::python_error& e) {
      throw coil::Error(std::string("a PyTorch call in the compiled graph failed: ") + e.what());
    }
  }

 private:
  struct Declared {
    coil::DType dtype;
    coil::Shape sizes, strides;
  };
  std::vector<nb::object> functions_;
  std::vector<std::vector<Declared>> declared_;  // per index, its outputs
  coil::Device device_;
  std::shared_ptr<Releases> releases_;
  nb::object from_dlpack_ = nb::module_::import_("torch.utils.dlpack").attr("from_dlpack");
};

// A compiled graph, run on the data pointers of its inputs (in the compiled layout).
class Compiled {
 public:
  Compiled(const std::string& program, const std::string& device, int device_index, bool allow_tf32, bool autotune,
           const std::vector<std::string>& weight_keys, const std::vector<uintptr_t>& weight_ptrs, const std::string& cache_dir,
           const DeviceMemory* memory, nb::list host_calls) {
    if (weight_keys.size() != weight_ptrs.size()) throw coil::Error("weight keys and pointers differ in number");
    {
      nb::gil_scoped_release unlocked;
      graph_ = coil::graph_from_fx(program);
    }
    if (host_calls.size() > 0)
      host_calls_ = std::make_shared<PyHostCalls>(host_calls, graph_,
                                                  coil::Device{device == "cuda" ? coil::Device::Kind::cuda : coil::Device::Kind::cpu,
                                                               device == "cuda" ? device_index : 0},
                                                  releases_);
    nb::gil_scoped_release unlocked;
    coil::CompileOptions options;
    options.device = device;
    options.cuda_device = device_index;
    options.allow_tf32 = allow_tf32;
    options.autotune = autotune;
    options.cache_dir = cache_dir;
    if (memory) options.device_memory = memory->allocator();
    options.host_calls = host_calls_;
    exe_ = coil::compile(graph_, options);
    on_gpu_ = exe_.gpu_plan != nullptr;
    coil::Device where{on_gpu_ ? coil::Device::Kind::cuda : coil::Device::Kind::cpu, on_gpu_ ? device_index : 0};
    auto borrow = [&](const coil::Node& n, uintptr_t ptr) {
      const coil::TensorMeta& m = n.outputs[0].meta;
      auto sizes = constants(m.sizes), strides = constants(m.strides);
      if (!sizes || !strides) throw coil::Error("%" + n.name() + ": a weight of symbolic sizes");
      return coil::Tensor::borrow(reinterpret_cast<void*>(ptr), m.dtype, *sizes, *strides, 0, where);
    };
    for (int i : graph_.input_nodes()) {
      const coil::TensorMeta& m = graph_.nodes[static_cast<size_t>(i)].outputs[0].meta;
      auto sizes = constants(m.sizes), strides = constants(m.strides);
      inputs_.push_back({m.dtype, m.sizes, m.strides, sizes.value_or(coil::Shape{}), strides.value_or(coil::Shape{}), sizes && strides});
    }
    device_ = where;
    std::map<std::string, uintptr_t> given;
    for (size_t i = 0; i < weight_keys.size(); ++i) given[weight_keys[i]] = weight_ptrs[i];
    for (int i : graph_.weight_nodes()) {
      const coil::Node& n = graph_.nodes[static_cast<size_t>(i)];
      const auto& key = std::get<std::string>(n.arg("key").value);
      if (!given.count(key)) throw coil::Error("no pointer for weight '" + key + "'");
      weights_[key] = borrow(n, given.at(key));
    }
  }

  // `owners` (optional): per input, the tensor whose memory it is, handed over (the list is
  // emptied) or None. The run lets go of a handed tensor once its last reader is enqueued, so a
  // caller that held it only through this list (a backward graph's saved activations) has it
  // freed there, in stream order, for the graph's later steps to reuse.
  // `sizes`: the values of the graph's size symbols (in its declaration order) for this call,
  // where it has any (a graph Dynamo traced with dynamic sizes).
  nb::list run(const std::vector<uintptr_t>& ptrs, uintptr_t stream, std::optional<nb::list> owners,
               const std::vector<int64_t>& sizes) const {
    if (sizes.size() != graph_.symbols.size())
      throw coil::Error("the compiled graph has " + std::to_string(graph_.symbols.size()) + " size symbols, got " +
                        std::to_string(sizes.size()) + " values");
    if (ptrs.size() != inputs_.size())
      throw coil::Error("the compiled graph takes " + std::to_string(inputs_.size()) + " inputs, got " + std::to_string(ptrs.size()));
    if (owners && owners->size() != ptrs.size())
      throw coil::Error("the compiled graph takes " + std::to_string(ptrs.size()) + " owners, got " + std::to_string(owners->size()));
    const auto called = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<Owner>> handed(ptrs.size());
    if (owners) {
      for (size_t i = 0; i < ptrs.size(); ++i) {
        nb::object o = (*owners)[i];
        if (o.is_none()) continue;
        // (memory of coil's pool goes back to it as the run goes; PyTorch's waits for the GIL)
        const bool pools = exe_.gpu_plan && exe_.gpu_plan->allocator && exe_.gpu_plan->allocator->owns(ptrs[i]);
        handed[i] = std::make_shared<Owner>(o.release().ptr(), exe_.gpu_plan && !pools ? releases_ : nullptr);
      }
      PyList_SetSlice(owners->ptr(), 0, PY_SSIZE_T_MAX, nullptr);
    }
    std::vector<coil::Tensor> outs;
    struct FlushAfter {  // what the run let go of, dropped once it has the GIL again (errors too)
      Releases& releases;
      ~FlushAfter() { releases.flush(); }
    } flush_after{*releases_};
    {
      nb::gil_scoped_release unlocked;
      std::vector<coil::Tensor> inputs;
      inputs.reserve(ptrs.size());
      std::map<std::string, int64_t> bound;
      for (size_t i = 0; i < sizes.size(); ++i) bound[graph_.symbols[i].name] = sizes[i];
      for (size_t i = 0; i < ptrs.size(); ++i) {
        const Input& in = inputs_[i];
        std::function<void(void*)> release;
        if (handed[i]) release = [owner = std::move(handed[i])](void*) {};  // the owner goes with the last view
        inputs.push_back(in.fixed ? coil::Tensor::borrow(reinterpret_cast<void*>(ptrs[i]), in.dtype, in.fixed_sizes, in.fixed_strides, 0,
                                                         device_, std::move(release))
                                  : coil::Tensor::borrow(reinterpret_cast<void*>(ptrs[i]), in.dtype, coil::eval_all(in.sizes, bound),
                                                         coil::eval_all(in.strides, bound), 0, device_, std::move(release)));
      }
      outs = exe_.run_on_stream(std::move(inputs), weights_, reinterpret_cast<void*>(stream), bound);
    }
    const auto ran = std::chrono::steady_clock::now();
    nb::list result;  // None for an output written over its input (compute_outputs_in_inputs)
    for (const auto& t : outs) result.append(t.defined() ? to_torch(t, from_dlpack_) : nb::none());
    const auto done = std::chrono::steady_clock::now();
    call_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(done - called).count();
    outputs_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(done - ran).count();
    return result;
  }

  std::vector<int> compute_outputs_in_inputs(const std::vector<int>& inputs) { return exe_.compute_outputs_in_inputs(inputs); }

  // CUDA graphs for the runs on device tensors (runtime/cuda/graph_replays.h): `note(message)` is
  // called once per reason a run cannot replay one. False where the graph does not run on a GPU.
  bool use_cuda_graphs(nb::object note) {
    if (!exe_.gpu_plan) return false;
    // (called from runs without the GIL; dropped with it)
    std::shared_ptr<PyObject> held(note.release().ptr(), [](PyObject* o) {
      nb::gil_scoped_acquire locked;
      Py_DECREF(o);
    });
    exe_.gpu_plan->use_cuda_graphs([held](const std::string& message) {
      nb::gil_scoped_acquire locked;
      try {
        nb::handle(held.get())(message);
      } catch (nb::python_error& e) {  // (a warning made an error: the run goes on)
        e.discard_as_unraisable("coil's CUDA graph note");
      }
    });
    return true;
  }

  // Throws the first error of earlier runs on the GPU that finished (none on the CPU).
  void check_pending() const {
    nb::gil_scoped_release unlocked;
    if (exe_.gpu_plan) exe_.gpu_plan->check_pending(false);
  }

  nb::dict stats() const {
    nb::dict d;
    d["frontend_ms"] = exe_.stats.frontend_ms;
    d["codegen_ms"] = exe_.stats.codegen_ms;
    d["build_ms"] = exe_.stats.build_ms;
    d["cache_hit"] = exe_.stats.cache_hit;
    d["loop_kernels"] = exe_.stats.loop_kernels;
    d["extern_calls"] = exe_.stats.extern_calls;
    d["translation_units"] = exe_.stats.translation_units;
    d["tuned_kernels"] = exe_.stats.tuned_kernels;
    d["tuning_cache_hits"] = exe_.stats.tuning_cache_hits;
    d["size_variants"] = exe_.stats.size_variants;
    d["tune_ms"] = exe_.stats.tune_ms;
    d["tuning"] = exe_.stats.tuning;  // CUDA: per kernel tuned in this compile, its candidates' times
    nb::list units;  // CUDA: per NVRTC unit, (its kernels, ms, cache hit)
    for (const auto& u : exe_.stats.units) units.append(nb::make_tuple(nb::cast(u.kernels), u.ms, u.cache_hit));
    d["units"] = units;
    if (exe_.gpu_plan) {  // the host's time in the GPU plan's runs so far (GpuPlan::host_times)
      auto t = exe_.gpu_plan->host_times();
      nb::dict host;
      host["runs"] = t.runs, host["setup_ms"] = t.setup_ns / 1e6, host["loop_ms"] = t.loop_ns / 1e6, host["loops"] = t.loops;
      host["gemm_ms"] = t.gemm_ns / 1e6, host["gemms"] = t.gemms, host["conv_ms"] = t.conv_ns / 1e6, host["convs"] = t.convs;
      host["memory_ms"] = t.memory_ns / 1e6, host["finish_ms"] = t.finish_ns / 1e6;
      host["torch_ms"] = t.torch_ns / 1e6, host["torch_calls"] = t.torch_calls;
      // the whole of Compiled.run (the plan's run and the above within it), and its outputs'
      // making into torch tensors
      host["call_ms"] = static_cast<double>(call_ns_.load()) / 1e6, host["outputs_ms"] = static_cast<double>(outputs_ns_.load()) / 1e6;
      d["host"] = host;
      const auto g = exe_.gpu_plan->graph_stats();  // CUDA graphs (all zero when off)
      nb::dict graphs;
      graphs["captures"] = g.captures, graphs["replays"] = g.replays, graphs["plain_runs"] = g.plain_runs;
      graphs["graphs"] = g.graphs, graphs["copied_inputs"] = g.copied_inputs;
      d["cuda_graphs"] = graphs;
    }
    return d;
  }

  // Per output, the strides its tensors have (Executable::output_strides); None where symbolic.
  nb::list output_strides() const {
    nb::list out;
    for (const auto& strides : exe_.output_strides()) {
      auto values = constants(strides);
      out.append(values ? nb::cast(*values) : nb::none());
    }
    return out;
  }

  // Per output, (sizes, strides, dtype name) of its tensors (Executable::output_layouts); None
  // where symbolic.
  nb::list output_layouts() const {
    nb::list out;
    for (const auto& layout : exe_.output_layouts()) {
      auto sizes = constants(layout.sizes), strides = constants(layout.strides);
      if (sizes && strides) out.append(nb::make_tuple(*sizes, *strides, std::string(coil::dtype_name(layout.dtype))));
      else out.append(nb::none());
    }
    return out;
  }

  std::vector<std::string> symbols() const {
    std::vector<std::string> out;
    for (const auto& s : graph_.symbols) out.push_back(s.name);
    return out;
  }

  std::string graph_text() const { return coil::print_graph(graph_); }
  const std::string& device() const { return exe_.device; }

 private:
  coil::Graph graph_;
  coil::Executable exe_;
  bool on_gpu_ = false;
  struct Input {
    coil::DType dtype;
    coil::SymShape sizes, strides;  // as compiled (expressions of the size symbols, if any)
    coil::Shape fixed_sizes, fixed_strides;  // their values, where static (`fixed`)
    bool fixed = false;
  };
  std::vector<Input> inputs_;
  coil::Device device_;
  coil::TensorMap weights_;
  nb::object from_dlpack_ = nb::module_::import_("torch.utils.dlpack").attr("from_dlpack");
  std::shared_ptr<Releases> releases_ = std::make_shared<Releases>();
  std::shared_ptr<const PyHostCalls> host_calls_;  // (released with the GIL held, as Python objects must be)
  mutable std::atomic<int64_t> call_ns_{0}, outputs_ns_{0};  // host time in run(), for stats()
};

}  // namespace

NB_MODULE(_coil, m) {
  m.doc() = "coil's compiler and runtime, for the torch.compile adapter";
  m.attr("__version__") = COIL_VERSION;
  // Compiled graphs live in torch.compile's caches until the interpreter exits; that is not a leak.
  nb::set_leak_warnings(false);
  nb::exception<coil::Error> coil_error(m, "CoilError");
  // After CoilError: nanobind tries the most recently registered translator first.
  nb::exception<coil::LimitError>(m, "LimitError", coil_error);
  m.def("supported", &coil::frontend::export_target_supported, nb::arg("target"),
        "Whether coil compiles nodes of this target (\"torch.ops.aten.add.Tensor\").");
  // The kernel cache's store (build/cache.h), for the adapter's warm-start entries: verified on
  // read (a torn or corrupted entry is a miss), written atomically.
  auto cache = [](const std::string& dir) {
    return dir.empty() ? coil::build::ArtifactCache::from_environment() : coil::build::ArtifactCache(dir);
  };
  m.def("cache_key", [](const std::vector<std::string>& parts) {
    std::string text;  // each part preceded by its length, so ("ab", "c") != ("a", "bc")
    for (const auto& part : parts) text += std::to_string(part.size()) + ":" + part;
    return coil::build::ArtifactCache::key({text});
  }, nb::arg("parts"), "xxh3-128 of the parts, as hex.");
  m.def("cache_read", [cache](const std::string& dir, const std::string& key, const std::string& ext) -> std::optional<nb::bytes> {
    std::optional<std::string> bytes;
    {
      nb::gil_scoped_release unlocked;
      bytes = cache(dir).read(key, ext);
    }
    if (!bytes) return std::nullopt;
    return nb::bytes(bytes->data(), bytes->size());
  }, nb::arg("dir"), nb::arg("key"), nb::arg("ext"), "An entry's bytes, or None (absent or corrupted). dir \"\": the default cache.");
  m.def("cache_store", [cache](const std::string& dir, const std::string& key, const std::string& ext, nb::bytes bytes) {
    std::string data(bytes.c_str(), bytes.size());
    nb::gil_scoped_release unlocked;
    cache(dir).store(key, ext, data);
  }, nb::arg("dir"), nb::arg("key"), nb::arg("ext"), nb::arg("bytes"), "Writes an entry atomically.");
  nb::class_<DeviceMemory>(m, "DeviceMemory", "One GPU's caching allocator, shared by the compiled graphs given it.")
      .def(nb::init<int>(), nb::arg("device_index"))
      .def("stats", &DeviceMemory::stats, "live_bytes, cached_bytes, driver_allocations, reuses, peak_live_bytes, peak_held_bytes")
      .def("release_cached", &DeviceMemory::release_cached, "Gives every cached block back to the driver.")
      .def("reset_peaks", &DeviceMemory::reset_peaks, "The peaks start again from what is held now.")
      .def("live_blocks", &DeviceMemory::live_blocks, "(address, size, bytes requested) of every block handed out and not freed.");
  nb::class_<Compiled>(m, "Compiled")
      .def(nb::init<const std::string&, const std::string&, int, bool, bool, const std::vector<std::string>&,
                    const std::vector<uintptr_t>&, const std::string&, const DeviceMemory*, nb::list>(),
           nb::arg("program"), nb::arg("device"), nb::arg("device_index") = 0, nb::arg("allow_tf32") = false, nb::arg("autotune") = true,
           nb::arg("weight_keys") = std::vector<std::string>{}, nb::arg("weight_ptrs") = std::vector<uintptr_t>{},
           nb::arg("cache_dir") = "", nb::arg("memory").none() = nb::none(), nb::arg("host_calls") = nb::list())
      .def("run", &Compiled::run, nb::arg("ptrs"), nb::arg("stream") = 0, nb::arg("owners").none() = nb::none(),
           nb::arg("sizes") = std::vector<int64_t>{},
           "Runs on the inputs' data pointers; `owners`: per input its tensor or None, handed over (the list is "
           "emptied) so that the run frees each once its last reader is enqueued; `sizes`: the values of the "
           "graph's size symbols, in their order (symbols()).")
      .def("symbols", &Compiled::symbols, "The graph's size symbols, in the order run() takes their values.")
      .def("check_pending", &Compiled::check_pending, "Raises the first error of earlier GPU runs that finished.")
      .def("compute_outputs_in_inputs", &Compiled::compute_outputs_in_inputs, nb::arg("inputs"),
           "Per output, the index of the input it updates or -1; returns those granted: such an output is "
           "written over its input where the input is used in place, and run() returns None for it.")
      .def("use_cuda_graphs", &Compiled::use_cuda_graphs, nb::arg("note"),
           "Replays CUDA graphs for runs on device tensors; note(message) hears why a run cannot.")
      .def("stats", &Compiled::stats)
      .def("graph_text", &Compiled::graph_text)
      .def("output_strides", &Compiled::output_strides)
      .def("output_layouts", &Compiled::output_layouts, "Per output (sizes, strides, dtype name), or None where symbolic.")
      .def_prop_ro("device", &Compiled::device);
}
