#include "buffers.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "common/fp8.hpp"
#include "common/host_convert.hpp"

#ifdef FLASHATTN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace fa_cli {
namespace {

using flashattn::detail::bf16_to_float;
using flashattn::detail::float_to_bf16;

#ifdef FLASHATTN_WITH_CUDA
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

}  // namespace

float to_float(const void* data, flashattn::DType dtype, size_t i) {
  switch (dtype) {
    case flashattn::DType::F32: return static_cast<const float*>(data)[i];
    case flashattn::DType::F16: return static_cast<float>(static_cast<const _Float16*>(data)[i]);
    case flashattn::DType::BF16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case flashattn::DType::F8E4M3:
      return flashattn::detail::e4m3_to_float(static_cast<const uint8_t*>(data)[i]);
    default: break;
  }
  return NAN;
}

void from_float(const float* src, void* dst, flashattn::DType dtype, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case flashattn::DType::F32: static_cast<float*>(dst)[i] = src[i]; break;
      case flashattn::DType::F16: static_cast<_Float16*>(dst)[i] = static_cast<_Float16>(src[i]); break;
      case flashattn::DType::BF16: static_cast<uint16_t*>(dst)[i] = float_to_bf16(src[i]); break;
      case flashattn::DType::F8E4M3:
        static_cast<uint8_t*>(dst)[i] = flashattn::detail::float_to_e4m3(src[i]);
        break;
      default: throw std::runtime_error("from_float: unsupported dtype");
    }
  }
}

Buffer::Buffer(flashattn::Device device, size_t bytes) : device_(device), bytes_(bytes) {
  size_t n = bytes ? bytes : 1;
  if (device == flashattn::Device::CPU) {
    data_ = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!data_) throw std::runtime_error("host allocation of " + std::to_string(n) + " bytes failed");
  } else {
#ifdef FLASHATTN_WITH_CUDA
    cuda_check(cudaMalloc(&data_, n), "cudaMalloc");
#else
    throw std::runtime_error("this build has no CUDA support");
#endif
  }
}

Buffer::~Buffer() {
  if (device_ == flashattn::Device::CPU) {
    std::free(data_);
  } else {
#ifdef FLASHATTN_WITH_CUDA
    cudaFree(data_);
#endif
  }
}

void Buffer::upload(const void* host) {
  if (device_ == flashattn::Device::CPU) {
    std::memcpy(data_, host, bytes_);
    return;
  }
#ifdef FLASHATTN_WITH_CUDA
  cuda_check(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#endif
}

void Buffer::download(void* host) const {
  if (device_ == flashattn::Device::CPU) {
    std::memcpy(host, data_, bytes_);
    return;
  }
#ifdef FLASHATTN_WITH_CUDA
  cuda_check(cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#endif
}

void device_synchronize(flashattn::Device device) {
#ifdef FLASHATTN_WITH_CUDA
  if (device == flashattn::Device::CUDA) cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#else
  (void)device;
#endif
}

std::string device_name(flashattn::Device device) {
  if (device == flashattn::Device::CPU) return "cpu";
#ifdef FLASHATTN_WITH_CUDA
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
    return std::string("cuda:") + std::to_string(dev) + " (" + prop.name + ")";
  }
#endif
  return "cuda";
}

}  // namespace fa_cli
