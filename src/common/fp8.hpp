// OCP fp8 e4m3 ("e4m3fn", what torch.float8_e4m3fn holds): 1 sign bit, 4
// exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN,
// largest finite 448, smallest subnormal 2^-9. Host-side decode for the CPU
// path and encode for the command-line program's fp8 inputs; the CUDA
// kernels use the hardware conversions.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace flashattn::detail {

inline float e4m3_to_float(uint8_t x) {
  const int e = (x >> 3) & 15, m = x & 7;
  float v;
  if (e == 15 && m == 7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -9);  // subnormal: m * 2^-9
  } else {
    v = std::ldexp(static_cast<float>(8 + m), e - 10);  // (1 + m/8) * 2^(e-7)
  }
  return (x & 0x80) ? -v : v;
}

// The nearest e4m3 code of f: round to nearest, ties to even, saturating at
// +-448 (as cvt.rn.satfinite does); NaN gives 0x7f.
inline uint8_t float_to_e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  if (a >= 448.f) return static_cast<uint8_t>(sign | 0x7e);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // The quantum at a: 3 fraction bits below the leading one (2^(e-4)), or
  // the subnormals' 2^-9. a / q is exact (a power-of-two scaling), and
  // nearbyint rounds ties to even in the default rounding mode.
  const int qexp = e - 4 > -9 ? e - 4 : -9;
  const float r = std::ldexp(std::nearbyint(std::ldexp(a, -qexp)), qexp);
  if (r == 0.f) return sign;
  int er = 0;
  const float mr = std::frexp(r, &er);  // r = mr * 2^er
  const int biased = er - 1 + 7;       // r = (1 + m / 8) * 2^(er - 1)
  if (biased <= 0) return static_cast<uint8_t>(sign | static_cast<int>(std::ldexp(r, 9)));
  const int m = static_cast<int>((mr * 2.f - 1.f) * 8.f);
  return static_cast<uint8_t>(sign | (biased << 3) | m);
}

}  // namespace flashattn::detail
