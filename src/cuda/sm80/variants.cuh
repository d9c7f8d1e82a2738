// ALiBi and dropout in the sm80 kernels (issue 9), with the CPU backend's
// semantics (src/cpu/kernels/variants.hpp, flashattn.hpp):
//   s(i, j) = softcap(scale q_i.k_j) - slope(b, h) |i + Sk - Sq - j|
//   P = softmax(s) (the LSE is of this undropped P), O = (P o Z / (1 - p)) V
// with Z the keep mask of common/philox.hpp: the same Philox4x32-10 counter
// layout, so the same (seed, offset) keeps the same elements on every
// backend, in every tiling, and in the backward.
//
// Only the VAR instantiations of the kernels read these (template flag: the
// default kernels' code is unchanged); inside them ALiBi and dropout are
// runtime switches, so one extra instantiation per kernel covers both.
//
// Scores are in the kernels' units: raw q.k (scale folded into the exp2
// multiplier) without softcap, natural units with softcap. The bias per unit
// of distance is therefore -slope / scale or -slope (AttnArgs::alibi_unit).
//
// Dropout bits: one Philox call yields the draws of four neighbouring keys
// of one query. In a 16 x 8 C-fragment block, the 16 scores that a group of
// four lanes holds (forward: the quad, rows g and g+8 x keys 0..7) are
// exactly four such calls, so each lane runs one call and the group swaps
// keep bits with two shuffles: one generator call per four scores, the
// least possible.
#pragma once

#include <cstdint>

#include "common/philox.hpp"
#include "sm80/kernel_args.hpp"

