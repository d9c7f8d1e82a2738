// Emulated replacement of src/cuda/common/mma_sm80.cuh: mma.m16n8k16 from
// the PTX ISA fragment layouts (g = lane/4, t = lane%4):
//   A: a0 (g, 2t..) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..)
//   B: b0 (k 2t.., n g) b1 (k 2t+8.., n g)
//   C: c0,c1 (g, 2t..) c2,c3 (g+8, 2t..)
#pragma once

#include <cstdint>

#include "common/elem.hpp"
#include "cuda_emu.hpp"

namespace flashattn::detail::cuda {

template <int E>
struct ElemType;
template <>
struct ElemType<kF16> {
  using type = __half;
};
template <>
struct ElemType<kBF16> {
  using type = __nv_bfloat16;
};

template <class T>
inline float to_f(uint16_t u) {
  T h;
  std::memcpy(&h, &u, 2);
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(h);
  else
    return __bfloat162float(h);
}
template <class T>
inline uint16_t from_f(float x) {
  T h;
  if constexpr (std::is_same_v<T, __half>)
    h = __float2half_rn(x);
  else
    h = __float2bfloat16_rn(x);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

template <class T>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  for (int i = 0; i < 4; ++i) w.u64[l][i] = a[i];
  w.u64[l][4] = b0;
  w.u64[l][5] = b1;
  w.bar.arrive_and_wait();
  float A[16][16], B[16][8];
  for (int ln = 0; ln < 32; ++ln) {
    const int g = ln / 4, t = ln % 4;
    auto half = [&](int reg, int which) { return to_f<T>(uint16_t(w.u64[ln][reg] >> (16 * which))); };
    for (int e = 0; e < 2; ++e) {
      A[g][2 * t + e] = half(0, e);
      A[g + 8][2 * t + e] = half(1, e);
      A[g][2 * t + 8 + e] = half(2, e);
      A[g + 8][2 * t + 8 + e] = half(3, e);
      B[2 * t + e][g] = half(4, e);
      B[2 * t + 8 + e][g] = half(5, e);
    }
  }
  w.bar.arrive_and_wait();
  const int g = l / 4, t = l % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int i = 0; i < 4; ++i) {
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A[rows[i]][k] * B[k][cols[i]];
    d[i] = acc;
  }
}

template <class T>
inline uint32_t pack2(float lo, float hi) {
  return uint32_t(from_f<T>(lo)) | (uint32_t(from_f<T>(hi)) << 16);
}
template <class T>
inline float2 unpack2(uint32_t v) {
  return make_float2(to_f<T>(uint16_t(v)), to_f<T>(uint16_t(v >> 16)));
}

}  // namespace flashattn::detail::cuda
