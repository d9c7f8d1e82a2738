// Row conversions between the tensor dtypes and the fp32 tile buffers.
// Loads are exact; stores round to nearest even (bf16 and fp16), keep
// inf/NaN, and handle fp16 subnormals. F16C is used when the TU has it.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__) || defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "simd.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

struct bf16_t { uint16_t bits; };
struct f16_t { uint16_t bits; };

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_to_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float f = float(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -f : f;
  }
  return bits_to_float(sign | ((e + 112) << 23) | (m << 13));
}

// Round-to-nearest-even float -> half (F. Giesen's float_to_half_fast3_rtne).
inline uint16_t float_to_half(float f) {
  uint32_t x = float_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                                 // below 2^-14: subnormal or 0
    // Adding 0.5 puts the result's ulp at 2^-24, the half subnormal step: the
    // FPU does the round-to-nearest-even.
    float g = bits_to_float(ax) + 0.5f;
    return uint16_t(sign | (float_to_bits(g) - 0x3f000000u));
  }
  uint32_t odd = (ax >> 13) & 1;
  ax += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round
  return uint16_t(sign | (ax >> 13));
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

// VW consecutive elements as fp32 lanes, exact: the 16-bit types widen in
// registers (bf16: zero-extend and shift; fp16: VCVTPH2PS where the TU has
// F16C), so a kernel can read 16-bit K/V rows where they are instead of
// converting a tile into a float buffer first (the decode path, forward.hpp).
inline vf vload_row(const float* p) { return vload(p); }
inline vf vload_row(const bf16_t* p) {
  // Intrinsics where there are vectors: GCC 12 lowers __builtin_convertvector
  // of 16 x u16 to 16 x i32 as two 256-bit halves stitched together (5
  // instructions for one VPMOVZXWD; measured 20% slower decode).
#if FA_VW == 16 && defined(__AVX512F__)
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return reinterpret_cast<vf>(_mm512_slli_epi32(w, 16));
#elif FA_VW == 8 && defined(__AVX2__)
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return reinterpret_cast<vf>(_mm256_slli_epi32(w, 16));
#else
  vf v;
  for (int i = 0; i < VW; ++i) v[i] = bits_to_float(uint32_t(p[i].bits) << 16);
  return v;
#endif
}
inline vf vload_row(const f16_t* p) {
#if defined(__F16C__) && FA_VW == 16 && defined(__AVX512F__)
  return reinterpret_cast<vf>(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(__F16C__) && FA_VW == 8 && defined(__AVX__)
  return reinterpret_cast<vf>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  vf v;
  for (int i = 0; i < VW; ++i) v[i] = half_to_float(p[i].bits);
  return v;
#endif
}

// dst[i] = mul * float(src[i]) for i < n.
inline void load_row(const float* src, float* dst, int64_t n, float mul) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = mul * src[i];
}
inline void load_row(const bf16_t* src, float* dst, int64_t n, float mul) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = mul * bits_to_float(uint32_t(s[i]) << 16);
}
inline void load_row(const f16_t* src, float* dst, int64_t n, float mul) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
#if defined(__F16C__)
  const __m256 vm = _mm256_set1_ps(mul);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(v, vm));
  }
#endif
  for (; i < n; ++i) dst[i] = mul * half_to_float(s[i]);
}

// dst[i] = round(mul * src[i]) for i < n.
inline void store_row(const float* src, float* dst, int64_t n, float mul) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = mul * src[i];
}
inline void store_row(const float* src, bf16_t* dst, int64_t n, float mul) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(mul * src[i]);
}
inline void store_row(const float* src, f16_t* dst, int64_t n, float mul) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  int64_t i = 0;
#if defined(__F16C__)
  const __m256 vm = _mm256_set1_ps(mul);
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(src + i), vm), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
#endif
  for (; i < n; ++i) d[i] = float_to_half(mul * src[i]);
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
