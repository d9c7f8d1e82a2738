// Host entry points of the sm80 path, one explicit instantiation per
// (element type, head dim) in src/cuda/inst/. Host-only declarations so that
// dispatch.cpp is plain C++.
#pragma once

#include <cstddef>

#include "common/params.hpp"
#include "flashattn/flashattn.hpp"

namespace flashattn::detail::cuda::sm80 {

// Byte layout of the backward workspace: D = rowsum(dO*O) [B,Hq,Sq] fp32,
// then (non-deterministic only) the fp32 dQ accumulator [B,Hq,Sq,dtile];
// varlen: [Hq,total_q] and [Hq,total_q,dtile] (rows by packed token, like
// the varlen LSE).
struct BwdWorkspace {
  size_t dsum_offset = 0, dq_offset = 0, total = 0;
};
inline BwdWorkspace bwd_workspace(const BwdParams& p, int dtile) {
  const size_t rows = p.varlen() ? static_cast<size_t>(p.heads_q) * p.total_q
                                 : static_cast<size_t>(p.batch) * p.heads_q * p.seqlen_q;
  BwdWorkspace w;
  w.dsum_offset = 0;
  w.dq_offset = (rows * sizeof(float) + 255) / 256 * 256;
  w.total = w.dq_offset + (p.deterministic ? 0 : rows * dtile * sizeof(float));
  if (rows == 0) w.total = 0;
  return w;
}

// E: Elem (kF16 / kBF16); D: tile head dim (64, 96, 128, 192, 256).
// workspace: fwd_plan(p, ...).workspace_bytes of device memory (split-KV
// partial results), or nullptr when that is 0.
template <int E, int D>
Status run_fwd(const FwdParams& p, void* workspace);
template <int E, int D>
Status run_bwd(const BwdParams& p, void* workspace);

}  // namespace flashattn::detail::cuda::sm80
