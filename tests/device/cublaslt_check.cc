// The GPU check of src/runtime/cuda/cublaslt (CI has no GPU): many layouts, dtypes and
// epilogues of GemmProblem run through the real cuBLASLt and are compared with a double
// reference; memory around D outside the product must stay untouched. Built and run on the
// device machine by tests/device/cublaslt_check.sh with the CUDA runtime for memory.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coil/error.h"
#include "runtime/cuda/cublaslt.h"
#include "support/half.h"

using namespace coil;
using namespace coil::cuda;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  failures += ok ? 0 : 1;
}

void check_cuda(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw Error(std::string(call) + ": " + cudaGetErrorString(rc));
}

double round_to(DType t, double x) {
  switch (t) {
    case DType::f16: return f16_bits_to_double(f16_bits_from_double(x));
    case DType::bf16: return bf16_bits_to_double(bf16_bits_from_double(x));
    case DType::f32: return static_cast<float>(x);
    default: return x;
  }
}

std::vector<char> encode(DType t, const std::vector<double>& v) {
  std::vector<char> bytes(v.size() * static_cast<size_t>(dtype_size(t)));
  for (size_t i = 0; i < v.size(); ++i) {
    char* p = bytes.data() + i * static_cast<size_t>(dtype_size(t));
    if (t == DType::f64) std::memcpy(p, &v[i], 8);
    if (t == DType::f32) {
      float f = static_cast<float>(v[i]);
      std::memcpy(p, &f, 4);
    }
    if (t == DType::f16) {
      uint16_t h = f16_bits_from_double(v[i]);
      std::memcpy(p, &h, 2);
    }
    if (t == DType::bf16) {
      uint16_t h = bf16_bits_from_double(v[i]);
      std::memcpy(p, &h, 2);
    }
  }
  return bytes;
}

std::vector<double> decode(DType t, const std::vector<char>& bytes) {
  size_t n = bytes.size() / static_cast<size_t>(dtype_size(t));
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const char* p = bytes.data() + i * static_cast<size_t>(dtype_size(t));
    if (t == DType::f64) std::memcpy(&v[i], p, 8);
    if (t == DType::f32) {
      float f;
      std::memcpy(&f, p, 4);
      v[i] = f;
    }
    if (t == DType::f16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v[i] = f16_bits_to_double(h);
    }
    if (t == DType::bf16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v[i] = bf16_bits_to_double(h);
    }
  }
  return v;
}

