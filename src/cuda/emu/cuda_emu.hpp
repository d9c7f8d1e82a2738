// A CPU emulation of the parts of the CUDA execution model the sm80 kernels
// use, so that their real source runs (slowly) on a machine without a GPU:
// one std::thread per CUDA thread of a block, __syncthreads as a block
// barrier, and the warp-collective instructions (ldmatrix, mma.sync,
// shfl.xor) as warp barriers around a shared slot array, implemented from
// the PTX ISA's description of each instruction -- independently of the
// index arithmetic in the kernels, which is what this checks. cp.async is a
// synchronous copy here, so missing waits/barriers are NOT detected.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

// The CUDA headers above define these for the host compiler; make them plain C++.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n)

using std::min;

namespace emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local Dim3 tl_thread, tl_block;
inline Dim3 g_grid;

struct Warp {
  std::barrier<> bar{32};
  uint64_t u64[32][8];
  float f32[32][12];
};
struct Block {
  explicit Block(int n) : bar(n), warps(n / 32) {
    for (auto& w : warps) w = std::make_unique<Warp>();
  }
  std::barrier<> bar;
  std::vector<std::unique_ptr<Warp>> warps;
};
inline Block* g_block = nullptr;
inline std::mutex g_atomic;

constexpr size_t kSmemBytes = 256 * 1024;
}  // namespace emu
// The kernels' `extern __shared__ unsigned char smem_raw[]`: the driver
// defines it (EMU_DEFINE_SMEM) with kSmemBytes.
namespace flashattn::detail::cuda::sm80 {
extern unsigned char smem_raw[];
}
#define EMU_DEFINE_SMEM \
  namespace flashattn::detail::cuda::sm80 { alignas(128) unsigned char smem_raw[::emu::kSmemBytes]; }
namespace emu {
inline unsigned char* const g_smem = flashattn::detail::cuda::sm80::smem_raw;

inline int lane() { return tl_thread.x & 31; }
inline Warp& warp() { return *g_block->warps[tl_thread.x >> 5]; }

// Runs kernel(args) for every block of `grid`, `threads` threads each.
template <class F>
void launch(Dim3 grid, int threads, F kernel) {
  g_grid = grid;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::memset(g_smem, 0xCD, kSmemBytes);  // garbage, as on a GPU
        Block block(threads);
        g_block = &block;
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            tl_thread = {unsigned(t), 0, 0};
            tl_block = {bx, by, bz};
            kernel();
          });
        for (auto& t : ts) t.join();
        g_block = nullptr;
      }
}

}  // namespace emu

#define threadIdx (::emu::tl_thread)
#define blockIdx (::emu::tl_block)
#define gridDim (::emu::g_grid)
#define blockDim (::emu::Dim3{unsigned(::emu::g_block->warps.size() * 32), 1, 1})

inline void __syncthreads() { emu::g_block->bar.arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float v, int mask) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.f32[l][0] = v;
  w.bar.arrive_and_wait();
  const float r = w.f32[l ^ mask][0];
  w.bar.arrive_and_wait();
  return r;
}

inline unsigned __shfl_xor_sync(unsigned, unsigned v, int mask) {
  emu::Warp& w = emu::warp();
  const int l = emu::lane();
  w.u64[l][0] = v;
  w.bar.arrive_and_wait();
  const unsigned r = static_cast<unsigned>(w.u64[l ^ mask][0]);
  w.bar.arrive_and_wait();
  return r;
}

inline float atomicAdd(float* p, float v) {
  std::lock_guard<std::mutex> lk(emu::g_atomic);
  const float old = *p;
  *p = old + v;
  return old;
}
inline float __log2f(float x) { return std::log2(x); }
