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
//
// fp32 (FA_FP32_SPLIT, kernels_amx.cpp) runs the same loop with every
// operand (Q, the K tile, V^T, P^T) held as three bf16 pieces, x = hi + mid +
// lo (bf16_pack.hpp, split3), and each GEMM as the six piece products that
// carry fp32's precision (amx_tiles.hpp, tile_block): the tile unit does 16x
// an AVX-512 core's fp32 FMAs per cycle, so six bf16 products still cost
// less than one fp32 GEMM on the FMA units (bench/NOTES.md, "fp32 on AMX
// tiles"). P is split, not rounded: the result is fp32 attention, judged by
// the fp32 rule.
#pragma once

#include <omp.h>

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

// 1: split fp32 runs the query blocks as a pipeline, the next GEMMs under
// each block's softmax (attend_amx); 0: one block after another, as bf16.
#ifndef FA_AMX_FWD_OVERLAP
#define FA_AMX_FWD_OVERLAP 1
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

static_assert(FBC % 32 == 0 && FBR % 32 == 0, "AMX tiles: 32 keys, 32 queries per block");
static_assert(VW == 16, "AMX kernels use 16-float vectors");

// Q^T in VNNI pairs, unscaled: qv row r (FBR pairs apart) holds, for column
// c, (q_c[2r], q_c[2r + 1]) (amx_tiles.hpp, transpose_pairs).
inline void pack_q_columns(const FwdLayout& L, float* ws, const bf16_t* const* rows, int64_t n,
                           int64_t ncol, int64_t d) {
  transpose_pairs(reinterpret_cast<uint16_t*>(ws + L.qv), 2 * FBR, reinterpret_cast<const uint16_t* const*>(rows),
                  n, ncol, d);
}
// Split fp32: the rows' three pieces (staged in the K tile's buffer, which
// holds FBC rows of three pieces), then each piece's Q^T as above, one plane
// of dq32 / 2 x FBR pairs after another.
inline void pack_q_columns(const FwdLayout& L, float* ws, const float* const* rows, int64_t n,
                           int64_t ncol, int64_t d) {
  static_assert(FBR <= FBC, "the Q pieces are staged in the K tile's buffer");
  const int64_t dq32 = round_up(d, 32);
  uint16_t* stage = reinterpret_cast<uint16_t*>(ws + L.kb16);
  split_rows([&](int64_t c) { return rows[c]; }, n, d, dq32, stage, 3 * dq32);
  uint16_t* qv = reinterpret_cast<uint16_t*>(ws + L.qv);
  for (int p = 0; p < 3; ++p)
    transpose_pairs(qv + p * dq32 * FBR, 2 * FBR, StridedRows{stage + p * dq32, 3 * dq32}, n, ncol, d);
}

// Split fp32 K and V of one (batch, kv head), split once per call
// (presplit_kv) instead of once per query tile: a task then reads K's pieces
// and V^T's planes in place. (Splitting every K/V tile per task measured a
// quarter of the forward at 4k: bench/NOTES.md, "fp32 on AMX tiles".)
struct SplitKV {
  Rows<const float> rows;  // the fp32 rows (the rare non-finite V fallback)
  const uint16_t* k;       // K: row j's three pieces at k + j * 3 * dq32
  const uint16_t* vt;      // V^T: piece p's plane at vt + p * dpad * ldv, key j in column j
  int64_t ldv;
  const uint8_t* vbad;     // per FBC-key tile: V holds an inf or NaN there
  const float* row(int64_t j) const { return rows.row(j); }
};

// bf16 elements of one (batch, kv head)'s pieces: K (sk16 rows of 3 dq32),
// V^T (3 planes of dpad rows, ldv apart), and its per-tile flags in bf16
// units. ldv: sk32 keys rounded up to an odd number of cache lines, so that
// a tile load's 16 rows spread over the L1 sets (at a power-of-two stride
// they shared one set and evicted each other: the forward ran no faster
// than splitting per task).
struct PresplitSize {
  int64_t sk16, sk32, ldv, k, vt, flags, per_head;
};
inline PresplitSize presplit_size(int64_t d, int64_t seqlen_k) {
  PresplitSize z;
  z.sk16 = round_up(seqlen_k, 16);
  z.sk32 = round_up(seqlen_k, 32);
  z.ldv = z.sk32 / 32 % 2 ? z.sk32 : z.sk32 + 32;
  z.k = z.sk16 * 3 * round_up(d, 32);
  z.vt = 3 * round_up(d, VW) * z.ldv;
  z.flags = round_up((seqlen_k + FBC - 1) / FBC, 64) / 2;
  z.per_head = round_up(z.k + z.vt + z.flags, 32);  // whole cache lines per head
  return z;
}

