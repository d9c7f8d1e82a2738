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
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "bf16_gemm.hpp"
#include "backward.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

static_assert(BR % 32 == 0 && BC % 32 == 0, "AMX backward tiles: multiples of 32");

struct BwdLayoutAmx {
  int64_t dp, dq32, tq, tk, sqp, steps, groups, chunk;
  // Per group (float offsets; bf16 buffers hold two values per float).
  size_t ktv, vtv, kvn, dkt, dvt, qb, dob, qtb, dotb, dq, lse, dsum, per_group;
  // Per thread.
  size_t s, dps, pvn, dsvn, dsb, kpos, zr, tmp, per_thread;
};

inline BwdLayoutAmx bwd_layout_amx(const BwdParams& p, int nthreads) {
  BwdLayoutAmx L;
  const int64_t d = p.head_dim, g = p.group();
  L.dp = round_up(d, 16);
  L.dq32 = round_up(d, 32);
  L.tq = (p.seqlen_q + BR - 1) / BR;
  L.tk = (p.seqlen_k + BC - 1) / BC;
  L.sqp = L.tq * BR;  // query rows per head, padded: a tile's 16-row stores stay in its tile
  L.steps = std::max(L.tq, L.tk);
  L.groups = p.batch * p.heads_kv;
  const int64_t want = L.tk > 0 ? (8 * int64_t(nthreads) + L.tk - 1) / L.tk : 1;
  L.chunk = std::max<int64_t>(1, std::min(L.groups, want));
  const int64_t rows = g * L.sqp;
  Carver c;
  L.ktv = c.take(L.tk * L.dq32 / 2 * BC);  // K^T pairs: dq32/2 x BC per tile
  L.vtv = c.take(L.tk * L.dq32 / 2 * BC);  // V^T pairs
  L.kvn = c.take(L.tk * BC / 2 * L.dp);    // K pairs: BC/2 x dp per tile
  L.dkt = c.take(L.tk * L.dp * BC);        // dK^T: dp x BC per tile
  L.dvt = c.take(L.tk * L.dp * BC);        // dV^T
  L.qb = c.take(rows * L.dq32 / 2);        // Q rows, bf16, zero padded to dq32
  L.dob = c.take(rows * L.dq32 / 2);       // dO rows
  L.qtb = c.take(g * L.tq * L.dp * BR / 2);   // Q^T per query tile: dp x BR, bf16
  L.dotb = c.take(g * L.tq * L.dp * BR / 2);  // dO^T per query tile
  L.dq = c.take(rows * L.dp);
  L.lse = c.take(rows);
  L.dsum = c.take(rows);
  L.per_group = c.floats;
  Carver t;
  L.s = t.take(BR * BC);
  L.dps = t.take(BR * BC);
  L.pvn = t.take(BR / 2 * BC);  // P pairs: BR/2 x BC
  L.dsvn = t.take(BR / 2 * BC); // dS pairs
  L.dsb = t.take(BR * BC / 2);  // dS rows, bf16
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

// Group prologue, KV side: the three packings of KV tile j; zero dK^T, dV^T.
inline void bwd_load_kv_amx(const BwdParams& p, const BwdLayoutAmx& L, float* G, int64_t b,
                            int64_t hk, int64_t j) {
  const int64_t d = p.head_dim, c0 = j * BC, nk = std::min(BC, p.seqlen_k - c0);
  const auto K = rows_of<const bf16_t>(p.k, p.k_str, b, hk);
  const auto V = rows_of<const bf16_t>(p.v, p.v_str, b, hk);
  const StridedRows kr{reinterpret_cast<const uint16_t*>(K.row(c0)), K.seq_stride};
  const StridedRows vr{reinterpret_cast<const uint16_t*>(V.row(c0)), V.seq_stride};
  transpose_pairs(u16(G + L.ktv) + j * L.dq32 * BC, 2 * BC, kr, nk, BC, d);
  transpose_pairs(u16(G + L.vtv) + j * L.dq32 * BC, 2 * BC, vr, nk, BC, d);
  interleave_pairs(u16(G + L.kvn) + j * BC * L.dp, 2 * L.dp, kr, nk, d, L.dp, BC / 2);
  std::memset(G + L.dkt + j * L.dp * BC, 0, sizeof(float) * size_t(L.dp * BC));
  std::memset(G + L.dvt + j * L.dp * BC, 0, sizeof(float) * size_t(L.dp * BC));
}

// Group prologue, query side: padded row x of query head hl (zeros past Sq).
inline void bwd_load_q_amx(const BwdParams& p, const BwdLayoutAmx& L, float* G, float* tmp,
                           int64_t b, int64_t hk, int64_t hl, int64_t i) {
  const int64_t d = p.head_dim, h = hk * p.group() + hl, r = hl * L.sqp + i;
  uint16_t *q = u16(G + L.qb) + r * L.dq32, *dout = u16(G + L.dob) + r * L.dq32;
  std::memset(q, 0, size_t(L.dq32) * 2);
  std::memset(dout, 0, size_t(L.dq32) * 2);
  std::memset(G + L.dq + r * L.dp, 0, sizeof(float) * size_t(L.dp));
  if (i >= p.seqlen_q) {
    G[L.lse + r] = kInf;
    G[L.dsum + r] = 0.0f;
    return;
  }
  const bf16_t* qrow = rows_of<const bf16_t>(p.q, p.q_str, b, h).row(i);
  const bf16_t* drow = rows_of<const bf16_t>(p.dout, p.do_str, b, h).row(i);
  std::memcpy(q, qrow, size_t(d) * 2);
  std::memcpy(dout, drow, size_t(d) * 2);
  float *dof = tmp, *of = tmp + L.dp;
  load_row(drow, dof, d, 1.0f);
  load_row(rows_of<const bf16_t>(p.out, p.o_str, b, h).row(i), of, d, 1.0f);
  float acc = 0.0f;
  for (int64_t k = 0; k < d; ++k) acc += dof[k] * of[k];
  G[L.dsum + r] = acc;
  G[L.lse + r] = lse_for_bwd(p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i]);
}

