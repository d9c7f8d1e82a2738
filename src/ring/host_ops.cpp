#include <algorithm>
#include <new>

#include "flashattn/ring.hpp"
#include "ring/host_tensor.hpp"
#include "ring/ring_ops.hpp"

namespace flashattn::ring::detail {
namespace {

class HostOps final : public Ops {
 public:
  Status alloc(DType dt, int64_t n, Buf* out) override {
    out->dtype = dt;
    out->n = n;
    out->device = Device::CPU;
    out->mem.reset(new (std::nothrow) uint8_t[std::max<size_t>(size_t(n) * dtype_size(dt), 1)],
                   [](void* p) { delete[] static_cast<uint8_t*>(p); });
    if (!out->mem) return Status::Error(ErrorCode::Internal, "ring: out of host memory");
    return Status::Ok();
  }
  Status copy(const TensorView& src, const TensorView& dst) override {
    detail::copy(src, dst);
    return Status::Ok();
  }
  Status accumulate(const TensorView& src, const TensorView& dst) override {
    detail::accumulate(src, dst);
    return Status::Ok();
  }
  Status fill(const TensorView& dst, float value) override {
    detail::fill(dst, value);
    return Status::Ok();
  }
  Status merge(const TensorView& out, const TensorView& lse, const TensorView& part,
               const TensorView& part_lse) override {
    return merge_partial(out, lse, part, part_lse);
  }
};

}  // namespace

std::unique_ptr<Ops> make_host_ops() { return std::make_unique<HostOps>(); }

}  // namespace flashattn::ring::detail
