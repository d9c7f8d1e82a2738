// Emulated replacement of src/cuda/common/ptx.cuh (see ../cuda_emu.hpp).
#pragma once

#include <cstdint>

#include "cuda_emu.hpp"

namespace flashattn::detail::cuda {

// "Shared addresses" are offsets into the emulated shared memory.
inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - emu::g_smem);
}
inline void cp_async_16(void* smem, const void* gmem, bool pred) {
  if (pred)
    std::memcpy(smem, gmem, 16);
  else
    std::memset(smem, 0, 16);
}
inline void cp_async_4(void* smem, const void* gmem, bool pred) {
  if (pred)
    std::memcpy(smem, gmem, 4);
  else
    std::memset(smem, 0, 4);
}
inline void red_add_f32x2(float* p, float x, float y) {
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
}
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}

// ldmatrix: lanes 8j..8j+7 hold the row addresses of matrix j. Without
// .trans lane l receives (row l/4, cols 2(l%4), 2(l%4)+1) of each matrix;
// with .trans, (rows 2(l%4) and 2(l%4)+1, col l/4).
template <int NM, bool TRANS>
inline void ldsm(uint32_t* r, uint32_t addr) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.u64[l][0] = addr;
  w.bar.arrive_and_wait();
  for (int j = 0; j < NM; ++j) {
    uint16_t lo, hi;
    if (!TRANS) {
      const unsigned char* row = emu::g_smem + w.u64[8 * j + l / 4][0];
      std::memcpy(&lo, row + 4 * (l % 4), 2);
      std::memcpy(&hi, row + 4 * (l % 4) + 2, 2);
    } else {
      const unsigned char* r0 = emu::g_smem + w.u64[8 * j + 2 * (l % 4)][0];
      const unsigned char* r1 = emu::g_smem + w.u64[8 * j + 2 * (l % 4) + 1][0];
      std::memcpy(&lo, r0 + 2 * (l / 4), 2);
      std::memcpy(&hi, r1 + 2 * (l / 4), 2);
    }
    r[j] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
  w.bar.arrive_and_wait();
}
inline void ldsm_x4(uint32_t (&r)[4], uint32_t a) { ldsm<4, false>(r, a); }
inline void ldsm_x4_t(uint32_t (&r)[4], uint32_t a) { ldsm<4, true>(r, a); }
inline void ldsm_x2(uint32_t (&r)[2], uint32_t a) { ldsm<2, false>(r, a); }
inline void ldsm_x2_t(uint32_t (&r)[2], uint32_t a) { ldsm<2, true>(r, a); }

inline float fast_exp2(float x) { return std::exp2(x); }

}  // namespace flashattn::detail::cuda