// V rows c0 .. c0 + nk - 1 as three bf16 pieces each (split_row, staged in
// `stage`, rows ld_stage apart), each piece's plane transposed to V^T at vt +
// piece * plane (keys as columns, rows ldv apart), as the P V GEMM reads
// them. Returns whether V held an inf or NaN there.
template <class VRows>
inline bool split_v_transposed(const VRows& V, int64_t c0, int64_t nk, int64_t d, uint16_t* stage,
                               int64_t ld_stage, uint16_t* vt, int64_t plane, int64_t ldv) {
  const int64_t dq32 = round_up(d, 32), dp = round_up(d, VW);
  split_rows([&](int64_t j) { return V.row(c0 + j); }, nk, d, dq32, stage, ld_stage);
  bool bad = false;
  for (int q = 0; q < 3; ++q) {
    bad |= transpose_bf16([&](int64_t j) { return stage + j * ld_stage + q * dq32; }, nk, d, dp,
                          round_up(nk, 32), vt + q * plane, ldv);
  }
  return bad;
}

// Splits every (batch, kv head)'s K and V into buf (per_head bf16 each), in
// parallel over FBC-key tiles; stage(t) is thread t's scratch of FBC rows of
// three pieces (its FwdLayout's kb16).
template <class Stage>
void presplit_kv(const FwdParams& p, uint16_t* buf, int nthreads, Stage stage) {
  const int64_t d = p.head_dim, dq32 = round_up(d, 32), dp = round_up(d, VW);
  const PresplitSize z = presplit_size(d, p.seqlen_k);
  const int64_t ntile = (p.seqlen_k + FBC - 1) / FBC, n = p.batch * p.heads_kv * ntile;
#pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t x = 0; x < n; ++x) {
    const int64_t bh = x / ntile, c0 = x % ntile * FBC, nk = std::min(FBC, p.seqlen_k - c0);
    const int64_t b = bh / p.heads_kv, hk = bh % p.heads_kv;
    const Rows<const float> K = rows_of<const float>(p.k, p.k_str, b, hk);
    const Rows<const float> V = rows_of<const float>(p.v, p.v_str, b, hk);
    uint16_t* head = buf + bh * z.per_head;
    const int64_t kend = std::min(round_up(c0 + nk, 16), z.sk16);
    split_rows([&](int64_t x) { return K.row(c0 + x); }, nk, d, dq32, head + c0 * 3 * dq32, 3 * dq32);
    for (int64_t j = c0 + nk; j < kend; ++j) std::memset(head + j * 3 * dq32, 0, size_t(3 * dq32) * 2);
    reinterpret_cast<uint8_t*>(head + z.k + z.vt)[c0 / FBC] = split_v_transposed(
        V, c0, nk, d, stage(omp_get_thread_num()), 3 * dq32, head + z.k + c0, dp * z.ldv, z.ldv);
  }
}

inline SplitKV split_kv_of(const FwdParams& p, const uint16_t* buf, int64_t b, int64_t hk, bool want_v) {
  const PresplitSize z = presplit_size(p.head_dim, p.seqlen_k);
  const uint16_t* head = buf + (b * p.heads_kv + hk) * z.per_head;
  return {want_v ? rows_of<const float>(p.v, p.v_str, b, hk) : rows_of<const float>(p.k, p.k_str, b, hk),
          head, head + z.k, z.ldv, reinterpret_cast<const uint8_t*>(head + z.k + z.vt)};
}

// Queries per block: the softmax, the P^T packing and the O^T update of one
// block run on buffers of their own (S^T 32 KiB, O^T 16 KiB at d = 128, P^T
// 16 KiB; split fp32: P^T 48 KiB, and two blocks' S^T and P^T at a time for
// the pipeline below); whole-tile buffers 1 KiB a row apart fell into a few
// L1 sets.
constexpr int64_t QB = 32;  // fwd_layout (forward.hpp) sizes L.s and L.pv for it

// P^T of one block: FBC / 2 pair rows of 2 * QB bf16, one plane per piece.
constexpr int64_t kPvPlane = FBC * QB;

