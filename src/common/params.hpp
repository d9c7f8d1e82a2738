// The one type-erased parameter block every backend receives (flash-attn's
// Flash_fwd_params idea). Built and validated by src/api; backends build their
// typed views from it and may assume every check in src/api/checks.cpp holds.
#pragma once

#include <cstdint>

#include "flashattn/flashattn.hpp"

namespace flashattn::detail {

// Strides of a [batch, seqlen, heads, head_dim] tensor, in elements; the
// head_dim stride is 1.
struct Strides {
  int64_t batch = 0, seq = 0, head = 0;
};

struct AttnParams {
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int32_t device_index = 0;
  void* stream = nullptr;

  int64_t batch = 0, seqlen_q = 0, seqlen_k = 0;
  int64_t heads_q = 0, heads_kv = 0, head_dim = 0;
  // Last dim of v, out, dout and dv (head_dim is q's and k's); 0 = head_dim
  // (params built without src/api, e.g. the kernel tests). Backends take one
  // head dim, except where they say otherwise (the Hopper forward): a call
  // with two reaches them through common/head_dim_pad.hpp, which pads the
  // narrower side with zeros.
  int64_t head_dim_v = 0;
  int64_t dim_v() const { return head_dim_v > 0 ? head_dim_v : head_dim; }

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  Strides q_str, k_str, v_str;

  float scale = 1.0f;    // already resolved (never 0)
  float softcap = 0.0f;  // 0 = off
  // Visible keys for query i: [i + off - window_left, i + off + window_right]
  // with off = seqlen_k - seqlen_q, clipped to [0, seqlen_k). -1 = unbounded.
  // Causal has been folded in as window_right = 0.
  int64_t window_left = -1, window_right = -1;
  bool causal = false;  // informational; the window already encodes it

  // ALiBi (CPU backend; CUDA sm80 kernels, sm80/variants.cuh): score (i, j)
  // gets -slope(b, h) * |i + seqlen_k - seqlen_q - j| added after scale and
  // softcap; slope(b, h) = alibi_slopes[b * alibi_batch_stride + h]
  // (stride 0 for [heads_q] slopes). nullptr = off.
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
  // Dropout on P (common/philox.hpp gives the mask); 0 = off.
  float dropout_p = 0.0f;
  uint64_t dropout_seed = 0, dropout_offset = 0;
  // Index of batch entry 0 in the caller's batch: the b of the dropout
  // generator is batch_offset + b (sequence_params sets it; 0 otherwise).
  int64_t batch_offset = 0;
  bool has_variants() const { return alibi_slopes != nullptr || dropout_p > 0.0f; }

  // Per-sequence lengths (all null for padded batches; then every sequence
  // has seqlen_q queries and seqlen_k keys). Pointers are on p.device.
  //  varlen: sequence b owns rows [cu_seqlens_q[b], cu_seqlens_q[b+1]) of q
  //    (and of out/dout/dq) and [cu_seqlens_k[b], cu_seqlens_k[b+1]) of k/v;
  //    the batch strides are 0 and seqlen_q / seqlen_k are the maxima.
  //  KV cache: sequence b sees keys [0, seqlens_k[b] + seqlens_k_add);
  //    seqlen_k is the capacity (an upper bound).
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqlens_k = nullptr;
  int64_t seqlens_k_add = 0;
  // KV cache, optional (nullptr = off): sequence b reads cache entry
  // kv_batch_idx[b] instead of entry b, and its keys start at cache row
  // leftpad_k[b] (keys [leftpad_k[b], seqlens_k[b] + seqlens_k_add): the
  // sequence's key 0 is that row, so masks count from it).
  const int32_t* kv_batch_idx = nullptr;
  const int32_t* leftpad_k = nullptr;
  // KV cache: entries of k/v's leading dimension, i.e. cache entries
  // (cache_batch_idx picks among them) or, paged, pages (the sm90 forward's
  // TMA bounds). 0 = batch.
  int64_t kv_entries = 0;
  int64_t total_q = 0;  // varlen: rows of q (the LSE's head stride)
  int64_t total_k = 0;  // varlen: rows of k and v (the sm90 forward's TMA bounds)
  // Paged K/V: row t of sequence b is row t % page_size of page
  // block_table[b * block_table_stride + t / page_size]; k/v's batch stride
  // is then the page stride. nullptr = contiguous per-sequence K/V.
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0, page_size = 0;

  int64_t group() const { return heads_q / heads_kv; }
  bool varlen() const { return cu_seqlens_q != nullptr; }
  // True when sequences differ in length or location (varlen, KV cache, paged).
  bool per_sequence() const { return cu_seqlens_q != nullptr || seqlens_k != nullptr || block_table != nullptr; }
};

struct FwdParams : AttnParams {
  void* out = nullptr;
  Strides o_str;
  // LSE of (b, h, i) at lse[b * lse_batch_stride + h * lse_head_stride + i]:
  // [B, Hq, Sq] contiguous, or varlen [Hq, total_q] (batch stride 0, the
  // sequence's row offset cu_seqlens_q[b] added instead); nullptr = none.
  float* lse = nullptr;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  // KV cache: new keys/values [B, seqlens_k_add, Hkv, D] appended at row
  // seqlens_k[b] of the cache before the attention (nullptr = no append).
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  Strides knew_str, vnew_str;
  // KV cache rotary embedding (only with k_new; common/rotary.hpp): cos / sin
  // [ro_len, rotary_dim / 2] in the dtype of q, rows *_row_stride elements
  // apart. k_new rows are rotated as they are appended, q into a copy.
  // nullptr = off.
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  int64_t rotary_dim = 0, rotary_cos_stride = 0, rotary_sin_stride = 0;
  bool rotary_interleaved = false;
  int32_t num_splits = 0;  // split-KV pieces; 0 = heuristic
  // Testing aid: the dropout keep mask, int32 [B, Hq, Sq, Sk] contiguous
  // (1 kept, 0 dropped or outside the causal/window mask); nullptr = none.
  int32_t* dropout_mask = nullptr;
  // F8E4M3 inputs (dtype F8E4M3; out is then BF16): per-tensor dequantisation
  // factors, one fp32 each on p.device; nullptr = 1. The attention is that of
  // q * q_descale, k * k_descale, v * v_descale.
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
};

// The dtype of O (and dO) for inputs of dtype `in`: fp8 attention writes bf16.
inline DType out_dtype_for(DType in) { return in == DType::F8E4M3 ? DType::BF16 : in; }

struct BwdParams : AttnParams {
  const void* out = nullptr;
  const void* dout = nullptr;
  Strides o_str, do_str;
  const float* lse = nullptr;  // [B, Hq, Sq] contiguous (or varlen [Hq, total_q])
  int64_t lse_batch_stride = 0, lse_head_stride = 0;  // as in FwdParams
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  Strides dq_str, dk_str, dv_str;
  bool deterministic = false;
};

}  // namespace flashattn::detail
