// The ring's elementwise CUDA kernels: copy with dtype conversion, fp32
// accumulation, fill, and the LSE merge (the rescale rule of
// include/flashattn/ring.hpp, one thread per (batch, row, head)). Plain
// CUDA C++ with no inline PTX, so tests/ring_kernels_emu_check.cpp runs this
// very source on the CPU through src/cuda/emu (CI has no GPU).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashattn::ring::detail::kernels {

// A 1- to 4-d view (right-aligned into 4 dims); dtype 0 = f32, 1 = f16, 2 = bf16
// (flashattn::DType's values).
struct View {
  void* data;
  int dtype;
  int64_t shape[4];
  int64_t stride[4];
};

__device__ __forceinline__ float load(const View& v, int64_t i) {
  if (v.dtype == 1) return __half2float(static_cast<const __half*>(v.data)[i]);
  if (v.dtype == 2) return __bfloat162float(static_cast<const __nv_bfloat16*>(v.data)[i]);
  return static_cast<const float*>(v.data)[i];
}

__device__ __forceinline__ void store(const View& v, int64_t i, float x) {
  if (v.dtype == 1) {
    static_cast<__half*>(v.data)[i] = __float2half_rn(x);
  } else if (v.dtype == 2) {
    static_cast<__nv_bfloat16*>(v.data)[i] = __float2bfloat16_rn(x);
  } else {
    static_cast<float*>(v.data)[i] = x;
  }
}

// The element offset in v of the linear index `i` over v's shape.
__device__ __forceinline__ int64_t offset(const View& v, int64_t i) {
  int64_t off = 0;
  for (int d = 3; d >= 0; --d) {
    off += (i % v.shape[d]) * v.stride[d];
    i /= v.shape[d];
  }
  return off;
}

__device__ __forceinline__ int64_t numel(const View& v) {
  return v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3];
}

// op 0: dst = src; op 1: dst (fp32) += src; op 2: dst = value (src unused).
__global__ void elementwise_kernel(View src, View dst, int op, float value) {
  const int64_t n = numel(dst);
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t o = offset(dst, i);
    if (op == 2) {
      store(dst, o, value);
    } else {
      const float x = load(src, offset(src, i));
      store(dst, o, op == 1 ? load(dst, o) + x : x);
    }
  }
}

// out [B, S, H, D] fp32, lse [B, H, S] fp32, part [B, S, H, D] any dtype,
// part_lse [B, H, S] fp32 (3-d views right-aligned: shape[0] = 1).
__global__ void merge_kernel(View out, View lse, View part, View part_lse) {
  const int64_t B = out.shape[0], S = out.shape[1], H = out.shape[2], D = out.shape[3];
  const int64_t rows = B * S * H;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += step) {
    const int64_t h = r % H, s = (r / H) % S, b = r / (H * S);
    // The [B, H, S] views are right-aligned: their strides sit in [1..3].
    float* la = static_cast<float*>(lse.data) + b * lse.stride[1] + h * lse.stride[2] + s * lse.stride[3];
    const float lp = static_cast<const float*>(part_lse.data)[b * part_lse.stride[1] +
                                                             h * part_lse.stride[2] +
                                                             s * part_lse.stride[3]];
    const float a = *la;
    if (a != a || lp != lp) {  // never hide a NaN behind fmaxf
      *la = a != a ? a : lp;
      continue;
    }
    const float hi = fmaxf(a, lp), lo = fminf(a, lp);
    if (hi == -INFINITY) continue;  // no key on either side: out stays 0, lse -inf
    const float merged = hi + log1pf(expf(lo - hi));  // lo - hi = -inf -> exp 0
    const float w_old = expf(a - merged), w_new = expf(lp - merged);
    float* orow = static_cast<float*>(out.data) + b * out.stride[0] + s * out.stride[1] + h * out.stride[2];
    const int64_t prow = b * part.stride[0] + s * part.stride[1] + h * part.stride[2];
    for (int64_t d = 0; d < D; ++d) {
      orow[d * out.stride[3]] = orow[d * out.stride[3]] * w_old + load(part, prow + d * part.stride[3]) * w_new;
    }
    *la = merged;
  }
}

}  // namespace flashattn::ring::detail::kernels
