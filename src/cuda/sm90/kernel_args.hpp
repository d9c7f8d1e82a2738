// What the host adapter hands the kernel: TMA descriptors (passed by value as
// a __grid_constant__ parameter, as TMA requires) and the scalars of the
// problem, already narrowed to 32 bits (can_implement bounds the lengths).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace flashattn::detail::cuda::sm90 {

// Tile shape per head dim, shared by the host (TMA box sizes) and the kernel.
// Tuning knobs (compile definitions) for experiments; the defaults are the
// measured best (bench/sm90/NOTES.md).
#ifndef FLASHATTN_SM90_BLOCKN_HD64
#define FLASHATTN_SM90_BLOCKN_HD64 128
#endif
#ifndef FLASHATTN_SM90_BLOCKN_HD128
#define FLASHATTN_SM90_BLOCKN_HD128 128
#endif
// head_dim 192 (and the 16-bit head dims 136-184, fwd_tile_head_dim): 128
// query rows on two consumer warpgroups, as 256; 112 keys keep S + O + P
// (56 + 96 + 28 accumulator registers) inside the 240 a consumer gets and two
// K/V stages (42 KB each) beside Q (48 KB), FA3's choice at this head dim.
#ifndef FLASHATTN_SM90_BLOCKN_HD192
#define FLASHATTN_SM90_BLOCKN_HD192 112
#endif
#ifndef FLASHATTN_SM90_BLOCKN_HD256
#define FLASHATTN_SM90_BLOCKN_HD256 80
#endif
// Query rows per CTA = 64 x the number of consumer warpgroups. head_dim 64
// uses three (FA3's 192 x 128 tile): its softmax (MUFU ex2) costs as much as
// its MMAs, and a third warpgroup interleaves them better (+12% at 16k). Short
// causal / windowed head_dim 64 problems take 128-row tiles instead
// (kShortMaskedBlockM, chosen per call by sm90_forward.cu; head dim 128 too:
// tile_rules.hpp): there the 192-row tile's larger diagonal waste cost 14%
// at 512-1k tokens.
#ifndef FLASHATTN_SM90_BLOCKM_HD64
#define FLASHATTN_SM90_BLOCKM_HD64 192
#endif
// head_dim 128 (16-bit) takes three warpgroups too (+5-10% at 16k tokens
// non-causal; kernel_traits.cuh runs them in serial order, as S + O + P do
// not fit 160 registers). Causal and windowed calls joined them once the
// masked tiles were scheduled dynamically (tile_scheduler.cuh): +3-8% at
// 2k-16k, level at 512-1k (bench/sm90/NOTES.md). The 128-row instantiation
// stays for A/B timing (FLASHATTN_SM90_HD128_BLOCKM=128, sm90_forward.cu).
#ifndef FLASHATTN_SM90_BLOCKM_HD128
#define FLASHATTN_SM90_BLOCKM_HD128 192
#endif
constexpr int kNarrowBlockMHd128 = 128;
constexpr int block_m_for(int head_dim) {
  return head_dim <= 64    ? FLASHATTN_SM90_BLOCKM_HD64
         : head_dim <= 128 ? FLASHATTN_SM90_BLOCKM_HD128
                           : 128;
}
constexpr int block_n_for(int head_dim) {
  return head_dim <= 64    ? FLASHATTN_SM90_BLOCKN_HD64
         : head_dim <= 128 ? FLASHATTN_SM90_BLOCKN_HD128
         : head_dim <= 192 ? FLASHATTN_SM90_BLOCKN_HD192
                           : FLASHATTN_SM90_BLOCKN_HD256;
}

// The fp8 forward's query rows per tile at head dim 128: three consumer
// warpgroups, as head_dim 64 takes (kernel_traits.cuh: kIntraWGOverlap).
#ifndef FLASHATTN_SM90_FP8_BLOCKM_HD128
#define FLASHATTN_SM90_FP8_BLOCKM_HD128 192
#endif
constexpr int kFp8BlockMHd128 = FLASHATTN_SM90_FP8_BLOCKM_HD128;

