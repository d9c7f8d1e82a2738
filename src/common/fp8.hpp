// OCP fp8 e4m3 ("e4m3fn", what torch.float8_e4m3fn holds): 1 sign bit, 4
// exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN,
// largest finite 448, smallest subnormal 2^-9. Host-side decode for the CPU
// path; the CUDA kernels use the hardware conversions.
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

}  // namespace flashattn::detail
