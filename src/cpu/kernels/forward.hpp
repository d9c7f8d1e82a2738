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
//
// Varlen, KV-cache and paged batches run per sequence (common/sequence.hpp):
// a task list over (sequence, head, query tile), K/V rows read through the
// block table when paged. Decode shapes (seqlen_q * group <= FBR) take the
// flash-decoding path at the end of this file instead: the query heads of a
// GQA group are packed into one tile's columns (one K/V pass per group), and
// the key range is split over threads, the pieces merged by their LSE.
#pragma once

#include <omp.h>

#include <cmath>
#include <cstring>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/mask.hpp"
#include "common/sequence.hpp"
#include "convert.hpp"
#include "cpu/kernel_table.hpp"
#include "gemm.hpp"
#include "tile_mask.hpp"
#include "tiles.hpp"
#include "variants.hpp"

// FA_DECODE_AMX: bf16 decode scores and P V on AMX tiles (amx_decode.hpp;
// kernels_amx_decode.cpp sets it).
#ifndef FA_DECODE_AMX
#define FA_DECODE_AMX 0
#endif
#if FA_DECODE_AMX
#include "amx_decode.hpp"
#endif
// 1: an AMX decode step's P V on tiles too (pv_amx); 0: on the widening FMAs
// in 16-key calls (pv_in_chunks), for A/B runs.
#ifndef FA_DECODE_AMX_PV
#define FA_DECODE_AMX_PV 1
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

struct FwdLayout {
  int64_t dpad;                              // head_dim rounded up to whole vectors
  int64_t ldk = 0, ldv = 0;                  // row strides of the K and V tile buffers (tile_ld)
  size_t qt, k, v, s, o, m, l, al, tmp, lohi, qpos, zr, per_thread;  // float offsets in one thread's slice
  size_t qr = 0;  // (scale Q) rows of the first kDotCols columns, kDotCols x dpad (dot_rows)
  size_t qb = 0;  // FA_DECODE_DPBF16: their raw bf16 rows, kDotCols x d (dot_rows_dpbf16)
  size_t pp = 0;  // FA_DECODE_DPBF16: a tile's P as bf16 pairs, FBC / 2 x VW words (pv_dpbf16)
  size_t qtile = 0;  // FA_DECODE_AMX: the query columns as Q^T tiles (pack_q_tiles)
  size_t pvs = 0;    // FA_DECODE_AMX: pv_amx's P rows and V pairs
  size_t qv = 0, kb16 = 0, vt16 = 0, pv = 0, ot = 0;  // AMX only (forward_amx.hpp): bf16 pairs per float
};

// Query columns dot_rows computes a tile's scores for (their count rounded
// up to a power of two), or 0 for the GEMM: a decode step's few columns, one
// vector of them, head_dim a whole number of vectors (so a K row, in place
// or converted, is whole vectors with no padding). load_columns keeps
// those columns' Q rows (L.qr) only then.
inline int dot_cols(int64_t d, int64_t nq, int64_t ncol) {
  if (d % VW != 0 || ncol != VW || nq > kDotCols) return 0;
  return nq <= 1 ? 1 : nq <= 2 ? 2 : nq <= 4 ? 4 : kDotCols;
}

inline FwdLayout fwd_layout(int64_t d, int pieces = 1) {
  FwdLayout L;
  L.dpad = round_up(d, VW);
  Carver c;
#if FA_AMX
  // bf16 (and split fp32) on AMX, the only dtypes this layout serves
  // there, packs its own operands below and keeps S^T for one block of 32
  // queries at a time (split fp32: two, forward_amx.hpp's pipeline).
  const int blocks = pieces > 1 ? 2 : 1;
  L.qt = L.k = L.v = 0;
  L.s = c.take(blocks * FBC * 32);
#else
  L.ldk = tile_ld(d);
  L.ldv = tile_ld(L.dpad);
  L.qt = c.take(d * FLD);        // (scale Q)^T: d x FBR, rows FLD apart
  L.k = c.take(FBC * L.ldk);     // K tile: FBC x d, rows ldk apart
  L.v = c.take(FBC * L.ldv);     // V tile: FBC x dpad, zero padded, rows ldv apart
  L.s = c.take(FBC * FLD);       // S^T then P^T: FBC x FBR, rows FLD apart
#endif
  L.o = c.take(FBR * L.dpad);    // unnormalised O: FBR x dpad
  L.m = c.take(FBR);
  L.l = c.take(FBR);
  L.al = c.take(FBR);            // exp(m_old - m_new) of the current tile
  L.tmp = c.take(L.dpad);
  L.lohi = c.take(2 * FBR);         // int32 key bounds per query column (masking)
  L.qpos = c.take(FBR);             // ALiBi: i + Sk - Sq per query column
  L.zr = c.take(FBC);               // dropout: Z / (1 - p) of one column's keys
#if !FA_AMX
  L.qr = c.take(kDotCols * L.dpad);
#endif
#if FA_DECODE_DPBF16
  L.qb = c.take(kDotCols * L.dpad / 2);
  L.pp = c.take(FBC / 2 * VW);  // P pairs of pv_dpbf16
#endif
#if FA_DECODE_AMX
  if (d % 32 == 0) {
    L.qtile = c.take(amx_q_floats(d));
    L.pvs = c.take((pv_amx_scratch(d) + 1) / 2);
  }
#endif
#if FA_AMX
  const int64_t dq32 = round_up(d, 32);
  // Each of these once per piece (split fp32: three planes, or for kb16
  // three pieces side by side in each row).
  L.qv = c.take(pieces * dq32 / 2 * FBR);      // Q^T, VNNI pairs of bf16: dq32/2 x FBR
  L.kb16 = c.take(pieces * FBC * dq32 / 2);    // K tile, bf16 rows: FBC x dq32
  L.vt16 = c.take(pieces * L.dpad * FBC / 2);  // V^T, bf16: dpad x FBC
  L.pv = c.take(blocks * pieces * FBC / 2 * 32);  // P^T of 32 queries per block, VNNI pairs of bf16: FBC/2 x 32
  L.ot = c.take(L.dpad * FBR);        // O^T: dpad x FBR, in blocks of 32 queries
#endif
  L.per_thread = c.floats;
  return L;
}

// Element type of a row accessor (Rows / PagedRows).
template <class KV>
using row_type_t = std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const KV&>().row(0))>>;

