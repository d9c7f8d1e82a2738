// Register-blocked fp32 micro-kernels: C[M x N] (+)= A[M x K] * B[K x N].
// A is read one scalar at a time (broadcast) through two strides, so the
// same kernel serves A = Q, A = K and transposed operands (A = P^T is P with
// its strides swapped) and no tile is ever transposed per tile pair. B and C
// are row-major with N a multiple of VW (buffers are padded with zeros).
// An MR x (NV*VW) block of C lives in registers for the whole K loop.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "simd.hpp"

#if !defined(FA_MR) || !defined(FA_NV)
#error "define FA_MR and FA_NV (micro-kernel rows and vectors per row)"
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

constexpr int MR = FA_MR;  // rows of C per micro-kernel
constexpr int NV = FA_NV;  // vectors of C per row
constexpr int NR = NV * VW;

using MicroFn = void (*)(int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak, const float* B,
                         ptrdiff_t ldb, float* C, ptrdiff_t ldc, const float* row_scale);

// kAcc: C += A*B (C loaded first; multiplied by row_scale[r] when kScale),
// else C = A*B.
template <int R, int V, bool kAcc, bool kScale>
void micro(int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak, const float* B, ptrdiff_t ldb,
           float* C, ptrdiff_t ldc, const float* row_scale) {
  vf acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float rs = kScale ? row_scale[r] : 1.0f;
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      if (kAcc) {
        acc[r][v] = vload(C + r * ldc + v * VW);
        if (kScale) acc[r][v] *= rs;
      } else {
        acc[r][v] = vsplat(0.0f);
      }
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    const float* a = A + k * ak;
    vf bv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) bv[v] = vload(b + v * VW);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      float ar = a[r * am];
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[r][v] += ar * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) vstore(C + r * ldc + v * VW, acc[r][v]);
}

template <bool kAcc, bool kScale, int V, size_t... Rs>
constexpr std::array<MicroFn, MR> micro_row(std::index_sequence<Rs...>) {
  return {&micro<int(Rs) + 1, V, kAcc, kScale>...};
}
template <bool kAcc, bool kScale, size_t... Vs>
constexpr std::array<std::array<MicroFn, MR>, NV> micro_table(std::index_sequence<Vs...>) {
  return {micro_row<kAcc, kScale, int(Vs) + 1>(std::make_index_sequence<MR>())...};
}

// C[M x N] (+)= A * B with A(m, k) = A[m*am + k*ak]; N % VW == 0.
// K is split into blocks of KC so the B panel in use (KC x NR floats, 32 KiB
// with AVX-512) stays in L1 for head_dim 256; each C element still sums its
// products in k order, so the blocking changes no result.
constexpr int64_t KC = 128;

template <bool kAcc, bool kScale>
void gemm_block(int64_t M, int64_t N, int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak,
                const float* B, ptrdiff_t ldb, float* C, ptrdiff_t ldc, const float* row_scale) {
  static constexpr auto table = micro_table<kAcc, kScale>(std::make_index_sequence<NV>());
  for (int64_t n0 = 0; n0 < N; n0 += NR) {
    int64_t nv = (N - n0) / VW < NV ? (N - n0) / VW : NV;
    for (int64_t m0 = 0; m0 < M; m0 += MR) {
      int64_t mr = M - m0 < MR ? M - m0 : MR;
      table[nv - 1][mr - 1](K, A + m0 * am, am, ak, B + n0, ldb, C + m0 * ldc + n0, ldc,
                            kScale ? row_scale + m0 : nullptr);
    }
  }
}

template <bool kAcc, bool kScale = false>
void gemm(int64_t M, int64_t N, int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak,
          const float* B, ptrdiff_t ldb, float* C, ptrdiff_t ldc,
          const float* row_scale = nullptr) {
  int64_t kc = K < KC ? K : KC;
  gemm_block<kAcc, kScale>(M, N, kc, A, am, ak, B, ldb, C, ldc, row_scale);
  for (int64_t k0 = kc; k0 < K; k0 += KC) {
    kc = K - k0 < KC ? K - k0 : KC;
    gemm_block<true, false>(M, N, kc, A + k0 * ak, am, ak, B + k0 * ldb, ldb, C, ldc, nullptr);
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
