// The one place that knows every backend: validated params go to exactly one
// kernel family, chosen by device (and, inside the CUDA backend, by arch,
// dtype and head dim).
#include <exception>
#include <new>
#include <string>

#include "api/checks.hpp"
#include "common/varlen_tail.hpp"
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

// Validates the arguments, then hands the params to the backend of their
// device. Backends report errors by Status; the catch turns what escapes
// anyway (allocation failure) into one, so that the API never throws.
template <class Params, class Args, class Cpu, class Cuda>
Status route(const Args& args, Status (*make)(const Args&, Params*) noexcept, Cpu cpu,
             Cuda cuda) noexcept {
  try {
    Params p;
    if (Status s = make(args, &p); !s.ok()) return s;
    return p.device == Device::CPU ? cpu(p) : cuda(p);
  } catch (const std::bad_alloc&) {
    return Status::Error(ErrorCode::Internal, "out of host memory for the workspace");
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::Internal, std::string("internal error: ") + e.what());
  } catch (...) {
    return Status::Error(ErrorCode::Internal, "internal error");
  }
}

// A CUDA backend call, after the backend's own can_implement.
#ifdef FLASHATTN_WITH_CUDA
#define FA_CUDA_CALL(call)                                                         \
  [&](const auto& p) -> Status {                                                   \
    if (Status s = detail::cuda::can_implement(p); !s.ok()) return s;              \
    return call;                                                                   \
  }
#else
#define FA_CUDA_CALL(call) [](const auto&) { return no_cuda(); }
#endif

// Varlen calls write the packed rows past the last sequence too
// (common/varlen_tail.hpp), once the backend call has succeeded.
template <class P>
Status cpu_tail(const P& p, Status s) {
  if (s.ok() && p.varlen()) detail::varlen_tail::fill_host(detail::varlen_tail::plan(p));
  return s;
}
#ifdef FLASHATTN_WITH_CUDA
template <class P>
Status cuda_tail(const P& p, Status s) {
  if (s.ok() && p.varlen()) s = detail::cuda::clear_varlen_tail(detail::varlen_tail::plan(p), p.device_index, p.stream);
  return s;
}
#endif

Status check_out(size_t* bytes) {
  return bytes ? Status::Ok() : Status::Error(ErrorCode::InvalidArgument, "bytes: null pointer");
}

}  // namespace

Status forward(const ForwardArgs& args) noexcept {
  return route<FwdParams>(
      args, detail::make_forward_params,
      [](const FwdParams& p) { return cpu_tail(p, detail::cpu::forward(p)); },
      FA_CUDA_CALL(cuda_tail(p, detail::cuda::forward(p))));
}

Status backward(const BackwardArgs& args) noexcept {
  return route<BwdParams>(
      args, detail::make_backward_params,
      [](const BwdParams& p) { return cpu_tail(p, detail::cpu::backward(p)); },
      FA_CUDA_CALL(cuda_tail(p, detail::cuda::backward(p))));
}

Status forward_kvcache(const KvCacheArgs& args) noexcept {
  return route<FwdParams>(
      args, detail::make_kvcache_params, [](const FwdParams& p) { return detail::cpu::forward(p); },
      FA_CUDA_CALL(detail::cuda::forward(p)));
}

Status forward_workspace_bytes(const ForwardArgs& args, size_t* bytes) noexcept {
  if (Status s = check_out(bytes); !s.ok()) return s;
  return route<FwdParams>(
      args, detail::make_forward_params,
      [&](const FwdParams& p) {
        *bytes = detail::cpu::forward_workspace_bytes(p);
        return Status::Ok();
      },
      FA_CUDA_CALL((*bytes = detail::cuda::forward_workspace_bytes(p), Status::Ok())));
}

Status forward_kvcache_workspace_bytes(const KvCacheArgs& args, size_t* bytes) noexcept {
  if (Status s = check_out(bytes); !s.ok()) return s;
  return route<FwdParams>(
      args, detail::make_kvcache_params,
      [&](const FwdParams& p) {
        *bytes = detail::cpu::forward_workspace_bytes(p);
        return Status::Ok();
      },
      FA_CUDA_CALL((*bytes = detail::cuda::forward_workspace_bytes(p), Status::Ok())));
}

Status backward_workspace_bytes(const BackwardArgs& args, size_t* bytes) noexcept {
  if (Status s = check_out(bytes); !s.ok()) return s;
  return route<BwdParams>(
      args, detail::make_backward_params,
      [&](const BwdParams& p) {
        *bytes = detail::cpu::backward_workspace_bytes(p);
        return Status::Ok();
      },
      FA_CUDA_CALL((*bytes = detail::cuda::backward_workspace_bytes(p), Status::Ok())));
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