#if FA_AMX
}  // namespace flashattn::detail::cpu::FA_ISA_NS
#include "forward_amx.hpp"  // attend_amx: attend below, for bf16 on AMX tiles
namespace flashattn::detail::cpu::FA_ISA_NS {
#endif

// Whether x[0, n) (n a multiple of VW) holds an inf or NaN: x - x is 0 for
// finite x and NaN otherwise, summed in vector accumulators. (A scalar float
// sum here compiled to one serial chain of dependent vaddss, 8192 per 64-key
// tile at head dim 128, which the compiler may not reassociate: it cost the
// decode path more than its GEMMs; bench/NOTES.md.)
inline bool has_nonfinite(const float* x, int64_t n) {
  vf a0 = vsplat(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t e = 0;
  for (; e + 4 * VW <= n; e += 4 * VW) {
    const vf x0 = vload(x + e), x1 = vload(x + e + VW), x2 = vload(x + e + 2 * VW),
             x3 = vload(x + e + 3 * VW);
    a0 += x0 - x0;
    a1 += x1 - x1;
    a2 += x2 - x2;
    a3 += x3 - x3;
  }
  for (; e < n; e += VW) {
    const vf x0 = vload(x + e);
    a0 += x0 - x0;
  }
  const vf a = (a0 + a1) + (a2 + a3);
  for (int i = 0; i < VW; ++i) {
    if (a[i] != 0.0f) return true;
  }
  return false;
}

// O = diag(alpha) O + P V for a partially masked tile whose V holds inf/NaN:
// masked P entries are exactly 0, and 0 * inf/NaN in the gemm would put NaN
// into rows that cannot see the key. Skipping P == 0 terms keeps a
// non-finite V value to the rows that see it (README, Reliability). Rare path.
inline void pv_skipping_zeros(int64_t nq, int64_t dp, int64_t nk, const float* pt, const float* vb,
                              int64_t ldv, float* o, const float* al) {
  for (int64_t i = 0; i < nq; ++i) {
    float* oi = o + i * dp;
    for (int64_t k = 0; k < dp; ++k) oi[k] *= al[i];
    for (int64_t j = 0; j < nk; ++j) {
      const float pij = pt[j * FLD + i];
      if (pij == 0.0f) continue;
      const float* vj = vb + j * ldv;
      for (int64_t k = 0; k < dp; ++k) oi[k] += pij * vj[k];
    }
  }
}

// Whether attend() reads the K/V rows of a tile where they are, given rows at
// a fixed stride (Rows, not a block table): tiles of one column block, so the
// S GEMM reads each K value once, and head_dim a whole number of vectors;
// 16-bit rows only where S comes from dot_rows (gemm() would widen each K
// value once per broadcast).
template <class T>
inline bool in_place_tiles(int64_t d, int64_t nq, int64_t ncol) {
  return d % VW == 0 && ncol <= NR && (std::is_same_v<T, float> || dot_cols(d, nq, ncol) > 0);
}

// Whether a decode step on bf16 K/V rows read in place runs on VDPBF16PS: its
// scores against the raw bf16 Q rows in L.qb (dot_rows_dpbf16) and its P V
// (pv_dpbf16); both take the head dimension in whole 32-element vectors.
template <class TK>
inline bool dpbf16_decode(int64_t d) {
  return FA_DECODE_DPBF16 && std::is_same_v<TK, bf16_t> && d % 32 == 0;
}

// Whether a decode step on bf16 K rows read in place scores them on AMX
// tiles (dot_rows_amx against the packed Q^T in L.qtile; whole 32-element
// chunks of the head dimension).
template <class TK>
inline bool amx_decode(int64_t d) {
  return FA_DECODE_AMX && std::is_same_v<TK, bf16_t> && d % 32 == 0;
}

#if FA_DECODE_DPBF16
// pv_dpbf16 for nr (<= kDotCols) query rows; P^T rows FLD apart.
template <class Tick>
void pv_dpbf16_rows(int64_t nr, int64_t nk, int64_t d, const float* pt, const bf16_t* v, int64_t ldv, float* o,
                    int64_t ldo, const float* alpha, uint32_t* pairs, Tick* tick) {
  static_assert(kDotCols == 8, "one case per row count below");
  switch (nr) {
    case 1: return pv_dpbf16<1>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    case 2: return pv_dpbf16<2>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    case 3: return pv_dpbf16<3>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    case 4: return pv_dpbf16<4>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    case 5: return pv_dpbf16<5>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    case 6: return pv_dpbf16<6>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    case 7: return pv_dpbf16<7>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
    default: return pv_dpbf16<8>(nk, d, pt, FLD, v, ldv, o, ldo, alpha, pairs, tick);
  }
}
#endif

// S^T of a decode step's ndot query columns (dot_cols) against nk key rows:
// from the scaled fp32 rows in qr, or (dpbf16_decode) the bf16 rows in qb
// with the factor qmul applied to the sums, or (amx_decode) the Q^T tiles in
// qtile, whole 16-key blocks on the tile unit with the same factor and the
// last nk % 16 keys from qr.
template <class TK, class Tick = NoTick>
void scores_by_dot(int ndot, int64_t nk, int64_t d, const TK* k, int64_t ldk, const float* qr,
                   const uint16_t* qb, const uint16_t* qtile, float qmul, float* s, Tick* tick = nullptr) {
#if FA_DECODE_AMX
  if constexpr (std::is_same_v<TK, bf16_t>) {
    if (amx_decode<TK>(d) && qtile) {
      const int64_t n16 = nk / 16 * 16;
      if (n16 > 0) dot_rows_amx(n16, d, k, ldk, qtile, qmul, s, FLD, ndot, tick);
      if (n16 < nk) scores_by_dot(ndot, nk - n16, d, k + n16 * ldk, ldk, qr, qb, nullptr, qmul, s + n16 * FLD);
      return;
    }
  }
#else
  (void)qtile;
#endif
#if FA_DECODE_DPBF16
  if constexpr (std::is_same_v<TK, bf16_t>) {
    if (dpbf16_decode<TK>(d)) {
      switch (ndot) {
        case 1: dot_rows_dpbf16<1>(nk, d, k, ldk, qb, qmul, s, FLD, tick); break;
        case 2: dot_rows_dpbf16<2>(nk, d, k, ldk, qb, qmul, s, FLD, tick); break;
        case 4: dot_rows_dpbf16<4>(nk, d, k, ldk, qb, qmul, s, FLD, tick); break;
        default: dot_rows_dpbf16<kDotCols>(nk, d, k, ldk, qb, qmul, s, FLD, tick); break;
      }
      return;
    }
  }
#else
  (void)qb, (void)qmul;
#endif
  switch (ndot) {  // (VW >= 4 in every build; 8 columns need VW >= 8)
    case 1: dot_rows<1>(nk, d, k, ldk, qr, s, FLD, tick); break;
    case 2: dot_rows<2>(nk, d, k, ldk, qr, s, FLD, tick); break;
    case 4: dot_rows<4>(nk, d, k, ldk, qr, s, FLD, tick); break;
    default: dot_rows<kDotCols <= VW ? kDotCols : 4>(nk, d, k, ldk, qr, s, FLD, tick); break;
  }
}

// The online softmax of one key tile for query columns [0, VW / 2) (the rest
// of a vector's columns are padding), two keys per vector: lanes [0, VW / 2)
// key j, [VW / 2, VW) key j + 1 (an odd last key alone, its upper half -inf).
// Each half keeps its own running max and sum; they meet per column at the
// end (vswap_halves). m, l and al come out with the lower half's values in
// both halves. P replaces S in place, as in the one-key loop.
// (flatten: vexp is inlined into the loops, as in attend's own loop; called
// out of line, with the halves through the stack, this ran 1.6x slower.)
// tick (a decode step's prefetcher, or nullptr): step(work) per eight keys of
// the exponential loop.
template <class Tick = NoTick>
[[gnu::flatten]] inline void softmax_two_keys(float* s, int64_t nk, float* m, float* l, float* al, bool capped,
                                              float cap, Tick* tick = nullptr, int64_t work8 = 0) {
  const int64_t nk2 = nk & ~int64_t(1);
  const vi low = vlow_mask();
  vf mx = vsplat(kNegInf);
  for (int64_t j = 0; j < nk2; j += 2) {
    vf x = vload_halves(s + j * FLD, s + (j + 1) * FLD);
    if (capped) {
      x = vsoftcap(x, cap);
      vstore_halves(s + j * FLD, s + (j + 1) * FLD, x);
    }
    mx = vmax(mx, x);
  }
  if (nk2 < nk) {
    vf x = vsel(low, vload(s + nk2 * FLD), vsplat(kNegInf));
    if (capped) {
      x = vsoftcap(x, cap);
      vstore_low(s + nk2 * FLD, x);
    }
    mx = vmax(mx, x);
  }
  const vf mold = vdup_low(vload(m)), mnew = vmax(mold, vmax(mx, vswap_halves(mx)));
  // A column that has seen only masked keys keeps m = -inf; exponentiate
  // against 0 instead so exp(-inf - -inf) never happens.
  const vf mu = vsel(mnew == vsplat(kNegInf), vsplat(0.0f), mnew);
  const vf alpha = vexp(mold - mu);
  vf sum = vsplat(0.0f);
  for (int64_t j = 0; j < nk2; j += 2) {
    const vf p = vexp(vload_halves(s + j * FLD, s + (j + 1) * FLD) - mu);
    vstore_halves(s + j * FLD, s + (j + 1) * FLD, p);
    sum += p;
    if (tick && (j & 6) == 6) tick->step(work8);
  }
  if (nk2 < nk) {
    const vf p = vsel(low, vexp(vload(s + nk2 * FLD) - mu), vsplat(0.0f));
    vstore_low(s + nk2 * FLD, p);
    sum += p;
  }
  vstore(l, alpha * vdup_low(vload(l)) + (sum + vswap_halves(sum)));
  vstore(m, mnew);
  vstore(al, alpha);
}

// Decode prefetch knobs (for A/B runs; bench/NOTES.md has the measurements).
// Key tiles ahead of the current one that a decode task prefetches: one tile
// measured best.
#ifndef FA_DECODE_PF_AHEAD
#define FA_DECODE_PF_AHEAD 1
#endif
// Which cache the prefetches fill (L1 or L2 only) is chosen per CPU at run
// time: decode_prefetch_to_l2() (kernel_table.hpp).
// 1: each head's share of the next tile is spread over that head's step
// (SpreadPrefetch); 0: issued in one burst before it.
#ifndef FA_DECODE_PF_SPREAD
#define FA_DECODE_PF_SPREAD 1
#endif
// 1: the spread covers the scores and the P V of a VDPBF16PS or AMX decode
// step, in proportion to their multiply-adds; 0: the scores only (the P V
// then runs with no prefetch in flight but the hardware's).
#ifndef FA_DECODE_PF_OVER_PV
#define FA_DECODE_PF_OVER_PV 1
#endif
// Whether a decode step's P V (on rows read in place) ticks the prefetcher:
// attend flushes it after the scores otherwise, and decode_task counts the
// P V's work in the spread only then.
template <class T>
inline bool pv_ticks(int64_t d, int ndot) {
  return FA_DECODE_PF_OVER_PV && ndot > 0 && (dpbf16_decode<T>(d) || amx_decode<T>(d));
}

// The weight of a decode step's scores in its prefetch spread, per key row,
// in the units of step(): ndot columns x d multiply-adds, a quarter of that
// on AMX tiles, whose multiply-adds take a small part of the step's time
// (dot_rows_amx ticks in the same units).
template <class T>
inline int64_t score_work(int64_t d, int ndot) {
#if FA_DECODE_AMX
  if (amx_decode<T>(d)) return ndot * d / kAmxScoreShare;
#endif
  return ndot * d;
}

// Keys per P V call of a ticking AMX decode step (pv_in_chunks).
constexpr int64_t kPvChunk = 16;

// O = diag(alpha) O + P V over nk keys in calls of kPvChunk keys with a tick
// after each: gemm's sums run over the keys in order and O goes through
// memory exactly (fp32) between calls, so the result is the one call's bits.
template <class T, class Tick>
void pv_in_chunks(int64_t nr, int64_t dp, int64_t nk, const float* pt, const T* v, int64_t ldv, float* o,
                  const float* alpha, Tick* tick) {
  for (int64_t j = 0; j < nk; j += kPvChunk) {
    const int64_t n = std::min(kPvChunk, nk - j);
    if (alpha) {
      gemm<true, true>(nr, dp, n, pt + j * FLD, 1, FLD, v + j * ldv, ldv, o, dp, alpha);
      alpha = nullptr;
    } else {
      gemm<true>(nr, dp, n, pt + j * FLD, 1, FLD, v + j * ldv, ldv, o, dp);
    }
    tick->step(n * nr * dp);
  }
}

#if FA_AMX && FA_FP32_SPLIT
// Pre-split fp32 K / V (forward_amx.hpp, SplitKV) exist for the tiles only.
inline void attend(const FwdLayout& L, float* ws, int64_t d, int64_t nq, int64_t ncol, int64_t seqlen_k,
                   int64_t c_begin, int64_t c_end, int64_t full_lo, int64_t full_hi, const SplitKV& K,
                   const SplitKV& V, float qscale, float cap, const Variants* var = nullptr) {
  attend_amx(L, ws, d, nq, ncol, seqlen_k, c_begin, c_end, full_lo, full_hi, K, V, qscale, cap, var, true);
}
#endif

// The online-softmax loop over key tiles c0 = c_begin, c_begin + FBC, ...
// below c_end, for ncol query columns of (scale Q)^T already in qt (their
// rows in qr instead when dot_cols picks dot_rows for S); column i
// sees keys [lo[i], hi[i]) (absolute). Leaves unnormalised O, m and l in the
// thread's buffers; fresh = false continues from the O, m and l a previous
// call left there (the decode path walks its key slice one tile per call).
// full_lo / full_hi: a tile inside [full_lo, full_hi) needs no per-element
// mask (the largest lo and the smallest hi). qscale: the factor already in
// qt and qr (the AMX path and dot_rows_dpbf16 apply it to the scores instead).
template <class KV, class Tick = NoTick>
void attend(const FwdLayout& L, float* ws, int64_t d, int64_t nq, int64_t ncol, int64_t seqlen_k,
            int64_t c_begin, int64_t c_end, int64_t full_lo, int64_t full_hi, const KV& K,
            const KV& V, float qscale, float cap, const Variants* var = nullptr, bool fresh = true,
            Tick* tick = nullptr) {
#if FA_AMX
  if constexpr (std::is_same_v<row_type_t<KV>, bf16_t> ||
                (FA_FP32_SPLIT && std::is_same_v<row_type_t<KV>, float>)) {
    return attend_amx(L, ws, d, nq, ncol, seqlen_k, c_begin, c_end, full_lo, full_hi, K, V, qscale,
                      cap, var, fresh);
  }
#endif
  const int64_t dp = L.dpad;
  const bool capped = cap > 0.0f;
  const bool alibi = var && var->alibi, dropout = var && var->dropout;
  float *qt = ws + L.qt, *kb = ws + L.k, *vb = ws + L.v, *s = ws + L.s, *o = ws + L.o;
  float *m = ws + L.m, *l = ws + L.l, *al = ws + L.al;
  const int32_t* lo = reinterpret_cast<const int32_t*>(ws + L.lohi);
  const int32_t* hi = lo + FBR;
  if (fresh) {
    for (int64_t i = 0; i < FBR; ++i) { m[i] = kNegInf; l[i] = 0.0f; }
    // pv_amx loads and stores O as 16-row C tiles: rows nq..15 are zeroed
    // too, so that it adds its zero rows to defined values.
    static_assert(FBR >= 16, "O holds a whole C tile");
    const int64_t o_rows = amx_decode<row_type_t<KV>>(d) ? std::max<int64_t>(nq, 16) : nq;
    std::memset(o, 0, sizeof(float) * size_t(o_rows * dp));
  }

  // Decode-sized tiles (in_place_tiles): the GEMMs read K and V where they
  // are (the tile copies were a fifth of the decode path's time,
  // bench/NOTES.md). 16-bit rows are widened as loaded, on full tiles only,
  // whose V needs no inf/NaN check. Else the rows are converted / gathered /
  // zero-padded into the tile buffers, which the GEMMs of a wide query tile
  // re-read from L1.
  using T = row_type_t<KV>;
  constexpr bool kFloat = std::is_same_v<T, float>;
  const int ndot = dot_cols(d, nq, ncol);  // S by dot_rows, on K in place or converted
  // A paged cache's rows are read in place too, one run of rows per page
  // (for_runs): its decode steps converted every tile before, 2.4-2.9x the
  // strided cache's time for bf16 and up to 1.6x for fp32 (bench/NOTES.md).
  constexpr bool kPaged = std::is_same_v<KV, PagedRows<const T>>;
  const bool in_place = (std::is_same_v<KV, Rows<const T>> || kPaged) && in_place_tiles<T>(d, nq, ncol);
  // Calls f(j0, j1) for the runs [j0, j1) of a tile's nk keys (from c0)
  // that are consecutive rows of K and V: the whole tile, or its share of
  // each page.
  auto for_runs = [&](int64_t c0, int64_t nk, auto&& f) {
    if constexpr (kPaged) {
      for (int64_t j0 = 0; j0 < nk;) {
        const int64_t j1 = std::min(nk, ((c0 + j0) / K.page_size + 1) * K.page_size - c0);
        f(j0, j1);
        j0 = j1;
      }
    } else {
      f(int64_t(0), nk);
    }
  };
  for (int64_t c0 = c_begin; c0 < c_end; c0 += FBC) {
    const int64_t nk = std::min(FBC, seqlen_k - c0);
    const bool partial = !(c0 >= full_lo && c0 + nk <= full_hi);
    // Query columns [cb0, cb1) (whole vectors) hold every column that sees a
    // key of this tile; a column outside sees none (all its P are 0, alpha 1)
    // and is left out of the GEMMs and the softmax: the same values, less work
    // on a causal or window diagonal, where a 256-row query tile would
    // otherwise compute the tile's full width for rows that see none of it.
    // (Plain variables, not a structured binding: for_runs' lambdas capture
    // them, which C++17 does not allow for bindings.)
    const ColumnRange cols = partial && !ndot ? visible_columns(lo, hi, nq, c0, nk) : ColumnRange{0, ncol};
    const int64_t cb0 = cols.begin, cb1 = cols.end;
    if (cb0 >= cb1) continue;
    const int64_t nr = std::min(cb1, nq) - cb0;  // query rows of O touched
    // V's inf/NaN matter only where P has exact zeros (masked or dropped
    // entries, pv_skipping_zeros below): full tiles without dropout skip the
    // check (it was 12% of a decode call's time; bench/NOTES.md).
    const bool check_v = partial || dropout;
    // (A paged fp32 tile that needs the check is converted: pv_skipping_zeros
    // reads one run.)
    const bool tile_in_place = in_place && ((kFloat && !kPaged) || !check_v);
    const T* vin = nullptr;  // a strided tensor's V rows read in place
    int64_t ldk = L.ldk, ldv = L.ldv;
    bool vbad = false;
    if constexpr (std::is_same_v<KV, Rows<const T>>) {
      if (tile_in_place) {
        vin = V.row(c0), ldv = V.seq_stride;
        if constexpr (kFloat) {
          for (int64_t j = 0; j < nk && check_v && !vbad; ++j) vbad = has_nonfinite(vin + j * ldv, d);
        }
      }
    }
    if (!tile_in_place) {
      for (int64_t j = 0; j < nk; ++j) {
        load_row(K.row(c0 + j), kb + j * ldk, d, 1.0f);
        load_row(V.row(c0 + j), vb + j * ldv, d, 1.0f);
        for (int64_t k = d; k < dp; ++k) vb[j * ldv + k] = 0.0f;
      }
      for (int64_t j = 0; j < nk && check_v && !vbad; ++j) vbad = has_nonfinite(vb + j * ldv, dp);
    }
    // The next tile's K/V rows are prefetched a slice per column chunk of the
    // softmax below: spread out, the misses overlap the exp work instead of
    // filling the line-fill buffers in one burst.
    const int64_t pf0 = c0 + FBC, pf1 = std::min(c_end, c0 + 2 * FBC), nchunk = (cb1 - cb0) / VW;
    const int64_t pf_step = pf1 > pf0 ? (pf1 - pf0 + nchunk - 1) / nchunk : 0;
    if (ndot && tile_in_place) {
      for_runs(c0, nk, [&](int64_t j0, int64_t j1) {
        scores_by_dot(ndot, j1 - j0, d, K.row(c0 + j0), K.seq_stride, ws + L.qr,
                      reinterpret_cast<const uint16_t*>(ws + L.qb), reinterpret_cast<const uint16_t*>(ws + L.qtile),
                      qscale, s + j0 * FLD, tick);
      });
    } else if (ndot) {
      scores_by_dot(ndot, nk, d, kb, ldk, ws + L.qr, nullptr, nullptr, 1.0f, s);
    } else if constexpr (kFloat) {
      if (tile_in_place) {
        for_runs(c0, nk, [&](int64_t j0, int64_t j1) {
          gemm<false>(j1 - j0, cb1 - cb0, d, K.row(c0 + j0), K.seq_stride, 1, qt + cb0, FLD, s + j0 * FLD + cb0,
                      FLD);
        });
      } else {
        gemm<false>(nk, cb1 - cb0, d, kb, ldk, 1, qt + cb0, FLD, s + cb0, FLD);
      }
    } else {
      gemm<false>(nk, cb1 - cb0, d, kb, ldk, 1, qt + cb0, FLD, s + cb0, FLD);
    }
    // The tick's prefetches end with the scores unless the P V runs on
    // VDPBF16PS, whose steps take their share too (the same spread over the
    // fp32 / widening P V measured level, bench/NOTES.md).
    if (tick && !(tile_in_place && pv_ticks<T>(d, ndot))) tick->flush();
    if (partial) mask_cols_abs(s + cb0, FLD, lo + cb0, hi + cb0, cb1 - cb0, c0, nk);

    // Online softmax. A decode step with at most half a vector of query
    // columns (a GQA group of <= 8 with AVX-512's 16 lanes) takes two keys
    // per vector, so that its exponentials do not run on padding lanes.
    if (VW >= 8 && ndot && nq <= HW && !alibi) {
      if (pf_step) {
        prefetch_rows(K, pf0, std::min(pf1, pf0 + pf_step), d);
        prefetch_rows(V, pf0, std::min(pf1, pf0 + pf_step), d);
      }
      // An AMX decode step's P V ticks the prefetcher; the softmax takes an
      // eighth of P V's share (amx_decode.hpp, FA_DECODE_PV_TICK_PHASES).
#if FA_DECODE_AMX
      const bool sm_ticks = FA_DECODE_PV_TICK_PHASES && FA_DECODE_AMX_PV && tile_in_place && pv_ticks<T>(d, ndot) &&
                            amx_decode<T>(d) && nq >= kPvAmxMinRows;
#else
      const bool sm_ticks = false;
#endif
      softmax_two_keys(s, nk, m, l, al, capped, cap, sm_ticks ? tick : nullptr, nq * d);
    } else {
      // One vector of query columns at a time.
      for (int64_t c = cb0; c < cb1; c += VW) {
        if (pf_step) {
          const int64_t a = pf0 + (c - cb0) / VW * pf_step, e = std::min(pf1, a + pf_step);
          prefetch_rows(K, a, e, d);
          prefetch_rows(V, a, e, d);
        }
        vf mx = vsplat(kNegInf);
        if (!alibi) {
          for (int64_t j = 0; j < nk; ++j) {
            vf x = vload(s + j * FLD + c);
            if (capped) { x = vsoftcap(x, cap); vstore(s + j * FLD + c, x); }
            mx = vmax(mx, x);
          }
        } else {
          const Variants va = *var;  // a local copy: no aliasing with the stores to s
          const vf qp = vload(ws + L.qpos + c);
          for (int64_t j = 0; j < nk; ++j) {
            vf x = vload(s + j * FLD + c);
            if (capped) x = vsoftcap(x, cap);
            x += va.bias_q(qp, c0 + j);  // after the cap, as flash-attn
            vstore(s + j * FLD + c, x);
            mx = vmax(mx, x);
          }
        }
        vf mold = vload(m + c), mnew = vmax(mold, mx);
        // A column that has seen only masked keys keeps m = -inf; exponentiate
        // against 0 instead so exp(-inf - -inf) never happens.
        vf mu = vsel(mnew == vsplat(kNegInf), vsplat(0.0f), mnew);
        vf alpha = vexp(mold - mu);
        vf sum = vsplat(0.0f);
        for (int64_t j = 0; j < nk; ++j) {
          vf pj = vexp(vload(s + j * FLD + c) - mu);
          vstore(s + j * FLD + c, pj);
          sum += pj;
        }
        vstore(l + c, alpha * vload(l + c) + sum);
        vstore(m + c, mnew);
        vstore(al + c, alpha);
      }
    }
    // Dropout after l took the undropped P (the LSE is of the undropped
    // softmax): P~ = P o Z / (1 - p) goes into O.
    if (dropout) {
      float* zr = ws + L.zr;
      for (int64_t c = cb0; c < cb0 + nr; ++c) {
        const int64_t i = var->row0 + c;
        var->keep_row(i, c0, nk, zr);
        for (int64_t j = 0; j < nk; ++j) s[j * FLD + c] *= zr[j];
        if (var->mask) {
          int32_t* mrow = var->mask + i * var->seqlen_k;
          for (int64_t j = 0; j < nk; ++j)
            if (c0 + j >= lo[c] && c0 + j < hi[c]) mrow[c0 + j] = zr[j] != 0.0f;
        }
      }
    }
    // O = diag(alpha) O + P V, with P read as (P^T)^T. (vbad: fp32 rows or
    // the converted tile, never 16-bit rows in place.)
    if ((partial || dropout) && vbad) {
      if constexpr (kFloat) {
        pv_skipping_zeros(nr, dp, nk, s + cb0, vin ? vin : vb, ldv, o + cb0 * dp, al + cb0);
      } else {
        pv_skipping_zeros(nr, dp, nk, s + cb0, vb, ldv, o + cb0 * dp, al + cb0);
      }
    } else if (tile_in_place) {
      // O's rescale by alpha goes with the first run; later runs add.
      for_runs(c0, nk, [&](int64_t j0, int64_t j1) {
        const T* vr = V.row(c0 + j0);
        const float* pt = s + j0 * FLD + cb0;
#if FA_DECODE_DPBF16
        if constexpr (std::is_same_v<T, bf16_t>) {
          if (ndot && dpbf16_decode<T>(d) && (j1 - j0) % 2 == 0) {
            static constexpr float kOnes[kDotCols] = {1, 1, 1, 1, 1, 1, 1, 1};
            pv_dpbf16_rows(nr, j1 - j0, d, pt, vr, V.seq_stride, o + cb0 * dp, dp, j0 == 0 ? al + cb0 : kOnes,
                           reinterpret_cast<uint32_t*>(ws + L.pp), FA_DECODE_PF_OVER_PV ? tick : nullptr);
            return;
          }
        }
#endif
#if FA_DECODE_AMX
        if constexpr (std::is_same_v<T, bf16_t>) {
          static_assert(FBC <= kPvAmxKeys, "pv_amx takes one key tile");
          if (FA_DECODE_AMX_PV && ndot && amx_decode<T>(d) && nr >= kPvAmxMinRows) {
            pv_amx(nr, j1 - j0, d, pt, FLD, vr, V.seq_stride, o + cb0 * dp, dp, j0 == 0 ? al + cb0 : nullptr,
                   reinterpret_cast<uint16_t*>(ws + L.pvs), FA_DECODE_PF_OVER_PV ? tick : nullptr);
            return;
          }
        }
#endif
        if (tick && ndot && amx_decode<T>(d) && FA_DECODE_PF_OVER_PV) {
          pv_in_chunks(nr, dp, j1 - j0, pt, vr, V.seq_stride, o + cb0 * dp, j0 == 0 ? al + cb0 : nullptr, tick);
          return;
        }
        if (j0 == 0) {
          gemm<true, true>(nr, dp, j1 - j0, pt, 1, FLD, vr, V.seq_stride, o + cb0 * dp, dp, al + cb0);
        } else {
          gemm<true>(nr, dp, j1 - j0, pt, 1, FLD, vr, V.seq_stride, o + cb0 * dp, dp);
        }
      });
    } else {
      gemm<true, true>(nr, dp, nk, s + cb0, 1, FLD, vb, ldv, o + cb0 * dp, dp, al + cb0);
    }
    if (tick) tick->flush();
  }
}

// K/V row access for one (sequence, kv head): strided, or through the block table.
template <class T, bool PAGED>
auto kv_rows(const FwdParams& p, const void* data, const Strides& st, int64_t b, int64_t hk) {
  if constexpr (PAGED) {
    return paged_rows_of<const T>(data, st, p.block_table + b * p.block_table_stride, p.page_size, hk);
  } else {
    return rows_of<const T>(data, st, b, hk);
  }
}

// Query column c of a tile is (head h_of(c), row i_of(c)); fills qt (or qr,
// see attend) and the
// per-column key bounds, returns the union of visible keys and the
// no-mask-needed range.
struct ColumnBounds {
  KeyRange keys;
  int64_t full_lo, full_hi;
};
template <class T, class Col>
ColumnBounds load_columns(const FwdParams& p, const FwdLayout& L, float* ws, const WindowMask& mask,
                          int64_t b, int64_t nq, int64_t ncol, float qscale, Col col) {
  const int64_t d = p.head_dim;
  float *qt = ws + L.qt, *tmp = ws + L.tmp;
  int32_t* lo = reinterpret_cast<int32_t*>(ws + L.lohi);
  int32_t* hi = lo + FBR;
  // bf16 (and split fp32) on AMX packs the raw Q rows (forward_amx.hpp);
  // qt is not used there.
#if FA_AMX
  constexpr bool kTiles = std::is_same_v<T, bf16_t> || (FA_FP32_SPLIT && std::is_same_v<T, float>);
  const T* qrows[kTiles ? FBR : 1];
#else
  constexpr bool kTiles = false;
#endif
  ColumnBounds cb{{INT64_MAX, 0}, 0, INT64_MAX};
  const int ndot = dot_cols(d, nq, ncol);
#if FA_DECODE_AMX
  const uint16_t* dot_rows16[kDotCols];  // the raw bf16 rows of dot_rows' columns, for pack_q_tiles
#endif
  for (int64_t c = 0; c < nq; ++c) {
    int64_t h, i;
    col(c, &h, &i);
    const T* qrow = rows_of<const T>(p.q, p.q_str, b, h).row(i);
    if constexpr (kTiles) {
#if FA_AMX
      qrows[c] = qrow;
#endif
    } else if (ndot) {
      // dot_rows reads the rows as they are; Q^T is for gemm() only, and
      // its strided stores (a 1 KiB stride over a 128 KiB buffer) were 39% of
      // a 64-key decode call (bench/NOTES.md).
      load_row(qrow, ws + L.qr + c * L.dpad, d, qscale);
      if (dpbf16_decode<T>(d)) std::memcpy(reinterpret_cast<uint16_t*>(ws + L.qb) + c * d, qrow, 2 * size_t(d));
#if FA_DECODE_AMX
      dot_rows16[c] = reinterpret_cast<const uint16_t*>(qrow);
#endif
    } else {
      load_row(qrow, tmp, d, qscale);
      for (int64_t k = 0; k < d; ++k) qt[k * FLD + c] = tmp[k];
    }
    const KeyRange r = mask.keys(i);
    lo[c] = int32_t(r.begin);
    hi[c] = int32_t(std::max(r.begin, r.end));
    if (!r.empty()) {
      cb.keys.begin = std::min(cb.keys.begin, r.begin);
      cb.keys.end = std::max(cb.keys.end, r.end);
    }
    cb.full_lo = std::max(cb.full_lo, r.begin);
    cb.full_hi = std::min(cb.full_hi, r.end);
  }
  if constexpr (!kTiles) {
    if (!ndot) {
      for (int64_t k = 0; k < d; ++k)
        for (int64_t c = nq; c < ncol; ++c) qt[k * FLD + c] = 0.0f;
    }
    for (int64_t c = nq; c < ndot; ++c) std::memset(ws + L.qr + c * L.dpad, 0, sizeof(float) * size_t(d));
    if (ndot > nq && dpbf16_decode<T>(d))
      std::memset(reinterpret_cast<uint16_t*>(ws + L.qb) + nq * d, 0, 2 * size_t((ndot - nq) * d));
  }
  for (int64_t c = nq; c < ncol; ++c) lo[c] = hi[c] = 0;
#if FA_DECODE_AMX
  if (ndot && amx_decode<T>(d)) pack_q_tiles(reinterpret_cast<uint16_t*>(ws + L.qtile), dot_rows16, nq, d);
#endif
#if FA_AMX
  if constexpr (kTiles) pack_q_columns(L, ws, qrows, nq, ncol, d);
#endif
  if (cb.keys.begin >= cb.keys.end) cb.keys = {0, 0};
  return cb;
}

inline float qscale_of(const FwdParams& p) { return q_factor(p.scale, p.softcap); }

// Normalised O rows and LSE of column c (head h, row i) of the tile.
template <class T>
void store_column(const FwdParams& p, const FwdLayout& L, const float* ws, int64_t c, int64_t b,
                  int64_t h, int64_t i) {
  const float li = ws[L.l + c];
  store_row(ws + L.o + c * L.dpad, rows_of<T>(p.out, p.o_str, b, h).row(i), p.head_dim,
            li > 0.0f ? 1.0f / li : 0.0f);
  if (p.lse) {  // l == 0: no visible key (-inf); a NaN l (NaN input) stays NaN
    p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] =
        li != 0.0f ? ws[L.m + c] + std::log(li) : kNegInf;
  }
}

// kv(b, hk): the K and V accessors of (sequence b, kv head hk).
template <class T, bool PAGED>
auto tensor_kv(const FwdParams& p) {
  return [&p](int64_t b, int64_t hk) {
    return std::make_pair(kv_rows<T, PAGED>(p, p.k, p.k_str, b, hk), kv_rows<T, PAGED>(p, p.v, p.v_str, b, hk));
  };
}

template <class T, class KvFn>
void fwd_task(const FwdParams& p, const WindowMask& mask, const FwdLayout& L, float* ws,
              int64_t b, int64_t h, int64_t qtile, KvFn kv) {
  const int64_t r0 = qtile * FBR, nq = std::min(FBR, p.seqlen_q - r0), ncol = round_up(nq, VW);
  const int64_t hk = h / p.group();
  const ColumnBounds cb = load_columns<T>(p, L, ws, mask, b, nq, ncol, qscale_of(p),
                                          [&](int64_t c, int64_t* hh, int64_t* i) { *hh = h; *i = r0 + c; });
  const KeyRange kr = cb.keys;
  const int64_t c_begin = kr.empty() ? kr.end : kr.begin / FBC * FBC;
  Variants var(p, b, h);
  if (var.any()) {
    var.row0 = r0;
    if (p.dropout_mask) var.mask = p.dropout_mask + (b * p.heads_q + h) * p.seqlen_q * p.seqlen_k;
    for (int64_t c = 0; c < ncol; ++c) ws[L.qpos + c] = float(r0 + c + var.offset);
  }
  const auto kvs = kv(b, hk);
  attend(L, ws, p.head_dim, nq, ncol, p.seqlen_k, c_begin, kr.end, cb.full_lo, cb.full_hi, kvs.first,
         kvs.second, qscale_of(p), p.softcap, var.any() ? &var : nullptr);
  for (int64_t i = 0; i < nq; ++i) store_column<T>(p, L, ws, i, b, h, r0 + i);
}

// ---- padded and per-sequence batches -------------------------------------------

// Query tiles of each sequence, as a prefix sum over the batch (per-sequence
// params only; a padded batch has the same count everywhere).
inline std::vector<int64_t> tile_prefix(const FwdParams& p) {
  std::vector<int64_t> pre(size_t(p.batch) + 1, 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t lq = seq_lens(p, b).len_q;
    pre[size_t(b) + 1] = pre[size_t(b)] + p.heads_q * ((lq + FBR - 1) / FBR);
  }
  return pre;
}

// Split fp32 on AMX: K and V split into bf16 pieces once per call
// (forward_amx.hpp, presplit_kv) when some KV head serves more than one query
// tile, for padded batches whose pieces stay under kPresplitMaxBytes (the
// extra workspace is 1.5x K and V); else each task splits its own tiles.
constexpr size_t kPresplitMaxBytes = size_t(1) << 30;
inline size_t presplit_floats(const FwdParams& p) {
#if FA_AMX
  if (tile_pieces(p.dtype) != 3 || p.per_sequence() || p.block_table) return 0;
  if ((p.seqlen_q + FBR - 1) / FBR * p.group() < 2) return 0;
  const size_t bf16s = size_t(presplit_size(p.head_dim, p.seqlen_k).per_head) * size_t(p.batch * p.heads_kv);
  return bf16s * 2 <= kPresplitMaxBytes ? bf16s / 2 : 0;
#else
  (void)p;
  return 0;
#endif
}

template <class T, bool PAGED>
void forward_seq(const FwdParams& p, float* ws, int nthreads) {
  const FwdLayout L = fwd_layout(p.head_dim, tile_pieces(p.dtype));
  auto thread_ws = [&](int t) { return ws + size_t(t) * L.per_thread; };
  if (!p.per_sequence()) {
    auto run = [&](auto kv) {
      const WindowMask mask(p);
      const int64_t tq = (p.seqlen_q + FBR - 1) / FBR;
      const int64_t ntasks = p.batch * p.heads_q * tq;
#pragma omp parallel num_threads(nthreads)
      {
        float* w = thread_ws(omp_get_thread_num());
        // Tasks are independent; dynamic scheduling only balances causal work
        // (the last query tiles, the heaviest, come first).
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntasks; ++t) {
          const int64_t qtile = tq - 1 - t % tq, bh = t / tq;
          fwd_task<T>(p, mask, L, w, bh / p.heads_q, bh % p.heads_q, qtile, kv);
        }
      }
    };
#if FA_AMX
    if constexpr (FA_FP32_SPLIT && std::is_same_v<T, float> && !PAGED) {
      if (presplit_floats(p)) {
        uint16_t* buf = reinterpret_cast<uint16_t*>(thread_ws(nthreads));
        presplit_kv(p, buf, nthreads, [&](int t) { return reinterpret_cast<uint16_t*>(thread_ws(t) + L.kb16); });
        return run([&](int64_t b, int64_t hk) {
          return std::make_pair(split_kv_of(p, buf, b, hk, false), split_kv_of(p, buf, b, hk, true));
        });
      }
    }
#endif
    return run(tensor_kv<T, PAGED>(p));
  }
  const std::vector<int64_t> pre = tile_prefix(p);
  const int64_t ntasks = pre.back();
#pragma omp parallel num_threads(nthreads)
  {
    float* w = ws + size_t(omp_get_thread_num()) * L.per_thread;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntasks; ++t) {
      const int64_t b = std::upper_bound(pre.begin(), pre.end(), t) - pre.begin() - 1;
      const SeqLens sl = seq_lens(p, b);
      const FwdParams sp = sequence_params(p, b, sl);
      const int64_t tq = (sl.len_q + FBR - 1) / FBR, local = t - pre[size_t(b)];
      fwd_task<T>(sp, WindowMask(sp), L, w, 0, local / tq, tq - 1 - local % tq, tensor_kv<T, PAGED>(sp));
    }
  }
}