// One tile pair (query tile i, KV tile j) for every query head of the group.
inline void bwd_pair_amx(const BwdParams& p, const WindowMask& mask, const BwdLayoutAmx& L,
                         float* G, float* W, int64_t i, int64_t j, int64_t b, int64_t hk) {
  const int64_t d = p.head_dim, dp = L.dp, dq32 = L.dq32, g = p.group();
  const int64_t r0 = i * BR, nq = std::min(BR, p.seqlen_q - r0);
  const int64_t c0 = j * BC, nk = std::min(BC, p.seqlen_k - c0);
  const int64_t nq16 = round_up(nq, 16), nq32 = round_up(nq, 32);
  const int64_t nk16 = round_up(nk, 16), nk32 = round_up(nk, 32);
  const KeyRange kr = mask.keys(r0, r0 + nq);
  if (kr.empty() || kr.end <= c0 || kr.begin >= c0 + nk) return;
  const bool full = mask.tile_full(r0, r0 + nq, c0, c0 + nk);
  const float qscale = q_factor(p.scale, p.softcap);
  (void)d;

  const uint16_t* ktv = u16(G + L.ktv) + j * dq32 * BC;
  const uint16_t* vtv = u16(G + L.vtv) + j * dq32 * BC;
  const uint16_t* kvn = u16(G + L.kvn) + j * BC * dp;
  float *dkt = G + L.dkt + j * dp * BC, *dvt = G + L.dvt + j * dp * BC;
  float *s = W + L.s, *dps = W + L.dps;
  uint16_t *pvn = u16(W + L.pvn), *dsvn = u16(W + L.dsvn), *dsb = u16(W + L.dsb);
  if (p.has_variants()) key_positions(W + L.kpos, c0, nk);
  const __mmask16 tail = nk % 16 ? __mmask16((1u << (nk % 16)) - 1) : __mmask16(0xffff);
  configure_tiles();
  for (int64_t hl = 0; hl < g; ++hl) {
    const int64_t r = hl * L.sqp + r0;
    const uint16_t* q = u16(G + L.qb) + r * dq32;
    const uint16_t* dout = u16(G + L.dob) + r * dq32;
    const uint16_t* qt = u16(G + L.qtb) + (hl * L.tq + i) * dp * BR;
    const uint16_t* dot = u16(G + L.dotb) + (hl * L.tq + i) * dp * BR;
    const float *lse = G + L.lse + r, *dsum = G + L.dsum + r;
    float* dq = G + L.dq + r * dp;
    tile_gemm(nq16, nk16, dq32, q, dq32, ktv, 2 * BC, s, BC, false);      // S / scale
    tile_gemm(nq16, nk16, dq32, dout, dq32, vtv, 2 * BC, dps, BC, false);  // dP = dO V^T
    const vf qs = vsplat(qscale);
    for (int64_t ii = 0; ii < nq; ++ii)
      for (int64_t jj = 0; jj < nk16; jj += VW) vstore(s + ii * BC + jj, vload(s + ii * BC + jj) * qs);
    if (!full) mask_rows(s, BC, mask, r0, nq, c0, nk);
    p_and_ds_rows(p, b, hk * g + hl, r0, nq, c0, nk, nk16, lse, dsum, W + L.kpos, W + L.zr, s, dps, BC);
    // bf16 operands: P and dS in query pairs (rows past nq are zero), dS rows
    // with the keys past nk zeroed (they meet K's zero rows in dS K).
    const vf zero = vsplat(0.0f);
    for (int64_t ii = 0; ii < nq32; ii += 2)
      for (int64_t jj = 0; jj < nk16; jj += VW) {
        const bool a = ii < nq, c = ii + 1 < nq;
        const vf p0 = a ? vload(s + ii * BC + jj) : zero, p1 = c ? vload(s + (ii + 1) * BC + jj) : zero;
        const vf d0 = a ? vload(dps + ii * BC + jj) : zero, d1 = c ? vload(dps + (ii + 1) * BC + jj) : zero;
        _mm512_storeu_si512(pvn + (ii / 2) * 2 * BC + 2 * jj,
                            pack_pair_bf16(reinterpret_cast<__m512>(p0), reinterpret_cast<__m512>(p1)));
        _mm512_storeu_si512(dsvn + (ii / 2) * 2 * BC + 2 * jj,
                            pack_pair_bf16(reinterpret_cast<__m512>(d0), reinterpret_cast<__m512>(d1)));
      }
    for (int64_t ii = 0; ii < nq16; ++ii)
      for (int64_t jj = 0; jj < nk32; jj += VW) {
        const __mmask16 km = ii >= nq || jj >= nk16 ? __mmask16(0) : jj + VW < nk16 ? __mmask16(0xffff) : tail;
        const __m512 x = _mm512_maskz_loadu_ps(km, dps + ii * BC + jj);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dsb + ii * BC + jj),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x)));
      }
    tile_gemm(dp, nk16, nq32, dot, BR, pvn, 2 * BC, dvt, BC, true);   // dV^T += dO^T P
    tile_gemm(dp, nk16, nq32, qt, BR, dsvn, 2 * BC, dkt, BC, true);   // dK^T += Q^T dS
    tile_gemm(nq16, dp, nk32, dsb, BC, kvn, 2 * dp, dq, dp, true);     // dQ += dS K
  }
  release_tiles();
}

