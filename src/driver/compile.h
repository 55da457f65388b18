// THE pipeline, top to bottom: decompose -> lower -> fuse -> CPU codegen -> build -> Plan;
// `compile()` is declared in include/coil/compile.h. COIL_DEBUG=graph,loop,fusion,code writes
// each stage to stderr.
#pragma once
#include <chrono>
#include <functional>
#include <string>

#include "coil/compile.h"
#include "coil/graph.h"
#include "codegen/cpu/cpu_codegen.h"
#include "codegen/cuda/cuda_codegen.h"
#include "runtime/cuda/context.h"
#include "runtime/plan.h"

namespace coil {

// Milliseconds since `t0` (the compile stages' timings).
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// What code is generated for: the CPU, or a CUDA device (real or a preset).
struct Target {
  bool cuda = false;
  cuda::DeviceInfo device;  // when cuda
  // Every extern call as a loop kernel (tests of that path on the CPU). The CUDA target always
  // converts what cuBLASLt does not take.
  bool externs_as_loops = false;
  // Convolutions as im2col + GEMM (schedule/conv_to_gemm.h). The CUDA target always does it.
  bool conv_as_gemm = false;
  // Convolution chains in channels-last layouts (CPU; the CUDA target with library convolutions always).
  bool channels_last = false;
  // CUDA: whether a convolution stays a library call (cuDNN offers plans for it; compile_cuda
  // asks it) instead of im2col + GEMM or a loop kernel. Empty: none does.
  std::function<bool(const loop::ExternCall&, const loop::Program&)> library_convolution;
  // CUDA: a convolution cuDNN could take that stays coil's direct loop kernel (measured faster:
  // driver/conv_choice.h) rather than becoming im2col + GEMM. Empty: none.
  std::function<bool(const loop::ExternCall&, const loop::Program&)> loop_convolution;
  // CUDA: the fused convolutions epilogue fusion is about to ask library_convolution about, all
  // at once (schedule/fuse_conv_epilogues.h), so that cuDNN builds their plans in parallel.
  std::function<void(const std::vector<std::pair<loop::ExternCall, loop::Program>>&)> prefetch_convolutions;
  std::string kernel_prefix;  // prepended to kernel names (several graphs in one unit)
  int cuda_candidate = -1;    // CompileOptions::cuda_candidate
  // CUDA: row kernels run inside the few-row products that read them (schedule/fuse_gemv_prologues.h);
  // COIL_GEMV_PROLOGUES=0 turns that off for the GPU compile (to measure both on one device).
  bool gemv_prologues = true;
};

// Everything before the system compiler or NVRTC: the decomposed graph, the fused loop program
// and the generated code (what `coil compile --emit` prints).
struct Generated {
  Graph graph;
  LoweredGraph lowered;
  codegen::CpuSource source;   // CPU target
  codegen::CudaSource cuda;    // CUDA target
  CompileStats stats;  // frontend and codegen times
};
Generated generate(const Graph& graph, const Target& target = {});
Executable compile_cpu(const Graph& graph, const CompileOptions& options);
// compile_cuda.cc: NVRTC in parallel, modules loaded into `context`, the GPU plan.
Executable compile_cuda(const Graph& graph, const CompileOptions& options, std::shared_ptr<cuda::Context> context);
// Whether the CUDA runtime runs this extern call through cuBLASLt (else it becomes a loop kernel).
bool cublas_takes(const loop::ExternCall& call, const loop::Program& program);
// Whether the CPU runtime runs this extern call through a library (matrix products of float
// dtypes: OpenBLAS; f32/f16/bf16 convolutions: oneDNN), else it becomes a loop kernel.
bool cpu_library_takes(const loop::ExternCall& call, const loop::Program& program);
// Whether COIL_DEBUG names `stage` (comma-separated stages, or "all").
bool debug_enabled(std::string_view stage);

}  // namespace coil