// ---- decode: packed GQA, split KV ----------------------------------------------

// ALiBi and dropout run on the per-query-tile path only (their per-column
// (b, h, i) bookkeeping lives there), KV-cache decode included.
inline bool use_decode(const FwdParams& p) { return p.seqlen_q * p.group() <= FBR && !p.has_variants(); }

// Decode tasks run up to kDecodeHeads KV heads together (decode_task). (The
// bf16 pair-GEMM paths, AMX and AVX512-BF16, send their decode calls to these
// kernels compiled without FA_AMX: bf16_table_impl.hpp.)
constexpr int64_t kDecodeHeads = 8;
inline int64_t decode_group_heads(const FwdParams& p) { return std::min(p.heads_kv, kDecodeHeads); }
inline int64_t decode_head_groups(const FwdParams& p) {
  const int64_t gh = decode_group_heads(p);
  return gh > 0 ? (p.heads_kv + gh - 1) / gh : 0;
}

// Key-range pieces per (sequence, kv head). Splitting pays when the
// (sequence, head group) units of the decode tasks below are too few to
// occupy the threads. The count depends on the problem only, never on the
// thread count, so results are the same bits for any OMP_NUM_THREADS
// (tests/determinism_test.cpp): below 16 units, pieces of >= 8 key tiles
// (512 keys, so loading Q^T and the merge stay small beside them), at most 16.
inline int64_t decode_splits(const FwdParams& p) {
  const int64_t units = p.batch * decode_head_groups(p), tiles = (p.seqlen_k + FBC - 1) / FBC;
  if (units == 0 || tiles <= 1) return 1;
  int64_t ns = p.num_splits;
  if (ns == 0) ns = units >= 16 ? 1 : std::min<int64_t>(16, (tiles + 7) / 8);
  return std::max<int64_t>(1, std::min(ns, tiles));
}