// Elements an operand spans: 1 + the largest offset.
int64_t span(int64_t batch, int64_t rows, int64_t cols, int64_t bs, int64_t rs, int64_t cs) {
  if (batch == 0 || rows == 0 || cols == 0) return 0;
  return 1 + (batch - 1) * bs + (rows - 1) * rs + (cols - 1) * cs;
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { check_cuda(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// Runs p (pointers offset by `offset_elems` from 256-byte-aligned allocations) and returns the
// worst error relative to the tolerance (<= 1 passes); -1 when memory outside D changed.
double run(const CublasLt& lt, const GemmProblem& p, void* workspace, size_t workspace_bytes, int offset_elems = 0,
           bool in_place = false, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  DType t = p.dtype;
  auto fill = [&](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (auto& x : v) x = round_to(t, dist(rng));
    return v;
  };
  int64_t off = offset_elems;
  auto a = fill(off + span(p.batch, p.m, p.k, p.a_bs, p.a_rs, p.a_cs));
  auto b = fill(off + span(p.batch, p.k, p.n, p.b_bs, p.b_rs, p.b_cs));
  auto c = fill(off + span(p.batch, p.m, p.n, p.c_bs, p.c_rs, p.c_cs));
  auto bias = fill(off + p.n);
  std::vector<double> d(static_cast<size_t>(off + span(p.batch, p.m, p.n, p.d_bs, p.d_rs, p.d_cs) + 64), 7.0);
  if (in_place) d = c, d.resize(d.size() + 64, 7.0);
  size_t es = static_cast<size_t>(dtype_size(t));
  DeviceBuffer da(a.size() * es), db(b.size() * es), dc(c.size() * es), dd(d.size() * es), dbias(bias.size() * es);
  auto up = [&](DeviceBuffer& buf, const std::vector<double>& v) {
    auto bytes = encode(t, v);
    check_cuda(cudaMemcpy(buf.p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  };
  up(da, a), up(db, b), up(dc, c), up(dd, d), up(dbias, bias);
  auto at = [&](DeviceBuffer& buf) { return static_cast<char*>(buf.p) + off * static_cast<int64_t>(es); };
  lt.gemm(p, at(da), at(db), in_place ? at(dd) : at(dc), at(dd), at(dbias), workspace, workspace_bytes, nullptr);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<char> bytes(d.size() * es);
  check_cuda(cudaMemcpy(bytes.data(), dd.p, bytes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<double> got = decode(t, bytes);

  double rtol = t == DType::f64 ? 1e-12 : t == DType::f32 ? (p.tf32 ? 4e-3 : 2e-6) : t == DType::f16 ? 2e-3 : 1e-2;
  // cuBLASLt's f64 GELU is good to about 1e-10, not to fp64's last bits (seen on an H200).
  if (t == DType::f64 && (p.epilogue == Epilogue::gelu || p.epilogue == Epilogue::bias_gelu)) rtol = 1e-9;
  std::vector<bool> written(got.size(), false);
  double worst = 0;
  const std::vector<double>& cin = in_place ? d : c;
  for (int64_t bi = 0; bi < p.batch; ++bi)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          double x = a[static_cast<size_t>(off + bi * p.a_bs + i * p.a_rs + l * p.a_cs)] *
                     b[static_cast<size_t>(off + bi * p.b_bs + l * p.b_rs + j * p.b_cs)];
          acc += x;
          mag += std::fabs(x);
        }
        double v = p.alpha * acc;
        mag = std::fabs(p.alpha) * mag;
        if (p.beta != 0) {
          int64_t ci =
              in_place ? off + bi * p.d_bs + i * p.d_rs + j * p.d_cs : off + bi * p.c_bs + i * p.c_rs + j * p.c_cs;
          v += p.beta * cin[static_cast<size_t>(ci)];
          mag += std::fabs(p.beta * cin[static_cast<size_t>(ci)]);
        }
        if (epilogue_has_bias(p.epilogue)) v += bias[static_cast<size_t>(off + j)], mag += 1;
        if (p.epilogue == Epilogue::relu || p.epilogue == Epilogue::bias_relu) v = std::max(v, 0.0);
        if (p.epilogue == Epilogue::gelu || p.epilogue == Epilogue::bias_gelu) v = gelu_tanh(v);
        size_t di = static_cast<size_t>(off + bi * p.d_bs + i * p.d_rs + j * p.d_cs);
        written[di] = true;
        double err = std::fabs(got[di] - v) / (rtol * (mag + std::fabs(v)) + 1e-300);
        if (!(err <= worst)) worst = err;  // NaN sticks
      }
  for (size_t i = 0; i < got.size(); ++i)
    if (!written[i] && got[i] != d[i]) return -1;
  return worst;
}

GemmProblem contiguous(DType t, int64_t m, int64_t n, int64_t k) {
  GemmProblem p{.dtype = t, .m = m, .n = n, .k = k};
  p.a_rs = k;
  p.b_rs = p.c_rs = p.d_rs = n;
  p.a_cs = p.b_cs = p.c_cs = p.d_cs = 1;
  return p;
}

}  // namespace

int main() {
  try {
    auto lt = CublasLt::load();
    std::printf("cuBLASLt %s from %s\n", lt->version().c_str(), lt->path().c_str());
    size_t ws_bytes = 32u << 20;
    DeviceBuffer ws(ws_bytes);

    struct Case {
      std::string name;
      GemmProblem p;
      int offset = 0;
      bool in_place = false;
    };
    std::vector<Case> cases;
    for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      for (bool tf32 : {false, true}) {
        if (tf32 && t != DType::f32) continue;
        std::string tag = std::string(dtype_name(t)) + (tf32 ? "+tf32" : "");
        auto add = [&](std::string name, GemmProblem p, int offset = 0, bool in_place = false) {
          p.tf32 = tf32;
          cases.push_back({tag + " " + name, p, offset, in_place});
        };
        add("contiguous 64x96x48", contiguous(t, 64, 96, 48));
        add("odd sizes 37x53x29", contiguous(t, 37, 53, 29));
        GemmProblem p = contiguous(t, 64, 128, 96);
        p.b_rs = 1, p.b_cs = 96, p.epilogue = Epilogue::bias_gelu;
        add("linear (B = w^T) + bias_gelu", p);
        p = contiguous(t, 40, 24, 32);
        p.a_rs = 1, p.a_cs = 40, p.epilogue = Epilogue::relu;
        add("A transposed + relu", p);
        p = contiguous(t, 40, 24, 32);
        p.a_rs = 1, p.a_cs = 40, p.b_rs = 1, p.b_cs = 32, p.epilogue = Epilogue::gelu;
        add("both transposed + gelu", p);
        p = contiguous(t, 32, 48, 16);
        p.batch = 3, p.a_bs = 32 * 16, p.b_bs = 0, p.d_bs = 32 * 48, p.epilogue = Epilogue::bias;
        add("batched, shared B + bias", p);
        p = contiguous(t, 32, 48, 16);
        p.a_rs = 24, p.b_rs = 56, p.d_rs = 64, p.c_rs = 72, p.alpha = 2, p.beta = 0.5;
        add("padded leading dimensions, alpha 2, beta 0.5 with C", p);
        p = contiguous(t, 32, 48, 16);
        p.batch = 4, p.a_bs = 32 * 16, p.b_bs = 16 * 48, p.d_bs = 32 * 48, p.c_bs = 0, p.beta = 1;
        p.epilogue = Epilogue::bias_relu;
        add("batched, C broadcast over batches, beta 1 + bias_relu", p);
        p = contiguous(t, 32, 48, 16);
        p.beta = 1, p.c_rs = 48;
        add("in place C == D, beta 1", p, 0, true);
        p = contiguous(t, 1, 80, 64);
        p.a_rs = 0, p.d_rs = 0;
        add("m == 1 (row vector)", p);
        p = contiguous(t, 80, 1, 64);
        p.b_rs = 3, p.b_cs = 0, p.d_cs = 5;
        add("n == 1, strided column vector", p);
        p = contiguous(t, 16, 24, 8);
        p.batch = 3, p.a_bs = 16 * 8, p.b_bs = 8 * 24, p.d_rs = 3 * 24, p.d_bs = 24;
        add("D interleaved by batch ([m, batch, n] memory)", p);
        add("pointers offset by one element", contiguous(t, 64, 64, 64), 1);
        p = contiguous(t, 64, 64, 64);
        p.epilogue = Epilogue::bias;
        add("pointers offset by one element + bias", p, 1);
      }
    }
    for (const Case& c : cases) {
      std::string why;
      double worst = 0;
      try {
        worst = run(*lt, c.p, ws.p, ws_bytes, c.offset, c.in_place);
      } catch (const Error& e) {
        why = e.what();
      }
      if (!why.empty())
        expect(false, c.name + ": " + why);
      else if (worst < 0)
        expect(false, c.name + ": wrote outside D");
      else
        expect(worst <= 1, c.name + " (error/tolerance " + std::to_string(worst) + ")");
    }
    expect(run(*lt, contiguous(DType::f16, 64, 96, 48), nullptr, 0) <= 1, "no workspace");
    std::printf("algorithms cached: %zu\n", lt->cached_algorithms());

    // Threads sharing the handle and the cache (each syncs the device, so they interleave).
    std::vector<std::thread> threads;
    std::vector<double> worst(4, 0);
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&, i] {
        for (int r = 0; r < 5; ++r) {
          double w =
              run(*lt, contiguous(DType::bf16, 64 + 8 * (r % 2), 64, 64), nullptr, 0, 0, false, 100u + 10u * i + r);
          if (!(w <= worst[i])) worst[i] = w;
        }
      });
    for (auto& t : threads) t.join();
    expect(worst[0] <= 1 && worst[1] <= 1 && worst[2] <= 1 && worst[3] <= 1 && worst[0] >= 0, "4 threads x 5 products");

    // k == 0 is refused; empty problems do nothing.
    GemmProblem k0 = contiguous(DType::f32, 8, 8, 0);
    bool refused = false;
    try {
      lt->gemm(k0, ws.p, ws.p, nullptr, ws.p, nullptr, nullptr, 0, nullptr);
    } catch (const Error& e) {
      refused = std::string(e.what()).find("k == 0") != std::string::npos;
    }
    expect(refused, "k == 0 is refused");
    lt->gemm(contiguous(DType::f32, 0, 8, 8), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr);

    // A large bf16 product: the heuristic's algorithm should run near the chip's peak.
    int64_t big = 8192;
    GemmProblem p = contiguous(DType::bf16, big, big, big);
    DeviceBuffer a(static_cast<size_t>(big * big * 2)), b(static_cast<size_t>(big * big * 2)),
        d(static_cast<size_t>(big * big * 2));
    check_cuda(cudaMemset(a.p, 0x3c, static_cast<size_t>(big * big * 2)), "cudaMemset");
    check_cuda(cudaMemset(b.p, 0x3c, static_cast<size_t>(big * big * 2)), "cudaMemset");
    for (int i = 0; i < 3; ++i) lt->gemm(p, a.p, b.p, nullptr, d.p, nullptr, ws.p, ws_bytes, nullptr);
    cudaEvent_t start, stop;
    cudaEventCreate(&start), cudaEventCreate(&stop);
    cudaEventRecord(start);
    for (int i = 0; i < 10; ++i) lt->gemm(p, a.p, b.p, nullptr, d.p, nullptr, ws.p, ws_bytes, nullptr);
    cudaEventRecord(stop);
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    std::printf("bf16 %ldx%ldx%ld: %.0f TFLOP/s\n", big, big, big, 2.0 * big * big * big * 10 / (ms * 1e-3) / 1e12);

    lt.reset();
    auto again = CublasLt::load();  // unloading and loading again
    expect(run(*again, contiguous(DType::f32, 32, 32, 32), nullptr, 0) <= 1, "loaded again after unloading");
  } catch (const Error& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
