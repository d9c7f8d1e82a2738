// DESIGN.md's correctness rule, in one place for the tests and for
// `flashattn run --check`.
//
// fp16 / bf16 (out = kernel, ref = fp64 reference, naive = naive_same_dtype):
//     max over elements of (|out - ref| - ulp(ref) / 2) <= 2 * max|naive - ref| + atol
//   ulp(x) = the dtype's quantum at |x|. The rule bounds the kernel's error
//   before its output is rounded to the dtype; that last rounding adds up to
//   half an ulp at the element, which max|naive - ref| does not always
//   contain: where the naive rounds its largest elements well, a kernel whose
//   fp32 value lies a little further from the exact one, across a rounding
//   midpoint, is a whole ulp off (seen on the H200: dQ -1.1796875 against
//   ref -1.18753, 1.004 bf16 ulps, with max|naive - ref| = 0.0025, a third of
//   an ulp). Per element, the allowance stays tiny for the small elements,
//   unlike an atol of one ulp of max|ref| (FlashAttention-3's tests).
// fp32 (no lower-precision yardstick; compared with fp64 directly):
//     max|out - ref| <= 8 * eps32 * sqrt(L * D) * max|ref| + atol
//   L = the longest sum behind one output element: seqlen_k for out and dq
//   (the row's P V or dS K, and its softmax sum), max(seqlen_k, seqlen_q *
//   heads_q/heads_kv) for dk and dv (the column sum, with P's own softmax
//   sum over seqlen_k); D = head_dim. Rounding in a sum of n terms grows like
//   eps * sqrt(n) (random walk); an output element is a sum over L terms that
//   each carry a D-term dot product, hence sqrt(L * D). Calibration: over the
//   whole test sweep the CPU kernels' worst max|out - ref| / (eps32 sqrt(L D)
//   max|ref|) was 0.9 (median ~0.05), so 8 leaves ~9x for another summation
//   order or exp, while a one-key masking error (~max|ref| / L) or a missed
//   rescale stays far above it.
//
// atol = max(1e-5 * max|ref|, 16 * eps32 * sqrt(D) * M), for every dtype.
//   The first term covers the naive happening to be exact (one
//   visible key: out = v); it is ~1/400 of a bf16 ulp and ~1/50 of an fp16 ulp
//   at the output's scale. The second is an fp32 noise floor for results that are
//   sums of cancelling terms: with one visible key dS = P (dP - D) is exactly
//   0 in fp64 (so max|ref| = 0), while any fp32 kernel leaves eps32-sized
//   residue of dP ~ |dO| |V|. M is the size of those terms (magnitudes()):
//   max|v| for out, max|dO| for dv, scale * max||dO_i|| * max||v_j|| * max|k|
//   for dq (max|q| for dk). It has no sqrt(L) factor, so it stays far below a
//   real error's size.
//
// LSE (fp32 for every dtype): rows with -inf must be -inf in both, others
//     |lse - ref| <= 2 * max|naive_lse - ref| + 16 * eps32 * sqrt(D) * max(1, max|ref|)
//                    + score_err
//   score_err bounds errors in the scores beyond fp32 arithmetic, which the
//   fp32 naive does not have (0 for fp16/bf16/fp32). LSE is 1-Lipschitz in
//   the scores' max-norm, so a score error of e moves it by e at most.
//   fp8: Hopper's fp8 MMA adds the products of each k = 32 step with about
//   14 fraction bits (not fp32), so fp8_score_error() allows 2^-14 of the
//   summed magnitudes per step: (D / 32) * 2^-14 * scale * max_ij sum_d
//   |q_id k_jd|. Measured: the first fp8 kernel's LSE was 2.6e-4 off at head
//   dim 128 against an fp32-arithmetic tolerance of 1.2e-4; this bound was
//   1.7e-3 there. O needs nothing extra: P's e4m3 rounding (2^-4), which the
//   naive has, dominates it. fp8's naive is naive_forward_fp8: P rounded
//   against a reference up to 2^7.75 below the row max, the worst of four
//   such lags, since the kernel's lazy rescale keeps its reference up to 2^8
//   below and so rounds a row's largest P, which a naive rounding at the max
//   keeps exact (naive_same_dtype.hpp).
//   The yardstick grew by 1-2.2x on the fp8 test shapes; against it the
//   kernel reads 0.4-1.1 in an emulation of its softmax (bench/sm90/NOTES.md).
//
// A NaN (or an inf where ref is finite) never passes.
#pragma once

#include <cstdint>
#include <vector>

#include "flashattn/flashattn.hpp"

namespace flashattn::reference {

struct ErrorStats {
  double max_err = 0, naive_err = 0, max_ref = 0, tol = 0;
  // What the tolerance bounds: max(|out - ref| - ulp(ref) / 2) for
  // fp16/bf16 (above), max|out - ref| for fp32 and the LSE.
  double judged_err = 0;
  int64_t worst_index = -1;
  int64_t bad = 0;  // NaN, or infinite where ref is finite, or -inf mismatches
  int64_t first_bad = -1;
  bool size_mismatch = false;
  bool pass() const { return !size_mismatch && bad == 0 && judged_err <= tol; }
};

// The scale M of the terms behind each output (see above).
struct Magnitudes {
  double out = 0, dq = 0, dk = 0, dv = 0;
};
// Dense rows: q, k of head_dim, v, dout of head_dim_v (0 = head_dim); dout
// may be empty (forward only). scale is resolved.
Magnitudes magnitudes(const std::vector<double>& q, const std::vector<double>& k,
                      const std::vector<double>& v, const std::vector<double>& dout,
                      int64_t head_dim, double scale, int64_t head_dim_v = 0);

ErrorStats measure(const std::vector<double>& out, const std::vector<double>& ref,
                   const std::vector<double>& naive);

// `naive` may be empty for fp32. `reduce_len` is L, `magnitude` is M (0: no floor).
ErrorStats judge(DType dt, const std::vector<double>& out, const std::vector<double>& ref,
                 const std::vector<double>& naive, int64_t reduce_len, int64_t head_dim,
                 double magnitude);

ErrorStats judge_lse(const std::vector<double>& out, const std::vector<double>& ref,
                     const std::vector<double>& naive, int64_t head_dim, double score_err = 0);

// The fp8 MMA's score error bound above, over dense [B, S, H, D] q and k
// (GQA: query head h pairs with kv head h / (Hq / Hkv)); scale is resolved.
double fp8_score_error(const std::vector<double>& q, const std::vector<double>& k, int64_t batch,
                       int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                       int64_t head_dim, double scale);

// The fp32 rule's tolerance factor (times max|ref|), exposed for calibration.
double fp32_rel_tol(int64_t reduce_len, int64_t head_dim);

}  // namespace flashattn::reference
