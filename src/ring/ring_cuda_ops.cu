// The ring's Ops on a CUDA device: stream-ordered allocation
// (cudaMallocAsync / cudaFreeAsync on the caller's stream) and the kernels of
// ring_kernels.cuh, all enqueued on that stream.
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_check.hpp"
#include "ring/ring_kernels.cuh"
#include "ring/ring_ops.hpp"

namespace flashattn::ring::detail {
namespace {

using flashattn::detail::cuda::DeviceGuard;
using flashattn::detail::cuda::cuda_error;

kernels::View to_view(const TensorView& t) {
  kernels::View v{};
  v.data = t.data;
  v.dtype = static_cast<int>(t.dtype);
  const int n = t.ndim;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = 1;
    v.stride[i] = 0;
  }
  for (int i = 0; i < n; ++i) {  // right-aligned into 4 dims
    v.shape[4 - n + i] = t.shape[i];
    v.stride[4 - n + i] = t.stride[i];
  }
  return v;
}

unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > 65535 ? 65535 : b));  // grid-stride loops cover the rest
}

class CudaOps final : public Ops {
 public:
  CudaOps(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  Status alloc(DType dt, int64_t n, Buf* out) override {
    DeviceGuard g;
    if (Status s = g.enter(device_); !s.ok()) return s;
    void* p = nullptr;
    const size_t bytes = size_t(n) * dtype_size(dt);
    if (bytes != 0) FA_CUDA_TRY(cudaMallocAsync(&p, bytes, stream_));
    cudaStream_t stream = stream_;
    const int device = device_;
    // Freed in stream order: after every kernel and transfer enqueued before it.
    out->mem = std::shared_ptr<void>(p, [stream, device](void* q) {
      if (q == nullptr) return;
      int prev = 0;
      cudaGetDevice(&prev);
      cudaSetDevice(device);
      cudaFreeAsync(q, stream);
      cudaSetDevice(prev);
    });
    out->dtype = dt;
    out->n = n;
    out->device = Device::CUDA;
    out->device_index = device_;
    return Status::Ok();
  }

  Status copy(const TensorView& src, const TensorView& dst) override {
    return elementwise(src, dst, 0, 0.0f);
  }
  Status accumulate(const TensorView& src, const TensorView& dst) override {
    return elementwise(src, dst, 1, 0.0f);
  }
  Status fill(const TensorView& dst, float value) override { return elementwise(dst, dst, 2, value); }

  Status merge(const TensorView& out, const TensorView& lse, const TensorView& part,
               const TensorView& part_lse) override {
    const int64_t rows = out.shape[0] * out.shape[1] * out.shape[2];
    if (rows == 0) return Status::Ok();
    DeviceGuard g;
    if (Status s = g.enter(device_); !s.ok()) return s;
    constexpr int kThreads = 128;
    kernels::merge_kernel<<<blocks_for(rows, kThreads), kThreads, 0, stream_>>>(
        to_view(out), to_view(lse), to_view(part), to_view(part_lse));
    FA_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }

 private:
  Status elementwise(const TensorView& src, const TensorView& dst, int op, float value) {
    const int64_t n = dst.numel();
    if (n == 0) return Status::Ok();
    DeviceGuard g;
    if (Status s = g.enter(device_); !s.ok()) return s;
    constexpr int kThreads = 256;
    kernels::elementwise_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_>>>(
        to_view(src), to_view(dst), op, value);
    FA_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }

  int device_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<Ops> make_cuda_ops(int device, void* stream) {
  return std::make_unique<CudaOps>(device, static_cast<cudaStream_t>(stream));
}

}  // namespace flashattn::ring::detail
