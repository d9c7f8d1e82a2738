// The backward (backward.hpp) for bf16 inputs on AMX tiles: the same
// recomputation from the saved LSE, the same deterministic wavefront over
// tile pairs and the same group buffers, with the five GEMMs of a pair on the
// tile unit and P, dS rounded to bf16 before the GEMMs that consume them (as
// the correctness rule's naive_same_dtype and a GPU kernel do):
//   S  = Q K^T        A = Q rows (raw bf16)   B = K^T in VNNI pairs (per KV tile)
//   dP = dO V^T       A = dO rows             B = V^T in VNNI pairs
//   dV^T += dO^T P    A = dO^T (per Q tile)   B = P in VNNI pairs (per pair)
//   dK^T += Q^T dS    A = Q^T                 B = dS in VNNI pairs
//   dQ  += dS K       A = dS rows (bf16)      B = K in VNNI pairs (per KV tile)
// dK and dV are accumulated transposed (d x keys) so that every per-pair
// operand is a cheap row interleave of P or dS, never a transpose; they go
// back to rows once, at the end. Q stays unscaled (exact); the scale is
// applied to the fp32 scores and to dK, dQ when they are stored.
//
// fp32 (FA_FP32_SPLIT, kernels_amx.cpp) runs the same schedule with every
// operand held as three bf16 pieces (bf16_pack.hpp, split3) and each GEMM as
// the six piece products that carry fp32's precision (amx_tiles.hpp), as the
// fp32 forward does (forward_amx.hpp): P and dS are split, not rounded.
// Rows (Q, dO, dS) keep their pieces side by side in a row (A operands, one
// lda apart per row, the pieces dq32 apart); every other packing has one
// plane per piece.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "bf16_gemm.hpp"
#include "backward.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

static_assert(BR % 32 == 0 && BC % 32 == 0, "AMX backward tiles: multiples of 32");

struct BwdLayoutAmx {
  int64_t pieces;  // bf16 pieces per element: 3 for split fp32, else 1
  int64_t dp, dq32, qld, tq, tk, sqp, steps, groups, chunk;
  // Piece plane strides (bf16 elements) of the packings below.
  int64_t ktv_plane, kvn_plane, qtb_plane, pv_plane;
  // Per group (float offsets; bf16 buffers hold two values per float).
  size_t ktv, vtv, kvn, dkt, dvt, qb, dob, qtb, dotb, dq, lse, dsum, per_group;
  // Per thread.
  size_t s, dps, pvn, dsvn, dsb, kpos, zr, tmp, stage, per_thread;
};

inline BwdLayoutAmx bwd_layout_amx(const BwdParams& p, int nthreads) {
  BwdLayoutAmx L;
  const int64_t d = p.head_dim, g = p.group();
  L.pieces = tile_pieces(p.dtype);
  const int64_t P = L.pieces;
  L.dp = round_up(d, 16);
  L.dq32 = round_up(d, 32);
  L.qld = P * L.dq32;  // Q, dO rows: their pieces side by side
  L.tq = (p.seqlen_q + BR - 1) / BR;
  L.tk = (p.seqlen_k + BC - 1) / BC;
  L.sqp = L.tq * BR;  // query rows per head, padded: a tile's 16-row stores stay in its tile
  L.steps = std::max(L.tq, L.tk);
  L.groups = p.batch * p.heads_kv;
  const int64_t want = L.tk > 0 ? (8 * int64_t(nthreads) + L.tk - 1) / L.tk : 1;
  L.chunk = std::max<int64_t>(1, std::min(L.groups, want));
  const int64_t rows = g * L.sqp;
  L.ktv_plane = L.tk * L.dq32 * BC;
  L.kvn_plane = L.tk * BC * L.dp;
  L.qtb_plane = g * L.tq * L.dp * BR;
  L.pv_plane = BR * BC;
  Carver c;
  L.ktv = c.take(P * L.tk * L.dq32 / 2 * BC);  // K^T pairs: dq32/2 x BC per tile
  L.vtv = c.take(P * L.tk * L.dq32 / 2 * BC);  // V^T pairs
  L.kvn = c.take(P * L.tk * BC / 2 * L.dp);    // K pairs: BC/2 x dp per tile
  L.dkt = c.take(L.tk * L.dp * BC);            // dK^T: dp x BC per tile
  L.dvt = c.take(L.tk * L.dp * BC);            // dV^T
  L.qb = c.take(rows * L.qld / 2);             // Q rows: bf16 pieces of dq32 (zero padded), side by side
  L.dob = c.take(rows * L.qld / 2);            // dO rows
  L.qtb = c.take(P * g * L.tq * L.dp * BR / 2);   // Q^T per query tile: dp x BR, bf16
  L.dotb = c.take(P * g * L.tq * L.dp * BR / 2);  // dO^T per query tile
  L.dq = c.take(rows * L.dp);
  L.lse = c.take(rows);
  L.dsum = c.take(rows);
  L.per_group = c.floats;
  Carver t;
  L.s = t.take(BR * BC);
  L.dps = t.take(BR * BC);
  L.pvn = t.take(P * BR / 2 * BC);  // P pairs: BR/2 x BC
  L.dsvn = t.take(P * BR / 2 * BC); // dS pairs
  L.dsb = t.take(P * BR * BC / 2);  // dS rows, bf16 (one plane per piece)
  L.stage = P > 1 ? t.take(BC * L.qld / 2) : 0;  // split fp32: a K / V tile's rows of pieces
  L.kpos = t.take(BC);
  L.zr = t.take(BC);
  L.tmp = t.take(2 * L.dp);
  L.per_thread = t.floats;
  return L;
}

