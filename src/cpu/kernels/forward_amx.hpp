// The forward's inner loop (forward.hpp, attend) for bf16 inputs on AMX:
// the same FlashAttention-2 online softmax, tile order and S^T orientation,
// with both GEMMs on the tile unit and P rounded to bf16 before P V, as a GPU
// kernel does (the correctness rule's naive_same_dtype rounds P the same way).
//
//   S^T = K Q^T   A = the K tile, bf16 rows read in place (or copied, padded);
//                 B = Q^T in VNNI pairs, packed once per task (load_columns).
//   O^T += V^T P^T  A = V^T, transposed once per K/V tile;
//                 B = P^T in VNNI pairs, written by the softmax loop itself.
// Q is packed unscaled (exact: bf16 in, bf16 out) and the softmax scale is
// applied to the fp32 scores, so no rounding is added before Q K^T. O is kept
// transposed (d x queries) so the per-query rescale exp(m_old - m_new) stays a
// vector multiply across lanes; it is skipped when every factor is exactly 1,
// the common case once a row's maximum has settled. The transposed O goes
// back to the row layout of forward.hpp once per task.
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "bf16_gemm.hpp"
#include "convert.hpp"
#include "simd.hpp"
#include "tile_mask.hpp"
#include "tiles.hpp"
#include "variants.hpp"

// 1: each query block's softmax is preceded by a slice of the next K/V
// tile's prefetches; 0: the hardware prefetchers alone (kernels_amx.cpp).
#ifndef FA_AMX_FWD_PF
#define FA_AMX_FWD_PF 1
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

static_assert(FBC % 32 == 0 && FBR % 32 == 0, "AMX tiles: 32 keys, 32 queries per block");
static_assert(VW == 16, "AMX kernels use 16-float vectors");

// Q^T in VNNI pairs, unscaled: qv row r (FBR pairs apart) holds, for column
// c, (q_c[2r], q_c[2r + 1]) (amx_tiles.hpp, transpose_pairs).
inline void pack_q_columns(uint16_t* qv, const uint16_t* const* rows, int64_t n, int64_t ncol,
                           int64_t d) {
  transpose_pairs(qv, 2 * FBR, rows, n, ncol, d);
}

// Queries per block: the softmax, the P^T packing and the O^T update of one
// block run back to back on buffers of their own (S^T 16 KiB, O^T 16 KiB at
// d = 128, P^T 8 KiB), so they stay in L1 between the two GEMMs; whole-tile
// buffers 1 KiB a row apart spilled to L2 and fell into a few L1 sets.
constexpr int64_t QB = 32;  // fwd_layout (forward.hpp) sizes L.s for it: FBC x 32

// Rounds P^T rows j, j + 1 (16 queries from column c of a block) into pv.
inline void store_p_pair(uint16_t* pv, int64_t j, int64_t c, vf p0, vf p1) {
  _mm512_storeu_si512(pv + (j / 2) * 2 * QB + 2 * c,
                      pack_pair_bf16(reinterpret_cast<__m512>(p0), reinterpret_cast<__m512>(p1)));
}

