// Tile sizes, typed tensor access and workspace carving shared by the
// forward and backward CPU kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/params.hpp"
#include "simd.hpp"

#ifndef FA_BR
#define FA_BR 64
#endif
#ifndef FA_BC
#define FA_BC 64
#endif

namespace flashattn::detail::cpu::FA_ISA_NS {

constexpr int64_t BR = FA_BR;  // query rows per tile
constexpr int64_t BC = FA_BC;  // key rows per tile
static_assert(BR % VW == 0 && BC % VW == 0, "tiles must be whole vectors wide");

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
