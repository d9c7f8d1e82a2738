// Scalar host conversions between fp32 and the 16-bit storage types: round to
// nearest even, infinities kept, NaN kept (quiet), fp16 subnormals exact. One
// place for the host code outside the CPU kernels: the ring's host buffers,
// the fp8 CPU path's bf16 output, the CLI's buffers.
//
// The CPU kernels keep their own (cpu/kernels/convert.hpp, vectorised rows as
// well): that header is compiled once per ISA namespace with that ISA's -m
// flags, and an inline function shared with those TUs could have its
// AVX-512-compiled body picked by the linker for the scalar path.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace flashattn::detail {

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

// Subnormals through double (exact there), where nearbyint's default mode is
// the rounding.
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

inline float bf16_to_float(uint16_t b) { return bits_to_float(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

}  // namespace flashattn::detail
