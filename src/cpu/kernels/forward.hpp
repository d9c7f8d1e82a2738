// FlashAttention forward on CPU (seed lesson section 4; FlashAttention-2 loop
// order): each task owns one query tile of one (batch, head) and walks the KV
// tiles its rows can see, keeping the running max m, running sum l and the
// unnormalised output O in fp32 tile buffers; O is rescaled by
// exp(m_old - m_new) as the max grows and divided by l once at the end.
// S and P exist only as one BC x BR tile per thread.
//
// Orientation: the score tile is stored transposed, S^T = K * (scale Q)^T
// (keys x queries), so the per-query statistics run across vector lanes
// (no horizontal reductions) and Q^T is built once per task instead of
// transposing K for every tile pair. P*V then reads P^T through swapped
// strides (see gemm.hpp).
#pragma once

#include <omp.h>

#include <cmath>
#include <cstring>

#include "common/mask.hpp"
#include "convert.hpp"
#include "gemm.hpp"
#include "tile_mask.hpp"
#include "tiles.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

struct FwdLayout {
  int64_t dpad;                              // head_dim rounded up to whole vectors
  size_t qt, k, v, s, o, m, l, al, tmp, lohi, per_thread;  // float offsets in one thread's slice
};

inline FwdLayout fwd_layout(int64_t d) {
  FwdLayout L;
  L.dpad = round_up(d, VW);
  Carver c;
  L.qt = c.take(d * FBR);        // (scale Q)^T: d x FBR
  L.k = c.take(FBC * d);         // K tile: FBC x d
  L.v = c.take(FBC * L.dpad);    // V tile: FBC x dpad, zero padded
  L.s = c.take(FBC * FBR);        // S^T then P^T: FBC x FBR
  L.o = c.take(FBR * L.dpad);    // unnormalised O: FBR x dpad
  L.m = c.take(FBR);
  L.l = c.take(FBR);
  L.al = c.take(FBR);            // exp(m_old - m_new) of the current tile
  L.tmp = c.take(L.dpad);
  L.lohi = c.take(2 * FBR);         // int32 key bounds per query column (masking)
  L.per_thread = c.floats;
  return L;
}

inline size_t forward_workspace_floats(const FwdParams& p, int nthreads) {
  return size_t(nthreads) * fwd_layout(p.head_dim).per_thread;
}

