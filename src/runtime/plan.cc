#include "runtime/plan.h"

#include "runtime/cpu_extern.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>

#include "support/check.h"

namespace coil {

namespace {

// Storage elements a layout addresses, offset included.
int64_t span_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    last += (sizes[i] - 1) * strides[i];
  }
  return last + 1;
}

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

}  // namespace

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
  // Buffers no step touches (a per-row result that fusion kept in registers) get no memory.
  std::vector<bool> touched(buffers.size(), false);
  for (int b : lowered.output_buffers) touched[static_cast<size_t>(b)] = true;
  for (const auto& k : lowered.program.kernels) {
    if (const auto* e = std::get_if<loop::ExternCall>(&k)) {
      touched[static_cast<size_t>(e->output)] = true;
      for (const auto& v : e->inputs) touched[static_cast<size_t>(v.buffer)] = true;
      continue;
    }
    const auto& lk = std::get<loop::LoopKernel>(k);
    std::function<void(const loop::ExprRef&)> mark = [&](const loop::ExprRef& x) {
      if (x->kind() == loop::Expr::Kind::load) touched[static_cast<size_t>(x->buffer())] = true;
      for (const auto& o : x->operands()) mark(o);
    };
    for (const auto& r : lk.reductions) mark(r.value);
    for (const auto& st : lk.stores) {
      touched[static_cast<size_t>(st.buffer)] = true;
      mark(st.value);
      if (st.dynamic) mark(st.dynamic);
    }
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!touched[b] && !held[b].defined()) continue;
    if (held[b].defined()) {
      ptrs[b] = held[b].data();
      continue;
    }
    const loop::Buffer& buf = buffers[b];
    auto sizes = eval_all(buf.sizes, symbols), strides = eval_all(buf.strides, symbols);
    int64_t offset = buf.offset.eval(symbols);
    // Kernels write every element they later read; only constants start with values.
    Shape flat_shape = {std::max<int64_t>(span_of(sizes, strides, offset), 1)};
    Tensor flat = Tensor::empty_strided(buf.dtype, flat_shape, {1});
    for (size_t i = 0; i < buf.data.size(); ++i) flat.store(static_cast<int64_t>(i), buf.data[i]);
    ptrs[b] = flat.data();
    held[b] = flat.view(sizes, strides, offset);
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k]) {
      int64_t status[3] = {0, 0, 0};
      kernels[k](ptrs.data(), symbol_values.data(), status);
      if (status[0]) {
        const auto& lk = std::get<loop::LoopKernel>(lowered.program.kernels[k]);
        fail("index {} is out of bounds for a dimension of size {} (computing %{})", status[1], status[2],
             fmt::join(lk.origins, ", %"));
      }
    } else {
      run_extern_cpu(std::get<loop::ExternCall>(lowered.program.kernels[k]), lowered.program, ptrs, symbols);
    }
  }
  std::vector<Tensor> out;
  for (int b : lowered.output_buffers) out.push_back(held[static_cast<size_t>(b)]);
  return out;
}

}  // namespace coil
