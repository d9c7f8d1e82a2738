// One sequence of a batch as params of its own: batch 1, the sequence's own
// lengths, every pointer moved to its first row. Lets a backend run varlen,
// KV-cache and paged batches through kernels written for one padded batch
// (host code: reads cu_seqlens / seqlens_k, so CPU pointers only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "params.hpp"

namespace flashattn::detail {

struct SeqLens {
  int64_t q_off = 0, k_off = 0;  // first row of the sequence in q / k (varlen, cache_leftpad), else 0
  int64_t len_q = 0, len_k = 0;
  int64_t kv_b = 0;  // batch entry of k / v (cache_batch_idx), else b
};

inline SeqLens seq_lens(const AttnParams& p, int64_t b) {
  SeqLens s;
  s.len_q = p.seqlen_q;
  s.len_k = p.seqlen_k;
  if (p.cu_seqlens_q) {
    s.q_off = p.cu_seqlens_q[b];
    s.len_q = p.cu_seqlens_q[b + 1] - s.q_off;
  }
  if (p.cu_seqlens_k) {
    s.k_off = p.cu_seqlens_k[b];
    s.len_k = p.cu_seqlens_k[b + 1] - s.k_off;
  }
  s.kv_b = p.kv_batch_idx ? p.kv_batch_idx[b] : b;
  if (p.seqlens_k) {  // a KV cache: rows [leftpad, seqlens_k + appended) of entry kv_b
    const int64_t pad = p.leftpad_k ? p.leftpad_k[b] : 0;
    s.k_off += pad;
    s.len_k = p.seqlens_k[b] + p.seqlens_k_add - pad;
  }
  return s;
}

namespace seq_detail {
inline int64_t elem_bytes(DType dt) { return dt == DType::F32 ? 4 : 2; }
template <class Ptr>
Ptr advance(Ptr ptr, int64_t elems, DType dt) {
  if (ptr == nullptr) return ptr;
  using Byte = typename std::conditional<std::is_const<typename std::remove_pointer<Ptr>::type>::value,
                                         const char, char>::type;
  return reinterpret_cast<Ptr>(reinterpret_cast<Byte*>(ptr) + elems * elem_bytes(dt));
}
// Row `row` of batch entry `b` of a [B, S, H, D] view.
inline int64_t offset(const Strides& s, int64_t b, int64_t row) { return b * s.batch + row * s.seq; }

inline void narrow_common(AttnParams& r, const AttnParams& p, int64_t b, const SeqLens& s) {
  r.batch = 1;
  r.seqlen_q = s.len_q;
  r.seqlen_k = s.len_k;
  r.q = advance(p.q, offset(p.q_str, b, s.q_off), p.dtype);
  if (p.block_table) {  // pages are shared by all sequences: move the table row instead
    r.block_table = p.block_table + b * p.block_table_stride;
  } else {
    r.k = advance(p.k, offset(p.k_str, s.kv_b, s.k_off), p.dtype);
    r.v = advance(p.v, offset(p.v_str, s.kv_b, s.k_off), p.dtype);
  }
  r.cu_seqlens_q = r.cu_seqlens_k = r.seqlens_k = nullptr;
  r.kv_batch_idx = r.leftpad_k = nullptr;
  r.kv_entries = p.block_table ? p.kv_entries : 0;  // the pages stay shared
  r.seqlens_k_add = 0;
  // ALiBi slopes row and dropout stream of sequence b (common/philox.hpp).
  if (p.alibi_slopes) r.alibi_slopes = p.alibi_slopes + b * p.alibi_batch_stride;
  r.batch_offset = p.batch_offset + b;
}
}  // namespace seq_detail

inline FwdParams sequence_params(const FwdParams& p, int64_t b, const SeqLens& s) {
  using namespace seq_detail;
  FwdParams r = p;
  narrow_common(r, p, b, s);
  r.out = advance(p.out, offset(p.o_str, b, s.q_off), p.dtype);
  if (p.lse) r.lse = p.lse + b * p.lse_batch_stride + s.q_off;
  r.k_new = advance(p.k_new, b * p.knew_str.batch, p.dtype);
  r.v_new = advance(p.v_new, b * p.vnew_str.batch, p.dtype);
  return r;
}

inline BwdParams sequence_params(const BwdParams& p, int64_t b, const SeqLens& s) {
  using namespace seq_detail;
  BwdParams r = p;
  narrow_common(r, p, b, s);
  r.out = advance(p.out, offset(p.o_str, b, s.q_off), p.dtype);
  r.dout = advance(p.dout, offset(p.do_str, b, s.q_off), p.dtype);
  r.dq = advance(p.dq, offset(p.dq_str, b, s.q_off), p.dtype);
  r.dk = advance(p.dk, offset(p.dk_str, b, s.k_off), p.dtype);
  r.dv = advance(p.dv, offset(p.dv_str, b, s.k_off), p.dtype);
  r.lse = p.lse + b * p.lse_batch_stride + s.q_off;
  return r;
}

// A varlen batch runs one sequence after another, each with the padded
// kernel on that sequence's params: its workspace and task count are the
// largest any one sequence needs.
template <class Params, class F>
auto max_over_sequences(const Params& p, F&& f) {
  decltype(f(p)) most{};
  for (int64_t b = 0; b < p.batch; ++b) most = std::max(most, f(sequence_params(p, b, seq_lens(p, b))));
  return most;
}

// Calls f(sequence params) for every sequence with queries or keys (one with
// no queries still writes its zero dK, dV; one with no keys its zero dQ).
template <class Params, class F>
void for_each_sequence(const Params& p, F&& f) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const Params sp = sequence_params(p, b, seq_lens(p, b));
    if (sp.seqlen_q > 0 || sp.seqlen_k > 0) f(sp);
  }
}

}  // namespace flashattn::detail
