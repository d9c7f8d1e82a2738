// Warp-level GEMM tiles on mma.sync.m16n8k16 with operands fetched from
// shared memory by ldmatrix. A warp computes an (MT*16) x (NT*8) block of
// C += A.B over KS k-steps of 16.
//
// Storage conventions (all row-major 16-bit tiles described by a SmemLayout):
//   A_KM = false: A stored [m][k] (plain ldmatrix)   A_KM = true: stored [k][m] (.trans)
//   B_KN = false: B stored [n][k] (plain ldmatrix)   B_KN = true: stored [k][n] (.trans)
// e.g. S = Q K^T reads Q as [m][k] and K as [n][k]; O += P V reads V as [k][n].
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "common/ptx.cuh"

namespace flashattn::detail::cuda {

// Lane l addresses row r = l % 8 of matrix i = l / 8.
template <bool A_KM, class L, class T>
__device__ __forceinline__ void load_frag_a(uint32_t (&a)[4], const T* s, int m0, int k0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  if constexpr (!A_KM) {
    // matrices: (m0,k0) (m0+8,k0) (m0,k0+8) (m0+8,k0+8) -> a0 a1 a2 a3
    ldsm_x4(a, L::lane_addr(s, m0, r + (i & 1) * 8, k0 >> 3, i >> 1));
  } else {
    // stored rows are k: (k0,m0) (k0,m0+8) (k0+8,m0) (k0+8,m0+8) -> a0 a1 a2 a3
    ldsm_x4_t(a, L::lane_addr(s, k0, r + (i >> 1) * 8, m0 >> 3, i & 1));
  }
}

// B fragments of the two n-tiles n0 and n0+8: b[0],b[1] for n0; b[2],b[3] for n0+8.
template <bool B_KN, class L, class T>
__device__ __forceinline__ void load_frag_b2(uint32_t (&b)[4], const T* s, int n0, int k0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  if constexpr (!B_KN) {
    // (n0,k0) (n0,k0+8) (n0+8,k0) (n0+8,k0+8)
    ldsm_x4(b, L::lane_addr(s, n0, r + (i >> 1) * 8, k0 >> 3, i & 1));
  } else {
    // stored rows are k: (k0,n0) (k0+8,n0) (k0,n0+8) (k0+8,n0+8)
    ldsm_x4_t(b, L::lane_addr(s, k0, r + (i & 1) * 8, n0 >> 3, i >> 1));
  }
}

// B fragment of one n-tile (lanes 0..15 give the addresses).
template <bool B_KN, class L, class T>
__device__ __forceinline__ void load_frag_b1(uint32_t (&b)[2], const T* s, int n0, int k0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  if constexpr (!B_KN) {
    ldsm_x2(b, L::lane_addr(s, n0, r, k0 >> 3, i & 1));
  } else {
    ldsm_x2_t(b, L::lane_addr(s, k0, r + (i & 1) * 8, n0 >> 3, 0));
  }
}

// acc[mt][nt] += A[m0 + 16mt .., 0 .. 16KS) . B[0 .. 16KS, n0 + 8nt ..)
template <int MT, int NT, int KS, bool A_KM, bool B_KN, class LA, class LB, class T>
__device__ __forceinline__ void gemm_ss(float (&acc)[MT][NT][4], const T* sA, int m0, const T* sB, int n0,
                                        int lane) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) load_frag_a<A_KM, LA>(a[mt], sA, m0 + mt * 16, ks * 16, lane);
#pragma unroll
    for (int nt = 0; nt + 1 < NT; nt += 2) {
      uint32_t b[4];
      load_frag_b2<B_KN, LB>(b, sB, n0 + nt * 8, ks * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<T>(acc[mt][nt], a[mt], b[0], b[1]);
        mma_16816<T>(acc[mt][nt + 1], a[mt], b[2], b[3]);
      }
    }
    if constexpr (NT % 2 == 1) {
      uint32_t b[2];
      load_frag_b1<B_KN, LB>(b, sB, n0 + (NT - 1) * 8, ks * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma_16816<T>(acc[mt][NT - 1], a[mt], b[0], b[1]);
    }
  }
}

// Same with A already in registers (fragments per k-step), B from shared;
// B's k rows start at k0 (a warp's share of a tile's keys).
template <int MT, int NT, int KS, bool B_KN, class LB, class T>
__device__ __forceinline__ void gemm_rs(float (&acc)[MT][NT][4], const uint32_t (&a)[MT][KS][4], const T* sB,
                                        int n0, int lane, int k0 = 0) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
    for (int nt = 0; nt + 1 < NT; nt += 2) {
      uint32_t b[4];
      load_frag_b2<B_KN, LB>(b, sB, n0 + nt * 8, k0 + ks * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<T>(acc[mt][nt], a[mt][ks], b[0], b[1]);
        mma_16816<T>(acc[mt][nt + 1], a[mt][ks], b[2], b[3]);
      }
    }
    if constexpr (NT % 2 == 1) {
      uint32_t b[2];
      load_frag_b1<B_KN, LB>(b, sB, n0 + (NT - 1) * 8, k0 + ks * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mma_16816<T>(acc[mt][NT - 1], a[mt][ks], b[0], b[1]);
    }
  }
}

// C fragments of NT n-tiles (fp32) -> A fragments of NT/2 k-steps (16-bit).
template <class T, int MT, int NT>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[MT][NT / 2][4], const float (&c)[MT][NT][4]) {
  static_assert(NT % 2 == 0, "k-steps need pairs of n-tiles");
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int ks = 0; ks < NT / 2; ++ks) {
      a[mt][ks][0] = pack2<T>(c[mt][2 * ks][0], c[mt][2 * ks][1]);
      a[mt][ks][1] = pack2<T>(c[mt][2 * ks][2], c[mt][2 * ks][3]);
      a[mt][ks][2] = pack2<T>(c[mt][2 * ks + 1][0], c[mt][2 * ks + 1][1]);
      a[mt][ks][3] = pack2<T>(c[mt][2 * ks + 1][2], c[mt][2 * ks + 1][3]);
    }
  }
}

// Store C fragments (rows m0.., cols n0..) to a shared tile as 16-bit pairs.
template <class L, class T, int MT, int NT>
__device__ __forceinline__ void store_c(T* s, const float (&c)[MT][NT][4], int m0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int row = m0 + mt * 16 + g, col = n0 + nt * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(s + L::off(row, col)) = pack2<T>(c[mt][nt][0], c[mt][nt][1]);
      *reinterpret_cast<uint32_t*>(s + L::off(row + 8, col)) = pack2<T>(c[mt][nt][2], c[mt][nt][3]);
    }
  }
}

}  // namespace flashattn::detail::cuda
