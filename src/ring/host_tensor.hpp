// Host-side helpers of the ring: element conversion, dense buffers and views
// over them, row slices of BSHD / [B, H, S] views. Scalar code: the ring's
// own elementwise work is O(N d) per step against the attention's O(N^2 d).
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>

#include "flashattn/flashattn.hpp"

namespace flashattn::ring::detail {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_to_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float f = float(m) * 5.9604644775390625e-8f;  // m * 2^-24
    return sign ? -f : f;
  }
  return bits_to_float(sign | ((e + 112) << 23) | (m << 13));
}

// Round to nearest even; subnormals through double (exact there), where
// nearbyint's default mode is the rounding.
inline uint16_t float_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00);         // NaN
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00);        // rounds to inf
  if (ax < 0x38800000u) {                                       // half subnormal (or 0)
    const double steps = double(bits_to_float(ax)) * 16777216.0;  // in units of 2^-24
    return uint16_t(sign | uint16_t(std::nearbyint(steps)));
  }
  const uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1);  // RNE on the 13 dropped bits
  return uint16_t(sign | (((rounded >> 23) - 112) << 10 | ((rounded >> 13) & 0x3ff)));
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

inline float load(DType dt, const void* base, int64_t i) {
  switch (dt) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return f16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bits_to_float(uint32_t(static_cast<const uint16_t*>(base)[i]) << 16);
  }
  return 0.0f;
}

inline void store(DType dt, void* base, int64_t i, float v) {
  switch (dt) {
    case DType::F32: static_cast<float*>(base)[i] = v; break;
    case DType::F16: static_cast<uint16_t*>(base)[i] = float_to_f16(v); break;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
  }
}

// Rows [begin, begin + count) of dimension `dim` of a view.
inline TensorView slice(TensorView t, int dim, int64_t begin, int64_t count) {
  t.data = static_cast<uint8_t*>(t.data) + begin * t.stride[dim] * int64_t(dtype_size(t.dtype));
  t.shape[dim] = count;
  return t;
}

// dst = src elementwise over a 4-d or 3-d view (dtype conversion included).
void copy(const TensorView& src, const TensorView& dst);
// dst (fp32) += src (any dtype), 4-d views of one shape.
void accumulate(const TensorView& src, const TensorView& dst);
// Fills a view with a value.
void fill(const TensorView& dst, float value);

}  // namespace flashattn::ring::detail
