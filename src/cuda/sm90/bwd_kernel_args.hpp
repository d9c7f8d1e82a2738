// What the host adapter (bwd_sm90.cu) hands the Hopper backward kernels: TMA
// descriptors of Q, K, V, dO (by value, __grid_constant__), the workspace
// pointers and the problem's scalars, narrowed to 32 bits where
// can_implement_bwd bounds them.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace flashattn::detail::cuda::sm90 {

// Tile shape of the backward: one CTA per bwd_block_n(head_dim) keys of one
// kv head, stepping over bwd_block_m(head_dim) query rows at a time (shared by
// host and device: TMA box sizes, the padded LSE/D rows, the grid). Head dim
// 64 takes 128 query rows per step: its wgmmas would be half as long at 64,
// and its dQ tile (128 x 64) then splits by rows between the two consumer
// warpgroups, where head dim 128's (64 x 128) splits by columns. Head dims
// 192 and 256 take 64 keys: dK and dV for 128 keys would need 192 or 256
// registers per thread (bwd_traits.cuh, kSplitHeadDim), and split dK, dV and
// dQ by columns between the consumer warpgroups (bwd_kernel_split.cuh).
constexpr bool bwd_split_head_dim(int head_dim) { return head_dim > 128; }
constexpr int bwd_block_n(int head_dim) { return bwd_split_head_dim(head_dim) ? 64 : 128; }
constexpr int bwd_block_m(int head_dim) { return head_dim <= 64 ? 128 : 64; }
// Head dim 128 also has a kernel on 80-row steps (FlashAttention-3's choice
// for its non-causal backward): each step's five products are 25% longer for
// the same barriers, waits and hand-offs. Its dQ = dS K runs transposed (dQ^T
// = K^T dS^T, N = 80 query columns; a wgmma's M is 64 rows) and its single
// dQ staging tile makes room for the taller Q/dO stages (bwd_traits.cuh).
// The host picks it per call (bwd_sm90.cu, block_m_of).
constexpr int kBwdTallBlockM = 80;
constexpr bool bwd_tall_steps_built(int head_dim) { return head_dim == 128; }
// The split's columns: consumer warpgroup w takes columns bwd_split_col0(w)
// .. + bwd_split_cols(head_dim, w) of dK, dV and dQ. Whole 64-column
// (128-byte) swizzle atoms, because an MN-major wgmma operand (dO, Q and K
// there) can start only at an atom's edge: the first warpgroup takes two
// atoms, the second the rest (two at 256, one at 192).
constexpr int bwd_split_col0(int w) { return 128 * w; }
constexpr int bwd_split_cols(int head_dim, int w) { return w == 0 ? 128 : head_dim - 128; }
// Floats of padding after each head_dim-long row of the fp32 dQ accumulator,
// in shared memory (rows 8 banks apart: conflict-free staging stores) and,
// so that a staged query tile is one contiguous bulk reduce-add, in global
// memory too.
constexpr int kBwdDQPad = 8;
// Floats per query row of the accumulator. The split head dims stage dQ in
// the step's Q/dO buffers, which have no room for padding: their rows are
// swizzled instead (bwd_dq_split_offset). The 80-row steps stage dQ^T's
// fragments as single floats down the query rows, which a pad of 4 keeps
// conflict-free (rows 4 banks apart; 8 would put 2 lanes on each bank).
constexpr int bwd_dq_stride(int head_dim, int block_m) {
  return bwd_split_head_dim(head_dim) ? head_dim : head_dim + (block_m == kBwdTallBlockM ? 4 : kBwdDQPad);
}
// The split head dims: where dQ[row][col] of a 64-query tile sits in the
// tile's 64 x head_dim floats of the accumulator. Each warpgroup's columns
// are a [64][bwd_split_cols] block (its staging area, two contiguous bulk
// reduce-adds) whose rows keep their 16-byte chunks in the order chunk ^
// (row % 8), which makes the staging stores conflict-free.
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr int bwd_dq_split_offset(int row, int col, int head_dim) {
  const int w = col / 128;
  return 64 * bwd_split_col0(w) + row * bwd_split_cols(head_dim, w) + (((col % 128) / 4) ^ (row % 8)) * 4 +
         col % 4;
}
// The preprocess (bwd_prepost.cuh): lanes per query row, one 16-byte load
// of O and of dO each, rounded up to a power of two that divides the warp
// (head dim 192: 24 lanes load, 32 take part in the row's shuffles).
constexpr int bwd_prep_lanes(int head_dim) {
  return head_dim / 8 <= 8 ? 8 : head_dim / 8 <= 16 ? 16 : 32;
}

// Varlen (cu_seqlens) workspace rows. Padded batches lay the LSE/D/dQ rows
// of (b, h) out at (b * Hq + h) * seqlen_q_pad; varlen batches at h *
// bwd_varlen_head_rows + bwd_varlen_row0(cu_seqlens_q[b], b): every
// sequence's first row is tile-aligned, and its last tile ends before the
// next sequence's first (floor(cu[b] / m) + ceil(len / m) <= floor(cu[b + 1] /
// m) + 1), so a query tile's bulk reduce-add and its LSE/D rows never reach
// another sequence's rows. One spare tile per head follows the last one.
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr int64_t bwd_varlen_row0(int cu_q_b, int b, int block_m) {
  return static_cast<int64_t>(block_m) * (cu_q_b / block_m + b);
}
constexpr int64_t bwd_varlen_head_rows(int64_t total_q, int64_t batch, int block_m) {
  return block_m * (total_q / block_m + batch + 1);
}