inline void backward_amx_t(const BwdParams& p, float* ws, int nthreads) {
  const WindowMask mask(p);
  const BwdLayoutAmx L = bwd_layout_amx(p, nthreads);
  const int64_t g = p.group(), d = p.head_dim, dp = L.dp;
  // dK = scale dS^T Q: backward.hpp's Q carries scale / cap and dK the factor
  // cap; with Q unscaled here the two meet as scale.
  const float kmul = p.scale;
  float* const wbase = ws + size_t(L.chunk) * L.per_group;
#pragma omp parallel num_threads(nthreads)
  {
    float* W = wbase + size_t(omp_get_thread_num()) * L.per_thread;
    for (int64_t g0 = 0; g0 < L.groups; g0 += L.chunk) {
      const int64_t ng = std::min(L.chunk, L.groups - g0);
      auto group_base = [&](int64_t gl) { return ws + size_t(gl) * L.per_group; };
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t x = 0; x < ng * L.tk; ++x) {
        const int64_t gg = g0 + x / L.tk;
        bwd_load_kv_amx(p, L, group_base(x / L.tk), gg / p.heads_kv, gg % p.heads_kv, x % L.tk);
      }
      const int64_t qrows = g * L.sqp;
#pragma omp for schedule(static)
      for (int64_t x = 0; x < ng * qrows; ++x) {
        const int64_t gg = g0 + x / qrows, rr = x % qrows;
        bwd_load_q_amx(p, L, group_base(x / qrows), W + L.tmp, gg / p.heads_kv, gg % p.heads_kv,
                       rr / L.sqp, rr % L.sqp);
      }
      // Q^T and dO^T per query tile, from the padded rows just written.
#pragma omp for schedule(dynamic, 1)
      for (int64_t x = 0; x < ng * g * L.tq; ++x) {
        float* G = group_base(x / (g * L.tq));
        const int64_t t = x % (g * L.tq);  // hl * tq + i
        const int64_t row0 = (t / L.tq) * L.sqp + (t % L.tq) * BR;
        const int64_t nq = std::min(BR, p.seqlen_q - (t % L.tq) * BR);
        const StridedRows qr{u16(G + L.qb) + row0 * L.dq32, L.dq32};
        const StridedRows dr{u16(G + L.dob) + row0 * L.dq32, L.dq32};
        transpose_bf16(qr, nq, d, dp, BR, u16(G + L.qtb) + t * dp * BR, BR);
        transpose_bf16(dr, nq, d, dp, BR, u16(G + L.dotb) + t * dp * BR, BR);
      }
      for (int64_t t = 0; t < L.steps; ++t) {
#pragma omp for schedule(dynamic, 1)
        for (int64_t x = 0; x < ng * L.tk; ++x) {
          const int64_t j = x % L.tk, i = (j + t) % L.steps;
          const int64_t gg = g0 + x / L.tk;
          if (i < L.tq) bwd_pair_amx(p, mask, L, group_base(x / L.tk), W, i, j, gg / p.heads_kv, gg % p.heads_kv);
        }
      }
#pragma omp for schedule(static) nowait
      for (int64_t x = 0; x < ng * p.seqlen_k; ++x) {
        const int64_t gg = g0 + x / p.seqlen_k, jj = x % p.seqlen_k;
        const int64_t b = gg / p.heads_kv, hk = gg % p.heads_kv;
        const float* G = group_base(x / p.seqlen_k);
        const size_t at = size_t((jj / BC) * dp * BC + jj % BC);
        float* tmp = W + L.tmp;
        for (int64_t k = 0; k < d; ++k) tmp[k] = G[L.dkt + at + size_t(k * BC)];
        store_row(tmp, rows_of<bf16_t>(p.dk, p.dk_str, b, hk).row(jj), d, kmul);
        for (int64_t k = 0; k < d; ++k) tmp[k] = G[L.dvt + at + size_t(k * BC)];
        store_row(tmp, rows_of<bf16_t>(p.dv, p.dv_str, b, hk).row(jj), d, 1.0f);
      }
#pragma omp for schedule(static)
      for (int64_t x = 0; x < ng * g * p.seqlen_q; ++x) {
        const int64_t gg = g0 + x / (g * p.seqlen_q), rr = x % (g * p.seqlen_q);
        const int64_t hl = rr / p.seqlen_q, i = rr % p.seqlen_q;
        const int64_t b = gg / p.heads_kv, h = (gg % p.heads_kv) * g + hl;
        const float* G = group_base(x / (g * p.seqlen_q));
        store_row(G + L.dq + (hl * L.sqp + i) * dp, rows_of<bf16_t>(p.dq, p.dq_str, b, h).row(i), d,
                  p.scale);
      }
    }
  }
}

inline void backward_amx(const BwdParams& p, float* ws, int nthreads) {
  if (!p.varlen()) return backward_amx_t(p, ws, nthreads);
  for_each_sequence(p, [&](const BwdParams& sp) { backward_amx_t(sp, ws, nthreads); });
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
