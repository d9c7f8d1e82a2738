// Raw memory for test tensors, on the host or (builds with
// FLASHATTN_WITH_CUDA) on a CUDA device, so one test body runs on either.
// Host access always goes through whole-buffer copies: simple, and tests never
// touch device memory directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashattn/flashattn.hpp"

namespace fa_test {

using flashattn::Device;
using flashattn::DType;

class Buffer {
 public:
  Buffer(Device device, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  std::vector<uint8_t> to_host() const;          // waits for the device first
  void from_host(const std::vector<uint8_t>& b);  // b.size() == bytes()

 private:
  Device device_;
  size_t bytes_;
  size_t alloc_bytes_;
  void* data_ = nullptr;
};

// True when this test build can allocate on `device` (CUDA: built with CUDA
// support and at least one device visible).
bool device_usable(Device device);
const char* device_name(Device device);

}  // namespace fa_test
