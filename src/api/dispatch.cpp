// The one place that knows every backend: validated params go to exactly one
// kernel family, chosen by device (and, inside the CUDA backend, by arch,
// dtype and head dim).
#include <exception>
#include <new>
#include <string>

#include "api/checks.hpp"
#include "flashattn/flashattn.h"
#include "cpu/cpu_backend.hpp"
#ifdef FLASHATTN_WITH_CUDA
#include "cuda/cuda_backend.hpp"
#endif

namespace flashattn {
namespace {

using detail::BwdParams;
using detail::FwdParams;

Status no_cuda() {
  return Status::Error(ErrorCode::Unsupported,
                       "tensors are on a CUDA device, but this build of flashattn has no CUDA "
                       "backend (configure with -DFLASHATTN_CUDA=ON and nvcc on PATH)");
}

// Backends report errors by Status; this catches what escapes anyway
// (allocation failure) so that the API never throws.
template <class F>
Status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "out of host memory for the workspace");
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::Internal, std::string("internal error: ") + e.what());
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "internal error");
  }
}

}  // namespace

Status forward(const ForwardArgs& args) noexcept {
  return guarded([&]() -> Status {
    FwdParams p;
    if (Status s = detail::make_forward_params(args, &p); !s.ok()) return s;
    if (p.device == Device::CPU) return detail::cpu::forward(p);
#ifdef FLASHATTN_WITH_CUDA
    if (Status s = detail::cuda::can_implement(p); !s.ok()) return s;
    return detail::cuda::forward(p);
#else
    return no_cuda();
#endif
  });
}

Status backward(const BackwardArgs& args) noexcept {
  return guarded([&]() -> Status {
    BwdParams p;
    if (Status s = detail::make_backward_params(args, &p); !s.ok()) return s;
    if (p.device == Device::CPU) return detail::cpu::backward(p);
#ifdef FLASHATTN_WITH_CUDA
    if (Status s = detail::cuda::can_implement(p); !s.ok()) return s;
    return detail::cuda::backward(p);
#else
    return no_cuda();
#endif
  });
}

Status forward_workspace_bytes(const ForwardArgs& args, size_t* bytes) noexcept {
  return guarded([&]() -> Status {
    if (bytes == nullptr) return Status::Error(ErrorCode::InvalidArgument, "bytes: null pointer");
    FwdParams p;
    if (Status s = detail::make_forward_params(args, &p); !s.ok()) return s;
    if (p.device == Device::CPU) {
      *bytes = detail::cpu::forward_workspace_bytes(p);
      return Status::Ok();
    }
#ifdef FLASHATTN_WITH_CUDA
    if (Status s = detail::cuda::can_implement(p); !s.ok()) return s;
    *bytes = detail::cuda::forward_workspace_bytes(p);
    return Status::Ok();
#else
    return no_cuda();
#endif
  });
}

Status backward_workspace_bytes(const BackwardArgs& args, size_t* bytes) noexcept {
  return guarded([&]() -> Status {
    if (bytes == nullptr) return Status::Error(ErrorCode::InvalidArgument, "bytes: null pointer");
    BwdParams p;
    if (Status s = detail::make_backward_params(args, &p); !s.ok()) return s;
    if (p.device == Device::CPU) {
      *bytes = detail::cpu::backward_workspace_bytes(p);
      return Status::Ok();
    }
#ifdef FLASHATTN_WITH_CUDA
    if (Status s = detail::cuda::can_implement(p); !s.ok()) return s;
    *bytes = detail::cuda::backward_workspace_bytes(p);
    return Status::Ok();
#else
    return no_cuda();
#endif
  });
}

#define FA_STR2(x) #x
#define FA_STR(x) FA_STR2(x)
const char* version() noexcept {
  return FA_STR(FA_VERSION_MAJOR) "." FA_STR(FA_VERSION_MINOR) "." FA_STR(FA_VERSION_PATCH);
}

bool cuda_available() noexcept {
#ifdef FLASHATTN_WITH_CUDA
  return detail::cuda::device_available();
#else
  return false;
#endif
}

}  // namespace flashattn
