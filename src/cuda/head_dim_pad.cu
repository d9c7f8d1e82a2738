// Row copies for common/head_dim_pad.hpp on the device (v with a head dim of
// its own): strided rows into zero-padded contiguous ones and back. Memory
// bound and O(N * head_dim); one thread per element, consecutive threads on
// consecutive columns so that a warp reads and writes whole row pieces.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/head_dim_pad.hpp"

namespace flashattn::detail::cuda {
namespace {

template <class T, bool kPad>
__global__ void pad_or_crop(const head_dim_pad::Rows t, T* padded, int64_t width, int64_t total) {
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < total;
       x += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = x / width, c = x % width;
    const int64_t h = r % t.heads, s = r / t.heads % t.n1, a = r / t.heads / t.n1;
    T* row = static_cast<T*>(t.ptr) + a * t.str.batch + s * t.str.seq + h * t.str.head;
    if (kPad) {
      padded[x] = c < t.cols ? row[c] : T(0);
    } else if (c < t.cols) {
      row[c] = padded[x];
    }
  }
}

template <bool kPad>
cudaError_t launch(const head_dim_pad::Rows& t, void* padded, int64_t width, size_t es, cudaStream_t stream) {
  const int64_t total = t.count() * width;
  if (total == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const unsigned grid = unsigned(blocks < (int64_t(1) << 20) ? blocks : (int64_t(1) << 20));
  switch (es) {
    case 1: pad_or_crop<uint8_t, kPad><<<grid, kThreads, 0, stream>>>(t, static_cast<uint8_t*>(padded), width, total); break;
    case 2: pad_or_crop<uint16_t, kPad><<<grid, kThreads, 0, stream>>>(t, static_cast<uint16_t*>(padded), width, total); break;
    case 4: pad_or_crop<uint32_t, kPad><<<grid, kThreads, 0, stream>>>(t, static_cast<uint32_t*>(padded), width, total); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pad_rows(const head_dim_pad::Rows& src, void* dst, int64_t width, size_t es, cudaStream_t s) {
  return launch<true>(src, dst, width, es, s);
}

cudaError_t launch_crop_rows(const void* src, int64_t width, const head_dim_pad::Rows& dst, size_t es,
                             cudaStream_t s) {
  return launch<false>(dst, const_cast<void*>(src), width, es, s);
}

}  // namespace flashattn::detail::cuda