// The fp8 forward's key tile at every head dim: a row of the transposed V
// tile (one head dim, kFp8BlockN keys) is exactly one 128-byte swizzle atom.
constexpr int kFp8BlockN = 128;
// Rows (head dims) per TMA box of the fp8 forward's transposed V: 16 KB
// boxes at most, as every other operand's.
constexpr int kFp8VtBoxRows = 128;

// head_dims 64 and 128 with a right mask bound (causal, windows) and few
// query rows run the 128-row tile (tile_rules.hpp, short_masked_tiles_pay).
constexpr int kShortMaskedBlockM = 128;

// The single-warpgroup tile (16-bit head dims 64 and 128, padded batches):
// 64 query rows, one consumer warpgroup, two CTAs per SM, so that one CTA's
// tile set-up, last key tiles and epilogue run beside the other CTA's main
// loop (the two consumer warpgroups of a 128-row tile start and end their
// tile together). Half the shared memory per CTA: head dim 128 then takes
// 64-key tiles (two stages of 64 x 128 K and V beside Q and O). An A/B
// option only (FLASHATTN_SM90_HD{64,128}_BLOCKM=64, sm90_forward.cu): slower
// from 2k tokens and unmasked, and at short causal calls two H100 runs
// disagreed (bench/sm90/NOTES.md, "The single-warpgroup tile").
constexpr int kSingleWGBlockM = 64;
constexpr int fwd_ctas_per_sm(int block_m) { return block_m == kSingleWGBlockM ? 2 : 1; }
// Keys per K/V tile of a 16-bit forward tile (fp8: kFp8BlockN).
constexpr int fwd_block_n(int head_dim, int block_m) {
  return block_m == kSingleWGBlockM && head_dim > 64 ? 64 : block_n_for(head_dim);
}

