#include "runtime/plan.h"

#include "runtime/cpu_extern.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "support/check.h"

namespace coil {

std::vector<int64_t> eval_all(const SymShape& s, const std::map<std::string, int64_t>& symbols) {
  std::vector<int64_t> out;
  for (const auto& d : s) out.push_back(d.eval(symbols));
  return out;
}

// A tensor whose element [0, ...] sits at the layout the kernels were compiled for.
Tensor bind_external(const Tensor& t, const loop::Buffer& b, const std::map<std::string, int64_t>& symbols,
                     const std::string& what) {
  if (t.dtype() != b.dtype) fail("{}: expected dtype {}, got {}", what, dtype_name(b.dtype), dtype_name(t.dtype()));
  auto sizes = eval_all(b.sizes, symbols);
  if (t.sizes() != sizes) fail("{}: expected shape {}, got {}", what, shape_to_string(sizes), shape_to_string(t.sizes()));
  if (t.strides() == eval_all(b.strides, symbols) || t.numel() == 0) return t;
  return t.contiguous_copy();  // the kernels assume the declared (contiguous) layout
}

int64_t buffer_elements(const loop::Buffer& buf, const std::map<std::string, int64_t>& symbols) {
  return std::max<int64_t>(span_of(eval_all(buf.sizes, symbols), eval_all(buf.strides, symbols), buf.offset.eval(symbols)), 1);
}

std::optional<int64_t> static_buffer_elements(const loop::Buffer& buf) {
  auto constant = [](const SymInt& v) { return v.constant().has_value(); };
  if (!std::all_of(buf.sizes.begin(), buf.sizes.end(), constant) || !std::all_of(buf.strides.begin(), buf.strides.end(), constant) ||
      !constant(buf.offset))
    return std::nullopt;
  return buffer_elements(buf, {});
}

size_t buffer_bytes(const loop::Buffer& buf, const std::map<std::string, int64_t>& symbols) {
  return static_cast<size_t>(buffer_elements(buf, symbols)) * static_cast<size_t>(dtype_size(buf.dtype));
}

std::vector<int> call_outputs(const loop::ExternCall& call) {
  std::vector<int> out{call.output};
  out.insert(out.end(), call.more_outputs.begin(), call.more_outputs.end());
  return out;
}

std::vector<bool> hosted_buffers(const loop::Program& p) {
  std::vector<bool> hosted(p.buffers.size(), false);
  for (const auto& k : p.kernels)
    if (const auto* e = std::get_if<loop::ExternCall>(&k); e && e->kind == loop::ExternKind::torch)
      for (int b : call_outputs(*e)) hosted[static_cast<size_t>(b)] = true;
  return hosted;
}

std::vector<Tensor> host_call(const HostCalls* calls, const loop::ExternCall& call, const loop::Program& p,
                              const std::vector<Tensor>& inputs, const std::map<std::string, int64_t>& symbols, void* stream) {
  if (!calls) fail("{}: a torch call, with nothing to run it", call.name);
  std::vector<Tensor> results = calls->call(static_cast<int>(call.params.at(0)), inputs, stream);
  const std::vector<int> outputs = call_outputs(call);
  if (results.size() != outputs.size()) fail("{}: the call returned {} tensors where {} were declared", call.name, results.size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const loop::Buffer& b = p.buffers[static_cast<size_t>(outputs[i])];
    const Tensor& t = results[i];
    auto sizes = eval_all(b.sizes, symbols), strides = eval_all(b.strides, symbols);
    if (!t.defined() || t.dtype() != b.dtype || t.sizes() != sizes || (t.numel() > 0 && t.strides() != strides))
      fail("{}: result {} is {}{} strides {} where the compiled graph has {}{} strides {}", call.name, i,
           t.defined() ? dtype_name(t.dtype()) : "nothing", t.defined() ? shape_to_string(t.sizes()) : "",
           t.defined() ? shape_to_string(t.strides()) : "", dtype_name(b.dtype), shape_to_string(sizes), shape_to_string(strides));
  }
  return results;
}

std::vector<Tensor> TemporaryCache::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(blocks_, {});
}

