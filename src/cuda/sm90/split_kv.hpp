// Split-KV bookkeeping of the Hopper forward (KernelArgs::num_splits): how
// many pieces a call's query tiles are cut into, and which key tiles a piece
// visits. Plain integer code, so that the host tests
// (tests/sm90_tile_order_test.cpp) check the functions the kernel and the
// host adapter run.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FA_SPLIT_KV_FN __host__ __device__ __forceinline__
#else
#define FA_SPLIT_KV_FN inline
#endif

namespace flashattn::detail::cuda::sm90 {

// The key tiles [n_begin, n_end) a query tile (or a piece of it) visits.
struct KeyTileRange {
  int n_begin, n_end;
};

// Piece `split` of a query tile's key tiles: the range cut into num_splits
// runs of ceil(length / num_splits) tiles, in order (empty for the pieces
// past its end when the range is short). Each piece's partial O and LSE go
// to the workspace for the combine kernel (split_combine.cuh).
FA_SPLIT_KV_FN KeyTileRange split_key_tiles(KeyTileRange r, int split, int num_splits) {
  if (num_splits <= 1) return r;
  const int per = (r.n_end - r.n_begin + num_splits - 1) / num_splits;
  const int b = r.n_begin + split * per, e = r.n_end < b + per ? r.n_end : b + per;
  return e > b ? KeyTileRange{b, e} : KeyTileRange{0, 0};
}

// The most pieces (the KV-cache API's num_splits is clamped to it, as on the
// sm80 path: sm80/fwd_plan.hpp kMaxSplits).
constexpr int kMaxSplitPieces = 128;
// A piece walks at least this many key tiles, so that its Q load, its
// partial row and the combine stay small beside it.
constexpr int64_t kMinSplitKeyTiles = 4;

// Pieces per query tile. `requested` (> 0: forward_kvcache's num_splits)
// wins, clamped. Otherwise split only when the query tiles leave at least
// half the SMs idle (one persistent CTA per SM), into as many pieces as keep
// all of them in one wave: floor(sms / tiles), at most key_tiles / 4.
// Measured: bench/NOTES.md, "KV cache on the Hopper forward".
inline int split_count(int64_t num_tiles, int64_t key_tiles, int sms, int64_t requested) {
  if (requested > 0) return static_cast<int>(requested < kMaxSplitPieces ? requested : kMaxSplitPieces);
  if (sms <= 0 || num_tiles <= 0) return 1;
  int64_t s = sms / num_tiles;
  if (s > key_tiles / kMinSplitKeyTiles) s = key_tiles / kMinSplitKeyTiles;
  if (s > kMaxSplitPieces) s = kMaxSplitPieces;
  return s >= 2 ? static_cast<int>(s) : 1;
}

}  // namespace flashattn::detail::cuda::sm90