namespace flashattn::detail::cuda::sm80 {

// Four keep bits (bit w: key 4 * j4 + w) of query i of generator row bh.
__device__ __forceinline__ uint32_t keep_bits4(const DropoutRng& rng, uint32_t bh, int i, int j4) {
  const uint32_t ctr[4] = {static_cast<uint32_t>(j4), static_cast<uint32_t>(i), bh, rng.off_lo};
  uint32_t r[4];
  Philox4x32::generate(ctr, rng.key, r);
  return (r[0] >= rng.threshold ? 1u : 0u) | (r[1] >= rng.threshold ? 2u : 0u) |
         (r[2] >= rng.threshold ? 4u : 0u) | (r[3] >= rng.threshold ? 8u : 0u);
}

// This lane's call is number k (0..3) of its group; every lane of the group
// gets all 16 bits, call k's at bits 4k..4k+3. m1 / m2: the lane-index bits
// that tell the group's lanes apart (k = those two bits).
__device__ __forceinline__ uint32_t gather_bits16(uint32_t bits4, int k, int m1, int m2) {
  uint32_t x = bits4 << (4 * k);
  x |= __shfl_xor_sync(0xffffffffu, x, m1);
  x |= __shfl_xor_sync(0xffffffffu, x, m2);
  return x;
}

// Generator row (b, h) as common/philox.hpp numbers it: b in the caller's batch.
__device__ __forceinline__ uint32_t drop_row(const AttnArgs& a, int b, int h) {
  return static_cast<uint32_t>((static_cast<int64_t>(a.drop_b0) + b) * a.rng.heads + h);
}

// Forward / dQ layout (rows queries, columns keys): element [2hh + e] of
// the 16 x 8 block at (row0 + 16mt, c0 + 8nt) is query row0 + 16mt + g + 8hh,
// key c0 + 8nt + 2t + e. The quad (same g) holds rows g, g+8 x 8 keys: lane
// t runs call k = t (row g + 8 (k & 1), keys 4 (k >> 1) + 0..3 of the block).
// row0 and c0 + 8nt: the block's first row and key (c0 a multiple of 8).
__device__ __forceinline__ uint32_t row_bits(const AttnArgs& a, uint32_t bh, int row0, int col0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  return gather_bits16(keep_bits4(a.rng, bh, row0 + g + 8 * (t & 1), col0 / 4 + (t >> 1)), t, 1, 2);
}
__device__ __forceinline__ bool row_keep(uint32_t all, int hh, int e, int lane) {
  const int col = 2 * (lane & 3) + e;  // in 0..7: call half col >> 2, word col & 3
  return (all >> (4 * (hh | ((col >> 2) << 1)) + (col & 3))) & 1u;
}

// Backward main kernel's S^T layout (rows keys, columns queries): element
// [2hh + e] of the block at (key0, q0) is key key0 + g + 8hh, query
// q0 + 2t + e. The group of four lanes with the same t and g >> 2 (lane bits
// 2 and 3 differ) holds keys 4 (g >> 2) + {0..3, 8..11} x queries 2t, 2t+1:
// lane k = g & 3 runs call k (query 2t + (k & 1), keys 4 (g >> 2) + 8 (k >> 1)
// + 0..3). key0: a multiple of 16.
__device__ __forceinline__ uint32_t col_bits(const AttnArgs& a, uint32_t bh, int key0, int q0, int lane) {
  const int g = lane >> 2, t = lane & 3, k = g & 3;
  return gather_bits16(keep_bits4(a.rng, bh, q0 + 2 * t + (k & 1), (key0 + 4 * (g >> 2) + 8 * (k >> 1)) / 4), k, 4, 8);
}
__device__ __forceinline__ bool col_keep(uint32_t all, int hh, int e, int lane) {
  return (all >> (4 * (2 * hh + e) + ((lane >> 2) & 3))) & 1u;  // word g & 3 of call 2hh + e
}

// This lane's keep bits for every 16 x 8 block of an MT x NT fragment array:
// block x = mt NT + nt at bits 4x + 2hh + e (its element [2hh + e]). The
// generator runs in a rolled loop: one copy of Philox's code and registers,
// where MT NT unrolled copies made the forward spill.
template <int MT, int NT>
__device__ __forceinline__ uint64_t row_keep_mask(const AttnArgs& a, uint32_t bh, int row0, int c0, int lane) {
  static_assert(MT * NT <= 16, "four bits per block in 64");
  uint64_t m = 0;
#pragma unroll 1
  for (int x = 0; x < MT * NT; ++x) {
    const uint32_t all = row_bits(a, bh, row0 + (x / NT) * 16, c0 + (x % NT) * 8, lane);
    const uint32_t mine = uint32_t(row_keep(all, 0, 0, lane)) | uint32_t(row_keep(all, 0, 1, lane)) << 1 |
                          uint32_t(row_keep(all, 1, 0, lane)) << 2 | uint32_t(row_keep(all, 1, 1, lane)) << 3;
    m |= uint64_t(mine) << (4 * x);
  }
  return m;
}
template <int MT, int NT>
__device__ __forceinline__ uint64_t col_keep_mask(const AttnArgs& a, uint32_t bh, int key0, int q0, int lane) {
  static_assert(MT * NT <= 16, "four bits per block in 64");
  uint64_t m = 0;
#pragma unroll 1
  for (int x = 0; x < MT * NT; ++x) {
    const uint32_t all = col_bits(a, bh, key0 + (x / NT) * 16, q0 + (x % NT) * 8, lane);
    const uint32_t mine = uint32_t(col_keep(all, 0, 0, lane)) | uint32_t(col_keep(all, 0, 1, lane)) << 1 |
                          uint32_t(col_keep(all, 1, 0, lane)) << 2 | uint32_t(col_keep(all, 1, 1, lane)) << 3;
    m |= uint64_t(mine) << (4 * x);
  }
  return m;
}
__device__ __forceinline__ bool keep_at(uint64_t m, int block, int idx) { return (m >> (4 * block + idx)) & 1u; }

// Forward: P *= Z / (1 - p) on the C fragments of rows row0 + 16mt + g (+8),
// keys c0 + 8nt + 2t + e. With mask_out (padded batches) also writes Z of
// the visible keys of rows < len_q at mask_out[i * ld + j].
template <int MT, int NT>
__device__ __forceinline__ void dropout_rows(float (&s)[MT][NT][4], const AttnArgs& a, uint32_t bh, int row0,
                                             int c0, int lane, int32_t* mask_out, int64_t ld, int len_q,
                                             const WindowMask& mask) {
  const uint64_t keep = row_keep_mask<MT, NT>(a, bh, row0, c0, lane);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int idx = 0; idx < 4; ++idx) s[mt][nt][idx] *= keep_at(keep, mt * NT + nt, idx) ? a.keep_scale : 0.f;
  if (mask_out == nullptr) return;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 1
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll 1
    for (int hh = 0; hh < 2; ++hh) {
      const int i = row0 + mt * 16 + g + 8 * hh;
      if (i >= len_q) continue;
      const KeyRange kr = mask.keys(i);
#pragma unroll 1
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll 1
        for (int e = 0; e < 2; ++e) {
          const int j = c0 + nt * 8 + 2 * t + e;
          if (j >= kr.begin && j < kr.end)
            mask_out[static_cast<int64_t>(i) * ld + j] = keep_at(keep, mt * NT + nt, 2 * hh + e) ? 1 : 0;
        }
    }
}

// ALiBi bias in kernel units for row position rp (query row + Sk - Sq) and key j.
__device__ __forceinline__ float alibi_bias(float slope_unit, int rp, int j) {
  const int d = rp - j;
  return slope_unit * static_cast<float>(d < 0 ? -d : d);
}

}  // namespace flashattn::detail::cuda::sm80