void TemporaryCache::give(std::vector<Tensor> blocks) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : blocks) blocks_.push_back(std::move(b));
}

std::vector<Tensor> Plan::run(const TensorMap& inputs, const TensorMap& weights, const std::map<std::string, int64_t>& given) const {
  auto symbols = bind_symbols(graph, inputs, given);
  std::vector<int64_t> symbol_values;
  for (const auto& s : graph.symbols) symbol_values.push_back(symbols.at(s.name));
  const auto& buffers = lowered.program.buffers;
  std::vector<Tensor> held(buffers.size());
  std::vector<void*> ptrs(buffers.size(), nullptr);

  auto inputs_nodes = graph.input_nodes();
  for (size_t i = 0; i < inputs_nodes.size(); ++i) {
    int b = lowered.input_buffers[i];
    const std::string& name = graph.nodes[static_cast<size_t>(inputs_nodes[i])].name();
    held[static_cast<size_t>(b)] = bind_external(inputs.at(name), buffers[static_cast<size_t>(b)], symbols, "input %" + name);
  }
  auto weight_nodes = graph.weight_nodes();
  for (size_t i = 0; i < weight_nodes.size(); ++i) {
    int b = lowered.weight_buffers[i];
    const Node& node = graph.nodes[static_cast<size_t>(weight_nodes[i])];
    const auto& key = std::get<std::string>(node.arg("key").value);
    auto it = weights.find(key);
    if (it == weights.end()) fail("weight '{}' (for %{}) was not given", key, node.name());
    held[static_cast<size_t>(b)] = bind_external(it->second, buffers[static_cast<size_t>(b)], symbols, "weight '" + key + "'");
  }
  // Outputs computed over the inputs they update, where the input was borrowed, not copied.
  std::vector<bool> in_input(lowered.output_buffers.size(), false);
  for (size_t o = 0; o < output_over_input.size(); ++o) {
    if (output_over_input[o] < 0) continue;
    auto i = static_cast<size_t>(output_over_input[o]);
    auto ib = static_cast<size_t>(lowered.input_buffers[i]), ob = static_cast<size_t>(lowered.output_buffers[o]);
    if (held[ib].data() != inputs.at(graph.nodes[static_cast<size_t>(inputs_nodes[i])].name()).data()) continue;
    held[ob] = held[ib];
    in_input[o] = true;
  }
  // Buffers no step touches (a per-row result that fusion kept in registers) get no memory.
  // Outputs and constants are allocated up front; temporaries just before their first step,
  // from the memory of temporaries already dead when it fits.
  // Storage elements a buffer's layout addresses (at least one).
  auto elements_of = [&](const loop::Buffer& buf) { return buffer_elements(buf, symbols); };
  std::vector<std::vector<int>> allocate_before(kernels.size());
  std::vector<bool> hosted = hosted_buffers(lowered.program);  // (taken over by in-place steps below)
  std::vector<Tensor> pool = temporaries->take();  // free temporaries' memory (u8, flat): earlier runs', then dead ones
  for (size_t b = 0; b < buffers.size(); ++b) {
    const loop::Buffer& buf = buffers[b];
    if (held[b].defined()) {
      ptrs[b] = held[b].data();
      continue;
    }
    if (memory.first_use[b] < 0 && buf.role != loop::Buffer::Role::output) continue;
    if (hosted[b]) continue;
    if (buf.role == loop::Buffer::Role::temporary) {
      allocate_before[static_cast<size_t>(memory.first_use[b])].push_back(static_cast<int>(b));
      continue;
    }
    // Kernels write every element they later read; only constants start with values.
    Tensor flat = Tensor::empty_strided(buf.dtype, {elements_of(buf)}, {1});
    for (size_t i = 0; i < buf.data.size(); ++i) flat.store(static_cast<int64_t>(i), buf.data[i]);
    ptrs[b] = flat.data();
    held[b] = flat.view(eval_all(buf.sizes, symbols), eval_all(buf.strides, symbols), buf.offset.eval(symbols));
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int b : allocate_before[k]) {
      if (int a = memory.in_place_of[static_cast<size_t>(b)]; a >= 0) {  // overwrites its dying operand
        held[static_cast<size_t>(b)] = held[static_cast<size_t>(a)];
        hosted[static_cast<size_t>(b)] = hosted[static_cast<size_t>(a)];
        ptrs[static_cast<size_t>(b)] = ptrs[static_cast<size_t>(a)];
        continue;
      }
      const loop::Buffer& buf = buffers[static_cast<size_t>(b)];
      int64_t bytes = elements_of(buf) * static_cast<int64_t>(dtype_size(buf.dtype));
      auto fit = pool.end();  // the smallest free block that holds it
      for (auto it = pool.begin(); it != pool.end(); ++it)
        if (it->numel() >= bytes && (fit == pool.end() || it->numel() < fit->numel())) fit = it;
      if (fit != pool.end()) {
        held[static_cast<size_t>(b)] = *fit;
        pool.erase(fit);
      } else {
        held[static_cast<size_t>(b)] = Tensor::empty_strided(DType::u8, {bytes}, {1});
      }
      ptrs[static_cast<size_t>(b)] = held[static_cast<size_t>(b)].data();
    }
    if (kernels[k]) {
      int64_t status[3] = {0, 0, 0};
      kernels[k](ptrs.data(), symbol_values.data(), status);
      if (status[0]) {
        const auto& lk = std::get<loop::LoopKernel>(lowered.program.kernels[k]);
        if (status[0] == 2) fail("integer division by zero (computing %{})", fmt::join(lk.origins, ", %"));
        fail("index {} is out of bounds for a dimension of size {} (computing %{})", status[1], status[2],
             fmt::join(lk.origins, ", %"));
      }
    } else if (const auto& call = std::get<loop::ExternCall>(lowered.program.kernels[k]); call.kind == loop::ExternKind::torch) {
      std::vector<Tensor> in;
      for (const auto& v : call.inputs) {
        const loop::Buffer& b = buffers[static_cast<size_t>(v.buffer)];
        in.push_back(Tensor::borrow(ptrs[static_cast<size_t>(v.buffer)], b.dtype, eval_all(v.sizes, symbols), eval_all(v.strides, symbols),
                                    v.offset.eval(symbols)));
      }
      std::vector<Tensor> results = host_call(host_calls.get(), call, lowered.program, in, symbols, nullptr);
      const std::vector<int> outs = call_outputs(call);
      for (size_t i = 0; i < outs.size(); ++i) {
        auto b = static_cast<size_t>(outs[i]);
        held[b] = std::move(results[i]);
        ptrs[b] = static_cast<char*>(held[b].data()) - buffers[b].offset.eval(symbols) * static_cast<int64_t>(dtype_size(buffers[b].dtype));
      }
    } else {
      run_extern_cpu(call, lowered.program, ptrs, symbols, onednn::Site{primitives.get(), k, symbol_values});
    }
    for (int b : memory.release_after[k]) {
      if (hosted[static_cast<size_t>(b)]) {  // the embedder's memory goes back to it
        held[static_cast<size_t>(b)] = Tensor();
        ptrs[static_cast<size_t>(b)] = nullptr;
        continue;
      }
      pool.push_back(std::move(held[static_cast<size_t>(b)]));
      held[static_cast<size_t>(b)] = Tensor();
      ptrs[static_cast<size_t>(b)] = nullptr;
    }
  }
  std::vector<Tensor> out;
  for (size_t o = 0; o < lowered.output_buffers.size(); ++o)
    out.push_back(in_input[o] ? Tensor() : held[static_cast<size_t>(lowered.output_buffers[o])]);
  temporaries->give(std::move(pool));
  return out;
}

}  // namespace coil
