// See fp8_v_transpose.hpp.
#include "fp8_v_transpose.hpp"

#include <string>

namespace flashattn::detail::cuda::sm90 {
namespace {

constexpr int kTile = 64;  // keys x head-dim elements per block

// One block: 64 keys x 64 head dims of one (batch, kv head). 16-byte loads
// along head_dim into shared memory, 16-byte stores along keys out of it.
// head_dim is a multiple of 16: the last block of a head dim that is not a
// multiple of 64 loads and stores only its rows below head_dim.
__global__ void __launch_bounds__(256) fp8_v_transpose_kernel(
    const uint8_t* __restrict__ v, int64_t s_batch, int64_t s_seq, int64_t s_head, int64_t seqlen_k,
    int batch, int heads_kv, int head_dim, int64_t keys_padded, uint8_t* __restrict__ vt) {
  __shared__ uint8_t tile[kTile][kTile + 16];  // +16: spreads the column reads over banks
  const int64_t k0 = int64_t(blockIdx.x) * kTile;
  const int d0 = blockIdx.y * kTile, t = threadIdx.x;
  // (batch, head) pairs beyond gridDim.z's 65535 limit loop.
  for (int64_t bh = blockIdx.z; bh < int64_t(batch) * heads_kv; bh += gridDim.z) {
    const int64_t b = bh / heads_kv, h = bh % heads_kv;
    {
      const int key = t / 4, chunk = (t % 4) * 16;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (k0 + key < seqlen_k && d0 + chunk < head_dim) {
        x = *reinterpret_cast<const uint4*>(v + b * s_batch + (k0 + key) * s_seq + h * s_head + d0 +
                                            chunk);
      }
      *reinterpret_cast<uint4*>(&tile[key][chunk]) = x;
    }
    __syncthreads();
    const int row = t / 4, chunk = (t % 4) * 16;  // row: head dim d0 + row; chunk: stored keys
    if (d0 + row < head_dim) {
      alignas(16) uint8_t out[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) out[j] = tile[fp8_vt_key_of(chunk + j)][row];
      uint8_t* dst = vt + (bh * head_dim + d0 + row) * keys_padded + k0 + chunk;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out);
    }
    __syncthreads();  // the tile is rewritten by the next pair
  }
}

}  // namespace

Status launch_fp8_v_transpose(const AttnParams& p, uint8_t* vt, cudaStream_t stream) {
  const int64_t keys = fp8_vt_keys(p.seqlen_k);
  if (keys == 0 || p.batch * p.heads_kv == 0) return Status::Ok();
  const int64_t pairs = p.batch * p.heads_kv;
  const dim3 grid(static_cast<unsigned>(keys / kTile), static_cast<unsigned>((p.head_dim + kTile - 1) / kTile),
                  static_cast<unsigned>(pairs < 65535 ? pairs : 65535));
  fp8_v_transpose_kernel<<<grid, 256, 0, stream>>>(
      static_cast<const uint8_t*>(p.v), p.v_str.batch, p.v_str.seq, p.v_str.head, p.seqlen_k,
      static_cast<int>(p.batch), static_cast<int>(p.heads_kv), static_cast<int>(p.head_dim), keys, vt);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return Status::Error(ErrorCode::CudaError,
                         std::string("sm90 fp8 forward: V transpose launch: ") + cudaGetErrorString(e));
  }
  return Status::Ok();
}

}  // namespace flashattn::detail::cuda::sm90