template <class KV>
void attend_amx(const FwdLayout& L, float* ws, int64_t d, int64_t nq, int64_t ncol,
                int64_t seqlen_k, int64_t c_begin, int64_t c_end, int64_t full_lo, int64_t full_hi,
                const KV& K, const KV& V, float qscale, float cap, const Variants* var, bool fresh) {
  const int64_t dp = L.dpad, dq32 = round_up(d, 32);
  const bool capped = cap > 0.0f;
  const bool alibi = var && var->alibi, dropout = var && var->dropout;
  const bool plain = !capped && !alibi;
  // s: S^T of one query block (FBC x QB); ot: O^T by blocks, block b at
  // ot + b * QB * dp (dp x QB each); pv: P^T of one block in VNNI pairs.
  float *s = ws + L.s, *o = ws + L.o, *ot = ws + L.ot;
  float *m = ws + L.m, *l = ws + L.l, *al = ws + L.al;
  const uint16_t* qv = reinterpret_cast<const uint16_t*>(ws + L.qv);
  uint16_t* kb = reinterpret_cast<uint16_t*>(ws + L.kb16);
  uint16_t* vt = reinterpret_cast<uint16_t*>(ws + L.vt16);
  uint16_t* pv = reinterpret_cast<uint16_t*>(ws + L.pv);
  const int32_t* lo = reinterpret_cast<const int32_t*>(ws + L.lohi);
  const int32_t* hi = lo + FBR;
  if (fresh) {  // else continue from the O^T, m and l of the previous call
    for (int64_t i = 0; i < FBR; ++i) { m[i] = kNegInf; l[i] = 0.0f; }
    std::memset(ot, 0, sizeof(float) * size_t(round_up(ncol, QB) * dp));
  }
  auto krow = [&](int64_t j) { return reinterpret_cast<const uint16_t*>(K.row(j)); };
  const int64_t nblk = (ncol + QB - 1) / QB;
  configure_tiles();

  for (int64_t c0 = c_begin; c0 < c_end; c0 += FBC) {
    const int64_t nk = std::min(FBC, seqlen_k - c0);
    const int64_t nk16 = round_up(nk, 16), nk32 = round_up(nk, 32);
    // The K tile is the A operand of S^T = K Q^T: read where it lies (the
    // GEMM takes the row stride) when its rows are whole 32-element chunks
    // and whole 16-row blocks of a strided tensor; else copied and zero
    // padded (the copy was 7% of the forward, bench/NOTES.md).
    const uint16_t* ka = kb;
    int64_t lda = dq32;
    if (std::is_same_v<KV, Rows<const bf16_t>> && d == dq32 && nk == nk16) {
      ka = krow(c0);
      lda = K.seq_stride;
    } else {
      for (int64_t j = 0; j < nk16; ++j) {
        uint16_t* dst = kb + j * dq32;
        if (j < nk) std::memcpy(dst, krow(c0 + j), size_t(d) * 2);
        std::memset(dst + (j < nk ? d : 0), 0, size_t(dq32 - (j < nk ? d : 0)) * 2);
      }
    }
    auto vrow = [&](int64_t j) { return reinterpret_cast<const uint16_t*>(V.row(c0 + j)); };
    const bool vbad = transpose_bf16(vrow, nk, d, dp, nk32, vt, FBC);
    const bool partial = !(c0 >= full_lo && c0 + nk <= full_hi);
    // The next tile's K/V rows are prefetched a slice per query block.
    const int64_t pf0 = c0 + FBC, pf1 = std::min(c_end, c0 + 2 * FBC);
    const int64_t pf_step = FA_AMX_FWD_PF && pf1 > pf0 ? (pf1 - pf0 + nblk - 1) / nblk : 0;

    for (int64_t cb = 0; cb < ncol; cb += QB) {
      const int64_t nb = std::min(QB, ncol - cb);
      float* otb = ot + cb * dp;
      if (pf_step) {
        const int64_t a = pf0 + cb / QB * pf_step, e = std::min(pf1, a + pf_step);
        prefetch_rows(K, a, e, d);
        prefetch_rows(V, a, e, d);
      }
      tile_gemm(nk16, nb, dq32, ka, lda, qv + 2 * cb, 2 * FBR, s, QB, false);  // raw q.k
      if (partial) mask_cols_abs(s, QB, lo + cb, hi + cb, nb, c0, nk);

      for (int64_t c = 0; c < nb; c += VW) {
        // Plain scores stay raw q.k and the scale rides in the exponent's
        // FMA; softcap / ALiBi need the scaled score first, stored back.
        vf mx = vsplat(kNegInf);
        if (plain) {
          // Four running maxima: one chain would wait on VMAXPS's latency
          // for every key (measured: 10% of the forward).
          vf m1 = mx, m2 = mx, m3 = mx;
          int64_t j = 0;
          for (; j + 4 <= nk; j += 4) {
            mx = vmax(mx, vload(s + j * QB + c));
            m1 = vmax(m1, vload(s + (j + 1) * QB + c));
            m2 = vmax(m2, vload(s + (j + 2) * QB + c));
            m3 = vmax(m3, vload(s + (j + 3) * QB + c));
          }
          for (; j < nk; ++j) mx = vmax(mx, vload(s + j * QB + c));
          mx = vmax(vmax(mx, m1), vmax(m2, m3)) * vsplat(qscale);
        } else {
          const vf qp = alibi ? vload(ws + L.qpos + cb + c) : vsplat(0.0f);
          for (int64_t j = 0; j < nk; ++j) {
            vf x = vload(s + j * QB + c) * vsplat(qscale);
            if (capped) x = vsoftcap(x, cap);
            if (alibi) x += var->bias_q(qp, c0 + j);
            vstore(s + j * QB + c, x);
            mx = vmax(mx, x);
          }
        }
        const vf qs = vsplat(plain ? qscale : 1.0f);
        vf mold = vload(m + cb + c), mnew = vmax(mold, mx);
        vf mu = vsel(mnew == vsplat(kNegInf), vsplat(0.0f), mnew);
        vf alpha = vexp(mold - mu);
        vf sum = vsplat(0.0f), sum1 = sum;
        for (int64_t j = 0; j < nk32; j += 2) {
          const vf zero = vsplat(0.0f);
          const vf p0 = j < nk ? vexp(vload(s + j * QB + c) * qs - mu) : zero;
          const vf p1 = j + 1 < nk ? vexp(vload(s + (j + 1) * QB + c) * qs - mu) : zero;
          sum += p0;
          sum1 += p1;
          if (dropout) {  // P~ = P o Z / (1 - p) is packed after the keep mask below
            vstore(s + j * QB + c, p0);
            vstore(s + (j + 1) * QB + c, p1);
          } else {
            store_p_pair(pv, j, c, p0, p1);
          }
        }
        vstore(l + cb + c, alpha * vload(l + cb + c) + (sum + sum1));
        vstore(m + cb + c, mnew);
        vstore(al + cb + c, alpha);
      }
      if (dropout) {
        float* zr = ws + L.zr;
        for (int64_t c = 0; c < std::min(nb, nq - cb); ++c) {
          const int64_t i = var->row0 + cb + c;
          var->keep_row(i, c0, nk, zr);
          for (int64_t j = 0; j < nk; ++j) s[j * QB + c] *= zr[j];
          if (var->mask) {
            int32_t* mrow = var->mask + i * var->seqlen_k;
            for (int64_t j = 0; j < nk; ++j)
              if (c0 + j >= lo[cb + c] && c0 + j < hi[cb + c]) mrow[c0 + j] = zr[j] != 0.0f;
          }
        }
        for (int64_t j = 0; j < nk32; j += 2)
          for (int64_t c = 0; c < nb; c += VW) {
            // Rows past nk hold stale values: the pair's zeros come from here.
            const vf p0 = j < nk ? vload(s + j * QB + c) : vsplat(0.0f);
            const vf p1 = j + 1 < nk ? vload(s + (j + 1) * QB + c) : vsplat(0.0f);
            store_p_pair(pv, j, c, p0, p1);
          }
      }
      if ((partial || dropout) && vbad) {
        // A masked P is exactly 0 and 0 * inf/NaN would reach rows that cannot
        // see the key (forward.hpp, pv_skipping_zeros): skip zero terms. Rare.
        for (int64_t c = 0; c < std::min(nb, nq - cb); ++c) {
          for (int64_t k = 0; k < dp; ++k) otb[k * QB + c] *= al[cb + c];
          for (int64_t j = 0; j < nk; ++j) {
            const float pij = bf16_bits_to_float(pv[(j / 2) * 2 * QB + 2 * c + (j & 1)]);
            if (pij == 0.0f) continue;
            for (int64_t k = 0; k < d; ++k) otb[k * QB + c] += pij * bf16_bits_to_float(vt[k * FBC + j]);
          }
        }
        continue;
      }
      // Rescale only where some factor is not exactly 1 (once a row's
      // maximum has settled, most tiles leave it unchanged).
      for (int64_t c = 0; c < nb; c += VW) {
        const vf a = vload(al + cb + c);
        if (_mm512_cmpneq_ps_mask(reinterpret_cast<__m512>(a), _mm512_set1_ps(1.0f)) == 0) continue;
        for (int64_t k = 0; k < dp; ++k) vstore(otb + k * QB + c, vload(otb + k * QB + c) * a);
      }
      tile_gemm(dp, nb, nk32, vt, FBC, pv, 2 * QB, otb, QB, true);
    }
  }
  release_tiles();
  for (int64_t i = 0; i < nq; ++i) {
    const float* src = ot + (i / QB) * QB * dp + i % QB;
    for (int64_t k = 0; k < dp; ++k) o[i * dp + k] = src[k * QB];
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
