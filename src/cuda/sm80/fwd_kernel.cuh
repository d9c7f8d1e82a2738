// FlashAttention-2 forward (Dao, "FlashAttention-2", 2023, Algorithm 1 and
// section 3.1-3.2): one block per (BM query rows, head, batch), looping over
// key/value tiles; S = Q K^T and O += P V on mma.sync, the online softmax in
// registers, never writing S or P to memory. Each warp owns BM/NW whole rows,
// so no cross-warp reduction is needed, except on decode tiles (KEY_SPLIT):
// there two warps take halves of each key tile and merge once at the end.
//
// Pipeline (one buffer each for K and V): while S = Q K_j^T runs, V_j is in
// flight; while the softmax and O += P V_j run, K_{j+1} is in flight.
// Causal / window: key tiles no row of the block sees are never visited, and
// the per-element mask runs only on tiles the mask cuts (tile_full false),
// which includes the seqlen_k tail tile.
//
// Per-sequence batches (fwd_args.hpp): blockIdx.z = batch * nsplit + split.
// Each block reads its sequence's lengths and row offsets (varlen
// cu_seqlens, KV-cache lengths) and exits when its query tile is past the
// sequence's end; paged K/V rows go through the block table inside the
// cp.async loads; with packed GQA (pack = group) blockIdx.y is the KV head
// and tile row r is query r / pack of head hk * pack + r % pack, so the heads
// of a group share every K/V tile; with nsplit > 1 each block covers a slice
// of the key tiles and writes its normalised partial O and LSE (fp32) for
// combine_kernel.cuh instead of the output.
#pragma once

#include <cstdint>

#include "common/mma_sm80.cuh"
#include "common/ptx.cuh"
#include "common/smem_tile.cuh"
#include "common/warp_mma.cuh"
#include "sm80/fwd_args.hpp"
#include "sm80/fwd_plan.hpp"
#include "sm80/fwd_tiles.cuh"
#include "sm80/kernel_args.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/softmax.cuh"
#include "sm80/variants.cuh"

namespace flashattn::detail::cuda::sm80 {

// Scores of one tile in C-fragment layout for rows r_base + 16mt + g (+8):
// softcap (not in PLAIN), then (VAR, pack 1) the ALiBi bias slope_unit
// |row + offset - key|, then -inf where the mask hides the key (columns
// c0 + 8nt + 2t + e).
template <bool VAR = false, bool PLAIN = false, int MT, int NT>
__device__ __forceinline__ void fwd_score_mod(float (&s)[MT][NT][4], const AttnArgs& a, const WindowMask& mask,
                                              int pack, int r_base, int c0, bool full, int lane,
                                              float slope_unit = 0.f) {
  if (!PLAIN && a.softcap > 0.f) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = a.softcap * tanhf(s[mt][nt][e] * a.cap_scale);
  }
  const int g = lane >> 2, t = lane & 3;
  if constexpr (VAR) {
    if (slope_unit != 0.f) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int rp = r_base + mt * 16 + g + 8 * h + static_cast<int>(mask.offset);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) s[mt][nt][2 * h + e] += alibi_bias(slope_unit, rp, c0 + nt * 8 + 2 * t + e);
        }
    }
  }
  if (full) return;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const KeyRange kr = mask.keys((r_base + mt * 16 + g + 8 * h) / pack);
      const int lo = static_cast<int>(kr.begin - c0), hi = static_cast<int>(kr.end - c0);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + 2 * t + e;
          if (col < lo || col >= hi) s[mt][nt][2 * h + e] = -INFINITY;
        }
    }
  }
}