// Floats of one piece's partial result: normalised O (columns x dpad), then
// LSE; sized for the longest sequence (p.seqlen_q is the maximum), the
// stride between pieces whatever the sequence.
inline size_t partial_floats(const FwdParams& p) {
  const int64_t ncol = round_up(p.seqlen_q * p.group(), VW);
  return size_t(round_up(ncol * round_up(p.head_dim, VW) + ncol, 16));
}

inline size_t decode_extra_floats(const FwdParams& p) {
  const int64_t ns = decode_splits(p);
  return ns > 1 ? size_t(p.batch * p.heads_kv * ns) * partial_floats(p) : 0;
}

// One line of a decode step's K / V prefetch, into L1 (prefetcht0) or into
// L2 only (prefetcht1): the better one depends on the CPU (kernel_table.hpp,
// decode_prefetch_to_l2).
[[gnu::always_inline]] inline void decode_prefetch_line(const char* a, bool to_l2) {
  if (to_l2) {
    __builtin_prefetch(a, 0, 2);
  } else {
    __builtin_prefetch(a, 0, 3);
  }
}

// Prefetches of rows [r, r_end): each row's K run, then its V run (the
// group's heads of one row are one run of memory), 64-byte lines spread over
// a step's arithmetic: the kernels call step(work) per block of keys (work in
// multiply-adds), and `lines` lines go out per `work_total` of work, the rest
// at flush(). Issued in one burst, a head's share (64 KB for four fp32 heads
// of 128) stalled the core on its fill buffers before any arithmetic; spread
// over the scores alone, the P V after them ran with no miss in flight.
template <class R>
struct SpreadPrefetch {
  R k0, kl, v0, vl;  // the group's first and last head's rows of K and V
  int64_t r, r_end, row_bytes;
  bool to_l2 = false;  // prefetcht1 instead of prefetcht0 (decode_prefetch_to_l2)
  int64_t lines = 0, work_total = 1, credit = 0;
  const char* p = nullptr;
  const char* e = nullptr;
  bool in_v = true;  // the next run is row r + 1's K run

