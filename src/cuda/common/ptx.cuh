// Thin wrappers over the sm80 PTX the kernels are built from: cp.async
// (global -> shared copies that bypass registers, completed by groups) and
// ldmatrix (a warp loads 8x8 b16 tiles out of shared memory straight into
// mma.sync fragment order, optionally transposed).
#pragma once

#include <cstdint>

namespace flashattn::detail::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; when !pred nothing is read and the 16 bytes are zeroed
// (src-size 0), which is how tails of the sequence and of the head dim are
// padded without branches.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool pred) {
  const int bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(bytes));
}
// 4-byte async copy (per-row scalars such as the LSE); zero-filled when !pred.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool pred) {
  const int bytes = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Lanes 8i..8i+7 give the row addresses of matrix i; lane l receives, of each
// matrix, (row l/4, cols 2(l%4), 2(l%4)+1) -- or with .trans the transposed
// pair (rows 2(l%4), 2(l%4)+1, col l/4).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// p[0] += x, p[1] += y in global memory (p 8-byte aligned), no return value.
// sm_90 has a vector reduction: one request instead of two.
__device__ __forceinline__ void red_add_f32x2(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(x), "f"(y));
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}

// 2^x with the MUFU unit (rel. error ~2^-22; ex2(-inf) = +0, which the
// online softmax relies on for masked scores).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashattn::detail::cuda
