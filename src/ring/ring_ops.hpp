// What the ring algorithm needs from the device its tensors live on: owned
// buffers, and four elementwise operations (copy with dtype conversion,
// fp32 accumulation, fill, the LSE merge). Host ops run on the CPU; CUDA ops
// (ring_cuda_ops.cu, CUDA builds only) enqueue kernels on the caller's
// stream, so the whole ring stays stream-ordered and the host never waits.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "flashattn/flashattn.hpp"

namespace flashattn::ring::detail {

// An owned buffer of n elements of dtype on one device.
struct Buf {
  std::shared_ptr<void> mem;
  DType dtype = DType::F32;
  int64_t n = 0;
  Device device = Device::CPU;
  int32_t device_index = 0;

  void* data() const { return mem.get(); }
  size_t bytes() const { return size_t(n) * dtype_size(dtype); }
  // A contiguous view of `shape` starting `offset` elements in.
  TensorView view(std::initializer_list<int64_t> shape, int64_t offset = 0) const {
    return TensorView::contiguous(static_cast<uint8_t*>(mem.get()) + offset * int64_t(dtype_size(dtype)),
                                  dtype, shape, device, device_index);
  }
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Status alloc(DType dt, int64_t n, Buf* out) = 0;
  // dst = src (3-d or 4-d views of one shape, any strides and dtypes).
  virtual Status copy(const TensorView& src, const TensorView& dst) = 0;
  // dst (fp32) += src (any dtype), 4-d.
  virtual Status accumulate(const TensorView& src, const TensorView& dst) = 0;
  virtual Status fill(const TensorView& dst, float value) = 0;
  // merge_partial's rule (include/flashattn/ring.hpp).
  virtual Status merge(const TensorView& out, const TensorView& lse, const TensorView& part,
                       const TensorView& part_lse) = 0;
};

std::unique_ptr<Ops> make_host_ops();
#if defined(FLASHATTN_WITH_CUDA)
// Ops on CUDA device `device`, enqueued on `stream` (a cudaStream_t).
std::unique_ptr<Ops> make_cuda_ops(int device, void* stream);
#endif

}  // namespace flashattn::ring::detail
