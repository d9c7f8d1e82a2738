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

  int64_t group() const { return heads_q / heads_kv; }
};

struct FwdParams : AttnParams {
  void* out = nullptr;
  Strides o_str;
  float* lse = nullptr;  // [B, Hq, Sq] contiguous, or nullptr
};

struct BwdParams : AttnParams {
  const void* out = nullptr;
  const void* dout = nullptr;
  Strides o_str, do_str;
  const float* lse = nullptr;  // [B, Hq, Sq] contiguous
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  Strides dq_str, dk_str, dv_str;
  bool deterministic = false;
};

}  // namespace flashattn::detail