// Cfg: FwdCfg<D> (128-row tiles), or FwdDecodeCfg<D> (16-row tiles, one
// warp) when a (sequence, KV head) has at most 16 query rows (decode).
// VAR: ALiBi and dropout (variants.cuh) as runtime switches; launched with
// pack = 1 only (a tile's rows are one head's queries).
// PLAIN: the common prefill (fwd_is_plain: no softcap, no paged K/V, no
// packed GQA rows, no KV split) with those paths compiled out. Beside them
// ptxas spilled the plain tile loop (head dim 128: 172 bytes) and ran the
// paged row arithmetic's integer work in the loop body's registers.
template <class T, int D, class Cfg = FwdCfg<D>, bool VAR = false, bool PLAIN = false>
__global__ void __launch_bounds__(Cfg::NW * 32) fwd_kernel(const FwdSeqArgs a) {
  static_assert(!(VAR && PLAIN), "PLAIN has no variants");
  constexpr int BM = Cfg::BM, BN = Cfg::BN, NW = Cfg::NW, NTHREADS = NW * 32;
  // KEY_SPLIT (decode tiles): every warp holds all BM rows and takes BN / NW
  // keys of each tile; else every warp owns BM / NW rows and all BN keys.
  constexpr bool KEY_SPLIT = Cfg::KEY_SPLIT;
  constexpr int MT = KEY_SPLIT ? BM / 16 : BM / (16 * NW);  // m-tiles per warp
  constexpr int WN = KEY_SPLIT ? BN / NW : BN;              // keys per warp and tile
  constexpr int NT = WN / 8;                                // score n-tiles
  constexpr int DT = D / 8;                                 // output n-tiles
  static_assert(MT * 16 * (KEY_SPLIT ? 1 : NW) == BM && WN % 16 == 0 && D % 16 == 0, "tile shape");
  static_assert(!KEY_SPLIT || NW == 2, "KEY_SPLIT merges two warps' states");
  using LQ = SmemLayout<BM, D>;
  using LK = SmemLayout<BN, D>;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + LQ::kSize;
  T* sV = sK + LK::kSize;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Heaviest (causal: last) query blocks first: within each (batch, head)
  // unit (x of the 3-D grid), or within each group of units (masked prefill
  // calls in the default order, kernel_traits.hpp fwd_grouped_order).
  int m_block = gridDim.x - 1 - blockIdx.x, hy = blockIdx.y, bz = blockIdx.z;
  if (a.group_units > 0) {
    const GridBlock gb = grid_block(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z), a.group_units,
                                    a.full_groups, gridDim.x, gridDim.y, gridDim.z);
    m_block = gridDim.x - 1 - gb.n, hy = gb.hk, bz = gb.b;
  }
  const int nsplit = PLAIN ? 1 : a.nsplit;
  const int b = bz / nsplit, split = bz % nsplit;
  const int pack = PLAIN ? 1 : a.pack;
  // hy is the query head, or the KV head when the group is packed into rows.
  const int hk = pack > 1 ? hy : hy / a.group;

  // This sequence's lengths and first rows.
  int len_q = a.seqlen_q, len_k = a.seqlen_k;
  int64_t q_off = 0, k_off = 0;
  if (a.cu_q != nullptr) {
    q_off = a.cu_q[b];
    len_q = a.cu_q[b + 1] - a.cu_q[b];
    k_off = a.cu_k[b];
    len_k = a.cu_k[b + 1] - a.cu_k[b];
  }
  int kv_b = b;  // K/V's batch entry (cache_batch_idx)
  if (a.seqlens_k != nullptr) {
    // KV cache: the sequence's keys are cache rows [leftpad, seqlens_k + add).
    const int left = a.leftpad_k != nullptr ? a.leftpad_k[b] : 0;
    len_k = a.seqlens_k[b] + a.seqlens_k_add - left;
    k_off = left;
    if (a.kv_batch_idx != nullptr) kv_b = a.kv_batch_idx[b];
  }
  WindowMask mask = a.mask;
  mask.offset = len_k - len_q;
  mask.seqlen_k = len_k;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Split pieces: let the combine grid (launched with programmatic dependent
  // launch) be scheduled into the SMs this grid leaves free; it waits for
  // this grid's completion before it reads anything.
  if (nsplit > 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int r0 = m_block * BM;
  const int rows_total = len_q * pack;
  if (r0 >= rows_total) return;
  const int rows = min(BM, rows_total - r0);

  const T* qbase = static_cast<const T*>(a.q.ptr);
  const T* kbase = static_cast<const T*>(a.k.ptr);
  const T* vbase = static_cast<const T*>(a.v.ptr);
  // Row r of the tile: query row qrow(r) of head qhead(r).
  auto qrow = [&](int r) { return (r0 + r) / pack; };
  auto qhead = [&](int r) { return pack > 1 ? hk * pack + (r0 + r) % pack : hy; };
  const T* gQ = qbase + b * a.q.sb + (q_off + r0) * a.q.ss + static_cast<int64_t>(hy) * a.q.sh;
  const T* gK = kbase + kv_b * a.k.sb + k_off * a.k.ss + hk * a.k.sh;
  const T* gV = vbase + kv_b * a.v.sb + k_off * a.v.ss + hk * a.v.sh;
  const int32_t* table = !PLAIN && a.block_table != nullptr ? a.block_table + b * a.bt_stride : nullptr;
  // Paged: key row c lives in page table[c / page_size] (k.sb is the page stride).
  auto load_kv = [&](T* s, const T* base, const T* g, const Tensor4& t, int c0) {
    if (table != nullptr) {
      const T* head = base + hk * t.sh;
      load_rows_async<LK, NTHREADS>(
          s,
          [&](int r) {
            const int c = c0 + r;
            return head + table[c / a.page_size] * t.sb + static_cast<int64_t>(c % a.page_size) * t.ss;
          },
          len_k - c0, a.d, base, tid);
    } else {
      load_tile_async<LK, NTHREADS>(s, g + static_cast<int64_t>(c0) * t.ss, t.ss, len_k - c0, a.d, base, tid);
    }
  };

  const int q_lo = qrow(0), q_hi = qrow(rows - 1) + 1;  // queries of this tile
  const KeyRange kr = mask.keys(q_lo, q_hi);
  int n_begin = 0, n_end = 0;
  if (!kr.empty()) {
    n_begin = static_cast<int>(kr.begin / BN);
    n_end = static_cast<int>((kr.end + BN - 1) / BN);
  }
  if (nsplit > 1) {  // this block's slice of the key tiles
    const int n = n_end - n_begin;
    const int s0 = n_begin + static_cast<int>(static_cast<int64_t>(n) * split / nsplit);
    n_end = n_begin + static_cast<int>(static_cast<int64_t>(n) * (split + 1) / nsplit);
    n_begin = s0;
  }

  if (pack > 1) {
    load_rows_async<LQ, NTHREADS>(
        sQ, [&](int r) { return qbase + b * a.q.sb + (q_off + qrow(r)) * a.q.ss + qhead(r) * a.q.sh; }, rows,
        a.d, qbase, tid);
  } else {
    load_tile_async<LQ, NTHREADS>(sQ, gQ, a.q.ss, rows, a.d, qbase, tid);
  }
  cp_async_commit();
  if (n_begin < n_end) load_kv(sK, kbase, gK, a.k, n_begin * BN);
  cp_async_commit();

  float o[MT][DT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
  OnlineSoftmax<MT, NT> sm;
  sm.init();
  const int wrow = KEY_SPLIT ? 0 : warp * MT * 16;  // this warp's first row in the tile
  const int wkey = KEY_SPLIT ? warp * WN : 0;        // ... and first key of each key tile

  float slope_unit = 0.f;
  uint32_t drop_bh = 0;
  int32_t* mask_out = nullptr;
  if constexpr (VAR) {
    if (a.alibi != nullptr) slope_unit = a.alibi[b * a.alibi_sb + hy] * a.alibi_unit;
    drop_bh = drop_row(a, b, hy);
    if (a.dropout_mask != nullptr)
      mask_out = a.dropout_mask + (static_cast<int64_t>(b) * a.heads_q + hy) * a.seqlen_q * a.seqlen_k;
  }

  for (int n = n_begin; n < n_end; ++n) {
    const int c0 = n * BN;
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

    cp_async_wait<0>();  // K_n (and Q) landed
    __syncthreads();     // ... for every thread; every warp is done with V_{n-1}
    load_kv(sV, vbase, gV, a.v, c0);
    cp_async_commit();

    gemm_ss<MT, NT, D / 16, false, false, LQ, LK>(s, sQ, wrow, sK, wkey, lane);
    const bool full = mask.tile_full(q_lo, q_hi, c0, c0 + BN);
    fwd_score_mod<VAR, PLAIN>(s, a, mask, pack, r0 + wrow, c0 + wkey, full, lane, slope_unit);

    cp_async_wait<0>();  // V_n landed
    __syncthreads();     // ... and every warp is done with K_n
    if (n + 1 < n_end) load_kv(sK, kbase, gK, a.k, c0 + BN);
    cp_async_commit();

    sm.step(s, o, a.mult);
    if constexpr (VAR) {
      // After the row sums took the undropped P (the LSE is of it).
      if (a.dropout) dropout_rows(s, a, drop_bh, r0 + wrow, c0, lane, mask_out, a.seqlen_k, len_q, mask);
    }
    uint32_t p[MT][NT / 2][4];
    c_to_a<T>(p, s);
    gemm_rs<MT, DT, NT / 2, true, LK>(o, p, sV, 0, lane, wkey);
  }

  cp_async_wait<0>();
  __syncthreads();

  if constexpr (KEY_SPLIT) {
    // Warp 1 hands its state (m, its part of l, unnormalised O) to warp 0
    // through the K and V tiles (free after the loop), element for element
    // in fragment order; warp 0 rescales both to the common max (the seed's
    // rule) and goes on alone.
    constexpr int kVals = MT * 2 * (2 + DT * 2);
    float* x = reinterpret_cast<float*>(sK);  // [kVals][32]
    static_assert(kVals * 32 * sizeof(float) <= 2 * LK::kSize * sizeof(T), "K and V tiles hold warp 1's state");
    int v = 0;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (warp == 1) {
          x[v++ * 32 + lane] = sm.m[mt][h];
          x[v++ * 32 + lane] = sm.l[mt][h];
#pragma unroll
          for (int dt = 0; dt < DT; ++dt) {
            x[v++ * 32 + lane] = o[mt][dt][2 * h];
            x[v++ * 32 + lane] = o[mt][dt][2 * h + 1];
          }
        }
      }
    __syncthreads();
    if (warp == 0) {
      v = 0;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float m1 = x[v++ * 32 + lane], l1 = x[v++ * 32 + lane];
          const float m0 = sm.m[mt][h], mx = fmaxf(m0, m1);
          // Both -inf (no key seen yet by either): nothing to rescale.
          const float ms = mx == -INFINITY ? 0.f : mx * a.mult;
          const float a0 = fast_exp2(m0 * a.mult - ms), a1 = fast_exp2(m1 * a.mult - ms);
          sm.m[mt][h] = mx;
          sm.l[mt][h] = sm.l[mt][h] * a0 + l1 * a1;
#pragma unroll
          for (int dt = 0; dt < DT; ++dt) {
            o[mt][dt][2 * h] = o[mt][dt][2 * h] * a0 + x[v++ * 32 + lane] * a1;
            o[mt][dt][2 * h + 1] = o[mt][dt][2 * h + 1] * a0 + x[v++ * 32 + lane] * a1;
          }
        }
    }
  }

  float lse[MT][2];
  sm.finish(o, a.mult, lse);
  const int g = lane >> 2, t = lane & 3;
  const bool writer = !KEY_SPLIT || warp == 0;  // holds rows of the result
  if (nsplit > 1) {
    if (!writer) return;
    // Partial result of this key slice, fp32, for the combine kernel.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = wrow + mt * 16 + g + 8 * hh;
        if (r >= rows) continue;
        const int64_t row = ((static_cast<int64_t>(split) * a.batch + b) * a.heads_q + qhead(r)) * a.max_q + qrow(r);
        if (t == 0) a.lse_accum[row] = lse[mt][hh];
        float* orow = a.o_accum + row * a.d;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          const int col = dt * 8 + 2 * t;
          if (col < a.d) *reinterpret_cast<float2*>(orow + col) = make_float2(o[mt][dt][2 * hh], o[mt][dt][2 * hh + 1]);
        }
      }
    return;
  }
  if (a.lse != nullptr && t == 0 && writer) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = wrow + mt * 16 + g + 8 * hh;
        if (r < rows) a.lse[b * a.lse_sb + qhead(r) * a.lse_sh + q_off + qrow(r)] = lse[mt][hh];
      }
  }
  // Stage O through the Q tile (each warp overwrites only its own rows, which
  // only it has read), then write 16-byte rows.
  if (writer) store_c<LQ, T>(sQ, o, wrow, 0, lane);
  __syncthreads();
  T* obase = static_cast<T*>(const_cast<void*>(a.o.ptr));
  if (pack > 1) {
    store_rows<LQ, NTHREADS>([&](int r) { return obase + b * a.o.sb + (q_off + qrow(r)) * a.o.ss + qhead(r) * a.o.sh; },
                             sQ, rows, a.d, tid);
  } else {
    T* gO = obase + b * a.o.sb + (q_off + r0) * a.o.ss + static_cast<int64_t>(hy) * a.o.sh;
    store_tile<LQ, NTHREADS>(gO, a.o.ss, sQ, rows, a.d, tid);
  }
}

// The 128-row-tile instantiation a problem runs (one place for launch_fwd.cuh
// and the CPU emulation harness; decode plans take FwdDecodeCfg instead).
template <class T, int D>
auto fwd_kernel_for(const FwdParams& p, const FwdPlan& plan) {
  using Kernel = void (*)(FwdSeqArgs);
  if (p.has_variants()) return Kernel(&fwd_kernel<T, D, FwdCfg<D>, true>);
  if (fwd_is_plain(p, plan)) return Kernel(&fwd_kernel<T, D, FwdCfg<D>, false, true>);
  return Kernel(&fwd_kernel<T, D, FwdCfg<D>>);
}

}  // namespace flashattn::detail::cuda::sm80
