// Tile copies whose rows are not one fixed stride apart: paged K/V (each row
// through the block table, pages of any multiple of 16 rows, so one 64-row
// tile may span pages) and packed-GQA Q / O (row r is query r / group of head
// r % group). The caller passes a functor giving the global address of row r.
#pragma once

#include <cstdint>

#include "common/ptx.cuh"
#include "common/smem_tile.cuh"

namespace flashattn::detail::cuda::sm80 {

template <class L, int NTHREADS, class T, class RowPtr>
__device__ __forceinline__ void load_rows_async(T* s, const RowPtr& row_ptr, int rows_valid, int cols_valid,
                                                const T* safe, int tid) {
  constexpr int kTotal = L::kRows * L::kChunks;
  constexpr int kIters = (kTotal + NTHREADS - 1) / NTHREADS;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int c = tid + it * NTHREADS;
    if (kTotal % NTHREADS == 0 || c < kTotal) {
      const int row = c / L::kChunks, col = (c % L::kChunks) * 8;
      const bool pred = row < rows_valid && col < cols_valid;
      const T* src = pred ? row_ptr(row) + col : safe;
      cp_async_16(s + L::off(row, col), src, pred);
    }
  }
}

template <class L, int NTHREADS, class T, class RowPtr>
__device__ __forceinline__ void store_rows(const RowPtr& row_ptr, const T* s, int rows_valid, int cols_valid,
                                           int tid) {
  constexpr int kTotal = L::kRows * L::kChunks;
  constexpr int kIters = (kTotal + NTHREADS - 1) / NTHREADS;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int c = tid + it * NTHREADS;
    if (kTotal % NTHREADS == 0 || c < kTotal) {
      const int row = c / L::kChunks, col = (c % L::kChunks) * 8;
      if (row < rows_valid && col < cols_valid) {
        *reinterpret_cast<uint4*>(row_ptr(row) + col) = *reinterpret_cast<const uint4*>(s + L::off(row, col));
      }
    }
  }
}

}  // namespace flashattn::detail::cuda::sm80