inline size_t backward_workspace_floats_amx(const BwdParams& p, int nthreads) {
  if (p.varlen()) {
    return max_over_sequences(p, [&](const BwdParams& s) { return backward_workspace_floats_amx(s, nthreads); });
  }
  const BwdLayoutAmx L = bwd_layout_amx(p, nthreads);
  return size_t(L.chunk) * L.per_group + size_t(nthreads) * L.per_thread;
}

inline uint16_t* u16(float* f) { return reinterpret_cast<uint16_t*>(f); }

// Group prologue, KV side: the three packings of KV tile j (per piece); zero
// dK^T, dV^T. stage: the thread's L.stage (split fp32: the tile's rows of
// pieces, packed from there).
template <class T>
void bwd_load_kv_amx(const BwdParams& p, const BwdLayoutAmx& L, float* G, uint16_t* stage,
                     int64_t b, int64_t hk, int64_t j) {
  const int64_t d = p.head_dim, c0 = j * BC, nk = std::min(BC, p.seqlen_k - c0);
  const auto K = rows_of<const T>(p.k, p.k_str, b, hk);
  const auto V = rows_of<const T>(p.v, p.v_str, b, hk);
  if constexpr (std::is_same_v<T, float>) {
    // K's pieces first (all three packed from the stage), then V's.
    split_rows([&](int64_t x) { return K.row(c0 + x); }, nk, d, L.dq32, stage, L.qld);
    for (int64_t q = 0; q < 3; ++q) {
      const StridedRows kr{stage + q * L.dq32, L.qld};
      transpose_pairs(u16(G + L.ktv) + q * L.ktv_plane + j * L.dq32 * BC, 2 * BC, kr, nk, BC, d);
      interleave_pairs(u16(G + L.kvn) + q * L.kvn_plane + j * BC * L.dp, 2 * L.dp, kr, nk, d, L.dp, BC / 2);
    }
    split_rows([&](int64_t x) { return V.row(c0 + x); }, nk, d, L.dq32, stage, L.qld);
    for (int64_t q = 0; q < 3; ++q) {
      const StridedRows vr{stage + q * L.dq32, L.qld};
      transpose_pairs(u16(G + L.vtv) + q * L.ktv_plane + j * L.dq32 * BC, 2 * BC, vr, nk, BC, d);
    }
  } else {
    (void)stage;
    const StridedRows kr{reinterpret_cast<const uint16_t*>(K.row(c0)), K.seq_stride};
    const StridedRows vr{reinterpret_cast<const uint16_t*>(V.row(c0)), V.seq_stride};
    transpose_pairs(u16(G + L.ktv) + j * L.dq32 * BC, 2 * BC, kr, nk, BC, d);
    transpose_pairs(u16(G + L.vtv) + j * L.dq32 * BC, 2 * BC, vr, nk, BC, d);
    interleave_pairs(u16(G + L.kvn) + j * BC * L.dp, 2 * L.dp, kr, nk, d, L.dp, BC / 2);
  }
  std::memset(G + L.dkt + j * L.dp * BC, 0, sizeof(float) * size_t(L.dp * BC));
  std::memset(G + L.dvt + j * L.dp * BC, 0, sizeof(float) * size_t(L.dp * BC));
}

