// Per-device properties the host side asks on every call (compute capability,
// opt-in shared memory, SM count, L2 size, memory-pool support), queried once per
// device and process and then read without CUDA calls (issue 8: a batch-1
// decode call is host-bound; each cudaDeviceGetAttribute / cudaGetDeviceCount
// is a driver round trip). Thread-safe: the first caller for a device fills
// its entry under a mutex and publishes it with a release store; later
// callers read it with an acquire load. A failed query is not cached, so the
// error is reported again on the next call, as before.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace flashattn::detail::cuda {

struct DeviceInfo {
  int major = 0, minor = 0;
  int smem_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int sm_count = 0;
  int l2_bytes = 0;        // cudaDevAttrL2CacheSize (the sm80 grids' groups)
  bool mem_pools = false;  // cudaDevAttrMemoryPoolsSupported
};

// Number of visible devices (fixed for the process once the runtime is up);
// on error returns the error and caches nothing.
inline cudaError_t cached_device_count(int* count) {
  static std::atomic<int> cached{-1};
  int n = cached.load(std::memory_order_acquire);
  if (n >= 0) {
    *count = n;
    return cudaSuccess;
  }
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return e;
  cached.store(n, std::memory_order_release);
  *count = n;
  return cudaSuccess;
}

// Properties of `device` (0 <= device < cached_device_count); nullptr and the
// error in *err when a query fails.
inline const DeviceInfo* device_info(int device, cudaError_t* err) {
  constexpr int kMaxDevices = 64;
  static DeviceInfo infos[kMaxDevices];
  static std::atomic<bool> ready[kMaxDevices];
  static std::mutex mu;
  *err = cudaSuccess;
  if (device < 0 || device >= kMaxDevices) {
    *err = cudaErrorInvalidDevice;
    return nullptr;
  }
  if (ready[device].load(std::memory_order_acquire)) return &infos[device];
  std::lock_guard<std::mutex> lock(mu);
  if (ready[device].load(std::memory_order_relaxed)) return &infos[device];
  DeviceInfo d;
  int pools = 0;
  cudaError_t e = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
  if (e != cudaSuccess) {
    *err = e;
    return nullptr;
  }
  d.mem_pools = pools != 0;
  infos[device] = d;
  ready[device].store(true, std::memory_order_release);
  return &infos[device];
}

// Blocks of `kernel` one SM holds at (threads, smem) on `device` (the current
// device), asked of the driver once per (kernel, threads, smem, device) and
// process: the sm80 launchers size their masked grids' last group with it on
// every call (sm80/fwd_plan.hpp grid_slots). 0 when the query fails, which is
// not cached.
inline int cached_blocks_per_sm(const void* kernel, int threads, size_t smem, int device) {
  struct Entry {
    const void* kernel;
    int threads;
    size_t smem;
    int device, per_sm;
  };
  static std::mutex mu;
  static std::vector<Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : cache)
    if (e.kernel == kernel && e.threads == threads && e.smem == smem && e.device == device) return e.per_sm;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cache.push_back({kernel, threads, smem, device, per_sm});
  return per_sm;
}

}  // namespace flashattn::detail::cuda
