// The plain unfused algorithm run in a low-precision dtype: the yardstick of
// DESIGN.md's correctness rule ("naive_same_dtype"). fp32 accumulation, the
// N x N score matrix materialised, P (and dS) rounded to the dtype before the
// GEMMs that consume them, outputs rounded to the dtype, as kernels do.
// Independent of the kernels; O(N^2) memory by design.
//
// Inputs are the dtype's values already widened to float, dense BSHD.
#pragma once

#include <cstdint>

#include "reference/reference.hpp"

namespace flashattn::reference {

// Rounds x to the nearest value of the dtype (0 = fp32, 1 = fp16, 2 = bf16,
// the codes of fa_dtype), round to nearest even.
float round_to_dtype(float x, int dtype);

void naive_lowp_forward(const Problem& pb, int dtype, const float* q, const float* k,
                        const float* v, float* out, float* lse);

void naive_lowp_backward(const Problem& pb, int dtype, const float* q, const float* k,
                         const float* v, const float* dout, float* dq, float* dk, float* dv);

}  // namespace flashattn::reference