  bool next_run() {
    if (in_v) {
      if (++r >= r_end) return false;
      p = reinterpret_cast<const char*>(k0.row(r));
      e = reinterpret_cast<const char*>(kl.row(r)) + row_bytes;
    } else {
      p = reinterpret_cast<const char*>(v0.row(r));
      e = reinterpret_cast<const char*>(vl.row(r)) + row_bytes;
    }
    in_v = !in_v;
    return true;
  }
  void step(int64_t work) {
    for (credit += work * lines; credit >= work_total; credit -= work_total) {
      if (p >= e && !next_run()) return;
      decode_prefetch_line(p, to_l2);
      p += 64;
    }
  }
  void flush() {
    while (p < e || next_run()) {
      decode_prefetch_line(p, to_l2);
      p += 64;
    }
  }
};

// One decode task: KV heads [hk0, hk0 + nh) of sequence sp, key slice `split`
// of nsplit. It runs every head on a tile before moving to the next: a
// [batch, seq, heads, d] cache holds one head's row as d values every
// heads * d, and reading them head by head left most of each fetched page to
// a later pass (one core, a plain read: 8.4 GB/s head by head against 15.2
// GB/s tile by tile over the heads; bench/NOTES.md). Head j keeps its state
// (Q^T, O, m, l) in ws + j * L.per_thread, so the arithmetic per head is
// unchanged; when split, it writes its piece to part(hk). to_l2: where its
// prefetches go (decode_prefetch_to_l2, read once per call by decode()).
// chained_in: this thread ran the previous piece just before (which, for a
// group of several heads, prefetched this one's first tile); chain_out: this
// thread takes the next piece right after (decode()).
template <class T, bool PAGED, class Part>
void decode_task(const FwdParams& sp, const FwdLayout& L, float* ws, int64_t hk0, int64_t nh,
                 int64_t split, int64_t nsplit, bool to_l2, Part part, bool chained_in = false,
                 bool chain_out = false) {
  const int64_t g = sp.group(), sq = sp.seqlen_q, nq = sq * g, ncol = round_up(nq, VW);
  if (nq == 0) return;
  const WindowMask mask(sp);
  auto slice = [&](int64_t j) { return ws + size_t(j) * L.per_thread; };
  ColumnBounds cb{};
  for (int64_t j = 0; j < nh; ++j) {  // every head of the group sees the same keys
    const int64_t hk = hk0 + j;
    cb = load_columns<T>(sp, L, slice(j), mask, 0, nq, ncol, qscale_of(sp),
                         [&](int64_t c, int64_t* h, int64_t* i) { *h = hk * g + c / sq; *i = c % sq; });
  }
  const KeyRange kr = cb.keys;
  int64_t c_begin = 0, c_end = 0;
  if (!kr.empty()) {
    const int64_t t0 = kr.begin / FBC, nt = (kr.end + FBC - 1) / FBC - t0;
    c_begin = (t0 + nt * split / nsplit) * FBC;
    c_end = std::min(kr.end, (t0 + nt * (split + 1) / nsplit) * FBC);
  }
  // The prefetches run up to pf_end: the slice's end, or, when this thread
  // takes the next slice right after (chain_out), into its first tile.
  const int64_t pf_end = chain_out ? std::min(kr.end, c_end + FBC) : c_end;
  // The group's part of a K/V row is one run of memory; the next tile's runs
  // are prefetched a share per head, spread over the tile's work.
  const auto k0 = kv_rows<T, PAGED>(sp, sp.k, sp.k_str, 0, hk0);
  const auto kl = kv_rows<T, PAGED>(sp, sp.k, sp.k_str, 0, hk0 + nh - 1);
  const auto v0 = kv_rows<T, PAGED>(sp, sp.v, sp.v_str, 0, hk0);
  const auto vl = kv_rows<T, PAGED>(sp, sp.v, sp.v_str, 0, hk0 + nh - 1);
  auto prefetch_run = [&](const auto& first, const auto& last, int64_t r) {
    const char* a = reinterpret_cast<const char*>(first.row(r));
    const char* e = reinterpret_cast<const char*>(last.row(r) + sp.head_dim);
    for (; a < e; a += 64) decode_prefetch_line(a, to_l2);
  };
  // One head alone (one KV head) takes its whole slice in one call, which
  // prefetches its next tile itself.
  const int64_t step = nh > 1 ? FBC : std::max<int64_t>(c_end - c_begin, 1);
  // Software prefetch pays for tiles read in place (fp32, 64k keys, caches
  // cold: 12.3-12.9 GB/s without it, 16.7-17.1 one tile ahead, 15.5 two, 14.0
  // four; 16-bit rows in place: 7.2-7.7 without, 10.8-11.5 with); for
  // converted 16-bit tiles it measured 5-9% slower than the hardware
  // prefetchers alone (bench/NOTES.md).
  const int64_t kAhead = std::is_same_v<T, float> || in_place_tiles<T>(sp.head_dim, nq, ncol)
                             ? FA_DECODE_PF_AHEAD * FBC
                             : 0;
  // Where the prefetches go to L2, the slice's first tile (which no earlier
  // step prefetched) is requested in one burst before its step: at 16k keys
  // (16 slices of 16 tiles) +6-8% on the Zen 4 (bench/NOTES.md, "Decode
  // prefetches into L2 on Zen 4"); a burst into L1 stalls on the fill buffers.
  // (One head alone prefetches inside attend, within its own slice: the
  // previous piece did not reach this one's first tile.)
  if (kAhead > 0 && to_l2 && !(chained_in && nh > 1))
    for (int64_t r = c_begin; r < std::min(c_end, c_begin + FBC); ++r) {
      prefetch_run(k0, kl, r);
      prefetch_run(v0, vl, r);
    }
  for (int64_t c0 = c_begin; c0 < std::max(c_end, c_begin + 1); c0 += step) {
    for (int64_t j = 0; j < nh; ++j) {  // an empty slice still initialises O, m, l
      using Pf = SpreadPrefetch<decltype(k0)>;
      Pf pf{k0, kl, v0, vl, 0, 0, int64_t(sizeof(T)) * sp.head_dim, to_l2};
      if (kAhead > 0) {
        const int64_t n1 = nh > 1 ? std::max<int64_t>(0, std::min(pf_end, c0 + kAhead + FBC) - (c0 + kAhead)) : 0;
        const int64_t ra = c0 + kAhead + n1 * j / nh, rb = c0 + kAhead + n1 * (j + 1) / nh;
        if (FA_DECODE_PF_SPREAD && rb > ra) {
          // The share's lines over the step's multiply-adds: the scores
          // (ndot columns) and, on VDPBF16PS, the P V (nq rows; the kernels
          // that tick, attend).
          const int64_t run = reinterpret_cast<const char*>(kl.row(ra)) + pf.row_bytes -
                              reinterpret_cast<const char*>(k0.row(ra));
          const int64_t nk = std::min(FBC, c_end - c0), ndot = dot_cols(sp.head_dim, nq, ncol);
          pf.r = ra - 1;
          pf.r_end = rb;
          pf.lines = (rb - ra) * 2 * ((run + 63) / 64);
          pf.work_total = std::max<int64_t>(
              1, nk * (score_work<T>(sp.head_dim, ndot) + (pv_ticks<T>(sp.head_dim, ndot) ? nq * sp.head_dim : 0)));
        } else {
          for (int64_t r = ra; r < rb; ++r) {
            prefetch_run(k0, kl, r);
            prefetch_run(v0, vl, r);
          }
        }
      }
      attend(L, slice(j), sp.head_dim, nq, ncol, sp.seqlen_k, c0, std::min(c0 + step, c_end), cb.full_lo,
             cb.full_hi, kv_rows<T, PAGED>(sp, sp.k, sp.k_str, 0, hk0 + j),
             kv_rows<T, PAGED>(sp, sp.v, sp.v_str, 0, hk0 + j), qscale_of(sp), sp.softcap, nullptr,
             c0 == c_begin, pf.r < pf.r_end ? &pf : nullptr);
    }
  }
  const int64_t dp = L.dpad;
  for (int64_t j = 0; j < nh; ++j) {
    const float* w = slice(j);
    float* po = part(hk0 + j);
    if (po == nullptr) {
      for (int64_t c = 0; c < nq; ++c) store_column<T>(sp, L, w, c, 0, (hk0 + j) * g + c / sq, c % sq);
      continue;
    }
    float* plse = po + ncol * dp;
    for (int64_t c = 0; c < nq; ++c) {
      const float li = w[L.l + c], inv = li > 0.0f ? 1.0f / li : 0.0f;
      for (int64_t k = 0; k < dp; ++k) po[c * dp + k] = w[L.o + c * dp + k] * inv;
      plse[c] = li != 0.0f ? w[L.m + c] + std::log(li) : kNegInf;
    }
  }
}

