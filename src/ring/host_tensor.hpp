// Host-side helpers of the ring: element conversion, dense buffers and views
// over them, row slices of BSHD / [B, H, S] views. Scalar code: the ring's
// own elementwise work is O(N d) per step against the attention's O(N^2 d).
#pragma once

#include <cstdint>

#include "common/host_convert.hpp"
#include "flashattn/flashattn.hpp"

namespace flashattn::ring::detail {

using ::flashattn::detail::bf16_to_float;
using ::flashattn::detail::f16_to_float;
using ::flashattn::detail::float_to_bf16;
using ::flashattn::detail::float_to_f16;

inline float load(DType dt, const void* base, int64_t i) {
  switch (dt) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return f16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
  }
  return 0.0f;
}

inline void store(DType dt, void* base, int64_t i, float v) {
  switch (dt) {
    case DType::F32: static_cast<float*>(base)[i] = v; break;
    case DType::F16: static_cast<uint16_t*>(base)[i] = float_to_f16(v); break;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
  }
}

// Rows [begin, begin + count) of dimension `dim` of a view.
inline TensorView slice(TensorView t, int dim, int64_t begin, int64_t count) {
  t.data = static_cast<uint8_t*>(t.data) + begin * t.stride[dim] * int64_t(dtype_size(t.dtype));
  t.shape[dim] = count;
  return t;
}

// dst = src elementwise over a 4-d or 3-d view (dtype conversion included).
void copy(const TensorView& src, const TensorView& dst);
// dst (fp32) += src (any dtype), 4-d views of one shape.
void accumulate(const TensorView& src, const TensorView& dst);
// Fills a view with a value.
void fill(const TensorView& dst, float value);

}  // namespace flashattn::ring::detail
