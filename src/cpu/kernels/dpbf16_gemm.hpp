// The bf16 GEMM engine on AVX512-BF16 dot products (kernels_avx512bf16.cpp),
// for CPUs with avx512_bf16 but no AMX (Cooper Lake, Zen 4): the interface of
// amx_tiles.hpp, so forward_amx.hpp and backward_amx.hpp run unchanged on it.
// VDPBF16PS adds, per fp32 lane, the two products of one bf16 pair of A
// (broadcast) and one of B's VNNI pairs; an MR x (NV * 16) block of C stays
// in registers over the whole K loop (gemm.hpp's scheme, K halved).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "simd.hpp"

#if !defined(__AVX512BF16__)
#error "dpbf16_gemm.hpp needs -mavx512bf16"
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

// No tile state to set up or hand back.
inline void configure_tiles() {}
inline void release_tiles() {}

// C[4 x 16 NV] (+)= A B over K (even): 16 accumulators of 32 zmm at NV = 4.
template <int NV>
inline void dp_block(int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                     float* C, int64_t ldc, bool accumulate) {
  constexpr int MR = 4;
  __m512 c[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v)
      c[r][v] = accumulate ? _mm512_loadu_ps(C + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 2) {
    const uint16_t* b = B + (k / 2) * ldb;
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 32 * v));
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, A + r * lda + k, 4);
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(int(pair)));
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_dpbf16_ps(c[r][v], a, bv[v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(C + r * ldc + 16 * v, c[r][v]);
}

// C[M x N] (+)= A[M x K] B[K x N], same contract as amx_tiles.hpp's tile_gemm
// (M, N multiples of 16, K of 32, zero padded operands).
inline void tile_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                      const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += 64) {
    const int64_t nv = (N - n0) / 16 < 4 ? (N - n0) / 16 : 4;
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const uint16_t* a = A + m0 * lda;
      const uint16_t* b = B + n0 * 2;
      float* c = C + m0 * ldc + n0;
      switch (nv) {
        case 4: dp_block<4>(K, a, lda, b, ldb, c, ldc, accumulate); break;
        case 3: dp_block<3>(K, a, lda, b, ldb, c, ldc, accumulate); break;
        case 2: dp_block<2>(K, a, lda, b, ldb, c, ldc, accumulate); break;
        default: dp_block<1>(K, a, lda, b, ldb, c, ldc, accumulate); break;
      }
    }
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
