// fp32 forward (tiles.cuh says why on the CUDA cores): one block per
// (query tile, query head, sequence), the seed's algorithm as written: Q's
// tile stays in shared memory, K / V tiles stream past it, scores and
// the online softmax (running max and sum per row, O rescaled when the max
// grows) stay in registers, P goes through shared memory into O += P V.
// Key tiles outside the causal / window band are never loaded; only the
// tiles the band cuts are masked element by element.
//
// Covers what the CPU backend covers: GQA, Sq != Sk, causal and windows,
// softcap, ALiBi, dropout (and the returned mask), varlen, KV-cache lengths,
// leftpad, batch index and paged K/V (the append runs before, in
// launch_f32.cuh).
#pragma once

#include <cstdint>

#include "f32/seq.cuh"
#include "f32/tiles.cuh"
#include "sm80/fwd_args.hpp"

namespace flashattn::detail::cuda::f32 {

template <int DT>
__global__ void __launch_bounds__(kThreads, FwdTile<DT>::MIN_BLOCKS) fwd_kernel(const sm80::FwdSeqArgs a) {
  using Tile = FwdTile<DT>;
  constexpr int RM = Tile::RM, CN = Tile::CN, BM = Tile::BM, BN = Tile::BN, LD = Tile::LD, LP = Tile::LP;
  constexpr int DG = DT / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sK = sQ + BM * LD;  // the ring's K slot
  float* sV = sK + BN * LD;  // the ring's V slot
  float* sP = sV + BN * LD;

  const Lane l = lane_of(threadIdx.x);
  const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
  const Seq s = sequence(a, b, a.cu_q, a.cu_k, a.seqlens_k, a.seqlens_k_add, a.leftpad_k, a.kv_batch_idx);
  // Heaviest (causal: last) query tiles first.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;
  if (m0 >= s.len_q) return;
  const int rows = min(BM, s.len_q - m0);
  const ScoreRule rule = score_rule(a, s, b, h);
  const uint32_t bh = a.dropout ? drop_row(a, b, h) : 0;

  const float* q = static_cast<const float*>(a.q.ptr) + b * a.q.sb + (s.q_off + m0) * a.q.ss + h * a.q.sh;
  load_rows_async<DT>(sQ, LD, BM, rows, a.d, q, a.q.ss);
  const int32_t* table = a.block_table != nullptr ? a.block_table + b * a.bt_stride : nullptr;
  // Key row j of the sequence (paged: page table[j / page_size], whose batch stride is the page stride).
  auto key_row = [&](const sm80::Tensor4& t, int j) {
    const float* base = static_cast<const float*>(t.ptr) + hk * t.sh;
    if (table != nullptr)
      return base + table[j / a.page_size] * t.sb + static_cast<int64_t>(j % a.page_size) * t.ss;
    return base + s.kv_b * t.sb + (s.k_off + j) * t.ss;
  };

  const KeyRange kr = s.mask.keys(m0, m0 + rows);
  const int n_begin = kr.empty() ? 0 : static_cast<int>(kr.begin / BN * BN);
  const int n_end = kr.empty() ? 0 : static_cast<int>(kr.end);

  float o[RM][4 * DG];
  float m_run[RM], l_run[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m_run[i] = -INFINITY;
    l_run[i] = 0.f;
#pragma unroll
    for (int e = 0; e < 4 * DG; ++e) o[i][e] = 0.f;
  }

  // K or V tile n0 into its slot (asynchronous: the caller commits). The
  // ring's order: K_i's copy runs under P_{i-1} V_{i-1}, V_i's under Q K_i^T,
  // so each wait finds its tile loaded while one product ran.
  auto load_kv = [&](float* dst, const sm80::Tensor4& t, int n0) {
    const int keys = min(BN, s.len_k - n0);
    if (table != nullptr)
      load_tile_async(dst, LD, BN, DT, keys, a.d, t.ptr, [&](int r) { return key_row(t, n0 + r); });
    else
      load_rows_async<DT>(dst, LD, BN, keys, a.d, key_row(t, n0), t.ss);
  };
  auto load_k = [&](int n0) { load_kv(sK, a.k, n0); };
  auto load_v = [&](int n0) { load_kv(sV, a.v, n0); };
  if (n_begin < n_end) load_k(n_begin);
  cp_async_commit();  // Q and the first K tile
  if (n_begin < n_end) load_v(n_begin);
  cp_async_commit();  // the first V tile

  for (int n0 = n_begin; n0 < n_end; n0 += BN) {
    const int keys = min(BN, s.len_k - n0);
    cp_async_wait<1>();  // this K tile (and Q); V's may still be in flight
    __syncthreads();     // ... visible to every thread
    float sc[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int c = 0; c < CN; ++c) sc[i][c] = 0.f;
    dot_nt(sc, sQ, LD, sK, LD, DT, l);
    // Scores in natural units; -inf where the mask hides the key (or the row
    // is past the sequence). A full tile (every row and key present and
    // visible) without softcap or ALiBi, the common case, takes the
    // branch-free loop: the general one's per-element mask and rule tests
    // cost ~15 instructions a score (ncu).
    const bool full = rows == BM && keys == BN && s.mask.tile_full(m0, m0 + rows, n0, n0 + BN);
    if (full && rule.plain()) {
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int c = 0; c < CN; ++c) sc[i][c] *= rule.scale;
    } else {
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const int r = l.ty + kRowThreads * i, qi = m0 + r;
#pragma unroll
        for (int c = 0; c < CN; ++c) {
          const int kj = n0 + l.tx + kColThreads * c;
          const bool vis = r < rows && (full || s.mask.visible(qi, kj));
          sc[i][c] = vis ? rule.score(sc[i][c], qi, kj) : -INFINITY;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int r = l.ty + kRowThreads * i, qi = m0 + r;
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < CN; ++c) mx = fmaxf(mx, sc[i][c]);
      const float m_new = fmaxf(m_run[i], row_max(mx));
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row that has seen no key yet
      const float alpha = expf(m_run[i] - m_use);
      float sum = 0.f, p[CN];
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        p[c] = expf(sc[i][c] - m_use);
        sum += p[c];
      }
      if (a.dropout) {
#pragma unroll
        for (int c = 0; c < CN; ++c) {
          const int kj = n0 + l.tx + kColThreads * c;
          if (p[c] > 0.f) {
            const bool keep = keeps(a.rng, bh, qi, kj);
            p[c] = keep ? p[c] * a.keep_scale : 0.f;
            if (a.dropout_mask != nullptr && keep)
              a.dropout_mask[((static_cast<int64_t>(b) * a.heads_q + h) * a.seqlen_q + qi) * a.seqlen_k + kj] = 1;
          }
        }
      }
#pragma unroll
      for (int c = 0; c < CN; ++c) sP[r * LP + l.tx + kColThreads * c] = p[c];
      l_run[i] = l_run[i] * alpha + row_sum(sum);
      m_run[i] = m_new;
#pragma unroll
      for (int e = 0; e < 4 * DG; ++e) o[i][e] *= alpha;
    }
    cp_async_wait<0>();  // this V tile
    __syncthreads();     // P and V are visible; K's slot is free
    if (n0 + BN < n_end) load_k(n0 + BN);
    cp_async_commit();  // the next K tile (maybe an empty group)
    accum_pv(o, sP, LP, BN, sV, LD, l);
    __syncthreads();  // P and V are consumed
    if (n0 + BN < n_end) load_v(n0 + BN);
    cp_async_commit();  // the next V tile (maybe an empty group)
  }
  cp_async_wait<0>();  // no copy outlives the block (rows with no key tile)

  // O = acc / l (0 for a row that saw no key), LSE = m + log l (-inf then).
  float* out = static_cast<float*>(const_cast<void*>(a.o.ptr)) + b * a.o.sb + (s.q_off + m0) * a.o.ss + h * a.o.sh;
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = l.ty + kRowThreads * i;
    if (r >= rows) continue;
    // l is 0 only for a row that saw no key (else >= 1); a NaN input makes it
    // NaN, and the row's O and LSE NaN with it (as on every backend).
    const float inv = l_run[i] == 0.f ? 0.f : 1.f / l_run[i];
#pragma unroll
    for (int j = 0; j < DG; ++j) {
      const int c = 4 * l.tx + 32 * j;
      if (c < a.d)
        *reinterpret_cast<float4*>(out + r * a.o.ss + c) =
            make_float4(o[i][4 * j] * inv, o[i][4 * j + 1] * inv, o[i][4 * j + 2] * inv, o[i][4 * j + 3] * inv);
    }
    if (a.lse != nullptr && l.tx == 0)
      a.lse[b * a.lse_sb + h * a.lse_sh + s.q_off + m0 + r] =
          l_run[i] == 0.f ? -INFINITY : m_run[i] + logf(l_run[i]);
  }
}

}  // namespace flashattn::detail::cuda::f32
