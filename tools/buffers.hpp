// Host/device buffers and dtype conversion for the command-line program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"

namespace fa_cli {

float to_float(const void* data, flashattn::DType dtype, size_t i);
void from_float(const float* src, void* dst, flashattn::DType dtype, size_t n);

// Bytes on the host or on a CUDA device; copies go through the host.
class Buffer {
 public:
  Buffer(flashattn::Device device, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host);  // host -> buffer
  void download(void* host) const;  // buffer -> host

 private:
  flashattn::Device device_;
  size_t bytes_;
  void* data_ = nullptr;
};

void device_synchronize(flashattn::Device device);
std::string device_name(flashattn::Device device);

}  // namespace fa_cli
