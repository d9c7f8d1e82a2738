// fp16 / bf16 <-> float conversions for the tests, written here on purpose
// (not taken from the library) so a conversion bug in the kernels cannot be
// mirrored by the checks. Float -> 16-bit rounds to nearest, ties to even;
// NaN stays NaN, overflow goes to +-inf, fp16 subnormals are exact.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "flashattn/flashattn.hpp"

namespace fa_test {

inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {  // below 2^-14: fp16 subnormal (or zero), unit 2^-24
    // a * 2^24 is exact in float; nearbyint rounds ties to even (default mode).
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(bits_float(a) * 16777216.0f));
    return static_cast<uint16_t>(sign | m);  // m == 0x400 is the smallest normal: still right
  }
  uint32_t h = ((((a >> 23) - 127u + 15u)) << 10) | ((a & 0x7fffffu) >> 13);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent: correct
  return static_cast<uint16_t>(sign | h);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float f = std::ldexp(static_cast<float>(m), -24);
    return sign ? -f : f;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// fp8 e4m3 ("e4m3fn": bias 7, 3 fraction bits, no infinities, 0x7f NaN,
// largest 448). Encoding rounds to nearest, ties to even, and saturates at
// +-448 (the tests never store an out-of-range value on purpose).
inline float e4m3_bits_to_float(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) {
    v = bits_float(0x7fc00000u);
  } else {
    v = e == 0 ? static_cast<float>(m) / 512.0f : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  }
  return (b & 0x80) ? -v : v;
}
inline uint8_t float_to_e4m3_bits(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  if (a >= 448.0f) return static_cast<uint8_t>(sign | 0x7e);
  // The nearest of the 127 finite magnitudes (codes 0..126), ties to the
  // even code (an even mantissa).
  static const auto table = [] {
    std::array<float, 127> t{};
    for (int c = 0; c < 127; ++c) t[c] = e4m3_bits_to_float(static_cast<uint8_t>(c));
    return t;
  }();
  int best = 0;
  for (int c = 1; c <= 126; ++c) {
    const float dc = std::fabs(table[c] - a), db = std::fabs(table[best] - a);
    if (dc < db || (dc == db && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

// Round a float to the nearest value representable in `dt` (identity for F32).
inline float round_to(flashattn::DType dt, float f) {
  switch (dt) {
    case flashattn::DType::F16: return half_to_float(float_to_half(f));
    case flashattn::DType::BF16: return bf16_to_float(float_to_bf16(f));
    case flashattn::DType::F8E4M3: return e4m3_bits_to_float(float_to_e4m3_bits(f));
    default: return f;
  }
}

// The 16-bit pattern of f in dt (F16 or BF16), rounded to nearest even, and back.
inline uint16_t to_bits16(flashattn::DType dt, float f) {
  return dt == flashattn::DType::BF16 ? float_to_bf16(f) : float_to_half(f);
}
inline float from_bits16(flashattn::DType dt, uint16_t b) {
  return dt == flashattn::DType::BF16 ? bf16_to_float(b) : half_to_float(b);
}

}  // namespace fa_test
