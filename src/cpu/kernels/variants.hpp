// ALiBi and dropout for the CPU kernels, as a policy next to the window mask
// (tile_mask.hpp): one object per (batch, query head) that the forward's
// softmax and the backward's P/dS step consult. Semantics (flashattn.hpp):
//   s(i, j) = softcap(scale q_i.k_j) - slope(b, h) * |i + Sk - Sq - j|
//   P = softmax(s) (LSE of this undropped P), P~ = P o Z / (1 - p), O = P~ V
// with Z the Philox keep mask of common/philox.hpp, a function of
// (seed, offset, b, h, i, j) only: tiles, threads and the backward all see
// the same Z.
#pragma once

#include <cstdint>

#include "common/params.hpp"
#include "common/philox.hpp"
#include "simd.hpp"

namespace flashattn::detail::cpu::FA_ISA_NS {

struct Variants {
  bool alibi = false, dropout = false;
  float slope = 0.0f;        // this (b, h)'s ALiBi slope
  int64_t offset = 0;        // seqlen_k - seqlen_q: query i sits on key i + offset
  int64_t b = 0, h = 0;      // b in the caller's batch (the dropout generator's index)
  float keep_scale = 1.0f;   // 1 / (1 - p)
  DropoutRng rng;
  // Forward only: column c of the task's tile is query row row0 + c; the
  // keep mask of this (b, h) is returned at mask[i * seqlen_k + j] when set.
  int64_t row0 = 0, seqlen_k = 0;
  int32_t* mask = nullptr;

  Variants(const AttnParams& p, int64_t b_, int64_t h_)
      : alibi(p.alibi_slopes != nullptr), dropout(p.dropout_p > 0.0f),
        offset(p.seqlen_k - p.seqlen_q), b(p.batch_offset + b_), h(h_), seqlen_k(p.seqlen_k) {
    if (alibi) slope = p.alibi_slopes[b_ * p.alibi_batch_stride + h];
    if (dropout) {
      keep_scale = 1.0f / (1.0f - p.dropout_p);
      rng = DropoutRng(p.dropout_seed, p.dropout_offset, p.dropout_p, p.heads_q);
    }
  }
  bool any() const { return alibi || dropout; }

  // ALiBi bias of query row i against the keys whose positions (as floats)
  // are in kpos: -slope * |i + offset - j|. Distances are integers below 2^24
  // for any sequence the tests or benchmarks use, so the float is exact there.
  vf bias(int64_t i, vf kpos) const {
    const vf d = vsplat(float(i + offset)) - kpos;
    return vsplat(-slope) * vmax(d, -d);
  }
  // The same for query positions in lanes (the forward's S^T layout):
  // qpos holds i + offset per lane, j is the key.
  vf bias_q(vf qpos, int64_t j) const {
    const vf d = qpos - vsplat(float(j));
    return vsplat(-slope) * vmax(d, -d);
  }
  // Multipliers Z / (1 - p) of keys [j0, j0 + n) of row i into zr[0..n).
  void keep_row(int64_t i, int64_t j0, int64_t n, float* zr) const {
    uint32_t r[4];
    int64_t have = -1;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t j = j0 + t;
      if ((j >> 2) != have) {
        rng.draws(b, h, i, j, r);
        have = j >> 2;
      }
      zr[t] = r[j & 3] >= rng.threshold ? keep_scale : 0.0f;
    }
  }
};

// kpos[t] = j0 + t as floats, padded up to whole vectors.
inline void key_positions(float* kpos, int64_t j0, int64_t n) {
  for (int64_t t = 0; t < round_up(n, VW); ++t) kpos[t] = float(j0 + t);
}

}  // namespace flashattn::detail::cpu::FA_ISA_NS
