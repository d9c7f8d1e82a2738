// Rotary embedding (RoPE) of the KV-cache call, one rule for every backend
// (flashattn.hpp, KvCacheArgs): element j < rotary_dim of a row at position
// pos becomes
//   x_j * cos[pos][f] + sign * x_partner * sin[pos][f]
// with (f, partner, sign) from rotary_pair below; elements from rotary_dim on
// pass through. Arithmetic in fp32, the result rounded to the row's dtype by
// the caller. The test reference (tests/support/varlen.cpp) writes the same
// rule out in fp64 on its own.
#pragma once

#include <cstdint>

#include "params.hpp"

#if defined(__CUDACC__)
#define FA_HOST_DEVICE __host__ __device__
#else
#define FA_HOST_DEVICE
#endif

namespace flashattn::detail {

struct RotaryPair {
  int64_t freq;     // column of cos / sin
  int64_t partner;  // the other element of the rotated pair
  float sign;       // -1 for the pair's first element, +1 for its second
};

// Interleaved (GPT-J): pairs (2f, 2f + 1). Otherwise (GPT-NeoX): pairs
// (f, f + rotary_dim / 2).
FA_HOST_DEVICE inline RotaryPair rotary_pair(int64_t j, int64_t rotary_dim, bool interleaved) {
  if (interleaved) return {j / 2, j ^ 1, (j & 1) ? 1.f : -1.f};
  const int64_t h = rotary_dim / 2;
  return j < h ? RotaryPair{j, j + h, -1.f} : RotaryPair{j - h, j - h, 1.f};
}

FA_HOST_DEVICE inline float rotary_apply(float x, float partner, float c, float s, float sign) {
  return x * c + sign * (partner * s);
}

// Position of row i of q in sequence b (cache_len = seqlens_k[b], the first
// appended key's position): causal or windowed calls (per_row) give each
// query row its own position after the cache; others put every row at
// cache_len (flash-attn's rule).
inline bool rotary_q_per_row(const AttnParams& p) { return p.window_left >= 0 || p.window_right >= 0; }
FA_HOST_DEVICE inline int64_t rotary_q_position(bool per_row, int64_t cache_len, int64_t i) {
  return cache_len + (per_row ? i : 0);
}

}  // namespace flashattn::detail
