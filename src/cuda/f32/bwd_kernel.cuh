// fp32 backward (tiles.cuh says why on the CUDA cores), recomputing P from
// the saved LSE as the seed describes, in three kernels:
//   bwd_dsum_kernel  D = rowsum(dO * O) per query row (into the workspace);
//   bwd_dkdv_kernel  one block per (key tile, KV head, sequence): K and V
//                    stay in shared memory, the query tiles of every query
//                    head of the group stream through, dK and dV accumulate
//                    in registers (GQA's reduction included, no atomics);
//   bwd_dq_kernel    one block per (query tile, query head, sequence): the
//                    key tiles stream through, dQ accumulates in registers.
// Every output element is summed in one fixed order by one thread, so the
// result is the same bit for bit on every run: the deterministic mode is
// the only mode. The cost is computing S and dP twice (once per kernel).
//
// With dropout (Z the keep mask, k = 1 / (1 - p)):
//   dV = (P o Z k)^T dO,  dP = (dO V^T) o Z k,  dS = P o (dP - D),
//   dScore/d(q.k) = scale (or scale (1 - tanh^2) with softcap),
//   dQ = dS' K,  dK = dS'^T Q  (dS' = dS times that derivative).
#pragma once

#include <cstdint>
#include <type_traits>

#include "f32/seq.cuh"
#include "f32/tiles.cuh"
#include "sm80/kernel_args.hpp"

