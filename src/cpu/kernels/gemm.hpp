// Register-blocked fp32 micro-kernels: C[M x N] (+)= A[M x K] * B[K x N].
// A is read one scalar at a time (broadcast) through two strides, so the
// same kernel serves A = Q, A = K and transposed operands (A = P^T is P with
// its strides swapped) and no tile is ever transposed per tile pair. B and C
// are row-major with N a multiple of VW (buffers are padded with zeros); B
// may be 16-bit rows (bf16 / fp16), widened to fp32 as they are loaded
// (convert.hpp's vload_row), which is exact, so the result is the same as on
// a converted copy. An MR x (NV*VW) block of C lives in registers for the
// whole K loop.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "convert.hpp"
#include "simd.hpp"

#if !defined(FA_MR) || !defined(FA_NV)
#error "define FA_MR and FA_NV (micro-kernel rows and vectors per row)"
#endif
// FA_DECODE_DPBF16: bf16 decode steps on VDPBF16PS (dot_rows_dpbf16 and
// pv_dpbf16 below; kernels_avx512bf16_decode.cpp sets it).
#ifndef FA_DECODE_DPBF16
#define FA_DECODE_DPBF16 0
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

constexpr int MR = FA_MR;  // rows of C per micro-kernel
constexpr int NV = FA_NV;  // vectors of C per row
constexpr int NR = NV * VW;

template <class TB>
using MicroFn = void (*)(int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak, const TB* B,
                         ptrdiff_t ldb, float* C, ptrdiff_t ldc, const float* row_scale);

// kAcc: C += A*B (C loaded first; multiplied by row_scale[r] when kScale),
// else C = A*B.
template <int R, int V, bool kAcc, bool kScale, class TB>
void micro(int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak, const TB* B, ptrdiff_t ldb,
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
    const TB* b = B + k * ldb;
    const float* a = A + k * ak;
    vf bv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) bv[v] = vload_row(b + v * VW);
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

template <bool kAcc, bool kScale, class TB, int V, size_t... Rs>
constexpr std::array<MicroFn<TB>, MR> micro_row(std::index_sequence<Rs...>) {
  return {&micro<int(Rs) + 1, V, kAcc, kScale, TB>...};
}
template <bool kAcc, bool kScale, class TB, size_t... Vs>
constexpr std::array<std::array<MicroFn<TB>, MR>, NV> micro_table(std::index_sequence<Vs...>) {
  return {micro_row<kAcc, kScale, TB, int(Vs) + 1>(std::make_index_sequence<MR>())...};
}

// C[M x N] (+)= A * B with A(m, k) = A[m*am + k*ak]; N % VW == 0.
// K is split into blocks of KC so the B panel in use (KC x NR floats, 32 KiB
// with AVX-512) stays in L1 for head_dim 256; each C element still sums its
// products in k order, so the blocking changes no result.
constexpr int64_t KC = 128;