struct BwdKernelArgs {
  CUtensorMap tm_q;   // box {64, bwd_block_m}
  CUtensorMap tm_do;  // box {64, bwd_block_m}
  CUtensorMap tm_k;   // box {64, bwd_block_n}
  CUtensorMap tm_v;   // box {64, bwd_block_n}
  // dK, dV, box {64, 64}: 64 keys (a consumer warpgroup's at head dims 64
  // and 128, the CTA's at 256) by 64 columns, stored by TMA.
  CUtensorMap tm_dk;
  CUtensorMap tm_dv;
  // Workspace (bwd_sm90.cu, Layout): LSE * log2(e) (+inf for a row that saw
  // no key and for the padding rows) and D = rowsum(dO * O), both
  // [B, Hq, seqlen_q_pad] (varlen: [Hq, ws_head_rows], bwd_varlen_row0) so
  // that every query tile has block_m aligned values (the kernel's rows per
  // step: bwd_block_m, or kBwdTallBlockM; the producer warp copies them in
  // float2s); the fp32 dQ accumulator over the same rows,
  // bwd_dq_stride(head_dim, block_m) floats each, the staging tile's layout
  // (at head dim 256 each query tile's block permuted: bwd_dq_split_offset).
  const float* lse2;
  const float* dsum;
  float* dq_accum;
  // Deterministic mode: one counter per bwd_block_m workspace rows (a query
  // tile of one query head), zeroed; the key tiles add to a query tile in
  // increasing order, each when the counter equals its rank.
  int* dq_order;
  int deterministic;
  // The CTA (x, y, z) handles kv head y * I + x % I of batch z (I = 2 ^
  // heads_interleave_log2; none when that is heads_kv or more: the grid's y
  // is ceil(heads_kv / I)), key tile kv_tile_base + kv_tile_step * (x / I):
  // base 0, step 1, I = 1 normally; in
  // deterministic mode the grid runs backwards over the key tiles with a
  // right mask bound (tiles - 1, -1) and interleaves up to 8 kv heads
  // (bwd_sm90.cu, det_interleave_log2), so
  // that a key tile's CTA is scheduled that many blocks after the one it
  // waits for (bwd_kernel.cuh, before bwd_dq_writer).
  int kv_tile_base, kv_tile_step, heads_interleave_log2;
  // Deterministic mode: two dQ writer warps take alternate steps
  // (bwd_dq_writer, bwd_dq_writer_split); 0 = one writer
  // (FLASHATTN_SM90_DET_TWO_WRITERS, for A/B runs).
  int det_two_writers;
  // Register stores of dK/dV (a varlen sequence's last partial tile of
  // keys): base pointers and strides in elements.
  void* dk;
  void* dv;
  int64_t dk_stride_batch, dk_stride_seq, dk_stride_head;
  int64_t dv_stride_batch, dv_stride_seq, dv_stride_head;
  // Varlen (nullptr for padded batches): sequence b is rows [cu_seqlens_q[b],
  // cu_seqlens_q[b + 1]) of the packed q / dO (the maps' batch is 1) and
  // [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k / v; seqlen_q / seqlen_k
  // are the longest; workspace rows as bwd_varlen_row0 says, ws_head_rows
  // (bwd_varlen_head_rows) per query head.
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int64_t ws_head_rows;
  int batch, seqlen_q, seqlen_q_pad, seqlen_k, heads_q, heads_kv, group;
  // The caller's head dims: q / k / dq / dk's and v / dout / dv's (v's own
  // head dim, or head_dim); both at most the tile's (bwd_tile_head_dim of the
  // wider, tma_desc.hpp). The TMA maps bound each operand by its own, so the
  // narrower side's columns load as zeros; the register stores stop there.
  int head_dim, head_dim_v;
  int window_left, window_right;  // -1 = unbounded (clamped on the host)
  float scale;       // softmax scale (dK's and dQ's final factor)
  // scale * log2(e): P = exp2(S * scale_log2 - LSE * log2(e)); log2(e) for
  // the score-mod kernel, whose scores are in natural units.
  float scale_log2;
  // Score modifications (the kMod kernels, score_mod.cuh): S becomes
  // softcap * tanh(S * scale / softcap) (0 = off), dS then carrying the
  // factor 1 - tanh^2, and takes the ALiBi bias -slope * |i + seqlen_k -
  // seqlen_q - j|, slope = alibi[b * alibi_batch_stride + h] (nullptr = off).
  float softcap;
  float cap_scale;  // scale / softcap
  const float* alibi;
  int64_t alibi_batch_stride;
};

// The preprocess and postprocess kernels (bwd_prepost.cuh).
struct BwdPrepArgs {
  const void* o;
  const void* dout;
  int64_t o_sb, o_ss, o_sh, do_sb, do_ss, do_sh;  // strides in elements
  const float* lse;                               // [B, Hq, Sq] (varlen [Hq, total_q])
  float* lse2;                                    // [B, Hq, Sqp] (varlen [Hq, ws_head_rows])
  float* dsum;                                    // as lse2
  float* dq_accum;                                // lse2's rows x dq_stride (below)
  void* dq;
  int64_t dq_sb, dq_ss, dq_sh;
  // Varlen: as in BwdKernelArgs; total_q packed rows, lse_sh the LSE's
  // head stride.
  const int* cu_seqlens_q;
  int64_t ws_head_rows, total_q, lse_sh;
  // head_dim: the tile's; cols: the caller's head_dim (<= head_dim), the
  // columns of dQ; cols_o: v's head dim (<= head_dim), the columns of O and
  // dO; block_m: the kernel's query rows per step (varlen workspace rows);
  // dq_stride: floats per accumulator row, bwd_dq_stride(head_dim, block_m).
  int batch, heads_q, seqlen_q, seqlen_q_pad, head_dim, cols, cols_o, block_m, dq_stride;
  float scale;
};

}  // namespace flashattn::detail::cuda::sm90
