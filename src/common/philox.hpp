// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11) and the dropout mask built on it. Counter-based: a draw is a pure
// function of (key, counter), so every backend, every tiling, every thread
// count and the backward regenerate the same mask without storing it.
// Written from the paper's description; checked against the published
// known-answer vectors of Random123 (tests/philox_test.cpp), which is what
// lets the tests use this header to build the expected mask.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FA_HOST_DEVICE __host__ __device__
#else
#define FA_HOST_DEVICE
#endif

namespace flashattn::detail {

struct Philox4x32 {
  // One 10-round bijection: out = Philox4x32-10_key(ctr).
  FA_HOST_DEVICE static void generate(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {  // the Weyl key schedule: bumped before rounds 2..10
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0;
      const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
      const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
      const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
};

// The dropout mask of one call. Element (b, h, i, j) — batch, query head,
// query row, key column, all counted in the unpadded [B, Hq, Sq, Sk] problem —
// draws word (j mod 4) of
//   Philox4x32-10( key = {lo32(seed), hi32(seed) + hi32(offset)},
//                  ctr = {j / 4, i, b * Hq + h, lo32(offset)} )
// and is kept iff that word >= threshold = round(p * 2^32), so
// P(keep) = 1 - threshold / 2^32 (p up to 2^-32). Kept values of P are scaled
// by 1 / (1 - p). One generator call serves four neighbouring keys.
struct DropoutRng {
  uint32_t key[2] = {0, 0};
  uint32_t off_lo = 0;
  uint32_t threshold = 0;
  int64_t heads = 1;

  DropoutRng() = default;
  FA_HOST_DEVICE DropoutRng(uint64_t seed, uint64_t offset, float p, int64_t heads_q)
      : key{uint32_t(seed), uint32_t(seed >> 32) + uint32_t(offset >> 32)},
        off_lo(uint32_t(offset)), threshold(threshold_of(p)), heads(heads_q) {}

  FA_HOST_DEVICE static uint32_t threshold_of(float p) {
    const double t = double(p) * 4294967296.0 + 0.5;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : uint32_t(t);
  }
  // The four draws of keys 4*(j/4) .. 4*(j/4)+3 of row i of (b, h).
  FA_HOST_DEVICE void draws(int64_t b, int64_t h, int64_t i, int64_t j, uint32_t out[4]) const {
    const uint32_t ctr[4] = {uint32_t(j >> 2), uint32_t(i), uint32_t(b * heads + h), off_lo};
    Philox4x32::generate(ctr, key, out);
  }
  FA_HOST_DEVICE bool keep(int64_t b, int64_t h, int64_t i, int64_t j) const {
    uint32_t r[4];
    draws(b, h, i, j, r);
    return r[j & 3] >= threshold;
  }
  // Keep bits of keys [j0, j0 + n) of one row into keep[0..n) (1 = kept).
  FA_HOST_DEVICE void row(int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n, uint8_t* keep) const {
    uint32_t r[4];
    int64_t have = -1;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t j = j0 + t;
      if ((j >> 2) != have) {
        draws(b, h, i, j, r);
        have = j >> 2;
      }
      keep[t] = r[j & 3] >= threshold ? 1 : 0;
    }
  }
};

}  // namespace flashattn::detail
