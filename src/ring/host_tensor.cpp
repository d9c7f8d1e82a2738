#include "ring/host_tensor.hpp"

namespace flashattn::ring::detail {
namespace {

// Calls f(src_offset, dst_offset) for every element of a 3-d or 4-d shape.
template <class F>
void for_each(const TensorView& a, const TensorView& b, F f) {
  const int n = a.ndim;
  int64_t shape[4] = {1, 1, 1, 1}, sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {  // right-aligned into 4 dims
    shape[4 - n + i] = a.shape[i];
    sa[4 - n + i] = a.stride[i];
    sb[4 - n + i] = b.stride[i];
  }
  for (int64_t i0 = 0; i0 < shape[0]; ++i0)
    for (int64_t i1 = 0; i1 < shape[1]; ++i1)
      for (int64_t i2 = 0; i2 < shape[2]; ++i2) {
        const int64_t oa = i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
        const int64_t ob = i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
        for (int64_t i3 = 0; i3 < shape[3]; ++i3) f(oa + i3 * sa[3], ob + i3 * sb[3]);
      }
}

}  // namespace

void copy(const TensorView& src, const TensorView& dst) {
  for_each(src, dst, [&](int64_t i, int64_t j) { store(dst.dtype, dst.data, j, load(src.dtype, src.data, i)); });
}

void accumulate(const TensorView& src, const TensorView& dst) {
  float* d = static_cast<float*>(dst.data);
  for_each(src, dst, [&](int64_t i, int64_t j) { d[j] += load(src.dtype, src.data, i); });
}

void fill(const TensorView& dst, float value) {
  for_each(dst, dst, [&](int64_t, int64_t j) { store(dst.dtype, dst.data, j, value); });
}

}  // namespace flashattn::ring::detail
