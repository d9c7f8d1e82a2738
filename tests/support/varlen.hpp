// Varlen and KV-cache problems end to end. The expected results come from
// the fp64 reference (and naive_same_dtype for the rule) run on each sequence
// cut out of the packed / cached data on the host: no kernel code, no shared
// index arithmetic with the library (the block table is resolved here by its
// own loop over pages).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"
#include "support/tensor.hpp"

namespace fa_test {

// An int32 tensor on `dev` holding `values` (row-major `shape`).
Tensor make_i32(Device dev, const std::vector<int32_t>& values, std::vector<int64_t> shape);
// cu_seqlens of the given lengths: {0, l0, l0 + l1, ...}.
std::vector<int32_t> cumulative(const std::vector<int64_t>& lens);

struct VarlenCase {
  DType dtype = DType::F16;
  std::vector<int64_t> lens_q, lens_k;
  int64_t heads_q = 2, heads_kv = 1, head_dim = 64;
  int64_t head_dim_v = 0;      // v / out's head dim; 0 = head_dim
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  bool deterministic = false;  // backward's fixed accumulation order
  // Packed rows past the last sequence (cu_seqlens[batch] < the tensors'
  // rows): their outputs must read as rows that see no key (O = 0, LSE =
  // -inf, gradients 0: common/varlen_tail.hpp), whatever q, k, v hold there.
  int64_t tail_q = 0, tail_k = 0;
  std::string name() const;
  int64_t dim_v() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  int64_t rule_dim() const { return head_dim > dim_v() ? head_dim : dim_v(); }
};
void PrintTo(const VarlenCase& c, std::ostream* os);

// Packed [total, heads, head_dim] inputs, cu_seqlens and outputs of a case.
struct VarlenInstance {
  VarlenCase c;
  Tensor q, k, v, out, lse, dout, dq, dk, dv, cu_q, cu_k;
  std::vector<double> qd, kd, vd, dod;
  flashattn::ForwardArgs fwd_args() const;
  flashattn::BackwardArgs bwd_args() const;
};
VarlenInstance make_varlen(Device dev, const VarlenCase& c, bool backward);

void check_varlen_forward(Device dev, const VarlenCase& c);
void check_varlen_backward(Device dev, const VarlenCase& c);

struct KvCase {
  DType dtype = DType::F16;
  int64_t seqlen_q = 1, heads_q = 8, heads_kv = 1, head_dim = 64;
  std::vector<int64_t> cache_lens;  // tokens already cached, per sequence (batch = size)
  int64_t s_new = 0;                // appended tokens (0 = no append)
  int64_t capacity = 64;            // per sequence (rounded up to whole pages when paged)
  int64_t page_size = 0;            // 0 = contiguous [B, capacity, Hkv, D] cache
  bool causal = false;
  int32_t num_splits = 0;
  // flash-attn's optional KV-cache inputs (KvCacheArgs):
  int64_t rotary_dim = 0;         // > 0: rotary_cos / rotary_sin [capacity + seqlen_q, rotary_dim / 2]
  bool rotary_interleaved = false;
  std::vector<int64_t> leftpad;   // non-empty: cache_leftpad, per sequence (<= cache_lens)
  int64_t extra_entries = -1;     // >= 0: cache_batch_idx over a shuffled cache of B + this many entries
  float softcap = 0.0f;
  int64_t window_left = -1;       // sliding window (keys at most this far left of the diagonal)
  // Cache rows a sequence never sees (past its keys, before its leftpad) hold
  // NaN, as a cache from torch.empty may: a kernel that loads them must keep
  // them out of the output (0 * NaN is NaN).
  bool nan_outside = false;
  std::string name() const;
};
void PrintTo(const KvCase& c, std::ostream* os);

// Runs forward_kvcache on fresh data and checks: the output and LSE against
// the reference over each sequence's keys (old cache + new tokens, from its
// leftpad row on), every cache row not appended to unchanged, the appended
// rows equal to k_new/v_new exactly (k_new rotated, with rotary: within an
// ulp of the fp64 rotation), q/k_new/v_new/index/rotary tensors untouched.
// With rotary the reference attends with q and k rotated in fp64 and rounded
// to the dtype (the test's own rotation: the rule written out, not the
// library's common/rotary.hpp).
void check_kvcache(Device dev, const KvCase& c);

}  // namespace fa_test
