// Host-side CUDA error handling: every runtime call and every launch is
// checked and turned into a Status (ErrorCode::CudaError) instead of aborting.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "flashattn/flashattn.hpp"

namespace flashattn::detail::cuda {

inline Status cuda_error(const char* what, cudaError_t e) {
  return Status::Error(ErrorCode::CudaError,
                       std::string("CUDA backend: ") + what + " failed: " + cudaGetErrorString(e));
}

#define FA_CUDA_TRY(expr)                                                                  \
  do {                                                                                     \
    const cudaError_t fa_err_ = (expr);                                                    \
    if (fa_err_ != cudaSuccess) return ::flashattn::detail::cuda::cuda_error(#expr, fa_err_); \
  } while (0)

// Makes p.device_index current for the scope, restoring the caller's device.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  Status enter(int device) {
    FA_CUDA_TRY(cudaGetDevice(&prev_));
    if (prev_ != device) {
      FA_CUDA_TRY(cudaSetDevice(device));
      restore_ = true;
    }
    return Status::Ok();
  }
  ~DeviceGuard() {
    if (restore_) cudaSetDevice(prev_);
  }

 private:
  int prev_ = 0;
  bool restore_ = false;
};

}  // namespace flashattn::detail::cuda