template <class T>
void fwd_task(const FwdParams& p, const WindowMask& mask, const FwdLayout& L, float* ws,
              int64_t b, int64_t h, int64_t qtile) {
  const int64_t d = p.head_dim, dp = L.dpad;
  const int64_t r0 = qtile * FBR, nq = std::min(FBR, p.seqlen_q - r0), ncol = round_up(nq, VW);
  const int64_t hk = h / p.group();
  const bool capped = p.softcap > 0.0f;
  const float cap = p.softcap;
  const float qscale = capped ? p.scale / cap : p.scale;

  float *qt = ws + L.qt, *kb = ws + L.k, *vb = ws + L.v, *s = ws + L.s, *o = ws + L.o;
  float *m = ws + L.m, *l = ws + L.l, *al = ws + L.al, *tmp = ws + L.tmp;

  auto Q = rows_of<const T>(p.q, p.q_str, b, h);
  auto K = rows_of<const T>(p.k, p.k_str, b, hk);
  auto V = rows_of<const T>(p.v, p.v_str, b, hk);

  for (int64_t i = 0; i < nq; ++i) {
    load_row(Q.row(r0 + i), tmp, d, qscale);
    for (int64_t k = 0; k < d; ++k) qt[k * FBR + i] = tmp[k];
  }
  for (int64_t k = 0; k < d; ++k)
    for (int64_t i = nq; i < ncol; ++i) qt[k * FBR + i] = 0.0f;
  for (int64_t i = 0; i < FBR; ++i) { m[i] = kNegInf; l[i] = 0.0f; }
  std::memset(o, 0, sizeof(float) * size_t(nq * dp));

  KeyRange kr = mask.keys(r0, r0 + nq);
  for (int64_t c0 = kr.empty() ? kr.end : kr.begin / FBC * FBC; c0 < kr.end; c0 += FBC) {
    const int64_t nk = std::min(FBC, p.seqlen_k - c0);
    for (int64_t j = 0; j < nk; ++j) {
      load_row(K.row(c0 + j), kb + j * d, d, 1.0f);
      load_row(V.row(c0 + j), vb + j * dp, d, 1.0f);
      for (int64_t k = d; k < dp; ++k) vb[j * dp + k] = 0.0f;
    }
    // The next tile's K/V rows are prefetched a slice per column chunk of the
    // softmax below: spread out, the misses overlap the exp work instead of
    // filling the line-fill buffers in one burst.
    const int64_t pf0 = c0 + FBC, pf1 = std::min(kr.end, c0 + 2 * FBC);
    const int64_t pf_step = pf1 > pf0 ? (pf1 - pf0 + ncol / VW - 1) / (ncol / VW) : 0;
    gemm<false>(nk, ncol, d, kb, d, 1, qt, FBR, s, FBR);
    if (!mask.tile_full(r0, r0 + nq, c0, c0 + nk))
      mask_cols(s, FBR, reinterpret_cast<int32_t*>(ws + L.lohi), mask, r0, nq, ncol, c0, nk);

    // Online softmax, one vector of query columns at a time.
    for (int64_t c = 0; c < ncol; c += VW) {
      if (pf_step) {
        const int64_t a = pf0 + c / VW * pf_step, e = std::min(pf1, a + pf_step);
        prefetch_rows(K, a, e, d);
        prefetch_rows(V, a, e, d);
      }
      vf mx = vsplat(kNegInf);
      for (int64_t j = 0; j < nk; ++j) {
        vf x = vload(s + j * FBR + c);
        if (capped) { x = vsoftcap(x, cap); vstore(s + j * FBR + c, x); }
        mx = vmax(mx, x);
      }
      vf mold = vload(m + c), mnew = vmax(mold, mx);
      // A column that has seen only masked keys keeps m = -inf; exponentiate
      // against 0 instead so exp(-inf - -inf) never happens.
      vf mu = vsel(mnew == vsplat(kNegInf), vsplat(0.0f), mnew);
      vf alpha = vexp(mold - mu);
      vf sum = vsplat(0.0f);
      for (int64_t j = 0; j < nk; ++j) {
        vf pj = vexp(vload(s + j * FBR + c) - mu);
        vstore(s + j * FBR + c, pj);
        sum += pj;
      }
      vstore(l + c, alpha * vload(l + c) + sum);
      vstore(m + c, mnew);
      vstore(al + c, alpha);
    }
    // O = diag(alpha) O + P V, with P read as (P^T)^T.
    gemm<true, true>(nq, dp, nk, s, 1, FBR, vb, dp, o, dp, al);
  }

  auto O = rows_of<T>(p.out, p.o_str, b, h);
  for (int64_t i = 0; i < nq; ++i) {
    const float li = l[i];
    store_row(o + i * dp, O.row(r0 + i), d, li > 0.0f ? 1.0f / li : 0.0f);
  }
  if (p.lse) {
    float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + r0;
    for (int64_t i = 0; i < nq; ++i) lse[i] = l[i] > 0.0f ? m[i] + std::log(l[i]) : kNegInf;
  }
}

template <class T>
void forward_t(const FwdParams& p, float* ws, int nthreads) {
  const WindowMask mask(p);
  const FwdLayout L = fwd_layout(p.head_dim);
  const int64_t tq = (p.seqlen_q + FBR - 1) / FBR;
  const int64_t ntasks = p.batch * p.heads_q * tq;
#pragma omp parallel num_threads(nthreads)
  {
    float* w = ws + size_t(omp_get_thread_num()) * L.per_thread;
    // Tasks are independent; dynamic scheduling only balances causal work
    // (the last query tiles, the heaviest, come first).
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntasks; ++t) {
      const int64_t qtile = tq - 1 - t % tq, bh = t / tq;
      fwd_task<T>(p, mask, L, w, bh / p.heads_q, bh % p.heads_q, qtile);
    }
  }
}

inline int64_t forward_tasks(const FwdParams& p) {
  return p.batch * p.heads_q * ((p.seqlen_q + FBR - 1) / FBR);
}

inline void forward(const FwdParams& p, float* ws, int nthreads) {
  switch (p.dtype) {
    case DType::F32: forward_t<float>(p, ws, nthreads); break;
    case DType::F16: forward_t<f16_t>(p, ws, nthreads); break;
    case DType::BF16: forward_t<bf16_t>(p, ws, nthreads); break;
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
