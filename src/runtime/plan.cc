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

std::vector<Tensor> TemporaryCache::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(blocks_, {});
}

void TemporaryCache::give(std::vector<Tensor> blocks) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : blocks) blocks_.push_back(std::move(b));
}

std::vector<Tensor> Plan::run(const TensorMap& inputs, const TensorMap& weights) const {
  auto symbols = bind_symbols(graph, inputs);
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
  std::vector<Tensor> pool = temporaries->take();  // free temporaries' memory (u8, flat): earlier runs', then dead ones
  for (size_t b = 0; b < buffers.size(); ++b) {
    const loop::Buffer& buf = buffers[b];
    if (held[b].defined()) {
      ptrs[b] = held[b].data();
      continue;
    }
    if (memory.first_use[b] < 0 && buf.role != loop::Buffer::Role::output) continue;
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
    } else {
      run_extern_cpu(std::get<loop::ExternCall>(lowered.program.kernels[k]), lowered.program, ptrs, symbols,
                     onednn::Site{primitives.get(), k, symbol_values});
    }
    for (int b : memory.release_after[k]) {
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