// kPrefetch: before each micro-kernel call, the next block's C rows (when
// accumulating) and A rows (row-major A) are requested, so that they arrive
// while this block's K loop runs. The backward's dV / dK / dQ tiles and its
// Q / dO rows are often out of this core's L2 when a tile pair starts (a
// thread takes another pair each wavefront step), and the micro-kernel's
// first loads of them stalled the block: +1-3% on the fp32 backward of a
// Zen 4 host (bench/NOTES.md, "The fp32 backward's operand blocks
// prefetched"). The forward prefetches its K / V tiles itself and keeps O
// in its own workspace.
template <bool kAcc, bool kScale, class TB, bool kPrefetch = false>
void gemm_block(int64_t M, int64_t N, int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak,
                const TB* B, ptrdiff_t ldb, float* C, ptrdiff_t ldc, const float* row_scale) {
  static constexpr auto table = micro_table<kAcc, kScale, TB>(std::make_index_sequence<NV>());
  // Where M is not a multiple of MR, the last two row blocks share their rows
  // evenly (8 = 4 + 4 rather than 6 + 2 with AVX2's MR = 6): a block of one or
  // two rows has too few accumulators to cover the FMA latency (2 x 2 of them
  // against the 8 in flight that two FMA ports of 4-cycle latency need), so
  // a decode step's P V (8 query rows) ran its last block at half rate. The
  // k order of every sum is the same either way.
  const int64_t tail = M > MR && M % MR != 0 ? MR + M % MR : 0;  // rows of the last two blocks
  const int64_t m_even = M - tail;                                // rows in whole MR blocks before them
  auto rows_at = [&](int64_t m0) {
    if (tail && m0 >= m_even) return m0 == m_even ? tail / 2 : M - m0;
    return M - m0 < MR ? M - m0 : MR;
  };
  auto vecs_at = [&](int64_t n0) { return (N - n0) / VW < NV ? (N - n0) / VW : NV; };
  for (int64_t n0 = 0; n0 < N; n0 += NR) {
    const int64_t nv = vecs_at(n0);
    for (int64_t m0 = 0; m0 < M;) {
      const int64_t mr = rows_at(m0);
      if constexpr (kPrefetch) {
        int64_t m1 = m0 + mr, n1 = n0;
        if (m1 >= M) m1 = 0, n1 += NR;
        if (n1 < N) {
          if (kAcc) prefetch_block(C + m1 * ldc + n1, rows_at(m1), vecs_at(n1) * VW, ldc);
          if (ak == 1) prefetch_block(A + m1 * am, rows_at(m1), K, am);
        }
      }
      table[nv - 1][mr - 1](K, A + m0 * am, am, ak, B + n0, ldb, C + m0 * ldc + n0, ldc,
                            kScale ? row_scale + m0 : nullptr);
      m0 += mr;
    }
  }
}

template <bool kAcc, bool kScale = false, class TB = float, bool kPrefetch = false>
void gemm(int64_t M, int64_t N, int64_t K, const float* A, ptrdiff_t am, ptrdiff_t ak,
          const TB* B, ptrdiff_t ldb, float* C, ptrdiff_t ldc,
          const float* row_scale = nullptr) {
  int64_t kc = K < KC ? K : KC;
  gemm_block<kAcc, kScale, TB, kPrefetch>(M, N, kc, A, am, ak, B, ldb, C, ldc, row_scale);
  for (int64_t k0 = kc; k0 < K; k0 += KC) {
    kc = K - k0 < KC ? K - k0 : KC;
    gemm_block<true, false, TB, kPrefetch>(M, N, kc, A + k0 * ak, am, ak, B + k0 * ldb, ldb, C, ldc, nullptr);
  }
}

// ---- Scores of a few query rows against many key rows --------------------
// The decode shape: S[j][c] = K_j . Q_c for up to kDotCols query rows (the
// GQA group of one decode step) and a tile of key rows. gemm() vectorises
// over the query columns, so with 8 of them in 16-lane vectors half of every
// FMA was padding; here the vectors run along the head dimension (every lane
// useful), two key rows at a time, and each key's NC partial-sum vectors are
// folded into one vector of NC sums by a shuffle-and-add tree (about 3 shuffle
// or add instructions per column per key against d / VW FMAs per column).

constexpr int kDotCols = 8;