// D = rowsum(dO o O) of one row, in 16 lanes (a scalar sum was ~1% of a
// 2k fp32 backward).
inline float row_dot(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 m = k + 16 <= n ? __mmask16(0xffff) : __mmask16((1u << (n - k)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, b + k), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// Query rows a head stride apart ([batch, seq, heads, d]) left the prologue
// waiting on its loads (split_row and bwd_load_q_amx were 6% of a 2k fp32
// backward's samples): the Q, dO and O rows kSplitAhead rows ahead are
// prefetched.
template <class T>
void bwd_prefetch_q_amx(const BwdParams& p, int64_t b, int64_t hk, int64_t hl, int64_t i) {
  if (i >= p.seqlen_q) return;
  const int64_t h = hk * p.group() + hl, bytes = p.head_dim * int64_t(sizeof(T));
  prefetch_lines(rows_of<const T>(p.q, p.q_str, b, h).row(i), bytes);
  prefetch_lines(rows_of<const T>(p.dout, p.do_str, b, h).row(i), bytes);
  prefetch_lines(rows_of<const T>(p.out, p.o_str, b, h).row(i), bytes);
}

// Group prologue, query side: padded row x of query head hl (zeros past Sq).
template <class T>
void bwd_load_q_amx(const BwdParams& p, const BwdLayoutAmx& L, float* G, float* tmp, int64_t b,
                    int64_t hk, int64_t hl, int64_t i) {
  const int64_t d = p.head_dim, h = hk * p.group() + hl, r = hl * L.sqp + i;
  uint16_t *q = u16(G + L.qb) + r * L.qld, *dout = u16(G + L.dob) + r * L.qld;
  std::memset(q, 0, size_t(L.qld) * 2);
  std::memset(dout, 0, size_t(L.qld) * 2);
  std::memset(G + L.dq + r * L.dp, 0, sizeof(float) * size_t(L.dp));
  if (i >= p.seqlen_q) {
    G[L.lse + r] = kInf;
    G[L.dsum + r] = 0.0f;
    return;
  }
  const T* qrow = rows_of<const T>(p.q, p.q_str, b, h).row(i);
  const T* drow = rows_of<const T>(p.dout, p.do_str, b, h).row(i);
  if constexpr (std::is_same_v<T, float>) {
    split_row(qrow, d, L.dq32, q, L.dq32);
    split_row(drow, d, L.dq32, dout, L.dq32);
  } else {
    std::memcpy(q, qrow, size_t(d) * 2);
    std::memcpy(dout, drow, size_t(d) * 2);
  }
  float *dof = tmp, *of = tmp + L.dp;
  load_row(drow, dof, d, 1.0f);
  load_row(rows_of<const T>(p.out, p.o_str, b, h).row(i), of, d, 1.0f);
  G[L.dsum + r] = row_dot(dof, of, d);
  G[L.lse + r] = lse_for_bwd(p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i]);
}

// One tile pair (query tile i, KV tile j) for every query head of the group.
template <class T>
void bwd_pair_amx(const BwdParams& p, const WindowMask& mask, const BwdLayoutAmx& L,
                         float* G, float* W, int64_t i, int64_t j, int64_t b, int64_t hk) {
  const int64_t d = p.head_dim, dp = L.dp, dq32 = L.dq32, g = p.group();
  const int64_t i0 = i * BR, nq_tile = std::min(BR, p.seqlen_q - i0);
  const int64_t c0 = j * BC, nk_tile = std::min(BC, p.seqlen_k - c0);
  const KeyRange kr = mask.keys(i0, i0 + nq_tile);
  if (kr.empty() || kr.end <= c0 || kr.begin >= c0 + nk_tile) return;
  const bool full = mask.tile_full(i0, i0 + nq_tile, c0, c0 + nk_tile);
  // A partial pair (causal / window diagonal) leaves out the query rows
  // before the first that sees a key of the tile (from a 32-row boundary, so
  // the query pairs and the Q^T / dO^T columns stay aligned) and the keys
  // past the last any row sees: with 256 x 128 tiles the causal diagonal's
  // second KV tile has half its rows masked out.
  int64_t a0 = 0, nk = nk_tile;
  if (!full) {
    int64_t first = nq_tile, kmax = c0;
    for (int64_t ii = 0; ii < nq_tile; ++ii) {
      const KeyRange rr = mask.keys(i0 + ii);
      if (rr.empty() || rr.end <= c0 || rr.begin >= c0 + nk_tile) continue;
      first = std::min(first, ii);
      kmax = std::max(kmax, rr.end);
    }
    if (first == nq_tile) return;
    a0 = first / 32 * 32;
    nk = std::min(nk_tile, kmax - c0);
  }
  const int64_t r0 = i0 + a0, nq = nq_tile - a0;
  const int64_t nq16 = round_up(nq, 16), nq32 = round_up(nq, 32);
  const int64_t nk16 = round_up(nk, 16), nk32 = round_up(nk, 32);
  const float qscale = q_factor(p.scale, p.softcap);
  (void)d;

  constexpr bool kSplit = std::is_same_v<T, float>;
  const int64_t qld = L.qld, pvp = L.pv_plane;
  const uint16_t* ktv = u16(G + L.ktv) + j * dq32 * BC;
  const uint16_t* vtv = u16(G + L.vtv) + j * dq32 * BC;
  const uint16_t* kvn = u16(G + L.kvn) + j * BC * dp;
  float *dkt = G + L.dkt + j * dp * BC, *dvt = G + L.dvt + j * dp * BC;
  float *s = W + L.s, *dps = W + L.dps;
  uint16_t *pvn = u16(W + L.pvn), *dsvn = u16(W + L.dsvn), *dsb = u16(W + L.dsb);
  if (p.has_variants()) key_positions(W + L.kpos, c0, nk_tile);
  const __mmask16 tail = nk % 16 ? __mmask16((1u << (nk % 16)) - 1) : __mmask16(0xffff);
  configure_tiles();
  for (int64_t hl = 0; hl < g; ++hl) {
    const int64_t r = hl * L.sqp + r0;
    const uint16_t* q = u16(G + L.qb) + r * qld;
    const uint16_t* dout = u16(G + L.dob) + r * qld;
    const uint16_t* qt = u16(G + L.qtb) + (hl * L.tq + i) * dp * BR + a0;
    const uint16_t* dot = u16(G + L.dotb) + (hl * L.tq + i) * dp * BR + a0;
    const float *lse = G + L.lse + r, *dsum = G + L.dsum + r;
    float* dq = G + L.dq + r * dp;
    pair_gemm<kSplit>(nq16, nk16, dq32, q, qld, dq32, ktv, 2 * BC, L.ktv_plane, s, BC, false);      // S / scale
    pair_gemm<kSplit>(nq16, nk16, dq32, dout, qld, dq32, vtv, 2 * BC, L.ktv_plane, dps, BC, false);  // dP = dO V^T
    const vf qs = vsplat(qscale);
    for (int64_t ii = 0; ii < nq; ++ii)
      for (int64_t jj = 0; jj < nk16; jj += VW) vstore(s + ii * BC + jj, vload(s + ii * BC + jj) * qs);
    // Up to nk16: past a trimmed nk the tile's keys are real and every row's
    // P there must be 0 (past the sequence they would only be thrown away).
    if (!full) mask_rows(s, BC, mask, r0, nq, c0, nk16);
    p_and_ds_rows(p, b, hk * g + hl, r0, nq, c0, nk, nk16, lse, dsum, W + L.kpos, W + L.zr, s, dps, BC);
    // bf16 operands: P and dS in query pairs (rows past nq are zero), dS rows
    // with the keys past nk zeroed (they meet K's zero rows in dS K).
    const vf zero = vsplat(0.0f);
    for (int64_t ii = 0; ii < nq32; ii += 2)
      for (int64_t jj = 0; jj < nk16; jj += VW) {
        const bool a = ii < nq, c = ii + 1 < nq;
        const vf p0 = a ? vload(s + ii * BC + jj) : zero, p1 = c ? vload(s + (ii + 1) * BC + jj) : zero;
        const vf d0 = a ? vload(dps + ii * BC + jj) : zero, d1 = c ? vload(dps + (ii + 1) * BC + jj) : zero;
        uint16_t *pd = pvn + (ii / 2) * 2 * BC + 2 * jj, *dd = dsvn + (ii / 2) * 2 * BC + 2 * jj;
        const __m512 pe = reinterpret_cast<__m512>(p0), po = reinterpret_cast<__m512>(p1);
        const __m512 de = reinterpret_cast<__m512>(d0), dO = reinterpret_cast<__m512>(d1);
        if constexpr (kSplit) {
          store_pair_pieces(pd, pvp, pe, po);
          store_pair_pieces(dd, pvp, de, dO);
        } else {
          _mm512_storeu_si512(pd, pack_pair_bf16(pe, po));
          _mm512_storeu_si512(dd, pack_pair_bf16(de, dO));
        }
      }
    for (int64_t ii = 0; ii < nq16; ++ii)
      for (int64_t jj = 0; jj < nk32; jj += VW) {
        const __mmask16 km = ii >= nq || jj >= nk16 ? __mmask16(0) : jj + VW < nk16 ? __mmask16(0xffff) : tail;
        const __m512 x = _mm512_maskz_loadu_ps(km, dps + ii * BC + jj);
        auto store = [&](int64_t q, __m512 v) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dsb + q * pvp + ii * BC + jj),
                              reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
        };
        if constexpr (kSplit) {
          const Split3 z = split3(x);
          store(0, z.hi);
          store(1, z.mid);
          store(2, z.lo);
        } else {
          store(0, x);
        }
      }
    pair_gemm<kSplit>(dp, nk16, nq32, dot, BR, L.qtb_plane, pvn, 2 * BC, pvp, dvt, BC, true);  // dV^T += dO^T P
    pair_gemm<kSplit>(dp, nk16, nq32, qt, BR, L.qtb_plane, dsvn, 2 * BC, pvp, dkt, BC, true);  // dK^T += Q^T dS
    pair_gemm<kSplit>(nq16, dp, nk32, dsb, BC, pvp, kvn, 2 * dp, L.kvn_plane, dq, dp, true);   // dQ += dS K
  }
  release_tiles();
}

