// See fp8_v_transpose.hpp.
#include "fp8_v_transpose.hpp"

#include <string>

namespace flashattn::detail::cuda::sm90 {
namespace {

// One block: one key tile (kKeys = kFp8VtKeyAlign keys) x kCols head-dim
// columns of one (batch, kv head), 16 KB. Phase 1: 16-byte loads along the
// head dimension (a key row's 128 bytes are 8 lanes' loads) into shared
// memory. Phase 2: a thread builds 16 stored positions (key chunk c = lane %
// 8) of 4 columns (group g = 4 * warp + lane / 8): it reads the 16 keys'
// 4-byte words at columns 4g .. 4g + 3, transposes the 16 x 4 bytes with
// byte permutes, and stores each column's 16 keys as one 16-byte store, so
// that the 8 lanes of a group write one column's whole 128-byte row of V^T.
// Shared rows are 128 bytes with their 16-byte chunks XOR-swizzled by key /
// 16: the 8 lanes of a group read 8 different chunks (no bank conflict), and
// a row's 8 chunks stay in one 128-byte row (phase 1's stores conflict-free).
// (The first version gathered each output byte with its own shared load, 16
// per 16-byte store: 35 us for the grid's 32 MB of V on an H100, 1.9 TB/s of
// read + write; lanes along the head dimension with 16-byte stores to 32
// rows per instruction took 42 us: bench/sm90/NOTES.md.)
constexpr int kKeys = 128, kCols = 128, kThreads = 256;
constexpr int kChunks = kCols / 16;  // 16-byte chunks per shared row
static_assert(kFp8VtKeyAlign == kKeys && kKeys / 16 == 8 && kThreads / 32 * 4 * 4 == kCols, "");

__device__ __forceinline__ int swizzled_chunk(int key, int chunk) { return chunk ^ ((key >> 4) & 7); }

// Bytes j of a, b, c, e -> out[j] = (a_j, b_j, c_j, e_j) (little-endian bytes).
__device__ __forceinline__ void transpose4x4(uint32_t a, uint32_t b, uint32_t c, uint32_t e, uint32_t (&out)[4]) {
  const uint32_t ab01 = __byte_perm(a, b, 0x5140), ab23 = __byte_perm(a, b, 0x7362);
  const uint32_t ce01 = __byte_perm(c, e, 0x5140), ce23 = __byte_perm(c, e, 0x7362);
  out[0] = __byte_perm(ab01, ce01, 0x5410);
  out[1] = __byte_perm(ab01, ce01, 0x7632);
  out[2] = __byte_perm(ab23, ce23, 0x5410);
  out[3] = __byte_perm(ab23, ce23, 0x7632);
}

// cu_k: varlen (sequence b's keys are packed rows cu_k[b] .. cu_k[b + 1]),
// else null (seqlen_k keys per batch entry, s_batch apart).
__global__ void __launch_bounds__(kThreads) fp8_v_transpose_kernel(
    const uint8_t* __restrict__ v, int64_t s_batch, int64_t s_seq, int64_t s_head, int64_t seqlen_k,
    const int32_t* __restrict__ cu_k, int batch, int heads_kv, int head_dim, int64_t keys_padded,
    uint8_t* __restrict__ vt) {
  __shared__ __align__(16) uint8_t tile[kKeys][kCols];
  const int64_t k0 = int64_t(blockIdx.x) * kKeys;
  const int d0 = blockIdx.y * kCols, t = threadIdx.x, lane = t % 32, warp = t / 32;
  constexpr int kLoads = kKeys * kChunks / kThreads;
  // (batch, head) pairs beyond gridDim.z's 65535 limit loop.
  for (int64_t bh = blockIdx.z; bh < int64_t(batch) * heads_kv; bh += gridDim.z) {
    const int64_t b = bh / heads_kv, h = bh % heads_kv;
    const uint8_t* src = v + h * s_head + d0;
    uint8_t* dst_row0 = vt;  // the pair's first V^T row, its first key
    if (cu_k != nullptr) {
      const int64_t first = cu_k[b];
      seqlen_k = cu_k[b + 1] - first;
      if (k0 >= seqlen_k) continue;  // past the sequence's last tile (uniform over the block)
      src += first * s_seq;
      dst_row0 += h * head_dim * keys_padded + fp8_vt_seq_start(first, b);
    } else {
      src += b * s_batch;
      dst_row0 += bh * head_dim * keys_padded;
    }
    uint4 x[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {  // all loads in flight before any store
      const int c = t + i * kThreads, key = c / kChunks, col = c % kChunks * 16;
      x[i] = make_uint4(0, 0, 0, 0);
      if (k0 + key < seqlen_k && d0 + col < head_dim) {
        x[i] = *reinterpret_cast<const uint4*>(src + (k0 + key) * s_seq + col);
      }
    }
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int c = t + i * kThreads, key = c / kChunks;
      *reinterpret_cast<uint4*>(&tile[key][swizzled_chunk(key, c % kChunks) * 16]) = x[i];
    }
    __syncthreads();
    const int kc = lane % 8, col = 4 * (4 * warp + lane / 8);  // key chunk, first of 4 columns
    if (d0 + col < head_dim) {  // head_dim is a multiple of 16: 4 whole columns or none
      // The 16 keys 16 kc .. + 15 share key / 16, hence one swizzled chunk.
      const int off = swizzled_chunk(16 * kc, col / 16) * 16 + col % 16;
      uint32_t out[4][4];  // [column j][word q]: stored positions 16 kc + 4q .. + 3 of column col + j
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          w[e] = *reinterpret_cast<const uint32_t*>(&tile[16 * kc + fp8_vt_key_of(4 * q + e)][off]);
        }
        uint32_t o[4];
        transpose4x4(w[0], w[1], w[2], w[3], o);
#pragma unroll
        for (int j = 0; j < 4; ++j) out[j][q] = o[j];
      }
      uint8_t* dst = dst_row0 + (d0 + col) * keys_padded + k0 + 16 * kc;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        *reinterpret_cast<uint4*>(dst + j * keys_padded) = make_uint4(out[j][0], out[j][1], out[j][2], out[j][3]);
      }
    }
    __syncthreads();  // the tile is rewritten by the next pair
  }
}

}  // namespace

Status launch_fp8_v_transpose(const AttnParams& p, uint8_t* vt, cudaStream_t stream) {
  // Key tiles per (batch, head): of the longest sequence when varlen (p.seqlen_k
  // is max_seqlen_k; the blocks past a sequence's tiles return).
  const int64_t tiles = fp8_vt_keys(p.seqlen_k) / kKeys;
  const int64_t keys = fp8_vt_row_keys(p);
  if (tiles == 0 || p.batch * p.heads_kv == 0) return Status::Ok();
  const int64_t pairs = p.batch * p.heads_kv;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((p.head_dim + kCols - 1) / kCols),
                  static_cast<unsigned>(pairs < 65535 ? pairs : 65535));
  fp8_v_transpose_kernel<<<grid, kThreads, 0, stream>>>(
      static_cast<const uint8_t*>(p.v), p.v_str.batch, p.v_str.seq, p.v_str.head, p.seqlen_k,
      p.varlen() ? p.cu_seqlens_k : nullptr, static_cast<int>(p.batch), static_cast<int>(p.heads_kv),
      static_cast<int>(p.head_dim), keys, vt);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return Status::Error(ErrorCode::CudaError,
                         std::string("sm90 fp8 forward: V transpose launch: ") + cudaGetErrorString(e));
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm90