// Merges the pieces of one (sequence, kv head) by the seed's rescale rule:
// with M = max_s lse_s and w_s = exp(lse_s - M), O = sum_s w_s O_s / sum_s w_s
// and LSE = M + log(sum_s w_s). No visible key anywhere: O = 0, LSE = -inf.
template <class T>
void decode_merge(const FwdParams& sp, const FwdLayout& L, float* tmp, int64_t hk, int64_t nsplit,
                  const float* parts, size_t stride) {
  const int64_t g = sp.group(), sq = sp.seqlen_q, nq = sq * g, ncol = round_up(nq, VW);
  const int64_t d = sp.head_dim, dp = L.dpad;
  for (int64_t c = 0; c < nq; ++c) {
    float mx = kNegInf;
    for (int64_t s = 0; s < nsplit; ++s) mx = std::max(mx, parts[s * stride + ncol * dp + c]);
    const int64_t h = hk * g + c / sq, i = c % sq;
    for (int64_t k = 0; k < dp; ++k) tmp[k] = 0.0f;
    float sum = 0.0f;
    if (mx != kNegInf) {
      for (int64_t s = 0; s < nsplit; ++s) {
        const float w = std::exp(parts[s * stride + ncol * dp + c] - mx);
        if (w == 0.0f) continue;
        sum += w;
        const float* po = parts + s * stride + c * dp;
        for (int64_t k = 0; k < d; ++k) tmp[k] += w * po[k];
      }
    }
    store_row(tmp, rows_of<T>(sp.out, sp.o_str, 0, h).row(i), d, sum > 0.0f ? 1.0f / sum : 0.0f);
    if (sp.lse) sp.lse[h * sp.lse_head_stride + i] = sum != 0.0f ? mx + std::log(sum) : kNegInf;
  }
}

