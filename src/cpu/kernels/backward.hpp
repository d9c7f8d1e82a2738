// FlashAttention backward on CPU (seed lesson section 5): S and P are
// recomputed tile by tile from the saved LSE (P = exp(S - LSE)), never stored
// beyond one tile per thread.
//
// Determinism scheme: two passes with disjoint outputs, no atomics, no
// reductions across threads, so results are bit-identical for any thread
// count and schedule.
//   0. D = rowsum(dO o O) in fp32, one row per iteration (O(B*Hq*Sq) floats).
//   1. dK/dV: one task per (batch, kv head, KV tile); it loops over the query
//      heads of its GQA group and the query tiles in a fixed order,
//      accumulating dV += P^T dO and dK += dS^T Q in its own fp32 tiles.
//   2. dQ: one task per (batch, query head, query tile); it loops over its KV
//      tiles in order, recomputing S, P, dP, dS for its rows, dQ += dS K.
// Pass 2 recomputes S and dP (7 tile GEMMs per tile pair instead of 5): the
// price of exact reproducibility without an O(N^2) or per-thread dQ buffer.
//
// Orientation: pass 1 keeps K^T, V^T of its tile (built once per task) and
// computes S = Q K^T with queries as rows; pass 2 keeps Q^T, dO^T (built once
// per task) and computes S^T = K Q^T with keys as rows. Neither transposes
// anything per tile pair; transposed GEMM operands are read through strides.
//
// Softcap: Q is loaded pre-multiplied by scale/cap, so the GEMM gives
// u = scale q.k / cap, t = tanh(u), s = cap t, and ds/d(scale q.k) = 1 - t^2;
// dK picks up the factor cap because its Q operand carries 1/cap.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstring>

#include "common/mask.hpp"
#include "convert.hpp"
#include "forward.hpp"
#include "gemm.hpp"
#include "tiles.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

struct BwdLayout {
  int64_t dpad;
  size_t dsum;  // D = rowsum(dO o O): B*Hq*Sq floats, shared
  // pass 1 (per thread)
  size_t kt, vt, q, dout, s, dps, dk, dv;
  // pass 2 (per thread, aliases pass 1)
  size_t qt, dot, k, v, st, dpst, dq;
  size_t lse, dd, tmp;  // both passes
  size_t shared, per_thread;
};

inline BwdLayout bwd_layout(const BwdParams& p) {
  BwdLayout L;
  const int64_t d = p.head_dim;
  L.dpad = round_up(d, VW);
  Carver sh;
  L.dsum = sh.take(p.batch * p.heads_q * p.seqlen_q);
  L.shared = sh.floats;

  Carver a;  // pass 1
  L.kt = a.take(d * BC);
  L.vt = a.take(d * BC);
  L.q = a.take(BR * L.dpad);
  L.dout = a.take(BR * L.dpad);
  L.s = a.take(BR * BC);
  L.dps = a.take(BR * BC);
  L.dk = a.take(BC * L.dpad);
  L.dv = a.take(BC * L.dpad);
  Carver b;  // pass 2
  L.qt = b.take(d * BR);
  L.dot = b.take(d * BR);
  L.k = b.take(BC * L.dpad);
  L.v = b.take(BC * d);
  L.st = b.take(BC * BR);
  L.dpst = b.take(BC * BR);
  L.dq = b.take(BR * L.dpad);
  Carver c;
  c.floats = std::max(a.floats, b.floats);
  L.lse = c.take(BR);
  L.dd = c.take(BR);
  L.tmp = c.take(L.dpad);
  L.per_thread = c.floats;
  return L;
}

inline size_t backward_workspace_floats(const BwdParams& p, int nthreads) {
  BwdLayout L = bwd_layout(p);
  return L.shared + size_t(nthreads) * L.per_thread;
}

inline int64_t backward_tasks(const BwdParams& p) {
  int64_t a = p.batch * p.heads_kv * ((p.seqlen_k + BC - 1) / BC);
  int64_t b = p.batch * p.heads_q * ((p.seqlen_q + BR - 1) / BR);
  return std::max(a, b);
}

