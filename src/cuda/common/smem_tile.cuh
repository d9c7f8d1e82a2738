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