// Per-thread floats of the decode path: one workspace slice per head of a task.
inline size_t decode_thread_floats(const FwdParams& p) {
  return size_t(decode_group_heads(p)) * fwd_layout(p.head_dim).per_thread;
}

template <class T, bool PAGED>
void decode(const FwdParams& p, float* ws, int nthreads) {
  const FwdLayout L = fwd_layout(p.head_dim);
  const int64_t ns = decode_splits(p), units = p.batch * p.heads_kv;
  const int64_t groups = decode_head_groups(p), gh = decode_group_heads(p);
  const int64_t ntasks = p.batch * groups * ns;
  const size_t per_thread = decode_thread_floats(p);
  // Pieces by (sequence, kv head, split), as decode_merge reads them.
  float* parts = ns > 1 ? ws + size_t(nthreads) * per_thread : nullptr;
  const size_t pstride = partial_floats(p);
  const bool to_l2 = decode_prefetch_to_l2();  // an environment read: once per call, not per task
  // One (sequence, head group) split in pieces (single-sequence decode): each
  // thread takes a run of consecutive pieces, and a piece's last step
  // prefetches the next piece's first tile, so that only a thread's first
  // piece starts on a tile no step prefetched (at 4k keys, 8 pieces of 8
  // tiles, +5-14% from memory on the Zen 4; bench/NOTES.md, "Decode: a
  // thread's pieces chained"). The pieces and their merge are the same for
  // any thread count, so the bits are too. Otherwise pieces go to threads
  // dynamically (sequences may differ in length).
  const bool chain = ntasks == ns && ns > 1;
#pragma omp parallel num_threads(nthreads)
  {
    float* w = ws + size_t(omp_get_thread_num()) * per_thread;
#if FA_DECODE_AMX
    configure_tiles();  // per thread, once per call (dot_rows_amx)
#endif
    auto run = [&](int64_t t, bool chained_in, bool chain_out) {
      const int64_t split = t % ns, bg = t / ns, b = bg / groups, hk0 = bg % groups * gh;
      const FwdParams sp = sequence_params(p, b, seq_lens(p, b));
      decode_task<T, PAGED>(sp, L, w, hk0, std::min(gh, p.heads_kv - hk0), split, ns, to_l2, [&](int64_t hk) {
        return parts ? parts + size_t((b * p.heads_kv + hk) * ns + split) * pstride : nullptr;
      }, chained_in, chain_out);
    };
    if (chain) {
      const int64_t nt = omp_get_num_threads(), i = omp_get_thread_num();
      const int64_t t0 = ntasks * i / nt, t1 = ntasks * (i + 1) / nt;
      for (int64_t t = t0; t < t1; ++t) run(t, t > t0, t + 1 < t1);
#pragma omp barrier
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntasks; ++t) run(t, false, false);
    }
    if (parts) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t u = 0; u < units; ++u) {
        const int64_t b = u / p.heads_kv;
        const FwdParams sp = sequence_params(p, b, seq_lens(p, b));
        decode_merge<T>(sp, L, w + L.o, u % p.heads_kv, ns, parts + size_t(u * ns) * pstride, pstride);
      }
    }
