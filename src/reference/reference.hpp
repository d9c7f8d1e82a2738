// The oracle: naive attention accumulating in double, forward and backward.
// It shares NO code with the kernels (not even the mask rule), so a bug in
// shared kernel code cannot hide from the tests. O(N^2) memory by design.
//
// All arrays are dense, contiguous, row-major double:
//   q [B, Sq, Hq, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv],
//   out/dout [B, Sq, Hq, Dv], lse [B, Hq, Sq] (Dv = head_dim_v, or D).
#pragma once

#include <cstdint>

namespace flashattn::reference {

struct Problem {
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1;
  int64_t heads_q = 1, heads_kv = 1, head_dim = 8;
  int64_t head_dim_v = 0;     // v / out's last dim; 0 = head_dim
  int64_t dim_v() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  double scale = 0.0;         // 0 = 1/sqrt(head_dim)
  bool causal = false;        // bottom-right aligned
  int64_t window_left = -1;   // -1 = unbounded
  int64_t window_right = -1;  // -1 = unbounded
  double softcap = 0.0;       // 0 = off
  // ALiBi: score (i, j) gets -slope * |i + Sk - Sq - j| added after scale and
  // softcap; slopes [Hq] (or [B, Hq] when alibi_per_batch). nullptr = off.
  const double* alibi_slopes = nullptr;
  bool alibi_per_batch = false;
  // Dropout with a GIVEN keep mask (the oracle does not generate one): int32
  // [B, Hq, Sq, Sk], 1 = kept; O = (P o Z / (1 - p)) V, LSE undropped.
  const int32_t* dropout_mask = nullptr;
  double dropout_p = 0.0;
};

// out and lse are written for every row; a row that sees no key gets
// out = 0 and lse = -inf.
void forward(const Problem& pb, const double* q, const double* k, const double* v,
             double* out, double* lse);

// Gradients of sum(out * dout) w.r.t. q, k, v; recomputes everything itself.
// given_out (null: not used) is the O that the backward under test was
// given, laid out like q: D_i = rowsum(dO o O) then comes from it, as in
// every FlashAttention backward, instead of the exact sum_j P_ij dP_ij. The
// two differ by dO . (O_given - O), the error of O's rounding, which a
// kernel cannot avoid. Where the exact gradient cancels to 0 (the fuzz
// oracle's zero-stride K: identical key rows make dQ = 0) that error is the
// whole of the kernel's dQ, while the naive's bf16 rounding of dS can erase
// it by luck (found by the fuzzer: dQ 1.7e-4 against naive 3.5e-5 and exact 0).
void backward(const Problem& pb, const double* q, const double* k, const double* v,
              const double* dout, double* dq, double* dk, double* dv,
              const double* given_out = nullptr);

}  // namespace flashattn::reference