// Rounds P^T rows j, j + 1 (16 queries from column c of a block) into pv;
// kSplit: their three pieces into pv's three planes.
template <bool kSplit>
inline void store_p_pair(uint16_t* pv, int64_t j, int64_t c, vf p0, vf p1) {
  uint16_t* dst = pv + (j / 2) * 2 * QB + 2 * c;
  const __m512 e = reinterpret_cast<__m512>(p0), o = reinterpret_cast<__m512>(p1);
  if constexpr (kSplit) {
    store_pair_pieces(dst, kPvPlane, e, o);
  } else {
    _mm512_storeu_si512(dst, pack_pair_bf16(e, o));
  }
}

template <class KV>
void attend_amx(const FwdLayout& L, float* ws, int64_t d, int64_t nq, int64_t ncol,
                int64_t seqlen_k, int64_t c_begin, int64_t c_end, int64_t full_lo, int64_t full_hi,
                const KV& K, const KV& V, float qscale, float cap, const Variants* var, bool fresh) {
  constexpr bool kSplit = std::is_same_v<row_type_t<KV>, float>;
  constexpr bool kPresplit = std::is_same_v<KV, SplitKV>;
  // The query blocks' software pipeline (below): split fp32 on the tile unit.
  constexpr bool kOverlap = kSplit && FA_AMX_FWD_OVERLAP;
  const int64_t dp = L.dpad, dq32 = round_up(d, 32);
  // Piece strides (kSplit): K pieces side by side in a row, the others in planes.
  const int64_t kld = kSplit ? 3 * dq32 : dq32, vt_plane = dp * FBC, qv_plane = dq32 * FBR;
  const bool capped = cap > 0.0f;
  const bool alibi = var && var->alibi, dropout = var && var->dropout;
  const bool plain = !capped && !alibi;
  // s: S^T of a query block (FBC x QB; kOverlap: two blocks'); ot: O^T by
  // blocks, block b at ot + b * QB * dp (dp x QB each); pv: P^T of a block
  // in VNNI pairs (kOverlap: two).
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
    int64_t lda = kld;
    bool vbad = false;
    // V^T as the P V GEMM reads it: this tile's columns, ldv apart, planes vplane apart.
    const uint16_t* vtile = vt;
    int64_t ldv = FBC, vplane = vt_plane;
    if constexpr (kPresplit) {
      ka = K.k + c0 * kld;
      vtile = V.vt + c0;
      ldv = V.ldv;
      vplane = dp * V.ldv;
      vbad = V.vbad[c0 / FBC];
    } else if constexpr (kSplit) {
      // V's pieces staged in kb first (rows of three pieces), transposed a
      // plane at a time; then K's pieces take kb.
      vbad = split_v_transposed(V, c0, nk, d, kb, kld, vt, vt_plane, FBC);
      split_rows([&](int64_t j) { return K.row(c0 + j); }, nk, d, dq32, kb, kld);
      for (int64_t j = nk; j < nk16; ++j) std::memset(kb + j * kld, 0, size_t(kld) * 2);
    } else {
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
      vbad = transpose_bf16(vrow, nk, d, dp, nk32, vt, FBC);
    }
    const bool partial = !(c0 >= full_lo && c0 + nk <= full_hi);
    // The next tile's K/V rows are prefetched a slice per query block.
    const int64_t pf0 = c0 + FBC, pf1 = std::min(c_end, c0 + 2 * FBC);
    const int64_t pf_step = FA_AMX_FWD_PF && pf1 > pf0 ? (pf1 - pf0 + nblk - 1) / nblk : 0;

    // Split fp32 (kOverlap) runs the query blocks as a software pipeline, so
    // that the tile unit computes under the softmax (amx_tiles.hpp,
    // SplitGemmJob): while block b's softmax runs on the AVX-512 units, its
    // loop issues, a few products at a time, block b - 1's P V and block
    // b + 1's Q K^T. S^T and P^T have two buffers each (block b's in buffer
    // b % 2). Block b's own P V is issued under block b + 1's softmax, the
    // last one after the loop. bf16 runs the blocks one after another (S^T,
    // softmax, P V) on one buffer each: its GEMMs are a sixth of fp32's, and
    // through the pipeline it measured level at best (bench/NOTES.md, "Tile
    // GEMMs under the softmax").
    // Blocks are the key tile's visible ones (a partial tile's keys that
    // some column of a block sees end at c0 + nkb: on a causal diagonal the
    // early blocks stop well short of nk, and the GEMMs and the softmax stop
    // there too; a block that sees none is skipped).
    auto keys_of = [&](int64_t cb) {
      if (!partial) return nk;
      const int64_t nb = std::min(QB, ncol - cb);
      int64_t kmax = 0;
      for (int64_t c = 0; c < nb; ++c) kmax = std::max<int64_t>(kmax, hi[cb + c]);
      return std::clamp<int64_t>(kmax - c0, 0, nk);
    };
    auto next_block = [&](int64_t cb) {  // the first visible block from cb (ncol if none)
      for (; cb < ncol; cb += QB)
        if (keys_of(cb) > 0) break;
      return cb;
    };
    using Job = PairGemmJob<kSplit>;
    auto s_job = [&](int64_t cb, int buf) {  // raw q.k into S^T buffer buf
      const int64_t nb = std::min(QB, ncol - cb);
      return pair_gemm_job<kSplit>(round_up(keys_of(cb), 16), nb, dq32, ka, lda, dq32, qv + 2 * cb, 2 * FBR,
                                   qv_plane, s + buf * FBC * QB, QB, false);
    };
    Job pv_prev;  // P V of the block before (kOverlap: pending)
    int64_t cb = next_block(0);
    Job s_next = cb < ncol && kOverlap ? s_job(cb, 0) : Job();
    s_next.finish();  // the first block's S^T: nothing to run under it
    for (int buf = 0; cb < ncol; buf = kOverlap ? buf ^ 1 : 0) {
      const int64_t nb = std::min(QB, ncol - cb), nkb = keys_of(cb);
      const int64_t nkb32 = round_up(nkb, 32);
      float* otb = ot + cb * dp;
      float* sb = s + buf * FBC * QB;
      uint16_t* pvb = pv + buf * (kSplit ? 3 : 1) * kPvPlane;
      const int64_t cn = next_block(cb + QB);
      if constexpr (kOverlap) {
        s_next = cn < ncol ? s_job(cn, buf ^ 1) : Job();
      } else {
        s_job(cb, buf).finish();
      }
      if (pf_step) {
        const int64_t a = pf0 + cb / QB * pf_step, e = std::min(pf1, a + pf_step);
        prefetch_rows(K, a, e, d);
        prefetch_rows(V, a, e, d);
      }
      if (partial) mask_cols_abs(sb, QB, lo + cb, hi + cb, nb, c0, nkb);
      // The exponential loop's iterations pace the two jobs (none without kOverlap).
      GemmPacer<Job> pacer(&pv_prev, &s_next, ((nb + VW - 1) / VW) * (nkb32 / 2));

      for (int64_t c = 0; c < nb; c += VW) {
        // Plain scores stay raw q.k and the scale rides in the exponent's
        // FMA; softcap / ALiBi need the scaled score first, stored back.
        vf mx = vsplat(kNegInf);
        if (plain) {
          // Four running maxima: one chain would wait on VMAXPS's latency
          // for every key (measured: 10% of the forward).
          vf m1 = mx, m2 = mx, m3 = mx;
          int64_t j = 0;
          for (; j + 4 <= nkb; j += 4) {
            mx = vmax(mx, vload(sb + j * QB + c));
            m1 = vmax(m1, vload(sb + (j + 1) * QB + c));
            m2 = vmax(m2, vload(sb + (j + 2) * QB + c));
            m3 = vmax(m3, vload(sb + (j + 3) * QB + c));
          }
          for (; j < nkb; ++j) mx = vmax(mx, vload(sb + j * QB + c));
          mx = vmax(vmax(mx, m1), vmax(m2, m3)) * vsplat(qscale);
        } else {
          const vf qp = alibi ? vload(ws + L.qpos + cb + c) : vsplat(0.0f);
          for (int64_t j = 0; j < nkb; ++j) {
            vf x = vload(sb + j * QB + c) * vsplat(qscale);
            if (capped) x = vsoftcap(x, cap);
            if (alibi) x += var->bias_q(qp, c0 + j);
            vstore(sb + j * QB + c, x);
            mx = vmax(mx, x);
          }
        }
        const vf qs = vsplat(plain ? qscale : 1.0f);
        vf mold = vload(m + cb + c), mnew = vmax(mold, mx);
        vf mu = vsel(mnew == vsplat(kNegInf), vsplat(0.0f), mnew);
        vf alpha = vexp(mold - mu);
        vf sum = vsplat(0.0f), sum1 = sum;
        for (int64_t j = 0; j < nkb32; j += 2) {
          const vf zero = vsplat(0.0f);
          const vf p0 = j < nkb ? vexp(vload(sb + j * QB + c) * qs - mu) : zero;
          const vf p1 = j + 1 < nkb ? vexp(vload(sb + (j + 1) * QB + c) * qs - mu) : zero;
          sum += p0;
          sum1 += p1;
          if (dropout) {  // P~ = P o Z / (1 - p) is packed after the keep mask below
            vstore(sb + j * QB + c, p0);
            vstore(sb + (j + 1) * QB + c, p1);
          } else {
            store_p_pair<kSplit>(pvb, j, c, p0, p1);
          }
          if constexpr (kOverlap) pacer.tick();
        }
        vstore(l + cb + c, alpha * vload(l + cb + c) + (sum + sum1));
        vstore(m + cb + c, mnew);
        vstore(al + cb + c, alpha);
      }
      pacer.finish();
      if (dropout) {
        float* zr = ws + L.zr;
        for (int64_t c = 0; c < std::min(nb, nq - cb); ++c) {
          const int64_t i = var->row0 + cb + c;
          var->keep_row(i, c0, nkb, zr);
          for (int64_t j = 0; j < nkb; ++j) sb[j * QB + c] *= zr[j];
          if (var->mask) {
            int32_t* mrow = var->mask + i * var->seqlen_k;
            for (int64_t j = 0; j < nkb; ++j)
              if (c0 + j >= lo[cb + c] && c0 + j < hi[cb + c]) mrow[c0 + j] = zr[j] != 0.0f;
          }
        }
        for (int64_t j = 0; j < nkb32; j += 2)
          for (int64_t c = 0; c < nb; c += VW) {
            // Rows past nkb hold stale values: the pair's zeros come from here.
            const vf p0 = j < nkb ? vload(sb + j * QB + c) : vsplat(0.0f);
            const vf p1 = j + 1 < nkb ? vload(sb + (j + 1) * QB + c) : vsplat(0.0f);
            store_p_pair<kSplit>(pvb, j, c, p0, p1);
          }
      }
      if ((partial || dropout) && vbad) {
        // A masked P is exactly 0 and 0 * inf/NaN would reach rows that cannot
        // see the key (forward.hpp, pv_skipping_zeros): skip zero terms. Rare.
        auto p_at = [&](int64_t j, int64_t c) {  // P as the GEMM sees it (the pieces' sum)
          const uint16_t* x = pvb + (j / 2) * 2 * QB + 2 * c + (j & 1);
          float v = bf16_bits_to_float(x[0]);
          if constexpr (kSplit) v += bf16_bits_to_float(x[kPvPlane]) + bf16_bits_to_float(x[2 * kPvPlane]);
          return v;
        };
        auto v_at = [&](int64_t j, int64_t k) {
          if constexpr (kSplit) return float(V.row(c0 + j)[k]);
          else return bf16_bits_to_float(vtile[k * ldv + j]);
        };
        for (int64_t c = 0; c < std::min(nb, nq - cb); ++c) {
          for (int64_t k = 0; k < dp; ++k) otb[k * QB + c] *= al[cb + c];
          for (int64_t j = 0; j < nkb; ++j) {
            const float pij = p_at(j, c);
            if (pij == 0.0f) continue;
            for (int64_t k = 0; k < d; ++k) otb[k * QB + c] += pij * v_at(j, k);
          }
        }
        pv_prev = Job();
      } else {
        // Rescale only where some factor is not exactly 1 (once a row's
        // maximum has settled, most tiles leave it unchanged).
        for (int64_t c = 0; c < nb; c += VW) {
          const vf a = vload(al + cb + c);
          if (_mm512_cmpneq_ps_mask(reinterpret_cast<__m512>(a), _mm512_set1_ps(1.0f)) == 0) continue;
          for (int64_t k = 0; k < dp; ++k) vstore(otb + k * QB + c, vload(otb + k * QB + c) * a);
        }
        pv_prev = pair_gemm_job<kSplit>(dp, nb, nkb32, vtile, ldv, vplane, pvb, 2 * QB, kPvPlane, otb, QB, true);
        if constexpr (!kOverlap) pv_prev.finish();
      }
      cb = cn;
    }
    pv_prev.finish();
  }
  release_tiles();
  for (int64_t i = 0; i < nq; ++i) {
    const float* src = ot + (i / QB) * QB * dp + i % QB;
    for (int64_t k = 0; k < dp; ++k) o[i * dp + k] = src[k * QB];
  }
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
