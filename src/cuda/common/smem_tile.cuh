// Shared-memory tiles of 16-bit elements and their copies to and from global
// memory (16-byte chunks, predicated on the sequence and head-dim tails).
//
// Bank conflicts: ldmatrix reads 8 rows x 16 bytes of one column chunk per
// phase; C-fragment stores write 8 rows x 4 words. With rows a multiple of
// 128 bytes (8 chunks) the chunk index is XOR-swizzled with (row % 8), which
// puts those 8 rows in 8 different 16-byte bank groups. Rows of 12 chunks
// (head dim 96) cannot be swizzled that way and get 16 bytes of padding
// instead: the row stride is then an odd number of 16-byte units mod 128 B.
#pragma once

#include <cstdint>

#include "common/ptx.cuh"

namespace flashattn::detail::cuda {

template <int ROWS, int COLS>
struct SmemLayout {
  static constexpr int kRows = ROWS, kCols = COLS;
  static constexpr int kChunks = COLS / 8;
  static constexpr bool kSwizzle = (kChunks % 8) == 0;
  static constexpr int kLd = kSwizzle ? COLS : COLS + 8;  // elements per row
  static constexpr int kSize = ROWS * kLd;                 // elements
  static_assert(COLS % 16 == 0, "tile columns must be a multiple of 16");

  // Element offset of (row, col); col may point inside a chunk.
  __device__ __forceinline__ static int off(int row, int col) {
    if constexpr (kSwizzle) {
      return row * kLd + ((((col >> 3) ^ (row & 7)) << 3) | (col & 7));
    } else {
      return row * kLd + col;
    }
  }

  // Shared address of an ldmatrix lane: element (row8 + rin, 8 * c8 + 8 * cb)
  // of the tile at s, where row8 is a multiple of 8 (a warp's or fragment's
  // first row, often a run-time value) and cb is 0 or 1. For even c8 the
  // swizzled chunk is ((c8 % 8) XOR (cb XOR rin % 8)), and since the tile is
  // 128-byte aligned and its rows are whole 128-byte units, the c8 % 8 part
  // is an XOR on address bits 4-6: every column's address is the lane's
  // column-0 address XOR an immediate, plus an immediate. off() instead
  // recomputed row % 8 and the XOR for each ldmatrix (the sm80 backward ran
  // ~3.5 integer instructions per ldmatrix, 26% more instructions than
  // FlashAttention-2's kernel). Odd c8 (head dim 192's dQ chunks of three
  // n-tiles) keeps the plain formula: c8 + cb carries there.
  template <class T>
  __device__ __forceinline__ static uint32_t lane_addr(const T* s, int row8, int rin, int c8, int cb) {
    if constexpr (kSwizzle) {
      if (c8 & 1) return smem_u32(s + (row8 + rin) * kLd + (((c8 + cb) ^ (rin & 7)) << 3));
      const uint32_t a0 = smem_u32(s + (row8 + rin) * kLd + 8 * (cb ^ (rin & 7)));
      return (a0 ^ static_cast<uint32_t>((c8 & 7) << 4)) + static_cast<uint32_t>((c8 & ~7) << 4);
    } else {
      return smem_u32(s + (row8 + rin) * kLd + 8 * (c8 + cb));
    }
  }
};

// Async copy of a ROWS x COLS tile starting at `g` (row stride `ld` elements)
// into `s`. Rows >= rows_valid and columns >= cols_valid (a multiple of 8)
// are zero-filled; `safe` is any valid global address for the masked lanes.
// When NTHREADS is a multiple of the chunks per row, each thread keeps one
// column and walks rows with a fixed stride: one 64-bit address and one
// increment instead of a hoisted address per chunk (registers matter here).
template <class L, int NTHREADS, class T>
__device__ __forceinline__ void load_tile_async(T* s, const T* g, int64_t ld, int rows_valid, int cols_valid,
                                                const T* safe, int tid) {
  constexpr int kTotal = L::kRows * L::kChunks;
  if constexpr (NTHREADS % L::kChunks == 0 && L::kRows % (NTHREADS / L::kChunks) == 0) {
    constexpr int kStep = NTHREADS / L::kChunks;  // rows per pass
    const int row0 = tid / L::kChunks, col = (tid % L::kChunks) * 8;
    const bool col_ok = col < cols_valid;
    const T* src = g + row0 * ld + col;
#pragma unroll
    for (int it = 0; it < L::kRows / kStep; ++it) {
      const int row = row0 + it * kStep;
      const bool pred = col_ok && row < rows_valid;
      cp_async_16(s + L::off(row, col), pred ? src : safe, pred);
      src += kStep * ld;
    }
  } else {
    constexpr int kIters = (kTotal + NTHREADS - 1) / NTHREADS;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int c = tid + it * NTHREADS;
      if (kTotal % NTHREADS == 0 || c < kTotal) {
        const int row = c / L::kChunks, col = (c % L::kChunks) * 8;
        const bool pred = row < rows_valid && col < cols_valid;
        const T* src = pred ? g + row * ld + col : safe;
        cp_async_16(s + L::off(row, col), src, pred);
      }
    }
  }
}

// Copy rows < rows_valid, columns < cols_valid of a shared tile to global.
template <class L, int NTHREADS, class T>
__device__ __forceinline__ void store_tile(T* g, int64_t ld, const T* s, int rows_valid, int cols_valid, int tid) {
  constexpr int kTotal = L::kRows * L::kChunks;
  constexpr int kIters = (kTotal + NTHREADS - 1) / NTHREADS;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int c = tid + it * NTHREADS;
    if (kTotal % NTHREADS == 0 || c < kTotal) {
      const int row = c / L::kChunks, col = (c % L::kChunks) * 8;
      if (row < rows_valid && col < cols_valid) {
        *reinterpret_cast<uint4*>(g + row * ld + col) = *reinterpret_cast<const uint4*>(s + L::off(row, col));
      }
    }
  }
}

}  // namespace flashattn::detail::cuda
