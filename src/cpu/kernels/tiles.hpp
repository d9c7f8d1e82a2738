// Tile sizes, typed tensor access and workspace carving shared by the
// forward and backward CPU kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/params.hpp"
#include "simd.hpp"

// Backward tiles: 128 x 128 measured ~9% faster than 64 x 64 single-threaded
// (longer K loops in the dV/dK/dQ GEMMs, half the wavefront steps).
#ifndef FA_BR
#define FA_BR 128
#endif
#ifndef FA_BC
#define FA_BC 128
#endif
// FA_AMX: the translation unit runs bf16 through forward_amx.hpp and
// backward_amx.hpp, their GEMMs on AMX tiles (kernels_amx.cpp) or, with
// FA_BF16_DOT, on AVX512-BF16 dot products (kernels_avx512bf16.cpp).
#ifndef FA_AMX
#define FA_AMX 0
#endif
// FA_FP32_SPLIT (kernels_amx.cpp): fp32 on AMX tiles too, each operand as
// three bf16 pieces (forward_amx.hpp, backward_amx.hpp, bf16_pack.hpp split3).
#ifndef FA_FP32_SPLIT
#define FA_FP32_SPLIT 0
#endif
#ifndef FA_FWD_BR
#define FA_FWD_BR 256
#endif
#ifndef FA_FWD_BC
#define FA_FWD_BC 64
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

// bf16 pieces per operand element on the AMX tile path: 3 for split fp32
// (FA_FP32_SPLIT), else 1 (the layouts' operand buffers grow with it).
inline int tile_pieces(DType dt) { return FA_FP32_SPLIT && dt == DType::F32 ? 3 : 1; }

constexpr int64_t BR = FA_BR;  // query rows per tile (backward)
constexpr int64_t BC = FA_BC;  // key rows per tile (backward)
// Forward: tall query tiles cut how often each K/V tile is fetched and
// converted per flop (256 rows measured ~6% faster than 128 single-threaded
// on a 2 MiB-L2 Xeon); the per-thread working set (~450 KiB at d = 128, ~700
// KiB at d = 256) outgrows a 512 KiB L2 (Zen 3), where 128 rows measured level
// with 256 (bench/NOTES.md, "Zen 3"), so 256 stays everywhere.
constexpr int64_t FBR = FA_FWD_BR;
constexpr int64_t FBC = FA_FWD_BC;
static_assert(BR % VW == 0 && BC % VW == 0 && FBR % VW == 0 && FBC % VW == 0,
              "tiles must be whole vectors wide");

// Leading dimension (floats) of a tile buffer whose rows hold n floats: whole
// cache lines, an odd number of them. The GEMMs read a column panel of such a
// buffer one line per row, a row's length apart; with an even number of
// lines per row (256 floats = 1 KB = 16 lines) those lines fell into a
// fraction of the L1 sets (64 rows of 1 KB: 4 of 64 sets, 32 lines of room on
// an 8-way L1) and evicted each other; with an odd number they spread over
// every set.
constexpr int64_t tile_ld(int64_t n) {
  const int64_t lines = (n + 15) / 16;
  return (lines % 2 == 1 ? lines : lines + 1) * 16;
}
// Forward: S^T / P^T (FBC x FBR) and (scale Q)^T (d x FBR) are FLD apart;
// backward: S / P, dP / dS (BR x BC) and K^T, V^T (d x BC) are BLD apart.
constexpr int64_t FLD = tile_ld(FBR);
constexpr int64_t BLD = tile_ld(BC);

// Rows of a [batch, seq, heads, head_dim] tensor for one (batch, head).
template <class T>
struct Rows {
  T* base;
  int64_t seq_stride;
  T* row(int64_t s) const { return base + s * seq_stride; }
};
template <class T, class P>
Rows<T> rows_of(P* data, const Strides& st, int64_t b, int64_t h) {
  return {static_cast<T*>(const_cast<void*>(static_cast<const void*>(data))) + b * st.batch +
              h * st.head,
          st.seq};
}

// Rows of a paged K/V cache for one (sequence, kv head): row s is row
// s % page_size of page table[s / page_size]. The tile loads go through this
// (no gathered copy of the cache).
template <class T>
struct PagedRows {
  T* base;  // page 0, row 0 of this head
  const int32_t* table;
  int64_t page_stride, seq_stride, page_size;
  T* row(int64_t s) const {
    return base + table[s / page_size] * page_stride + (s % page_size) * seq_stride;
  }
};
template <class T, class P>
PagedRows<T> paged_rows_of(P* data, const Strides& st, const int32_t* table, int64_t page_size,
                           int64_t h) {
  return {static_cast<T*>(const_cast<void*>(static_cast<const void*>(data))) + h * st.head, table,
          st.batch, st.seq, page_size};
}

// Prefetches rows [r0, r1) of a tensor (head_dim elements each) into cache,
// so the next tile's loads do not stall on memory.
template <class R>
void prefetch_rows(const R& rows, int64_t r0, int64_t r1, int64_t d) {
  using T = typename std::remove_pointer<decltype(rows.row(0))>::type;
  for (int64_t r = r0; r < r1; ++r) prefetch_lines(rows.row(r), d * int64_t(sizeof(T)));
}

// Carves per-thread scratch into 64-byte aligned float buffers.
struct Carver {
  size_t floats = 0;
  size_t take(int64_t n) {
    size_t at = floats;
    floats += size_t(round_up(n, 16));
    return at;
  }
};

}  // namespace flashattn::detail::cpu::FA_ISA_NS
