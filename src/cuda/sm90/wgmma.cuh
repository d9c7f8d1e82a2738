// wgmma plumbing: shared-memory matrix descriptors for the 128-byte-swizzled
// tiles TMA writes, the fence / commit / wait protocol, and compiler-level
// operand fences.
//
// Shared-memory tiles (written by TMA with CU_TENSOR_MAP_SWIZZLE_128B, box
// inner extent 64 elements = 128 bytes): a [rows x head_dim] tile is stored as
// head_dim/64 "atom columns", each [rows][128 bytes], row r's 16-byte chunk c
// at chunk position c ^ (r % 8). Every atom column starts 1024-byte aligned, so
// the hardware's address-based swizzle and TMA's agree.
//
// Descriptor fields (PTX ISA "matrix descriptor"; CuTe GmmaDescriptor):
//   bits  0-13 start address >> 4     bits 16-29 leading byte offset >> 4
//   bits 32-45 stride byte offset >> 4   bits 62-63 swizzle (1 = 128B)
// K-major, 128B swizzle (Q as A, K as B of S = Q K^T): canonical layout
//   ((8,m),(8 elems,2)) : ((128 B, SBO), (1, 16 B)); SBO = 1024 (8 rows of 128 B),
//   LBO unused (1). A k-step of 16 elements moves the start address by 32 B
//   inside the atom column; the next atom column is rows*128 B further.
// MN-major, 128B swizzle (V as B of O += P V, N = head_dim contiguous):
//   ((64 elems,n),(8,k)) : ((1, LBO), (128 B, SBO)); LBO = distance between
//   atom columns (64 head_dim elements) = rows*128 B, SBO = 1024 (8 kv rows).
//   A k-step of 16 kv rows moves the start address by 16*128 = 2048 B.
#pragma once

#include <cstdint>

#include "wgmma_ops.cuh"

namespace flashattn::detail::cuda::sm90 {

__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes,
                                                    uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// A descriptor moved by `bytes` (a multiple of 16; the start-address field
// cannot overflow: shared memory is < 256 KB).
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}
// The same on the low word alone (the start address and LBO fields): the
// high word (SBO, swizzle) stays a known constant, so each advanced
// descriptor costs one register instead of two. The 80-row backward needs
// the room (with desc_advance ptxas spilled 268 bytes in its main loop).
__device__ __forceinline__ uint64_t desc_advance_lo(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<uint32_t>(desc) + (bytes >> 4));
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The asm for a wgmma names its accumulators as in/out operands, but the
// hardware writes them only by the matching wait_group. These empty volatile
// asms pin every use of the registers after the wait (and keep register-A
// operands alive until it), so the compiler cannot hoist a read or reuse a
// register across the asynchronous window (CUTLASS's warpgroup_fence_operand).
template <int N>
__device__ __forceinline__ void fence_operand(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

template <int N, int M>
__device__ __forceinline__ void fence_operand(uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

}  // namespace flashattn::detail::cuda::sm90