#if FA_DECODE_AMX
    release_tiles();
#endif
  }
}

// ---- entry points ---------------------------------------------------------------

template <class T>
void forward_t(const FwdParams& p, float* ws, int nthreads) {
  const bool paged = p.block_table != nullptr;
  if (use_decode(p)) {
    paged ? decode<T, true>(p, ws, nthreads) : decode<T, false>(p, ws, nthreads);
  } else {
    paged ? forward_seq<T, true>(p, ws, nthreads) : forward_seq<T, false>(p, ws, nthreads);
  }
}

inline int64_t forward_tasks(const FwdParams& p) {
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return 0;
  if (use_decode(p)) return p.batch * decode_head_groups(p) * decode_splits(p);
  if (p.per_sequence()) return tile_prefix(p).back();
  return p.batch * p.heads_q * ((p.seqlen_q + FBR - 1) / FBR);
}

inline size_t forward_workspace_floats(const FwdParams& p, int nthreads) {
  if (use_decode(p)) return size_t(nthreads) * decode_thread_floats(p) + decode_extra_floats(p);
  return size_t(nthreads) * fwd_layout(p.head_dim, tile_pieces(p.dtype)).per_thread + presplit_floats(p);
}

inline void forward(const FwdParams& p, float* ws, int nthreads) {
  switch (p.dtype) {
    case DType::F32: forward_t<float>(p, ws, nthreads); break;
    case DType::F16: forward_t<f16_t>(p, ws, nthreads); break;
    case DType::BF16: forward_t<bf16_t>(p, ws, nthreads); break;
    default: break;
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
