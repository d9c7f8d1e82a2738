// Forward kernel arguments beyond the padded batch: per-sequence lengths
// (varlen cu_seqlens, KV-cache lengths), paged K/V through a block table,
// packed GQA (the query heads of one KV head as rows of one tile) and
// split-KV (flash-decoding: partial O / LSE per key range into a workspace,
// merged by combine_kernel.cuh). Plain data, built on the host.
#pragma once

#include <cstdint>

#include "sm80/kernel_args.hpp"

namespace flashattn::detail::cuda::sm80 {

struct FwdSeqArgs : FwdArgs {
  const int32_t* cu_q = nullptr;       // varlen: row offsets of q / out (batch + 1)
  const int32_t* cu_k = nullptr;       // varlen: row offsets of k / v
  const int32_t* seqlens_k = nullptr;  // KV cache: keys = seqlens_k[b] + seqlens_k_add
  int seqlens_k_add = 0;
  const int32_t* kv_batch_idx = nullptr;  // KV cache: K/V batch entry of sequence b (else b)
  const int32_t* leftpad_k = nullptr;     // KV cache: first key row of sequence b (else 0)
  const int32_t* block_table = nullptr;  // paged K/V (k.sb / v.sb are page strides)
  int64_t bt_stride = 0;
  int page_size = 0;
  int64_t lse_sb = 0, lse_sh = 0;  // LSE strides (batch, head); rows add cu_q[b]
  int pack = 1;       // query heads per tile row group (group when packed, else 1)
  int nsplit = 1;     // key-range pieces per (tile, head)
  int max_q = 0;      // rows per (batch, head) of the split workspace
  float* o_accum = nullptr;    // [nsplit, B, Hq, max_q, d] fp32 (nsplit > 1)
  float* lse_accum = nullptr;  // [nsplit, B, Hq, max_q]
  // Block order (kernel_traits.hpp grid_block over the 3-D grid's linear
  // index): 0 = each (batch, head) unit's query tiles in turn; else units in
  // groups of group_units, full_groups of them before the last.
  int group_units = 0, full_groups = 0;

  // A padded batch without features (what sm80_emu_check builds).
  FwdSeqArgs(const FwdArgs& a) : FwdArgs(a) {  // NOLINT: implicit on purpose
    lse_sh = seqlen_q;
    lse_sb = static_cast<int64_t>(heads_q) * seqlen_q;
    max_q = seqlen_q;
  }
  explicit FwdSeqArgs(const FwdParams& p) : FwdSeqArgs(FwdArgs(p)) {
    cu_q = p.cu_seqlens_q;
    cu_k = p.cu_seqlens_k;
    seqlens_k = p.seqlens_k;
    seqlens_k_add = static_cast<int>(p.seqlens_k_add);
    kv_batch_idx = p.kv_batch_idx;
    leftpad_k = p.leftpad_k;
    block_table = p.block_table;
    bt_stride = p.block_table_stride;
    page_size = static_cast<int>(p.page_size);
    lse_sb = p.lse_batch_stride;
    lse_sh = p.lse_head_stride;
  }
};

}  // namespace flashattn::detail::cuda::sm80