template <class T>
void backward_amx_t(const BwdParams& p, float* ws, int nthreads) {
  const WindowMask mask(p);
  const BwdLayoutAmx L = bwd_layout_amx(p, nthreads);
  const int64_t g = p.group(), d = p.head_dim, dp = L.dp;
  // dK = scale dS^T Q: backward.hpp's Q carries scale / cap and dK the factor
  // cap; with Q unscaled here the two meet as scale.
  const float kmul = p.scale;
  float* const wbase = ws + size_t(L.chunk) * L.per_group;
  Wavefront wf(L.chunk, L.tk, L.steps);
#pragma omp parallel num_threads(nthreads)
  {
    float* W = wbase + size_t(omp_get_thread_num()) * L.per_thread;
    for (int64_t g0 = 0; g0 < L.groups; g0 += L.chunk) {
      const int64_t ng = std::min(L.chunk, L.groups - g0);
      auto group_base = [&](int64_t gl) { return ws + size_t(gl) * L.per_group; };
#pragma omp single nowait
      wf.reset(ng);  // (the barriers of the prologue's loops below come before run)
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t x = 0; x < ng * L.tk; ++x) {
        const int64_t gg = g0 + x / L.tk;
        bwd_load_kv_amx<T>(p, L, group_base(x / L.tk), u16(W + L.stage), gg / p.heads_kv, gg % p.heads_kv,
                           x % L.tk);
      }
      const int64_t qrows = g * L.sqp;
#pragma omp for schedule(static)
      for (int64_t x = 0; x < ng * qrows; ++x) {
        if (x + kSplitAhead < ng * qrows) {
          const int64_t ga = g0 + (x + kSplitAhead) / qrows, ra = (x + kSplitAhead) % qrows;
          bwd_prefetch_q_amx<T>(p, ga / p.heads_kv, ga % p.heads_kv, ra / L.sqp, ra % L.sqp);
        }
        const int64_t gg = g0 + x / qrows, rr = x % qrows;
        bwd_load_q_amx<T>(p, L, group_base(x / qrows), W + L.tmp, gg / p.heads_kv, gg % p.heads_kv,
                       rr / L.sqp, rr % L.sqp);
      }
      // Q^T and dO^T per query tile, from the padded rows just written.
#pragma omp for schedule(dynamic, 1)
      for (int64_t x = 0; x < ng * g * L.tq; ++x) {
        float* G = group_base(x / (g * L.tq));
        const int64_t t = x % (g * L.tq);  // hl * tq + i
        const int64_t row0 = (t / L.tq) * L.sqp + (t % L.tq) * BR;
        const int64_t nq = std::min(BR, p.seqlen_q - (t % L.tq) * BR);
        for (int64_t q = 0; q < L.pieces; ++q) {
          const StridedRows qr{u16(G + L.qb) + row0 * L.qld + q * L.dq32, L.qld};
          const StridedRows dr{u16(G + L.dob) + row0 * L.qld + q * L.dq32, L.qld};
          transpose_bf16(qr, nq, d, dp, BR, u16(G + L.qtb) + q * L.qtb_plane + t * dp * BR, BR);
          transpose_bf16(dr, nq, d, dp, BR, u16(G + L.dotb) + q * L.qtb_plane + t * dp * BR, BR);
        }
      }
      wf.run([&](int64_t gl, int64_t i, int64_t j) {
        const int64_t gg = g0 + gl;
        if (i < L.tq) bwd_pair_amx<T>(p, mask, L, group_base(gl), W, i, j, gg / p.heads_kv, gg % p.heads_kv);
      });
#pragma omp barrier
      // dK, dV back to rows, 16 keys at a time: 16 x 16 transposes of the
      // d x BC accumulators into the thread's S buffer (free after the
      // steps), then the rows out. (A scalar gather per key, one load per
      // 512-byte stride, was 4-6% of the fp32 backward's samples.)
      const int64_t kb = (p.seqlen_k + 15) / 16;
#pragma omp for schedule(static) nowait
      for (int64_t x = 0; x < ng * kb; ++x) {
        const int64_t gg = g0 + x / kb, jj0 = (x % kb) * 16, nk = std::min<int64_t>(16, p.seqlen_k - jj0);
        const int64_t b = gg / p.heads_kv, hk = gg % p.heads_kv;
        const float* G = group_base(x / kb);
        const size_t at = size_t((jj0 / BC) * dp * BC + jj0 % BC);
        static_assert(BR * BC >= 16 * 256, "the S buffer holds 16 rows of the widest dp");
        float* rows = W + L.s;  // 16 rows of dp floats
        auto out = [&](size_t acc, const auto& dst, float mul) {
          for (int64_t k0 = 0; k0 < dp; k0 += 16) {
            __m512i r[16];
            for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(G + acc + at + size_t((k0 + c) * BC));
            transpose16x16(r);
            for (int c = 0; c < 16; ++c) _mm512_storeu_si512(rows + c * dp + k0, r[c]);
          }
          for (int64_t c = 0; c < nk; ++c) store_row(rows + c * dp, dst.row(jj0 + c), d, mul);
        };
        out(L.dkt, rows_of<T>(p.dk, p.dk_str, b, hk), kmul);
        out(L.dvt, rows_of<T>(p.dv, p.dv_str, b, hk), 1.0f);
      }
#pragma omp for schedule(static)
      for (int64_t x = 0; x < ng * g * p.seqlen_q; ++x) {
        const int64_t gg = g0 + x / (g * p.seqlen_q), rr = x % (g * p.seqlen_q);
        const int64_t hl = rr / p.seqlen_q, i = rr % p.seqlen_q;
        const int64_t b = gg / p.heads_kv, h = (gg % p.heads_kv) * g + hl;
        const float* G = group_base(x / (g * p.seqlen_q));
        store_row(G + L.dq + (hl * L.sqp + i) * dp, rows_of<T>(p.dq, p.dq_str, b, h).row(i), d,
                  p.scale);
      }
    }
  }
}

template <class T>
void backward_amx_dt(const BwdParams& p, float* ws, int nthreads) {
  if (!p.varlen()) return backward_amx_t<T>(p, ws, nthreads);
  for_each_sequence(p, [&](const BwdParams& sp) { backward_amx_t<T>(sp, ws, nthreads); });
}
// bf16, or split fp32 (FA_FP32_SPLIT builds only reach here with fp32).
inline void backward_amx(const BwdParams& p, float* ws, int nthreads) {
#if FA_FP32_SPLIT
  if (p.dtype == DType::F32) return backward_amx_dt<float>(p, ws, nthreads);
#endif
  backward_amx_dt<bf16_t>(p, ws, nthreads);
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