namespace dot_detail {
// Lane o of the combination of a and b (each holding W / G columns of G
// partial-sum lanes) into one vector of 2W / G columns of G / 2 lanes: the
// first (lo) or second (hi) half of column o / (G / 2)'s lanes; columns of a
// first, then b's (lanes of b are W + i in the shuffle's numbering).
template <int W, int G, bool kHi>
constexpr int src_lane(int o) {
  const int m = W / G, u = o / (G / 2), e = o % (G / 2);
  return (u < m ? 0 : W) + (u % m) * G + e + (kHi ? G / 2 : 0);
}
template <int G, size_t... I>
inline vf fold(vf a, vf b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, src_lane<VW, G, false>(int(I))...) +
         __builtin_shufflevector(a, b, src_lane<VW, G, true>(int(I))...);
}
// N vectors (N columns of G lanes each, or N aligned column groups) folded
// pairwise down to one: the first log2(N) levels of fold_columns' tree.
template <int N, int G = VW>
[[gnu::always_inline]] inline vf fold_group(vf* v) {  // (GCC left it a call per key row)
  if constexpr (N == 1) {
    return v[0];
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < N / 2; ++i) v[i] = fold<G>(v[2 * i], v[2 * i + 1], std::make_index_sequence<VW>());
    return fold_group<N / 2, G / 2>(v);
  }
}
// n vectors of G-lane column groups (at G = VW: one column's VW partial sums
// each) -> lane c of the result holds column c's total (n a power of two).
template <int N, int G = VW>
inline vf fold_columns(vf* v) {
  if constexpr (G == 1) {
    return v[0];
  } else if constexpr (N == 1) {  // one vector left: fold it with itself
    v[0] = fold<G>(v[0], v[0], std::make_index_sequence<VW>());
    return fold_columns<1, G / 2>(v);
  } else {
    vf f = fold_group<N, G>(v);
    return fold_columns<1, G / N>(&f);
  }
}
}  // namespace dot_detail

// Register budget of dot_rows: CG query columns per pass over the head
// dimension and KR key rows at a time, so that KR x CG accumulators, the KR
// key vectors and one query vector fit the ISA's vector registers. With 16
// (AVX2) all 8 columns of a GQA group at once took 2 x 8 accumulators plus
// 3 operands, and GCC kept three accumulators on the stack inside the loop
// (a load and a store per step on three FMA chains); AVX-512's 32 registers
// keep the 2 x 8 block the tenth session measured.
constexpr int kVecRegs = VW >= 16 ? 32 : 16;
template <int NC>
constexpr int kDotGroup = kVecRegs >= 32 || NC < 4 ? NC : 4;
template <int NC>
constexpr int kDotKeys = kVecRegs >= 32 ? 2 : (kVecRegs - 1) / (kDotGroup<NC> + 1);

