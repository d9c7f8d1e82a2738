#include "support/buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#ifdef FLASHATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fa_test {
namespace {
#ifdef FLASHATTN_WITH_CUDA
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("test support: ") + what + ": " + cudaGetErrorString(e));
  }
}
#endif
}  // namespace

Buffer::Buffer(Device device, size_t bytes) : device_(device), bytes_(bytes) {
  // Never a zero-size allocation: empty tensors still get a valid, aligned
  // pointer, so "null pointer" is only ever tested on purpose.
  alloc_bytes_ = (bytes + 255) / 256 * 256;
  if (alloc_bytes_ == 0) alloc_bytes_ = 256;
  if (device == Device::CPU) {
    data_ = std::aligned_alloc(256, alloc_bytes_);
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, alloc_bytes_);
    return;
  }
#ifdef FLASHATTN_WITH_CUDA
  cuda_check(cudaMalloc(&data_, alloc_bytes_), "cudaMalloc");
  cuda_check(cudaMemset(data_, 0, alloc_bytes_), "cudaMemset");
#else
  throw std::runtime_error("test support: CUDA buffers need a build with FLASHATTN_WITH_CUDA");
#endif
}

Buffer::~Buffer() {
  if (device_ == Device::CPU) {
    std::free(data_);
    return;
  }
#ifdef FLASHATTN_WITH_CUDA
  cudaFree(data_);
#endif
}

std::vector<uint8_t> Buffer::to_host() const {
  std::vector<uint8_t> out(bytes_);
  if (device_ == Device::CPU) {
    if (bytes_) std::memcpy(out.data(), data_, bytes_);
    return out;
  }
#ifdef FLASHATTN_WITH_CUDA
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (an earlier kernel failed)");
  if (bytes_) cuda_check(cudaMemcpy(out.data(), data_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#endif
  return out;
}

void Buffer::from_host(const std::vector<uint8_t>& b) {
  if (b.size() != bytes_) throw std::logic_error("test support: Buffer::from_host size mismatch");
  if (device_ == Device::CPU) {
    if (bytes_) std::memcpy(data_, b.data(), bytes_);
    return;
  }
#ifdef FLASHATTN_WITH_CUDA
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (bytes_) cuda_check(cudaMemcpy(data_, b.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#endif
}

bool device_usable(Device device) {
  if (device == Device::CPU) return true;
#ifdef FLASHATTN_WITH_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

const char* device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

}  // namespace fa_test