// P and dS for one score element vector: acc holds scale*q.k (divided by cap
// when capped, -inf when masked), lse/dsum the row statistics (lse = +inf for
// rows that see nothing, so P = 0 there). Returns P; dp becomes dS.
inline vf p_and_ds(vf acc, vf lse, vf dsum, vf& dp, bool capped, float cap) {
  if (capped) {
    vf t = vtanh(acc);
    vf sv = vsel(acc == vsplat(kNegInf), vsplat(kNegInf), vsplat(cap) * t);
    vf pv = vexp(sv - lse);
    dp = pv * (dp - dsum) * (vsplat(1.0f) - t * t);
    return pv;
  }
  vf pv = vexp(acc - lse);
  dp = pv * (dp - dsum);
  return pv;
}

// LSE as the backward uses it: -inf (a row without keys) becomes +inf, so
// exp(s - lse) is 0 instead of exp(-inf + inf) = NaN.
inline float lse_for_bwd(float x) { return x == kNegInf ? kInf : x; }

template <class T>
void dsum_row(const BwdParams& p, float* D, int64_t b, int64_t h, int64_t i, float* tmp,
              float* tmp2) {
  const int64_t d = p.head_dim;
  load_row(rows_of<const T>(p.dout, p.do_str, b, h).row(i), tmp, d, 1.0f);
  load_row(rows_of<const T>(p.out, p.o_str, b, h).row(i), tmp2, d, 1.0f);
  float acc = 0.0f;
  for (int64_t k = 0; k < d; ++k) acc += tmp[k] * tmp2[k];
  D[(b * p.heads_q + h) * p.seqlen_q + i] = acc;
}