// Scores of KR key rows (k, row stride ldk) against NC query rows (q, NC x
// d): one vector of NC sums per key row into s (row stride lds), lanes NC..
// zeroed. Every (key, column) sum runs over the head dimension in the same
// order and is folded by the same tree whatever KR and the column group, so
// the register budget changes no score.
template <int NC, int KR, class TK>
inline void dot_block(int64_t d, const TK* k, int64_t ldk, const float* q, float* s, int64_t lds,
                      const vi& keep) {
  constexpr int CG = kDotGroup<NC>, NG = NC / CG;
  vf grp[KR][NG];  // one vector per column group: its columns folded
#pragma GCC unroll 8
  for (int g = 0; g < NG; ++g) {
    vf acc[KR][CG];
#pragma GCC unroll 8
    for (int r = 0; r < KR; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < CG; ++c) acc[r][c] = vsplat(0.0f);
    const float* qg = q + g * CG * d;
    for (int64_t e = 0; e < d; e += VW) {
      vf x[KR];
#pragma GCC unroll 8
      for (int r = 0; r < KR; ++r) x[r] = vload_row(k + r * ldk + e);
#pragma GCC unroll 8
      for (int c = 0; c < CG; ++c) {
        const vf y = vload(qg + c * d + e);
#pragma GCC unroll 8
        for (int r = 0; r < KR; ++r) acc[r][c] += x[r] * y;
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < KR; ++r) grp[r][g] = dot_detail::fold_group<CG>(acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < KR; ++r)
    vstore(s + r * lds, vsel(keep, dot_detail::fold_columns<NG, VW / CG>(grp[r]), vsplat(0.0f)));
}

// The decode kernels' optional tick: step(work) once per block of key rows,
// work counted in multiply-adds (key rows x query columns x head-dim
// elements), so that a decode task can spread its prefetches over the step's
// arithmetic (forward.hpp SpreadPrefetch); this one does nothing.
struct NoTick {
  void step(int64_t) {}
  void flush() {}
};

// s[j * lds + c] = K[j * ldk + 0 .. d) . q[c * d + 0 .. d) for j < nk, c < NC
// (NC a power of two, at most VW and kDotCols), and 0 for NC <= c < VW.
// d a multiple of VW. K: fp32 rows or 16-bit rows widened as loaded.
template <int NC, class TK, class Tick = NoTick>
void dot_rows(int64_t nk, int64_t d, const TK* K, int64_t ldk, const float* q, float* s,
              int64_t lds, Tick* tick = nullptr) {
  static_assert(NC >= 1 && NC <= VW && NC <= kDotCols && (NC & (NC - 1)) == 0, "NC");
  constexpr int KR = kDotKeys<NC>;
  vi keep;
#pragma GCC unroll 16
  for (int i = 0; i < VW; ++i) keep[i] = i < NC ? -1 : 0;
  int64_t j = 0;
  for (; j + KR <= nk; j += KR) {
    dot_block<NC, KR>(d, K + j * ldk, ldk, q, s + j * lds, lds, keep);
    if (tick) tick->step(int64_t(KR) * NC * d);
  }
  for (; j < nk; ++j) dot_block<NC, 1>(d, K + j * ldk, ldk, q, s + j * lds, lds, keep);
}

#if FA_DECODE_DPBF16
// The scores of a bf16 decode step on VDPBF16PS (kernels_avx512bf16_decode.cpp):
// K rows as they are against the group's unscaled bf16 Q rows. One
// instruction adds, per lane, the two products of a pair of adjacent head-dim
// elements, so a (key, column) sum takes d / 32 instructions where dot_block
// takes d / 16 FMAs plus the widening of every K vector (that widening and
// those FMAs were the decode step's largest cost, 43% of its time, perf on
// Zen 5). Products of two bf16 are exact in fp32; the sums round per pair,
// and qmul (the softmax scale) multiplies each folded sum instead of Q. Same
// blocking and fold tree as dot_block.
static_assert(VW == 16, "VDPBF16PS: 16 fp32 lanes, 32 bf16 per vector");
template <int NC, int KR>
[[gnu::always_inline]] inline void dot_block_dpbf16(int64_t d, const uint16_t* k, int64_t ldk, const uint16_t* q,
                                                    float* s, int64_t lds, const vi& keep, float qmul) {
  constexpr int CG = kDotGroup<NC>, NG = NC / CG;
  vf grp[KR][NG];
#pragma GCC unroll 8
  for (int g = 0; g < NG; ++g) {
    __m512 acc[KR][CG];
#pragma GCC unroll 8
    for (int r = 0; r < KR; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < CG; ++c) acc[r][c] = _mm512_setzero_ps();
    const uint16_t* qg = q + g * CG * d;
    for (int64_t e = 0; e < d; e += 2 * VW) {
      __m512bh x[KR];
#pragma GCC unroll 8
      for (int r = 0; r < KR; ++r) x[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(k + r * ldk + e));
#pragma GCC unroll 8
      for (int c = 0; c < CG; ++c) {
        const __m512bh y = reinterpret_cast<__m512bh>(_mm512_loadu_si512(qg + c * d + e));
#pragma GCC unroll 8
        for (int r = 0; r < KR; ++r) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], x[r], y);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < KR; ++r) {
      vf a[CG];
#pragma GCC unroll 8
      for (int c = 0; c < CG; ++c) a[c] = reinterpret_cast<vf>(acc[r][c]);
      grp[r][g] = dot_detail::fold_group<CG>(a);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < KR; ++r)
    vstore(s + r * lds,
           vsel(keep, vsplat(qmul) * dot_detail::fold_columns<NG, VW / CG>(grp[r]), vsplat(0.0f)));
}

// dot_rows on VDPBF16PS: s[j * lds + c] = qmul * (K_j . q_c) with K bf16 rows
// and q NC bf16 rows of d elements (d a multiple of 32), lanes NC.. zeroed.
template <int NC, class Tick = NoTick>
void dot_rows_dpbf16(int64_t nk, int64_t d, const bf16_t* K, int64_t ldk, const uint16_t* q, float qmul,
                     float* s, int64_t lds, Tick* tick = nullptr) {
  static_assert(NC >= 1 && NC <= VW && NC <= kDotCols && (NC & (NC - 1)) == 0, "NC");
  constexpr int KR = kDotKeys<NC>;
  const uint16_t* k = reinterpret_cast<const uint16_t*>(K);
  vi keep;
#pragma GCC unroll 16
  for (int i = 0; i < VW; ++i) keep[i] = i < NC ? -1 : 0;
  int64_t j = 0;
  for (; j + KR <= nk; j += KR) {
    dot_block_dpbf16<NC, KR>(d, k + j * ldk, ldk, q, s + j * lds, lds, keep, qmul);
    if (tick) tick->step(int64_t(KR) * NC * d);
  }
  for (; j < nk; ++j) dot_block_dpbf16<NC, 1>(d, k + j * ldk, ldk, q, s + j * lds, lds, keep, qmul);
}

// A decode step's P V on VDPBF16PS: O[r] = alpha[r] O[r] + sum_j P[j][r] V_j
// for R query rows, bf16 V rows as they are (d a multiple of 32), P^T fp32
// rows lds apart, nk even. P is rounded to bf16 (as the GPU kernels and the
// pair-GEMM path round it); each key pair's P values are packed once into
// `pairs` (nk / 2 x 16 words of two bf16), and each pair of V rows is
// interleaved (VPERMT2W) into the pair layout the instruction reads. Per key
// this is half the instructions of micro()'s widening loads and FMAs. tick:
// step() per two key pairs of each 32-column block (per pair, its loads and
// stores of the prefetcher's state cost a few percent of a warm step).
template <int R, class Tick = NoTick>
void pv_dpbf16(int64_t nk, int64_t d, const float* pt, int64_t lds, const bf16_t* V, int64_t ldv, float* o,
               int64_t ldo, const float* alpha, uint32_t* pairs, Tick* tick = nullptr) {
  static_assert(R >= 1 && R <= VW, "R");
  const uint16_t* v = reinterpret_cast<const uint16_t*>(V);
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                      6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  // Word 2c of a pair vector: bf16(P[j][c]); word 2c + 1: bf16(P[j + 1][c]).
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23,
                                              7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t j = 0; j < nk; j += 2) {
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(pt + (j + 1) * lds), _mm512_loadu_ps(pt + j * lds));
    _mm512_storeu_si512(pairs + j / 2 * VW, _mm512_permutexvar_epi16(interleave, reinterpret_cast<__m512i>(x)));
  }
  for (int64_t e = 0; e < d; e += 2 * VW) {
    __m512 acc[R][2];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(alpha[r]);
      acc[r][0] = _mm512_mul_ps(a, _mm512_loadu_ps(o + r * ldo + e));
      acc[r][1] = _mm512_mul_ps(a, _mm512_loadu_ps(o + r * ldo + e + VW));
    }
    for (int64_t j = 0; j < nk; j += 2) {
      const __m512i v0 = _mm512_loadu_si512(v + j * ldv + e), v1 = _mm512_loadu_si512(v + (j + 1) * ldv + e);
      const __m512bh w0 = reinterpret_cast<__m512bh>(_mm512_permutex2var_epi16(v0, lo, v1));
      const __m512bh w1 = reinterpret_cast<__m512bh>(_mm512_permutex2var_epi16(v0, hi, v1));
      const uint32_t* pj = pairs + j / 2 * VW;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512bh p = reinterpret_cast<__m512bh>(_mm512_set1_epi32(int(pj[r])));
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], p, w0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], p, w1);
      }
      if (tick && (j & 2)) tick->step(2 * (2 * R * 2 * VW));
    }
    if (tick && (nk & 2)) tick->step(2 * R * 2 * VW);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(o + r * ldo + e, acc[r][0]);
      _mm512_storeu_ps(o + r * ldo + e + VW, acc[r][1]);
    }
  }
}
#endif

}  // namespace flashattn::detail::cpu::FA_ISA_NS
