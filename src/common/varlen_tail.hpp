// Rows of a varlen call's packed tensors that belong to no sequence: rows at
// or past cu_seqlens_q[batch] of out / lse / dq, and at or past
// cu_seqlens_k[batch] of dk / dv. The API accepts packed tensors longer than
// their sequences (a caller with static shapes or CUDA graphs packs into a
// buffer sized for the most tokens), and writes those rows as rows that see
// no key: O = 0, LSE = -inf, dQ = dK = dV = 0 (they reach no output, so
// their gradient is 0). Without it they kept whatever the memory held: from
// torch.empty, NaN in q.grad that the caller's projection backward then
// spreads over its whole weight gradient.
//
// src/api/dispatch.cpp applies the plan after the backend call succeeded
// (nothing is written by a refused call): fill_host below for CPU tensors,
// whose cu_seqlens the host reads; cuda::clear_varlen_tail (varlen_tail.cu)
// for CUDA ones, whose cu_seqlens stay on the device (the kernel reads
// cu_seqlens[batch] there: no synchronisation).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "common/params.hpp"

namespace flashattn::detail::varlen_tail {

// A packed [total, heads, cols] output: element (r, h, c) at byte offset
// (r * row_stride + h * head_stride + c) * elem_bytes from data.
struct Rows {
  void* data = nullptr;
  int64_t row_stride = 0, head_stride = 0;
  int64_t total = 0, heads = 0, cols = 0;
  int32_t elem_bytes = 0;
  int32_t unit = 0;     // bytes per store of the CUDA kernel (varlen_tail.cu sets it); unused on the host
  bool k_side = false;  // rows counted by cu_seqlens_k (dk, dv), not cu_seqlens_q
};

struct Plan {
  static constexpr int kMaxRows = 3;
  Rows rows[kMaxRows];
  int count = 0;
  // The LSE, fp32 [heads, total_q] with rows head_stride apart; nullptr = none.
  float* lse = nullptr;
  int64_t lse_heads = 0, lse_head_stride = 0, lse_total = 0;
  const int32_t* cu_q = nullptr;  // on the tensors' device
  const int32_t* cu_k = nullptr;
  int64_t batch = 0;

  void add(void* data, const Strides& s, int64_t total, int64_t heads, int64_t cols, DType dt, bool k_side) {
    Rows& r = rows[count++];
    r.data = data;
    r.row_stride = s.seq;
    r.head_stride = s.head;
    r.total = total;
    r.heads = heads;
    r.cols = cols;
    r.elem_bytes = dt == DType::F32 ? 4 : 2;  // outputs are never fp8 (out_dtype_for)
    r.k_side = k_side;
  }
};

inline Plan plan_of(const AttnParams& p) {
  Plan t;
  t.cu_q = p.cu_seqlens_q;
  t.cu_k = p.cu_seqlens_k;
  t.batch = p.batch;
  return t;
}

inline Plan plan(const FwdParams& p) {
  Plan t = plan_of(p);
  t.add(p.out, p.o_str, p.total_q, p.heads_q, p.dim_v(), out_dtype_for(p.dtype), false);
  if (p.lse != nullptr) {
    t.lse = p.lse;
    t.lse_heads = p.heads_q;
    t.lse_head_stride = p.lse_head_stride;
    t.lse_total = p.total_q;
  }
  return t;
}

inline Plan plan(const BwdParams& p) {
  Plan t = plan_of(p);
  t.add(p.dq, p.dq_str, p.total_q, p.heads_q, p.head_dim, p.dtype, false);
  t.add(p.dk, p.dk_str, p.total_k, p.heads_kv, p.head_dim, p.dtype, true);
  t.add(p.dv, p.dv_str, p.total_k, p.heads_kv, p.dim_v(), p.dtype, true);
  return t;
}

// CPU tensors: cu_seqlens are host memory (validated by src/api).
inline void fill_host(const Plan& t) {
  for (int i = 0; i < t.count; ++i) {
    const Rows& r = t.rows[i];
    const int64_t first = (r.k_side ? t.cu_k : t.cu_q)[t.batch];
    char* base = static_cast<char*>(r.data);
    for (int64_t row = first; row < r.total; ++row)
      for (int64_t h = 0; h < r.heads; ++h)
        std::memset(base + (row * r.row_stride + h * r.head_stride) * r.elem_bytes, 0,
                    size_t(r.cols * r.elem_bytes));  // +0 in every float format
  }
  if (t.lse != nullptr) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int64_t h = 0; h < t.lse_heads; ++h)
      for (int64_t i = t.cu_q[t.batch]; i < t.lse_total; ++i) t.lse[h * t.lse_head_stride + i] = neg_inf;
  }
}

}  // namespace flashattn::detail::varlen_tail
