// Picks the engine of the bf16 pair-GEMMs for this translation unit: AMX
// tiles (kernels_amx.cpp) or AVX512-BF16 dot products
// (kernels_avx512bf16.cpp, FA_BF16_DOT), with the packings both read.
#pragma once

#if defined(FA_BF16_DOT) && FA_BF16_DOT
#include "dpbf16_gemm.hpp"
#else
#include "amx_tiles.hpp"
#endif
#include "bf16_pack.hpp"
#include "tiles.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

// C (+)= A B on the tiles: bf16 operands, or (kSplit) three pieces each, piece
// planes pa / pb apart (amx_tiles.hpp).
template <bool kSplit>
inline void pair_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, int64_t pa,
                      const uint16_t* B, int64_t ldb, int64_t pb, float* C, int64_t ldc, bool accumulate) {
  static_assert(!kSplit || FA_FP32_SPLIT, "split fp32 GEMMs exist on AMX tiles only (kernels_amx.cpp)");
#if FA_FP32_SPLIT
  if constexpr (kSplit) return tile_gemm<true>(M, N, K, A, lda, B, ldb, C, ldc, accumulate, pa, pb);
#endif
  tile_gemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
