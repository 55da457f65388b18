#include "runtime/cuda/sized_run.h"

#include <algorithm>

#include "runtime/plan.h"

namespace coil {

SizedRun evaluate_sized_run(const loop::Program& p, const std::vector<SymbolDecl>& graph_symbols, std::vector<int64_t> values,
                            const std::vector<void*>& functions, const std::vector<codegen::CudaKernel>& kernels,
                            const std::vector<std::vector<SizedVariant>>& variants) {
  SizedRun r;
  for (size_t i = 0; i < graph_symbols.size() && i < values.size(); ++i) r.symbols[graph_symbols[i].name] = values[i];
  r.values = std::move(values);
  r.buffers.reserve(p.buffers.size());
  for (const loop::Buffer& b : p.buffers) {
    SizedRun::BufferAt& at = r.buffers.emplace_back();
    at.sizes = eval_all(b.sizes, r.symbols);
    at.strides = eval_all(b.strides, r.symbols);
    at.offset = b.offset.eval(r.symbols);
    at.elements = std::max<int64_t>(span_of(at.sizes, at.strides, at.offset), 1);
    at.bytes = static_cast<size_t>(at.elements) * static_cast<size_t>(dtype_size(b.dtype));
  }
  r.launches.resize(p.kernels.size());
  for (size_t k = 0; k < p.kernels.size() && k < functions.size(); ++k) {
    if (!functions[k]) continue;
    SizedRun::LaunchAt& launch = r.launches[k];
    launch.function = functions[k], launch.info = &kernels[k];
    if (k < variants.size() && !variants[k].empty()) {
      const std::vector<int64_t> bucket = codegen::size_bucket(kernels[k], r.values);
      for (const SizedVariant& v : variants[k])
        if (v.bucket == bucket) launch.function = v.function, launch.info = &v.info;
    }
    launch.units = launch.info->launch.units.eval(r.symbols);
  }
  return r;
}

}  // namespace coil