namespace flashattn::detail::cuda::f32 {

// Row (b, h, i) of the LSE / D arrays: [B, Hq, Sq] padded, [Hq, total_q] varlen.
__device__ __forceinline__ int64_t stat_row(const sm80::BwdArgs& a, const Seq& s, int b, int h, int i) {
  return b * a.row_sb + h * a.row_sh + s.q_off + i;
}

// One warp per query row. (A template only so that each tile head dim's
// translation unit has its own instance.)
template <int DT>
__global__ void __launch_bounds__(kThreads) bwd_dsum_kernel(const sm80::BwdArgs a) {
  const int b = blockIdx.z, h = blockIdx.y;
  const Seq s = sequence(a, b, a.cu_q, a.cu_k);
  const int i = blockIdx.x * (kThreads / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (i >= s.len_q) return;
  const int64_t q = s.q_off + i;
  const float* o = static_cast<const float*>(a.o.ptr) + b * a.o.sb + q * a.o.ss + h * a.o.sh;
  const float* g = static_cast<const float*>(a.dout.ptr) + b * a.dout.sb + q * a.dout.ss + h * a.dout.sh;
  float acc = 0.f;
  for (int c = lane; c < a.d; c += 32) acc = fmaf(o[c], g[c], acc);
#pragma unroll
  for (int m = 16; m > 0; m /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (lane == 0) a.dsum[stat_row(a, s, b, h, i)] = acc;
}

// dS' of one visible (query i, key j) from its raw scores q.k and dO.v.
struct Grad {
  float p_drop;  // P o Z k: the weight of dO in dV
  float ds;      // dS' (includes the score derivative)
};
__device__ __forceinline__ Grad grad_of(const sm80::BwdArgs& a, const ScoreRule& rule, uint32_t bh, float raw,
                                        float raw_dp, float lse, float dsum, int i, int j) {
  float dscore;
  const float p = expf(rule.score(raw, i, j, &dscore) - lse);
  float dp = raw_dp, pd = p;
  if (a.dropout) {
    const bool keep = keeps(a.rng, bh, i, j);
    dp = keep ? dp * a.keep_scale : 0.f;
    pd = keep ? p * a.keep_scale : 0.f;
  }
  return {pd, p * (dp - dsum) * dscore};
}

// grad_of without softcap, ALiBi or dropout, the same arithmetic: the loop
// over a whole visible tile then has no per-score tests (as the forward's).
__device__ __forceinline__ Grad plain_grad(float scale, float raw, float raw_dp, float lse, float dsum) {
  const float p = expf(raw * scale - lse);
  return {p, p * (raw_dp - dsum) * scale};
}
// Whether plain_grad serves the whole tile of queries [q0, q0 + nq) x keys
// [n0, n0 + nk): every row and key present (nq, nk the tile's full sizes
// BQ, BK) and visible, and neither softcap, ALiBi nor dropout.
__device__ __forceinline__ bool plain_tile(const sm80::BwdArgs& a, const Seq& s, const ScoreRule& rule, int q0,
                                           int queries, int BQ, int n0, int keys, int BK) {
  return queries == BQ && keys == BK && !a.dropout && rule.plain() && s.mask.tile_full(q0, q0 + BQ, n0, n0 + BK);
}

template <int DT>
__global__ void __launch_bounds__(kThreads) bwd_dkdv_kernel(const sm80::BwdArgs a) {
  using Tile = BwdTile<DT>;
  constexpr int RM = Tile::KRM, CN = Tile::QCN, BK = Tile::BK, BQ = Tile::BQ, LD = Tile::LD;
  constexpr int LP = score_pitch(BQ), STAGES = Tile::Q_STAGES;
  constexpr int DG = DT / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sK = reinterpret_cast<float*>(smem_raw);
  float* sV = sK + BK * LD;
  float* sQ = sV + BK * LD;             // STAGES buffers
  float* sdO = sQ + STAGES * BQ * LD;   // STAGES buffers
  float* sP = sdO + STAGES * BQ * LD;   // (P o Z k)^T: keys x queries
  float* sdS = sP + BK * LP;            // dS'^T

  const Lane l = lane_of(threadIdx.x);
  const int hk = blockIdx.y, b = blockIdx.z;
  const Seq s = sequence(a, b, a.cu_q, a.cu_k);
  const int n0 = blockIdx.x * BK;
  if (n0 >= s.len_k) return;
  const int keys = min(BK, s.len_k - n0);
  auto rows_of = [&](const sm80::Tensor4& t, int64_t off, int h) {
    return static_cast<const float*>(t.ptr) + b * t.sb + off * t.ss + static_cast<int64_t>(h) * t.sh;
  };
  const float* k = rows_of(a.k, s.k_off + n0, hk);
  const float* v = rows_of(a.v, s.k_off + n0, hk);
  load_rows_async<DT>(sK, LD, BK, keys, a.d, k, a.k.ss);
  load_rows_async<DT>(sV, LD, BK, keys, a.d, v, a.v.ss);

  // The (query head, query tile) pairs that see any of this block's keys, in
  // a fixed order: every head of the group, its query tiles in order.
  const int h_end = (hk + 1) * a.group;
  struct QTile {
    int h, q0;
  };
  auto next_visible = [&](QTile t) {
    for (;;) {
      t.q0 += BQ;
      if (t.q0 >= s.len_q) {
        t.q0 = 0;
        if (++t.h >= h_end) return t;
      }
      if (any_visible(s.mask, t.q0, min(t.q0 + BQ, s.len_q), n0, n0 + keys)) return t;
    }
  };
  // Q and dO rows of tile t into buffer `stage` (asynchronous: the caller commits).
  auto load_q = [&](QTile t, int stage) {
    const int queries = min(BQ, s.len_q - t.q0);
    const float* q = rows_of(a.q, s.q_off + t.q0, t.h);
    const float* g = rows_of(a.dout, s.q_off + t.q0, t.h);
    load_rows_async<DT>(sQ + stage * BQ * LD, LD, BQ, queries, a.d, q, a.q.ss);
    load_rows_async<DT>(sdO + stage * BQ * LD, LD, BQ, queries, a.d, g, a.dout.ss);
  };

  float dk[RM][4 * DG], dv[RM][4 * DG];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int e = 0; e < 4 * DG; ++e) dk[i][e] = dv[i][e] = 0.f;

  QTile cur = next_visible({hk * a.group, -BQ});  // h_end when there is none (len_q 0 too)
  if (cur.h < h_end) load_q(cur, 0);
  cp_async_commit();  // K, V and the first Q / dO tile
  for (int it = 0; cur.h < h_end; ++it) {
    const QTile nxt = next_visible(cur);
    const int stage = STAGES == 2 ? it & 1 : 0;
    if (STAGES == 2) {
      // The next tile goes to the buffer the previous iteration finished
      // with (its last barrier below); one group per iteration, maybe empty.
      if (nxt.h < h_end) load_q(nxt, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      if (it > 0) {
        load_q(cur, 0);
        cp_async_commit();
      }
      cp_async_wait<0>();
    }
    const int h = cur.h, q0 = cur.q0, queries = min(BQ, s.len_q - q0);
    const ScoreRule rule = score_rule(a, s, b, h);
    const uint32_t bh = a.dropout ? drop_row(a, b, h) : 0;
    // LSE and D of this thread's query columns (read while the products run).
    float lse[CN], dsum[CN];
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      const int col = l.tx + kColThreads * c;
      lse[c] = col < queries ? a.lse[stat_row(a, s, b, h, q0 + col)] : 0.f;
      dsum[c] = col < queries ? a.dsum[stat_row(a, s, b, h, q0 + col)] : 0.f;
    }
    __syncthreads();  // this tile's Q / dO (and K / V) are visible to every thread
    const float* tQ = sQ + stage * BQ * LD;
    const float* tdO = sdO + stage * BQ * LD;
    float st[RM][CN], dpt[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int c = 0; c < CN; ++c) st[i][c] = dpt[i][c] = 0.f;
    dot_nt(st, sK, LD, tQ, LD, DT, l);
    dot_nt(dpt, sV, LD, tdO, LD, DT, l);
    const bool plain = plain_tile(a, s, rule, q0, queries, BQ, n0, keys, BK);
    auto grads = [&](auto is_plain) {  // one loop per case: no per-score branch on `plain`
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const int r = l.ty + kRowThreads * i, kj = n0 + r;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
          const int col = l.tx + kColThreads * c, qi = q0 + col;
          Grad gr{0.f, 0.f};
          if constexpr (decltype(is_plain)::value)
            gr = plain_grad(rule.scale, st[i][c], dpt[i][c], lse[c], dsum[c]);
          else if (r < keys && col < queries && s.mask.visible(qi, kj))
            gr = grad_of(a, rule, bh, st[i][c], dpt[i][c], lse[c], dsum[c], qi, kj);
          sP[r * LP + col] = gr.p_drop;
          sdS[r * LP + col] = gr.ds;
        }
      }
    };
    plain ? grads(std::true_type{}) : grads(std::false_type{});
    __syncthreads();
    accum_pv(dv, sP, LP, BQ, tdO, LD, l);
    accum_pv(dk, sdS, LP, BQ, tQ, LD, l);
    __syncthreads();  // P, dS and this stage's Q / dO are consumed before they are overwritten
    cur = nxt;
  }
  cp_async_wait<0>();  // no copy outlives the block (keys no query sees)

