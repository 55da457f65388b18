#include "runtime/cpu_convert.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "support/check.h"
#include "support/half.h"

namespace coil {

namespace {

// Whether the layout addresses exactly its elements, with no gaps or overlaps: dense in some
// order of its dims (size-1 dims, which address nothing more, aside).
bool dense_layout(const Shape& sizes, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.emplace_back(strides[d], sizes[d]);
  std::sort(dims.begin(), dims.end());
  int64_t expect = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expect) return false;
    expect *= size;
  }
  return true;
}

void bf16_to_f32(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &bits, sizeof bits);
  }
}

void f32_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof bits);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;  // to nearest even
    out[i] = static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
  }
}

__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = static_cast<float>(f16_bits_to_double(in[i]));
}

__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = f16_bits_from_double(in[i]);
}

void f16_to_f32(const uint16_t* in, float* out, int64_t n) {
  if (__builtin_cpu_supports("f16c")) return f16_to_f32_f16c(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(f16_bits_to_double(in[i]));
}

void f32_to_f16(const float* in, uint16_t* out, int64_t n) {
  if (__builtin_cpu_supports("f16c")) return f32_to_f16_f16c(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = f16_bits_from_double(in[i]);
}

// n elements from `in` (dtype `from`) to `out` (dtype `to`), one of them f32, in parallel chunks.
void convert_flat(const void* in, DType from, void* out, DType to, int64_t n) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  auto part = [&](int64_t first, int64_t last) {
    const int64_t count = last - first;
    if (from == DType::f32 && to == DType::f32) {
      std::memcpy(static_cast<float*>(out) + first, static_cast<const float*>(in) + first, static_cast<size_t>(count) * 4);
    } else if (to == DType::f32) {
      const uint16_t* src = static_cast<const uint16_t*>(in) + first;
      float* dst = static_cast<float*>(out) + first;
      from == DType::bf16 ? bf16_to_f32(src, dst, count) : f16_to_f32(src, dst, count);
    } else {
      const float* src = static_cast<const float*>(in) + first;
      uint16_t* dst = static_cast<uint16_t*>(out) + first;
      to == DType::bf16 ? f32_to_bf16(src, dst, count) : f32_to_f16(src, dst, count);
    }
  };
  if (n <= kChunk) return part(0, n);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) part(c * kChunk, std::min(n, (c + 1) * kChunk));
}

bool convertible(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace

Tensor widen_to_f32(const Tensor& t) {
  COIL_CHECK(convertible(t.dtype())) << "widen_to_f32 of " << dtype_name(t.dtype());
  Shape sizes = t.sizes(), strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (strides[d] == 0) sizes[d] = 1;  // one element stands for the broadcast dim
  const Tensor src = t.view(sizes, strides, t.offset());
  Tensor wide;
  if (dense_layout(sizes, strides)) {
    wide = Tensor::empty_strided(DType::f32, sizes, strides);
    convert_flat(src.data(), src.dtype(), wide.data(), DType::f32, src.numel());
  } else {
    wide = Tensor::empty_strided(DType::f32, sizes, contiguous_strides(sizes));
    src.for_each_index([&](std::span<const int64_t> idx) { wide.store(wide.element_index(idx), src.load(src.element_index(idx))); });
  }
  Shape wide_strides = wide.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (t.strides()[d] == 0) wide_strides[d] = 0;
  return wide.view(t.sizes(), wide_strides, 0);
}

void narrow_into(const Tensor& src, const Tensor& dst) {
  COIL_CHECK(src.dtype() == DType::f32 && convertible(dst.dtype()) && src.sizes() == dst.sizes()) << "narrow_into";
  if (dst.numel() == 0) return;
  if (src.strides() == dst.strides() && dense_layout(dst.sizes(), dst.strides()))
    return convert_flat(src.data(), DType::f32, dst.data(), dst.dtype(), dst.numel());
  dst.for_each_index([&](std::span<const int64_t> idx) { dst.store(dst.element_index(idx), src.load(src.element_index(idx))); });
}

Tensor f32_like(const Tensor& like) {
  const bool dense = dense_layout(like.sizes(), like.strides());
  return Tensor::empty_strided(DType::f32, like.sizes(), dense ? like.strides() : contiguous_strides(like.sizes()));
}

}  // namespace coil