template <class T>
void dkdv_task(const BwdParams& p, const WindowMask& mask, const BwdLayout& L, const float* D,
               float* ws, int64_t b, int64_t hk, int64_t ktile) {
  const int64_t d = p.head_dim, dp = L.dpad;
  const int64_t c0 = ktile * BC, nk = std::min(BC, p.seqlen_k - c0), nkc = round_up(nk, VW);
  const bool capped = p.softcap > 0.0f;
  const float cap = p.softcap;
  const float qscale = capped ? p.scale / cap : p.scale;

  float *kt = ws + L.kt, *vt = ws + L.vt, *q = ws + L.q, *dout = ws + L.dout;
  float *s = ws + L.s, *dps = ws + L.dps, *dk = ws + L.dk, *dv = ws + L.dv;
  float *lse = ws + L.lse, *dd = ws + L.dd, *tmp = ws + L.tmp;

  auto K = rows_of<const T>(p.k, p.k_str, b, hk);
  auto V = rows_of<const T>(p.v, p.v_str, b, hk);
  for (int64_t j = 0; j < nk; ++j) {
    load_row(K.row(c0 + j), tmp, d, 1.0f);
    for (int64_t k = 0; k < d; ++k) kt[k * BC + j] = tmp[k];
    load_row(V.row(c0 + j), tmp, d, 1.0f);
    for (int64_t k = 0; k < d; ++k) vt[k * BC + j] = tmp[k];
  }
  for (int64_t k = 0; k < d; ++k)
    for (int64_t j = nk; j < nkc; ++j) kt[k * BC + j] = vt[k * BC + j] = 0.0f;
  std::memset(dk, 0, sizeof(float) * size_t(nk * dp));
  std::memset(dv, 0, sizeof(float) * size_t(nk * dp));

  const int64_t g = p.group();
  for (int64_t h = hk * g; h < (hk + 1) * g; ++h) {
    auto Q = rows_of<const T>(p.q, p.q_str, b, h);
    auto dO = rows_of<const T>(p.dout, p.do_str, b, h);
    const float* lse_bh = p.lse + (b * p.heads_q + h) * p.seqlen_q;
    const float* D_bh = D + (b * p.heads_q + h) * p.seqlen_q;
    for (int64_t r0 = 0; r0 < p.seqlen_q; r0 += BR) {
      const int64_t nq = std::min(BR, p.seqlen_q - r0);
      KeyRange kr = mask.keys(r0, r0 + nq);
      if (kr.empty() || kr.end <= c0 || kr.begin >= c0 + nk) continue;
      for (int64_t i = 0; i < nq; ++i) {
        load_row(Q.row(r0 + i), q + i * dp, d, qscale);
        load_row(dO.row(r0 + i), dout + i * dp, d, 1.0f);
        for (int64_t k = d; k < dp; ++k) q[i * dp + k] = dout[i * dp + k] = 0.0f;
        lse[i] = lse_for_bwd(lse_bh[r0 + i]);
        dd[i] = D_bh[r0 + i];
      }
      gemm<false>(nq, nkc, d, q, dp, 1, kt, BC, s, BC);      // S = Q K^T
      gemm<false>(nq, nkc, d, dout, dp, 1, vt, BC, dps, BC);  // dP = dO V^T
      if (!mask.tile_full(r0, r0 + nq, c0, c0 + nk)) mask_tile(s, 1, BC, mask, r0, nq, c0, nk);
      for (int64_t i = 0; i < nq; ++i) {
        const vf li = vsplat(lse[i]), di = vsplat(dd[i]);
        for (int64_t j = 0; j < nkc; j += VW) {
          vf dpv = vload(dps + i * BC + j);
          vf pv = p_and_ds(vload(s + i * BC + j), li, di, dpv, capped, cap);
          vstore(s + i * BC + j, pv);
          vstore(dps + i * BC + j, dpv);
        }
      }
      gemm<true>(nk, dp, nq, s, 1, BC, dout, dp, dv, dp);  // dV += P^T dO
      gemm<true>(nk, dp, nq, dps, 1, BC, q, dp, dk, dp);   // dK += dS^T (scale Q)
    }
  }

  auto dK = rows_of<T>(p.dk, p.dk_str, b, hk);
  auto dV = rows_of<T>(p.dv, p.dv_str, b, hk);
  const float kfac = capped ? cap : 1.0f;
  for (int64_t j = 0; j < nk; ++j) {
    store_row(dk + j * dp, dK.row(c0 + j), d, kfac);
    store_row(dv + j * dp, dV.row(c0 + j), d, 1.0f);
  }
}