  auto store = [&](const sm80::Tensor4& t, float (&acc)[RM][4 * DG]) {
    float* base = static_cast<float*>(const_cast<void*>(t.ptr)) + b * t.sb + (s.k_off + n0) * t.ss +
                  static_cast<int64_t>(hk) * t.sh;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int r = l.ty + kRowThreads * i;
      if (r >= keys) continue;
#pragma unroll
      for (int j = 0; j < DG; ++j) {
        const int c = 4 * l.tx + 32 * j;
        if (c < a.d)
          *reinterpret_cast<float4*>(base + r * t.ss + c) =
              make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
      }
    }
  };
  store(a.dk, dk);
  store(a.dv, dv);
}

template <int DT>
__global__ void __launch_bounds__(kThreads) bwd_dq_kernel(const sm80::BwdArgs a) {
  using Tile = BwdTile<DT>;
  constexpr int RM = Tile::QRM, CN = Tile::KCN, BQ = Tile::DQ_BQ, BK = Tile::DQ_BK, LD = Tile::LD;
  constexpr int LP = score_pitch(BK);
  constexpr int DG = DT / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sdO = sQ + BQ * LD;
  float* sK = sdO + BQ * LD;
  float* sV = sK + BK * LD;
  float* sdS = sV + BK * LD;

  const Lane l = lane_of(threadIdx.x);
  const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
  const Seq s = sequence(a, b, a.cu_q, a.cu_k);
  const int q0 = (gridDim.x - 1 - blockIdx.x) * BQ;
  if (q0 >= s.len_q) return;
  const int queries = min(BQ, s.len_q - q0);
  const ScoreRule rule = score_rule(a, s, b, h);
  const uint32_t bh = a.dropout ? drop_row(a, b, h) : 0;
  auto rows_of = [&](const sm80::Tensor4& t, int64_t off, int hh) {
    return static_cast<const float*>(t.ptr) + b * t.sb + off * t.ss + static_cast<int64_t>(hh) * t.sh;
  };
  const float* q = rows_of(a.q, s.q_off + q0, h);
  const float* g = rows_of(a.dout, s.q_off + q0, h);
  const float* k = rows_of(a.k, s.k_off, hk);
  const float* v = rows_of(a.v, s.k_off, hk);
  load_rows_async<DT>(sQ, LD, BQ, queries, a.d, q, a.q.ss);
  load_rows_async<DT>(sdO, LD, BQ, queries, a.d, g, a.dout.ss);
  cp_async_commit();  // waited for with the first K / V tile (or at the end)
  float lse[RM], dsum[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = l.ty + kRowThreads * i;
    lse[i] = r < queries ? a.lse[stat_row(a, s, b, h, q0 + r)] : 0.f;
    dsum[i] = r < queries ? a.dsum[stat_row(a, s, b, h, q0 + r)] : 0.f;
  }

  float dq[RM][4 * DG];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int e = 0; e < 4 * DG; ++e) dq[i][e] = 0.f;

  const KeyRange kr = s.mask.keys(q0, q0 + queries);
  const int n_begin = kr.empty() ? 0 : static_cast<int>(kr.begin / BK * BK);
  const int n_end = kr.empty() ? 0 : static_cast<int>(kr.end);
  for (int n0 = n_begin; n0 < n_end; n0 += BK) {
    const int keys = min(BK, s.len_k - n0);
    __syncthreads();  // the previous tile's K, V and dS are consumed
    // K and V in two groups: V's copy runs under S = Q K^T.
    load_rows_async<DT>(sK, LD, BK, keys, a.d, k + n0 * a.k.ss, a.k.ss);
    cp_async_commit();
    load_rows_async<DT>(sV, LD, BK, keys, a.d, v + n0 * a.v.ss, a.v.ss);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    float sc[RM][CN], dp[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int c = 0; c < CN; ++c) sc[i][c] = dp[i][c] = 0.f;
    dot_nt(sc, sQ, LD, sK, LD, DT, l);
    cp_async_wait<0>();
    __syncthreads();
    dot_nt(dp, sdO, LD, sV, LD, DT, l);
    const bool plain = plain_tile(a, s, rule, q0, queries, BQ, n0, keys, BK);
    auto grads = [&](auto is_plain) {  // one loop per case: no per-score branch on `plain`
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const int r = l.ty + kRowThreads * i, qi = q0 + r;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
          const int col = l.tx + kColThreads * c, kj = n0 + col;
          float ds = 0.f;
          if constexpr (decltype(is_plain)::value)
            ds = plain_grad(rule.scale, sc[i][c], dp[i][c], lse[i], dsum[i]).ds;
          else if (r < queries && s.mask.visible(qi, kj))
            ds = grad_of(a, rule, bh, sc[i][c], dp[i][c], lse[i], dsum[i], qi, kj).ds;
          sdS[r * LP + col] = ds;
        }
      }
    };
    plain ? grads(std::true_type{}) : grads(std::false_type{});
    __syncthreads();
    accum_pv(dq, sdS, LP, BK, sK, LD, l);
  }

  cp_async_wait<0>();  // no copy outlives the block (rows with no key tile)

  float* out = static_cast<float*>(const_cast<void*>(a.dq.ptr)) + b * a.dq.sb + (s.q_off + q0) * a.dq.ss +
               static_cast<int64_t>(h) * a.dq.sh;
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = l.ty + kRowThreads * i;
    if (r >= queries) continue;
#pragma unroll
    for (int j = 0; j < DG; ++j) {
      const int c = 4 * l.tx + 32 * j;
      if (c < a.d)
        *reinterpret_cast<float4*>(out + r * a.dq.ss + c) =
            make_float4(dq[i][4 * j], dq[i][4 * j + 1], dq[i][4 * j + 2], dq[i][4 * j + 3]);
    }
  }
}

}  // namespace flashattn::detail::cuda::f32
