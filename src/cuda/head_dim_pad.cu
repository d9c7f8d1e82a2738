// Row copies for common/head_dim_pad.hpp on the device (v with a head dim of
// its own, head dims not a multiple of 8): strided rows into zero-padded
// contiguous ones and back. Memory bound and O(N * head_dim). A block row
// (threadIdx.y) is one tensor row, its threads (threadIdx.x) the row's chunks
// (16 bytes where the rows allow, chunk_bytes), so the row's index
// arithmetic runs once per chunk rather than once per element: the first
// version, a thread per 2-byte element with three 64-bit divisions each, cost
// ~0.9 ms per 16k-token forward on the H200 (bench/NOTES.md).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/head_dim_pad.hpp"

namespace flashattn::detail::cuda {
namespace {

struct Shape {
  int64_t rows;       // n0 * n1 * heads
  int chunks_padded;  // chunks of V in a padded row
  int chunks_user;    // chunks of V holding the user's columns
};

template <class V, bool kPad, class Index>
__global__ void pad_or_crop(const head_dim_pad::Rows t, V* padded, Shape sh, size_t es) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  const int c = threadIdx.x;
  if (r >= sh.rows || c >= sh.chunks_padded) return;
  const Index heads = Index(t.heads), n1 = Index(t.n1), ri = Index(r);
  const Index h = ri % heads, rest = ri / heads, s = rest % n1, a = rest / n1;
  char* base = static_cast<char*>(t.ptr) +
               (int64_t(a) * t.str.batch + int64_t(s) * t.str.seq + int64_t(h) * t.str.head) * int64_t(es);
  V* user = reinterpret_cast<V*>(base);
  V* prow = padded + r * sh.chunks_padded;
  if (kPad) {
    prow[c] = c < sh.chunks_user ? user[c] : V{};
  } else if (c < sh.chunks_user) {
    user[c] = prow[c];
  }
}

template <class V, bool kPad>
cudaError_t launch_as(const head_dim_pad::Rows& t, void* padded, int64_t width, size_t es, cudaStream_t stream) {
  Shape sh;
  sh.rows = t.count();
  sh.chunks_padded = int(size_t(width) * es / sizeof(V));
  sh.chunks_user = int(size_t(t.cols) * es / sizeof(V));
  const int rows_per_block = sh.chunks_padded >= 256 ? 1 : 256 / sh.chunks_padded;
  const dim3 block(unsigned(sh.chunks_padded), unsigned(rows_per_block));
  const int64_t blocks = (sh.rows + rows_per_block - 1) / rows_per_block;
  if (blocks > INT32_MAX) return cudaErrorInvalidConfiguration;
  const bool small = sh.rows <= int64_t(UINT32_MAX) && t.n1 <= int64_t(UINT32_MAX);
  V* p = static_cast<V*>(padded);
  if (small) {
    pad_or_crop<V, kPad, uint32_t><<<unsigned(blocks), block, 0, stream>>>(t, p, sh, es);
  } else {
    pad_or_crop<V, kPad, uint64_t><<<unsigned(blocks), block, 0, stream>>>(t, p, sh, es);
  }
  return cudaGetLastError();
}

// The widest chunk (16 bytes down to 1) that divides every row start of t
// and both row lengths: 16 for the 16-byte rows of head dims that are
// multiples of 8 (PadOps::check, dispatch.cpp, holds the caller's tensors to
// it), smaller for others (head dim 100 in bf16: 8 bytes; 36: 8; 3: 2).
size_t chunk_bytes(const head_dim_pad::Rows& t, int64_t width, size_t es) {
  size_t c = 16;
  auto fit = [&](uint64_t x) {
    while (c > 1 && x % c != 0) c /= 2;
  };
  fit(reinterpret_cast<uintptr_t>(t.ptr));
  fit(uint64_t(width) * es);
  fit(uint64_t(t.cols) * es);
  const int64_t extents[] = {t.n0, t.n1, t.heads};
  const int64_t strides[] = {t.str.batch, t.str.seq, t.str.head};
  for (int i = 0; i < 3; ++i)
    if (extents[i] > 1) fit(uint64_t(strides[i] < 0 ? -strides[i] : strides[i]) * es);
  return c;
}

template <bool kPad>
cudaError_t launch(const head_dim_pad::Rows& t, void* padded, int64_t width, size_t es, cudaStream_t stream) {
  if (t.count() == 0) return cudaSuccess;
  // The workspace's base is 256-byte aligned and its rows width * es apart
  // (chunk_bytes takes that length too), so the caller's side sets the chunk.
  switch (chunk_bytes(t, width, es)) {
    case 16: return launch_as<uint4, kPad>(t, padded, width, es, stream);
    case 8: return launch_as<uint2, kPad>(t, padded, width, es, stream);
    case 4: return launch_as<uint32_t, kPad>(t, padded, width, es, stream);
    case 2: return launch_as<uint16_t, kPad>(t, padded, width, es, stream);
    default: return launch_as<uint8_t, kPad>(t, padded, width, es, stream);
  }
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