template <class T>
void dq_task(const BwdParams& p, const WindowMask& mask, const BwdLayout& L, const float* D,
             float* ws, int64_t b, int64_t h, int64_t qtile) {
  const int64_t d = p.head_dim, dp = L.dpad;
  const int64_t r0 = qtile * BR, nq = std::min(BR, p.seqlen_q - r0), ncol = round_up(nq, VW);
  const int64_t hk = h / p.group();
  const bool capped = p.softcap > 0.0f;
  const float cap = p.softcap;
  const float qscale = capped ? p.scale / cap : p.scale;

  float *qt = ws + L.qt, *dot = ws + L.dot, *kb = ws + L.k, *vb = ws + L.v;
  float *st = ws + L.st, *dpst = ws + L.dpst, *dq = ws + L.dq;
  float *lse = ws + L.lse, *dd = ws + L.dd, *tmp = ws + L.tmp;

  auto Q = rows_of<const T>(p.q, p.q_str, b, h);
  auto dO = rows_of<const T>(p.dout, p.do_str, b, h);
  const float* lse_bh = p.lse + (b * p.heads_q + h) * p.seqlen_q;
  const float* D_bh = D + (b * p.heads_q + h) * p.seqlen_q;
  for (int64_t i = 0; i < nq; ++i) {
    load_row(Q.row(r0 + i), tmp, d, qscale);
    for (int64_t k = 0; k < d; ++k) qt[k * BR + i] = tmp[k];
    load_row(dO.row(r0 + i), tmp, d, 1.0f);
    for (int64_t k = 0; k < d; ++k) dot[k * BR + i] = tmp[k];
    lse[i] = lse_for_bwd(lse_bh[r0 + i]);
    dd[i] = D_bh[r0 + i];
  }
  for (int64_t k = 0; k < d; ++k)
    for (int64_t i = nq; i < ncol; ++i) qt[k * BR + i] = dot[k * BR + i] = 0.0f;
  for (int64_t i = nq; i < ncol; ++i) { lse[i] = kInf; dd[i] = 0.0f; }
  std::memset(dq, 0, sizeof(float) * size_t(nq * dp));

  auto K = rows_of<const T>(p.k, p.k_str, b, hk);
  auto V = rows_of<const T>(p.v, p.v_str, b, hk);
  KeyRange kr = mask.keys(r0, r0 + nq);
  for (int64_t c0 = kr.empty() ? kr.end : kr.begin / BC * BC; c0 < kr.end; c0 += BC) {
    const int64_t nk = std::min(BC, p.seqlen_k - c0);
    for (int64_t j = 0; j < nk; ++j) {
      load_row(K.row(c0 + j), kb + j * dp, d, 1.0f);
      for (int64_t k = d; k < dp; ++k) kb[j * dp + k] = 0.0f;
      load_row(V.row(c0 + j), vb + j * d, d, 1.0f);
    }
    gemm<false>(nk, ncol, d, kb, dp, 1, qt, BR, st, BR);    // S^T = K (scale Q)^T
    gemm<false>(nk, ncol, d, vb, d, 1, dot, BR, dpst, BR);  // dP^T = V dO^T
    if (!mask.tile_full(r0, r0 + nq, c0, c0 + nk)) mask_tile(st, BR, 1, mask, r0, nq, c0, nk);
    for (int64_t j = 0; j < nk; ++j) {
      for (int64_t c = 0; c < ncol; c += VW) {
        vf dpv = vload(dpst + j * BR + c);
        p_and_ds(vload(st + j * BR + c), vload(lse + c), vload(dd + c), dpv, capped, cap);
        vstore(dpst + j * BR + c, dpv);
      }
    }
    gemm<true>(nq, dp, nk, dpst, 1, BR, kb, dp, dq, dp);  // dQ += dS K
  }

  auto dQ = rows_of<T>(p.dq, p.dq_str, b, h);
  for (int64_t i = 0; i < nq; ++i) store_row(dq + i * dp, dQ.row(r0 + i), d, p.scale);
}

template <class T>
void backward_t(const BwdParams& p, float* ws, int nthreads) {
  const WindowMask mask(p);
  const BwdLayout L = bwd_layout(p);
  float* D = ws + L.dsum;
  const int64_t nrows = p.batch * p.heads_q * p.seqlen_q;
  const int64_t tk = (p.seqlen_k + BC - 1) / BC, tq = (p.seqlen_q + BR - 1) / BR;
  const int64_t nkv = p.batch * p.heads_kv * tk, nq = p.batch * p.heads_q * tq;
#pragma omp parallel num_threads(nthreads)
  {
    float* w = ws + L.shared + size_t(omp_get_thread_num()) * L.per_thread;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t i = r % p.seqlen_q, bh = r / p.seqlen_q;
      dsum_row<T>(p, D, bh / p.heads_q, bh % p.heads_q, i, w + L.q, w + L.dout);
    }
    // (implicit barrier: D complete before either pass reads it)
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nkv; ++t) {
      const int64_t bh = t / tk;
      dkdv_task<T>(p, mask, L, D, w, bh / p.heads_kv, bh % p.heads_kv, t % tk);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nq; ++t) {
      const int64_t bh = t / tq;
      dq_task<T>(p, mask, L, D, w, bh / p.heads_q, bh % p.heads_q, tq - 1 - t % tq);
    }
  }
}

inline void backward(const BwdParams& p, float* ws, int nthreads) {
  switch (p.dtype) {
    case DType::F32: backward_t<float>(p, ws, nthreads); break;
    case DType::F16: backward_t<f16_t>(p, ws, nthreads); break;
    case DType::BF16: backward_t<bf16_t>(p, ws, nthreads); break;
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