struct KernelArgs {
  CUtensorMap tm_q;  // box {64, block_m}
  CUtensorMap tm_k;  // box {64, kBlockN}
  CUtensorMap tm_v;  // box {64, kBlockN}
  CUtensorMap tm_o;  // box {64, 64}: each consumer warpgroup stores its own rows
  float* lse;        // nullptr, or LSE (b, h, i) at lse[b * lse_batch_stride + h * lse_head_stride + row]
  int64_t lse_batch_stride, lse_head_stride;
  // Varlen (nullptr for padded batches): sequence b is rows [cu_seqlens_q[b],
  // cu_seqlens_q[b + 1]) of the packed q / out (the maps' batch is 1) and
  // [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k / v; seqlen_q / seqlen_k are
  // the longest. Work tiles past a sequence's end are skipped
  // (tile_scheduler.cuh); O goes out by TMA where a warpgroup's 64 rows lie
  // inside the sequence and by direct stores bounded by the sequence where
  // they do not (a TMA store would write the next sequence's rows).
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  // KV cache (padded q, contiguous cache; nullptr otherwise): sequence b
  // reads cache entry kv_batch_idx[b] (nullptr: b) of the K/V maps, whose
  // rows are the cache's capacity (seqlen_k), and sees its keys
  // [leftpad_k[b], seqused_k[b] + seqlens_k_add) (leftpad nullptr: 0), the
  // first of them its key 0. Runs the per-sequence (kVarlen) kernels: rows
  // past a sequence's keys are stale cache rows, whose V the consumers zero
  // as they do the next sequence's rows of a varlen batch.
  const int* seqused_k;
  const int* leftpad_k;
  const int* kv_batch_idx;
  int seqlens_k_add;
  // Paged KV cache (nullptr otherwise; no leftpad or batch indices then):
  // key t of sequence b is row t % page_size of page block_table[b *
  // bt_stride + t / page_size]; the K/V maps are [pages, page_size,
  // heads_kv, d] with boxes of page_rows rows, a divisor of both page_size
  // and kBlockN, so that each box lies in one page (mainloop.cuh KeyPages).
  const int* block_table;
  int bt_stride, page_size, page_rows;
  // Small pages are gathered instead (kv_gather = 1; sm90_forward.cu's rule):
  // warps 1-3 of the producer warpgroup copy each K/V tile row by row with
  // cp.async from these bases (byte strides of a page, a row and a head), as
  // a box of TMA per page and atom column would be too many boxes
  // (paged_gather.cuh). k's columns past head_dim_k (v's past head_dim) are
  // zero-filled, as TMA fills them.
  int kv_gather;
  int head_dim_k;
  const char* k_base;
  const char* v_base;
  int64_t k_page_bytes, k_row_bytes, k_head_bytes;
  int64_t v_page_bytes, v_row_bytes, v_head_bytes;
  void* out;         // O base pointer and strides in elements (direct-store epilogue)
  int64_t o_stride_batch, o_stride_seq, o_stride_head;
  int batch, seqlen_q, seqlen_k, heads_q, group;
  // GQA packing (per-sequence kernels, padded batches included; 1 = off):
  // a work tile holds the pack_heads = group query heads of one KV head for
  // kBlockM / pack_heads query positions, tile row r being position
  // r / pack_heads of head r % pack_heads (rows past the last whole group
  // are left empty), so that one K/V load serves the group. tm_q is then a
  // 5-d map {d, group, seq, heads_kv, batch} whose box lays rows out that
  // way; O, LSE and split-KV partials go out by direct stores.
  int pack_heads;
  int head_dim;  // O's (v's) head dim, the direct store's bound: at most the tile's (fwd_tile_head_dim)
  int window_left, window_right;  // -1 = unbounded (clamped on the host)
  int num_m_blocks;
  int num_tiles;  // num_m_blocks * num_splits * (heads_q / pack_heads) * batch work tiles
  // Split-KV (flash-decoding; sm90_forward.cu chooses it when the query tiles
  // are too few to fill the GPU): each query tile's key tiles are cut into
  // num_splits pieces (block_mask.cuh split_key_tiles), each its own work
  // tile, which writes its normalised O and its LSE in fp32 to o_accum
  // [num_splits, batch, heads_q, seqlen_q, head_dim] and lse_accum
  // [num_splits, batch, heads_q, seqlen_q] (row i of a varlen sequence at i);
  // split_combine.cuh merges them into out and lse. 1: off. Runs on the
  // per-sequence (kVarlen) kernels, padded batches included.
  int num_splits;
  float* o_accum;
  float* lse_accum;
  int grid_ctas;  // persistent CTAs: min(num_tiles, #SMs x fwd_ctas_per_sm)
  // Dynamic schedule (tile_scheduler.cuh), for masked problems: the count of
  // tiles claimed past the first gridDim.x, zeroed in stream order before the
  // launch (sm90_forward.cu). nullptr: static round robin.
  int* tile_counter;
  // fp8 inputs: per-tensor dequantisation factors (device pointers, nullptr
  // = 1), read by the consumers (kernel.cuh call_scales); unused otherwise.
  // tm_v then maps the transposed V (fp8_v_transpose.hpp).
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  float scale;       // softmax scale (natural units, for the LSE)
  float scale_log2;  // scale * log2(e): exp(scale*(s-m)) = exp2(s*scale_log2 - m*scale_log2)
  // Score modifications (16-bit inputs; the kMod kernels, score_mod.cuh):
  // softcap * tanh(s * scale / softcap) (softcap 0 = off), then the ALiBi
  // bias -slope * |i + seqlen_k - seqlen_q - j| with slope alibi[b *
  // alibi_batch_stride + h] (nullptr = off).
  float softcap;
  float cap_scale;  // scale / softcap
  const float* alibi;
  int64_t alibi_batch_stride;
  int longest_first;  // causal/window: schedule the m blocks with the most keys first
  // causal/window: the partial query tile is each sequence's first, not its
  // last (WorkTile::row0, tile_scheduler.cuh)
  int first_tile_partial;
  int pingpong;       // consumer warpgroups take turns issuing wgmmas (2 consumers only)
  int block_m;        // the instantiation's query rows per tile (host: which one to launch)
  int block_n;        // the key rows the K (and 16-bit V) boxes hold: must be the kernel's kBlockN
};

}  // namespace flashattn::detail::cuda::sm90
