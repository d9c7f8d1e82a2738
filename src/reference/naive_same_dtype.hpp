// naive_same_dtype: the plain unfused algorithm in the input dtype, the
// yardstick of DESIGN.md's correctness rule. fp32 accumulation; the score
// matrix S in fp32; P (forward) and P, dS (backward) rounded to the dtype
// before the GEMMs that consume them; outputs rounded to the dtype. For F32
// every rounding is the identity, giving a plain fp32 implementation.
// Separate from both the kernels and the fp64 reference (its own mask code).
// Used by the tests and by `flashattn run --check`.
#pragma once

#include <vector>

#include "flashattn/flashattn.hpp"
#include "reference/reference.hpp"

namespace flashattn::reference {

// Inputs: dense row-major values (already representable in dt). F8E4M3: the
// values are the dequantised inputs; P = exp(s - m) * 2^fp8_lag_log2 is
// rounded to e4m3 before it is normalised (fp8 kernels keep P unnormalised;
// the lag is how far below the row max their reference sits), O is rounded
// to bf16.
void naive_forward(const Problem& pb, flashattn::DType dt, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   std::vector<double>* out, std::vector<double>* lse, double fp8_lag_log2 = 0.0);

// The fp8 rule's yardstick. The Hopper fp8 kernel rounds P against a
// reference that may sit up to 2^8 below a row's max (the lazy rescale:
// softmax.cuh kStaleLog2), so its largest P is 2^lag, which e4m3 rounds,
// where a naive rounding at the max keeps it exact (1): on rows that one key
// dominates, its error was up to 3x that naive's (bench/sm90/NOTES.md, "fp8
// at every head dim"). The naive forward at kFp8LagsLog2, the output
// farthest from ref (max |out - ref|) returned, with its LSE.
inline constexpr double kFp8LagsLog2[] = {0.0, 1.5, 4.25, 7.75};
void naive_forward_fp8(const Problem& pb, const std::vector<double>& q, const std::vector<double>& k,
                       const std::vector<double>& v, const std::vector<double>& ref,
                       std::vector<double>* out, std::vector<double>* lse);

// Runs its own forward for O and the LSE, then the backward. given_out,
// when not null, is the O (in the dtype) that the backward under test was
// given (its forward's output): D = rowsum(dO o O) then comes from the same
// rounded O, so the yardstick carries the same error from O's rounding as the
// kernel must (on small problems that error dominates dQ, and the naive's
// own O could round more kindly; the fuzz oracle found a 2.7x case).
void naive_backward(const Problem& pb, flashattn::DType dt, const std::vector<double>& q,
                    const std::vector<double>& k, const std::vector<double>& v,
                    const std::vector<double>& dout, std::vector<double>* dq,
                    std::vector<double>* dk, std::vector<double>* dv,
                    const std::vector<double>* given_out = nullptr);

}  // namespace flashattn::reference
