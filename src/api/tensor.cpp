// TensorView helpers and the small facts about dtypes.
#include <cstdint>

#include "flashattn/flashattn.hpp"

namespace flashattn {

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::F8E4M3: return "float8_e4m3";
  }
  return "unknown";
}

size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::F8E4M3: return 1;
  }
  return 0;
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                  Device device, int32_t device_index) noexcept {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.device_index = device_index;
  t.ndim = static_cast<int32_t>(shape.size() > 4 ? 4 : shape.size());
  int i = 0;
  for (int64_t s : shape) {
    if (i == 4) break;
    t.shape[i++] = s;
  }
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

int64_t TensorView::numel() const noexcept {
  // Saturates instead of overflowing (undefined behaviour) on absurd shapes;
  // the argument checks refuse those with a message.
  int64_t n = 1;
  for (int i = 0; i < ndim && i < 4; ++i) {
    if (__builtin_mul_overflow(n, shape[i], &n)) return INT64_MAX;
  }
  return n;
}

}  // namespace flashattn
